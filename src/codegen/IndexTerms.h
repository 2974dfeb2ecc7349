/** \file The order in which a printed address adds its terms: outer loops' first, constants last.
 *
 * Storage lowering writes a flat index in the order of the storage's dims, e.g. for X[tok, k]
 * read in a 6-token register tile over a row's present blocks:
 *
 *     ((tc * 73728 + to * 18432) + ti * 3072) + col[p + ko] * 8) + ki
 *
 * Once clang unrolls ti and ki, `tc * 73728 + to * 18432 + 3072` is a different loop-invariant
 * value for every ti: six bases live across the ko loop, they spill, and each FMA computes its
 * address with an lea (the 8x8 block-sparse kernel ran at 1.19x dense at 50% density). Printed as
 *
 *     (((tc * 73728 + to * 18432) + col[p + ko] * 8) + ki) + ti * 3072
 *
 * the unrolled terms are constant offsets of one base, which the addressing mode carries. The
 * rule: a sum's terms, ordered by the depth of the innermost loop whose value they use (a let
 * counts at the depth it is bound at, an unknown variable — an argument — at 0), outer first,
 * constants last; the order among equal depths is kept. A sum times a constant counts as its terms
 * times the constant ((to * 4 + ti) * 40 is to * 160 and ti * 40), so that a padded tile row's
 * address splits too. Only the printed text changes: integer
 * + and - on the same terms give the same value in any order (no term overflows on its own, and
 * 64-bit indices leave the partial sums room). */
#pragma once

#include <functional>

#include "ir/IR.h"

namespace cora::ir {

/** `index` with the terms of its top-level sum (+ and -, through nested sums) reordered as the
 * file comment says; `depth` gives a variable's loop depth. Anything else is returned as is. */
Expr order_index_terms(const Expr &index, const std::function<int(const VarNode *)> &depth);

} // namespace cora::ir
