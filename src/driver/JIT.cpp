#include "driver/JIT.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>

#include "util/Error.h"
#include "util/Hash.h"

namespace cora::driver {

namespace fs = std::filesystem;

LoadedLibrary::~LoadedLibrary() {
    if (handle) dlclose(handle);
}

namespace {

bool on_path(const std::string &prog) {
    const char *path = std::getenv("PATH");
    if (!path) return false;
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        fs::path cand = fs::path(p.substr(start, end - start)) / prog;
        if (access(cand.c_str(), X_OK) == 0) return true;
        start = end + 1;
    }
    return false;
}

std::string run_capture(const std::string &cmd, int *status) {
    std::string out;
    FILE *f = popen((cmd + " 2>&1").c_str(), "r");
    if (!f) {
        *status = -1;
        return "popen failed";
    }
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0)
        out.append(buf.data(), n);
    *status = pclose(f);
    return out;
}

std::string unique_suffix() {
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    return std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(rd());
}

/** The compiler's version line and this CPU's model and feature flags, computed once. */
std::string toolchain_identity(const std::string &cxx) {
    static std::mutex mu;
    static std::map<std::string, std::string> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(cxx);
    if (it != cache.end()) return it->second;
    int status = 0;
    std::string id = run_capture(cxx + " --version", &status);
    std::ifstream cpu("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpu, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) id += line + "\n";
        if (line.empty()) break; // the first processor is enough
    }
    return cache[cxx] = id;
}

} // namespace

std::string run_command(const std::string &cmd, int *status) { return run_capture(cmd, status); }

std::string default_cache_dir() {
    if (const char *d = std::getenv("CORA_CACHE_DIR"); d && *d) return d;
    if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cora";
    if (const char *h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cora";
    return (fs::temp_directory_path() / "cora-cache").string();
}

std::string default_cxx() {
    if (const char *c = std::getenv("CORA_CXX"); c && *c) return c;
    return on_path("clang++") ? "clang++" : "c++";
}

JitResult jit_compile(const std::string &source, const std::string &symbol, const JitOptions &opts) {
    std::string dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
    std::string cxx = opts.cxx.empty() ? default_cxx() : opts.cxx;
    // The key covers the compiler's version and the CPU's features (-march=native), so a cache
    // directory shared between machines never serves a kernel built for another CPU.
    std::string flags = "-std=c++17 -O3 -march=native -fPIC -shared -fopenmp -w";
    std::string key = util::content_hash(toolchain_identity(cxx) + "\n" + flags + "\n" + source);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("cora: cannot create kernel cache directory '" + dir + "': " + ec.message());
    fs::path so = fs::path(dir) / ("k" + key + ".so");

    JitResult r;
    if (!fs::exists(so)) {
        std::string tmp_base = (fs::path(dir) / ("k" + key + ".tmp" + unique_suffix())).string();
        std::string cpp = tmp_base + ".cpp", tmp_so = tmp_base + ".so";
        {
            std::ofstream f(cpp);
            f << source;
            if (!f) throw Error("cora: cannot write '" + cpp + "'");
        }
        std::string cmd = cxx + " " + flags + " '" + cpp + "' -o '" + tmp_so + "'";
        if (opts.debug >= 2) std::cerr << "-- cora: compile: " << cmd << "\n";
        auto t0 = std::chrono::steady_clock::now();
        int status = 0;
        std::string log = run_capture(cmd, &status);
        r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (status != 0) {
            throw InternalError("cora: the generated kernel failed to compile (a bug in cora). Command: " + cmd +
                                "\nSource kept at " + cpp + "\n" + log.substr(0, 4000));
        }
        fs::rename(tmp_so, so, ec); // atomic: a concurrent winner leaves an identical file
        if (ec && !fs::exists(so)) throw Error("cora: cannot move kernel into cache: " + ec.message());
        fs::remove(tmp_so, ec);
        if (opts.debug >= 2)
            std::cerr << "-- cora: source kept at " << cpp << "\n";
        else
            fs::remove(cpp, ec);
    } else {
        r.from_cache = true;
    }
    auto lib = std::make_shared<LoadedLibrary>();
    lib->path = so.string();
    lib->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) throw Error(std::string("cora: cannot load kernel ") + so.string() + ": " + dlerror());
    r.entry = dlsym(lib->handle, symbol.c_str());
    if (!r.entry) throw InternalError("cora: kernel " + so.string() + " has no symbol " + symbol);
    r.library = lib;
    return r;
}

} // namespace cora::driver
