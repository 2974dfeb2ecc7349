/** \file The entry function around a body: `int32_t symbol(const cora_arg_t *args, int32_t nargs,
 * <extra>char *error, int32_t error_size)` of prelude/cora_runtime.h. Before the body runs it
 * checks the argument count, each argument's kind (scalar or array), element type, count and data
 * pointer, that no output overlaps another argument, and binds the arguments to the body's
 * variables; a NULL or empty error buffer is tolerated, a NULL argument array is an error. */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lower/Module.h"

namespace cora::ir {

/** The module's arguments callers pass (AOT kernels build their aux arrays themselves). */
std::vector<const ModuleArg *> abi_args(const LoweredModule &m);
/** The params and length arrays: what a size query takes. */
std::vector<const ModuleArg *> shape_args(const LoweredModule &m);
/** The input and output tensors, in argument order. */
std::vector<const ModuleArg *> tensor_args(const LoweredModule &m);

/** `<qualifiers>int32_t <symbol>(const cora_arg_t *args, int32_t nargs, <extra_params>char *error,
 * int32_t error_size)` running `body` over `args` (ABI order). Each of `bind` is a pointer
 * parameter among `extra_params`, bound to a buffer variable of the body after a NULL check. */
std::string emit_argv_function(const std::string &qualifiers, const std::string &symbol,
                               const std::vector<const ModuleArg *> &args, const std::string &extra_params,
                               const Stmt &body, const std::vector<std::pair<VarPtr, std::string>> &bind = {});

} // namespace cora::ir
