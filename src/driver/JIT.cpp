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

/** dlopen + dlsym; an empty result (and the loader's message in `why`) on failure. */
std::shared_ptr<LoadedLibrary> load(const fs::path &so, std::string *why) {
    auto lib = std::make_shared<LoadedLibrary>();
    lib->path = so.string();
    lib->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
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
    std::vector<std::string> flags = {"-std=c++17", "-O3",     "-march=native", "-fno-math-errno",
                                      "-fPIC",      "-shared", "-fopenmp",      "-w"};
    for (const std::string &f : sanitizer_flags())
        flags.push_back(f);
    std::string flag_text;
    for (const std::string &f : flags)
        flag_text += f + " ";
    std::string key = util::content_hash(toolchain_identity(cxx, &cache) + "\n" + flag_text + "\n" + source);
    fs::path so = cache.library_path(key);

    JitResult r;
    r.from_cache = cache.verified(key);
    std::string why;
    if (r.from_cache) {
        r.library = load(so, &why);
        if (!r.library) { // verified but unloadable (e.g. built for another libc): build it again
            if (opts.debug >= 1) std::cerr << "-- cora: cached kernel " << so << " does not load (" << why << ")\n";
            r.from_cache = false;
        }
    }
    if (!r.from_cache) {
        cache.evict(key);
        fs::path cpp = cache.temp_path(key, ".cpp"), tmp_so = cache.temp_path(key, ".so");
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
        auto t0 = std::chrono::steady_clock::now();
        ProcessResult pr = run_process(cmd);
        r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::error_code ec;
        if (!pr.ok()) {
            fs::remove(tmp_so, ec);
            throw InternalError(
                "cora: the generated kernel failed to compile (a bug in cora). Command: " + format_command(cmd) +
                "\nSource kept at " + cpp.string() + "\n" + pr.output.substr(0, 4000));
        }
        cache.publish(key, tmp_so);
        if (opts.debug >= 2)
            std::cerr << "-- cora: source kept at " << cpp << "\n";
        else
            fs::remove(cpp, ec);
        r.library = load(so, &why);
        if (!r.library)
            throw EnvironmentError("cora: cannot load the kernel just compiled, " + so.string() + ": " + why);
    }
    for (const std::string &symbol : symbols) {
        void *entry = dlsym(r.library->handle, symbol.c_str());
        if (!entry) throw InternalError("cora: kernel " + so.string() + " has no symbol " + symbol);
        r.entries.push_back(entry);
    }
    r.entry = r.entries.front();
    return r;
}

} // namespace cora::driver
