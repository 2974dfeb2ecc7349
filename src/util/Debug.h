/** \file Debug output. The level comes from CompileOptions, or from CORA_DEBUG when unset. */
#pragma once

#include <iostream>

namespace cora::util {

/** CORA_DEBUG as an integer (0 when unset or not a number). */
int env_debug_level();

} // namespace cora::util
