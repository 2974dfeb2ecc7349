/** \file Ahead-of-time output for a module lowered with build_aux_in_kernel (an entry and a size query): the kernel
 * sources (one per target variant), the wrappers (CPU dispatch, a typed entry, a size query) and the C header declaring
 * them (AotHeader.cpp). */
#pragma once

#include <string>
#include <vector>

#include "cora/Target.h"
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

/** A CUDA AOT library's sources (CudaAotLibrary.cpp). `wrappers`: the host entry, the size query, the
 * runtime (a context per caller) and the exported functions: `<fn>_create`, `<fn>_destroy`, `<fn>`
 * (context, stream, typed arguments; tensors in device memory), `<fn>_argv`, `<fn>_buffer_sizes`,
 * `<fn>_shape_transfers`. `on_cpu`: for CpuThreads, the kernels compiled for the CPU (a second unit).
 * `header`: the C header. */
struct CudaAotSource {
    std::string wrappers, on_cpu, header;
};
/** Where a CUDA library runs its kernels. */
enum class CudaDeviceKind {
    Gpu,        ///< through the driver API, from its fatbin
    CpuThreads, ///< the CUDA source compiled for the CPU (codegen_cuda_on_cpu): testable without a GPU
};
/** A library running on `device`: for a GPU from `fatbin`, the device code built for `archs`, named
 * in its load error. */
CudaAotSource codegen_cuda_aot(const Module &m, const std::string &fn, CudaDeviceKind device, const std::string &fatbin,
                               const std::vector<int> &archs);

/** The C header of an AOT library (AotHeader.cpp); `cuda`: of a CUDA library (a context, a stream,
 * tensors in device memory). */
std::string aot_header(const Module &m, const std::string &fn, bool cuda = false);

/** The library's arguments as JSON, returned by its exported `<fn>_signature()` (AotSignature.cpp):
 * {"format": 1, "function", "device": "cpu" | "cuda", "arguments": [{"name", "kind" (param,
 * length_array, input, output), "type", "min"/"max" (params, length arrays), "size_index" (its slot in
 * the size query's output, -1 for params), "shape_index" (its position among the size query's
 * arguments, -1 if not one), "layout"}, ...] in ABI order, "size_count"}. */
std::string aot_signature(const Module &m, const std::string &fn, bool cuda = false);

/** A typed wrapper's parameter name for `a`, clear of the wrapper's own names. */
std::string param_name(const ModuleArg &a);
/** The typed parameter list of an AOT function: scalars for params, pointer + count for arrays. */
std::string typed_params(const std::vector<const ModuleArg *> &args);
/** The body of a typed wrapper: its parameters packed into cora_arg_t, then `return target(args,
 * nargs, <extra_args>error, error_size);` (`extra_args` ends with ", " when not empty). */
std::string typed_call(const std::vector<const ModuleArg *> &args, const std::string &target,
                       const std::string &extra_args);

} // namespace cora::ir
