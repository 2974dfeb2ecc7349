/** \file C++ source for a lowered module: one extern "C" entry with the cora_runtime.h ABI,
 * argument unpacking and type checks, then the body (OpenMP for parallel loops). */
#pragma once

#include <string>

#include "lower/Module.h"

namespace cora::ir {

/** The C symbol of the module's entry point. */
std::string entry_symbol(const LoweredModule &m);
std::string codegen_c(const LoweredModule &m);

} // namespace cora::ir
