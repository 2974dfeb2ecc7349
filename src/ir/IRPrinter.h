/** \file Human-readable IR text (used by CORA_DEBUG dumps, error messages and tests). */
#pragma once

#include <string>

#include "ir/IR.h"

namespace cora::ir {

std::string print(const Expr &e);
std::string print(const Stmt &s);

} // namespace cora::ir
