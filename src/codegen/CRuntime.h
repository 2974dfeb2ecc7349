/** \file What every generated C++ source shares: the prologue (the ABI of prelude/cora_runtime.h,
 * then the helpers kernels call), the ABI's type codes and C spelling helpers. A target that
 * prints another language (CUDA) starts its sources with the same prologue. */
#pragma once

#include <cstdint>
#include <string>

#include "cora/Type.h"

namespace cora::ir {

/** The start of every generated source: includes, prelude/cora_runtime.h's text (cora_arg_t,
 * the type codes, the status codes), then the helpers (floor division, overflow-checked
 * arithmetic, vector loads, the thread count). */
std::string c_prologue();

/** The ABI type code (CORA_TYPE_*) of an element type; InternalError for a type without one. */
int32_t type_code(Type t);

/** `s` escaped for a C string literal (and for a printf format when `for_printf`). */
std::string c_escape(const std::string &s, bool for_printf);

/** `name` with every character that is not a letter, digit or '_' replaced by '_'. */
std::string c_identifier(const std::string &name);

} // namespace cora::ir
