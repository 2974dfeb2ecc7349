/** \file Compile generated C++ into a shared object in the kernel cache (driver/KernelCache.h) and
 * load it.
 *
 * The cache key hashes the source, the compiler's identity, the CPU and the flags. A kernel is
 * compiled to a unique temporary file and published atomically, so processes compiling the same
 * kernel at the same time both succeed and never see a partial file. An entry whose checksum does
 * not match, or that fails to load, is compiled again.
 *
 * Loaded kernels link an OpenMP runtime (LLVM's libomp with clang, libgomp with g++). Its worker
 * threads outlive the parallel regions that started them, so the runtime is pinned in the process
 * (RTLD_NODELETE) when the first kernel that uses it is loaded: unloading a kernel never unloads
 * the code those threads run. */
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace cora::driver {

struct LoadedLibrary {
    void *handle = nullptr;
    std::string path;
    ~LoadedLibrary();
};

struct JitResult {
    std::shared_ptr<LoadedLibrary> library;
    void *entry = nullptr;            ///< the first symbol's address
    std::vector<void *> entries;      ///< each symbol's address, in the order asked
    double compile_seconds = 0;
    bool from_cache = false;
};

struct JitOptions {
    std::string cache_dir; ///< empty: default_cache_dir()
    std::string cxx;       ///< empty: default_cxx()
    int debug = 0;
};

JitResult jit_compile(const std::string &source, const std::string &symbol, const JitOptions &opts);
/** One library defining several symbols (KernelBatch: one compiler run for many kernels). */
JitResult jit_compile(const std::string &source, const std::vector<std::string> &symbols, const JitOptions &opts);

/** Marks the OpenMP runtimes loaded in this process as never to be unloaded (see above). */
void pin_openmp_runtimes();

} // namespace cora::driver
