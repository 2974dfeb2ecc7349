/** \file A definition's schedulable reduction and its epilogue.
 *
 * A definition such as `sum(k < K: X(t, k) * W(k, o)) + bias(o)` is one reduction followed by
 * elementwise work on its finished value (the epilogue: bias, scale, activation, residual). The
 * reduction's dim can be scheduled like a loop of the Func (split, reorder, cache_write tiles)
 * and the epilogue is applied once per element, after the reduction completes (where the tile is
 * written back, or in a pass over the elements right after the reduction's loops): GEMMs keep
 * their register tiles and their epilogue costs no extra kernel. */
#pragma once

#include "ir/IR.h"

namespace cora::ir {

/** The only Reduce of `value` that is not nested inside another Reduce (one node, possibly read
 * more than once, as in `x * erf(x)`), or nullptr when there is none or more than one (then no reduction dim is
 * schedulable and lower_reductions computes each reduction in place). */
const Reduce *scheduled_reduce(const Expr &value);

/** `value` with its scheduled Reduce replaced by `acc` (the finished reduction); undefined when
 * the value is the bare reduction (nothing to apply). Requires scheduled_reduce(value). */
Expr epilogue_of(const Expr &value, const Expr &acc);

} // namespace cora::ir
