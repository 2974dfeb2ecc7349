/** \file C++ source for a lowered module: one extern "C" entry with the cora_runtime.h ABI,
 * argument unpacking and type checks, then the body (OpenMP for parallel loops); for AOT
 * libraries, also typed wrappers, a size query and a C header. */
#pragma once

#include <string>
#include <vector>

#include "lower/Module.h"

namespace cora::ir {

/** The C symbol of the module's entry point. */
std::string entry_symbol(const LoweredModule &m);
std::string codegen_c(const LoweredModule &m);

/** Ahead-of-time output for a module lowered with build_aux_in_kernel. `kernels`: one C++
 * source per target variant defining the kernel entry (`<fn>_argv`, or `<fn>_argv_<i>` when
 * there are several). `wrappers`: `<fn>_argv` choosing the first variant whose condition (a C
 * expression, e.g. __builtin_cpu_supports("avx512f"); empty: always) holds, `<fn>` with typed
 * arguments and `<fn>_buffer_sizes`. `header`: the C header declaring them. */
struct AotSource {
    std::vector<std::string> kernels;
    std::string wrappers, header;
};
AotSource codegen_c_aot(const LoweredModule &m, const std::string &function_name,
                        const std::vector<std::string> &variant_conditions);

/** `name` with every character that is not a letter, digit or '_' replaced by '_'. */
std::string c_identifier(const std::string &name);

} // namespace cora::ir
