/** \file What each argument of a compiled kernel is, in ABI order: one vocabulary for the public
 * argument list (Kernel::arguments(), KernelArgInfo), the AOT header and the lowered module
 * (ir::ModuleArg). */
#pragma once

namespace cora {

enum class ArgumentKind {
    Param,       ///< a scalar (int64)
    LengthArray, ///< a length array (int32)
    AuxArray,    ///< an aux array the prelude builds (int64; JIT kernels check it, AOT kernels build it)
    Input,       ///< an input tensor's packed storage
    Output       ///< an output tensor's packed storage
};

} // namespace cora
