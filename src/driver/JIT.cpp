#include "driver/JIT.h"

#include <dlfcn.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "driver/Compiler.h"
#include "driver/KernelCache.h"
#include "driver/Subprocess.h"
#include "util/Error.h"
#include "util/Hash.h"

namespace cora::driver {

namespace fs = std::filesystem;

LoadedLibrary::~LoadedLibrary() {
    if (handle) dlclose(handle);
}

void pin_openmp_runtimes() {
    // RTLD_NOLOAD only looks a library up; with RTLD_NODELETE it promotes a loaded one to stay for
    // the process's life. The extra reference it takes is dropped at once; the flag stays.
    for (const char *soname : {"libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so"})
        if (void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(h);
}

namespace {

/** dlopen of the verified entry (by its descriptor, see KernelCache.h); an empty result (and the
 * loader's message in `why`) on failure. */
std::shared_ptr<LoadedLibrary> load(const VerifiedEntry &entry, std::string *why) {
    auto lib = std::make_shared<LoadedLibrary>();
    lib->path = entry.path().string();
    lib->handle = dlopen(entry.load_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        const char *e = dlerror();
        *why = e ? e : "unknown error";
        return nullptr;
    }
    pin_openmp_runtimes();
    return lib;
}

} // namespace

JitResult jit_compile(const std::string &source, const std::string &symbol, const JitOptions &opts) {
    return jit_compile(source, std::vector<std::string>{symbol}, opts);
}

JitResult jit_compile(const std::string &source, const std::vector<std::string> &symbols, const JitOptions &opts) {
    CORA_CHECK(!symbols.empty(), "jit_compile: no symbol to look up");
    KernelCache cache(opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir);
    std::vector<std::string> cxx = compiler_command(opts.cxx);
    // -fno-math-errno: kernels never read errno, and a math call that may write it (exp, sqrt) is a
    // store the compiler must assume aliases everything, so it reloads loop bounds and offsets after
    // each call and vectorizes nothing around it (a ragged softmax ran 2x slower).
    std::vector<std::string> flags = {"-std=c++17", "-O3", "-fno-math-errno", "-fPIC", "-shared", "-fopenmp", "-w"};
    for (const std::string &f : target_flags("-march=native"))
        flags.push_back(f);
    for (const std::string &f : sanitizer_flags())
        flags.push_back(f);
    std::string flag_text;
    for (const std::string &f : flags)
        flag_text += f + " ";
    std::string key = util::content_hash(toolchain_identity(cxx, &cache) + "\n" + flag_text + "\n" + source);

    JitResult r;
    std::string why;
    if (std::optional<VerifiedEntry> entry = cache.open_verified(key)) {
        r.library = load(*entry, &why);
        r.from_cache = r.library != nullptr;
        // Verified but unloadable (e.g. built for another libc): build it again.
        if (!r.from_cache && opts.debug >= 1)
            std::cerr << "-- cora: cached kernel " << entry->path() << " does not load (" << why << ")\n";
    }
    if (!r.from_cache) {
        cache.evict(key);
        cache.sweep_stale_temporaries();
        // Everything this compile writes, the compiler's own temporaries included (TMPDIR), goes to a
        // scratch directory that is removed when this scope ends, whatever happens.
        std::unique_ptr<ScratchDirectory> scratch = cache.scratch(key);
        const fs::path cpp = scratch->path() / "kernel.cpp", tmp_so = scratch->path() / "kernel.so";
        {
            std::ofstream f(cpp);
            f << source;
            f.close();
            if (!f) throw EnvironmentError("cora: cannot write '" + cpp.string() + "' (is the disk full?)");
        }
        std::vector<std::string> args = flags;
        args.insert(args.end(), {cpp.string(), "-o", tmp_so.string()});
        std::vector<std::string> cmd = with_args(cxx, args);
        if (opts.debug >= 2) std::cerr << "-- cora: compile: " << format_command(cmd) << "\n";
        const std::vector<std::string> env = {"TMPDIR=" + scratch->path().string()};
        auto t0 = std::chrono::steady_clock::now();
        ProcessResult pr = run_process(cmd, env);
        r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!pr.ok()) {
            if (opts.debug >= 2) scratch->keep();
            report_compile_failure(cxx, flags, env, cmd, pr, scratch->path(), opts.debug >= 2);
        }
        cache.publish(key, tmp_so);
        if (opts.debug >= 2) {
            scratch->keep();
            std::cerr << "-- cora: source kept at " << cpp << "\n";
        }
        std::optional<VerifiedEntry> entry = cache.open_verified(key);
        if (!entry)
            throw EnvironmentError("cora: the kernel just compiled into " + cache.library_path(key).string() +
                                   " is missing or changed: is something else writing to the cache?");
        r.library = load(*entry, &why);
        if (!r.library)
            throw EnvironmentError("cora: cannot load the kernel just compiled, " + entry->path().string() + ": " +
                                   why);
    }
    const std::string so = r.library->path;
    for (const std::string &symbol : symbols) {
        void *entry = dlsym(r.library->handle, symbol.c_str());
        if (!entry) throw InternalError("cora: kernel " + so + " has no symbol " + symbol);
        r.entries.push_back(entry);
    }
    r.entry = r.entries.front();
    return r;
}

} // namespace cora::driver
