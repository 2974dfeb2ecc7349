/** \file The ragged format's aux kinds (analysis/AuxKind.h), each defined in its own file here;
 * StorageLayout.cpp makes their arrays. */
#pragma once

#include <memory>

#include "analysis/AuxKind.h"

namespace cora::ir {

/** The kinds' constructors, each defined in its kind's file. */
std::shared_ptr<const AuxKind> prefix_sum_kind(Expr summand);
/** `outer`: fo, else fi (with `partner`, its fo); over a loop (o < outer_extent, i < E_i(o)) whose
 * inner extents `prefix` sums. The padded total (the pad segment) is the extent of its layout. */
std::shared_ptr<const AuxKind> fusion_map_kind(bool outer, std::shared_ptr<const UFNode> prefix,
                                               std::shared_ptr<const UFNode> partner, Expr outer_extent);
/** The permutation of [0, extent) by decreasing `cost` (in the dim's variable), ties by index. */
std::shared_ptr<const AuxKind> longest_first_kind(Expr extent, Expr cost);

} // namespace cora::ir
