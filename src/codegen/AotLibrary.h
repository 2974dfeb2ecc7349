/** \file Ahead-of-time output for a module lowered with build_aux_in_kernel (an entry and a size query): the kernel
 * sources (one per target variant), the wrappers (CPU dispatch, a typed entry, a size query) and the C header declaring
 * them (AotHeader.cpp). */
#pragma once

#include <string>
#include <vector>

#include "ir/Module.h"

namespace cora::ir {

/** `kernels`: one C++ source per target variant defining the kernel entry (`<fn>_argv`, or
 * `<fn>_argv_<i>` when there are several). `wrappers`: `<fn>_argv` choosing the first variant
 * whose condition (a C expression, e.g. __builtin_cpu_supports("avx512f"); empty: always) holds,
 * `<fn>` with typed arguments and `<fn>_buffer_sizes`. `header`: the C header declaring them. */
struct AotSource {
    std::vector<std::string> kernels;
    std::string wrappers, header;
};
AotSource codegen_c_aot(const Module &m, const std::string &function_name,
                        const std::vector<std::string> &variant_conditions);
/** The same with one module per variant (a schedule per target, e.g. register tiles sized to the
 * target's vector registers): kernel i comes from variants[i]; the wrappers, the size query and
 * the header from variants[0]. CompileError unless every variant has the same arguments (names,
 * kinds, types and element counts), since they share one header and one size query. */
AotSource codegen_c_aot(const std::vector<const Module *> &variants, const std::string &function_name,
                        const std::vector<std::string> &variant_conditions);

/** The C header of an AOT library (AotHeader.cpp). */
std::string aot_header(const Module &m, const std::string &fn);

/** A typed wrapper's parameter name for `a`, clear of the wrapper's own names. */
std::string param_name(const ModuleArg &a);
/** The typed parameter list of an AOT function: scalars for params, pointer + count for arrays. */
std::string typed_params(const std::vector<const ModuleArg *> &args);

} // namespace cora::ir
