#include "driver/Compiler.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <sys/stat.h>

#include "driver/KernelCache.h"
#include "driver/Subprocess.h"
#include "util/Error.h"
#include "util/Hash.h"

namespace cora::driver {

namespace fs = std::filesystem;

namespace {

/** Where `prog` runs from: itself when it names a path, else the first executable on PATH. */
std::optional<fs::path> find_program(const std::string &prog) {
    if (prog.find('/') != std::string::npos)
        return access(prog.c_str(), X_OK) == 0 ? std::optional<fs::path>(prog) : std::nullopt;
    const char *path = std::getenv("PATH");
    if (!path) return std::nullopt;
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        fs::path cand = fs::path(p.substr(start, end - start)) / prog;
        if (access(cand.c_str(), X_OK) == 0) return cand;
        start = end + 1;
    }
    return std::nullopt;
}

bool on_path(const std::string &prog) { return find_program(prog).has_value(); }

/** What identifies the compiler's files without running it: each word of the command that is a
 * program, by its resolved path, size, modification time and inode (an upgrade changes them). */
std::string compiler_fingerprint(const std::vector<std::string> &compiler) {
    std::string fp;
    for (const std::string &w : compiler) {
        fp += w + "\n";
        std::optional<fs::path> exe = find_program(w);
        std::error_code ec;
        fs::path real = exe ? fs::canonical(*exe, ec) : fs::path();
        struct stat st {};
        if (exe && !ec && stat(real.c_str(), &st) == 0)
            fp += concat(real.string(), " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, " ",
                         st.st_ino, " ", st.st_dev, "\n");
    }
    return fp;
}

} // namespace

std::string default_cxx() {
    if (const char *c = std::getenv("CORA_CXX"); c && *c) return c;
    return on_path("clang++") ? "clang++" : "c++";
}

std::vector<std::string> compiler_command(const std::string &cxx) {
    std::vector<std::string> words = split_words(cxx.empty() ? default_cxx() : cxx);
    if (words.empty()) throw EnvironmentError("cora: the C++ compiler command (CORA_CXX) is empty");
    return words;
}

std::vector<std::string> sanitizer_flags() {
#ifdef CORA_KERNEL_SANITIZE_FLAGS
    return split_words(CORA_KERNEL_SANITIZE_FLAGS);
#else
    return {};
#endif
}

std::vector<std::string> target_flags(const std::string &march) {
    std::vector<std::string> flags = {march};
    if (march == "-march=native" || march == "-march=x86-64-v4") flags.push_back("-mprefer-vector-width=512");
    return flags;
}

std::vector<std::string> with_args(const std::vector<std::string> &compiler, const std::vector<std::string> &args) {
    std::vector<std::string> v = compiler;
    v.insert(v.end(), args.begin(), args.end());
    return v;
}

void report_compile_failure(const std::vector<std::string> &compiler, const std::vector<std::string> &flags,
                            const std::vector<std::string> &env, const std::vector<std::string> &cmd,
                            const ProcessResult &result, const fs::path &scratch, bool source_kept) {
    const std::string output = result.output.substr(0, 4000);
    const std::string command = "\nCommand: " + format_command(cmd) + "\n" + output;
    if (result.signal != 0)
        throw EnvironmentError(concat("cora: the C++ compiler was killed by signal ", result.signal,
                                      result.signal == 9 ? " (out of memory?)" : "", " while compiling a kernel",
                                      command));
    for (const char *cause : {"No space left on device", "Disk quota exceeded", "Permission denied",
                              "Read-only file system", "Cannot allocate memory", "Too many open files"})
        if (result.output.find(cause) != std::string::npos)
            throw EnvironmentError(concat("cora: the C++ compiler could not work (", cause,
                                          ") while compiling a kernel; the kernel cache is in '",
                                          scratch.parent_path().string(), "'", command));
    // Does the compiler build anything at all with these flags? A one-line source says.
    const fs::path probe_cpp = scratch / "probe.cpp", probe_so = scratch / "probe.so";
    {
        std::ofstream f(probe_cpp);
        f << "int cora_compiler_probe = 1;\n";
        f.close();
        if (!f) throw EnvironmentError("cora: cannot write '" + probe_cpp.string() + "' (is the disk full?)");
    }
    std::vector<std::string> probe_args = flags;
    probe_args.insert(probe_args.end(), {probe_cpp.string(), "-o", probe_so.string()});
    const std::vector<std::string> probe_cmd = with_args(compiler, probe_args);
    ProcessResult probe = run_process(probe_cmd, env);
    if (!probe.ok())
        throw EnvironmentError(concat("cora: the C++ compiler '", format_command(compiler),
                                      "' fails on any source with the kernels' flags (a one-line probe fails too): "
                                      "check the installation or CORA_CXX.\nProbe command: ",
                                      format_command(probe_cmd), "\n", probe.output.substr(0, 4000)));
    throw InternalError(concat("cora: the generated kernel failed to compile (a bug in cora; please report it). ",
                               source_kept ? "Source kept at " + (scratch / "kernel.cpp").string() + "."
                                           : "Set CORA_DEBUG=2 to keep its source.",
                               command));
}

std::string toolchain_identity(const std::vector<std::string> &compiler, const KernelCache *cache) {
    // Running `--version` costs 50-60 ms (clang++ loads LLVM), more than the rest of a cache hit:
    // every compile after the first reads the answer noted in the cache.
    const std::string note = "toolchain-" + util::content_hash(compiler_fingerprint(compiler));
    std::string id;
    if (std::optional<std::string> v = cache ? cache->read_note(note) : std::nullopt) {
        id = *v;
    } else {
        ProcessResult r = run_process(with_args(compiler, {"--version"}));
        if (!r.ok())
            throw EnvironmentError(concat("cora: the C++ compiler '", format_command(compiler),
                                          "' does not run (`--version` failed): ", r.output.substr(0, 1000)));
        id = r.output;
        if (cache) cache->write_note(note, id);
    }
    std::ifstream cpu("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpu, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) id += line + "\n";
        if (line.empty()) break; // the first processor is enough
    }
    return id;
}

} // namespace cora::driver
