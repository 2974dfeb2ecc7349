/** \file Simplifier for integer index expressions (and constant folding of the rest).
 *
 * Integer sums are brought to a linear canonical form (constant-coefficient sums of atoms:
 * variables, UF calls, loads, divisions, ...), so that e.g. `len(b) - (len(b) - 1)` becomes 1.
 * Floor division by a positive constant pulls out divisible terms exactly:
 * (c*q + r)/c = q + r/c, and (c*q + r) % c = r % c. The result is equivalent for every input. */
#pragma once

#include "ir/IR.h"

namespace cora::ir {

Expr simplify(const Expr &e);
Stmt simplify(const Stmt &s);

} // namespace cora::ir
