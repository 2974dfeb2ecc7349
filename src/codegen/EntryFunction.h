/** \file The entry function around a body: `int32_t symbol(const cora_arg_t *args, int32_t nargs,
 * <extra>char *error, int32_t error_size)` of prelude/cora_runtime.h. Before the body runs it
 * checks the argument count, each argument's kind (scalar or array), element type, count and data
 * pointer, that no output overlaps another argument, and binds the arguments to the body's
 * variables; a NULL or empty error buffer is tolerated, a NULL argument array is an error. */
#pragma once

#include <string>
#include <vector>

#include "ir/Module.h"

namespace cora::ir {

class CodeGen_C;

/** The function's arguments, in ABI order. */
std::vector<const ModuleArg *> arg_list(const LoweredFunc &f);
/** The input and output tensors among them, in argument order. */
std::vector<const ModuleArg *> tensor_args(const LoweredFunc &f);

/** `<qualifiers>int32_t <symbol>(const cora_arg_t *args, int32_t nargs, <T> *<out>, ..., char *error,
 * int32_t error_size)` running `f`'s body over its arguments (ABI order); each of f.output_arrays
 * is a pointer parameter of its own name, checked for NULL. */
std::string emit_function(const std::string &qualifiers, const std::string &symbol, const LoweredFunc &f);
/** As above, printed by `g` (a target's printer of host code), with `leading_params` (e.g.
 * "const cora_device_t *cora_device, ") before the output arrays. */
std::string emit_function(CodeGen_C &g, const std::string &qualifiers, const std::string &symbol, const LoweredFunc &f,
                          const std::string &leading_params = "");

} // namespace cora::ir
