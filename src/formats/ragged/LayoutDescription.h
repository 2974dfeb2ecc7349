/** \file A tensor's storage layout in words and formulas, for people calling kernels from C: the
 * AOT header states it per argument (codegen/AotHeader.cpp), so that a caller can lay out data
 * without reading the schedule. */
#pragma once

#include <string>

#include "analysis/AuxTable.h"
#include "formats/ragged/StorageLayout.h"

namespace cora::ir {

/** `e` with every prefix-sum aux call P(o..., x) written out as the sum it stands for,
 * sum(d' < x: summand(o..., d')), recursively; other aux calls stay. */
Expr expand_prefix_sums(const Expr &e);

/** Lines (each starting with `indent`) describing where t's elements live: the element at each
 * logical index and the formula of its offset, the physical order when storage transforms change
 * it, padded dims, and the element count. `flat` and `physical` are t's lowered storage. */
std::string describe_storage(AuxTable &table, const TensorNode &t, const FlatLayout &flat, const Layout &physical,
                             const std::string &indent);

} // namespace cora::ir
