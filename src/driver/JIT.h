/** \file Compile generated C++ into a shared object in a content-addressed cache and load it.
 *
 * The cache key hashes the source and the exact compiler command. A kernel is compiled to a
 * unique temporary file and renamed into place, so processes compiling the same kernel at the
 * same time both succeed and never see a partial file. */
#pragma once

#include <memory>
#include <string>

namespace cora::driver {

struct LoadedLibrary {
    void *handle = nullptr;
    std::string path;
    ~LoadedLibrary();
};

struct JitResult {
    std::shared_ptr<LoadedLibrary> library;
    void *entry = nullptr;
    double compile_seconds = 0;
    bool from_cache = false;
};

struct JitOptions {
    std::string cache_dir; ///< empty: default (see CompileOptions)
    std::string cxx;       ///< empty: default
    int debug = 0;
};

std::string default_cache_dir();
std::string default_cxx();

/** Run `cmd` through the shell; returns its stdout and stderr, sets *status (0: success). */
std::string run_command(const std::string &cmd, int *status);

JitResult jit_compile(const std::string &source, const std::string &symbol, const JitOptions &opts);

} // namespace cora::driver
