/** \file The host C++ compiler that builds kernels (JIT and AOT): which one, with which flags, and
 * a description of it for cache keys. Commands are argument vectors (driver/Subprocess.h). */
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "driver/Subprocess.h"

namespace cora::driver {

/** CORA_CXX, else clang++ when on PATH, else c++. */
std::string default_cxx();

/** The compiler's words: `cxx` (or the default when empty) split at whitespace. */
std::vector<std::string> compiler_command(const std::string &cxx);

/** Flags every kernel gets after the optimisation flags: the sanitizers cora itself was built with
 * (CORA_SANITIZE), so that generated code's out-of-bounds accesses are caught as well, and -O1
 * with them (src/CMakeLists.txt says why). Empty otherwise. */
std::vector<std::string> sanitizer_flags();

/** The flags that choose a kernel's instruction set: `march` (e.g. "-march=native", "-march=x86-64-v4"),
 * and for the targets that may have 512-bit vector registers (native, x86-64-v4) also
 * -mprefer-vector-width=512. Why: clang and g++ otherwise keep the loops they vectorize themselves
 * (softmax's exponentials, LayerNorm's passes, epilogues, copies: the `omp simd` loops) at 256 bits
 * on AVX-512 CPUs, while cora's own vector statements already use the whole register. On a CPU
 * without AVX-512 the preference changes nothing (no wider vectors exist). */
std::vector<std::string> target_flags(const std::string &march);

class KernelCache;

/** The compiler's version line and this CPU's model and feature flags: part of every cache key,
 * so a cache shared between machines never serves a kernel built for another CPU or compiler.
 * With a cache, the version line is noted there, keyed by the compiler's files (path, size,
 * mtime, inode): the compiler runs once per installed version, not once per compile (clang++
 * --version takes 50-60 ms). EnvironmentError when the compiler cannot be run. */
std::string toolchain_identity(const std::vector<std::string> &compiler, const KernelCache *cache = nullptr);

/** Throws the error for a compile (`cmd`, run with `env`) that failed with `result`:
 *   - EnvironmentError when the cause is this machine: the compiler killed by a signal (out of
 *     memory?), a full disk or a permission refused in its output, or a compiler that also fails
 *     on a trivial source with the same `flags` and environment (a broken install or CORA_CXX);
 *   - InternalError otherwise: the compiler works and rejects the generated code (cora's bug).
 * `scratch` is the compile's scratch directory (the probe is built there); `source_kept` says the
 * source stays there for a look (CORA_DEBUG=2). */
[[noreturn]] void report_compile_failure(const std::vector<std::string> &compiler,
                                         const std::vector<std::string> &flags, const std::vector<std::string> &env,
                                         const std::vector<std::string> &cmd, const ProcessResult &result,
                                         const std::filesystem::path &scratch, bool source_kept);

/** The compiler followed by `args`. */
std::vector<std::string> with_args(const std::vector<std::string> &compiler, const std::vector<std::string> &args);

} // namespace cora::driver
