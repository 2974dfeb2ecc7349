/** \file Storage lowering through the dimension graph (CoRA appendix B.1, Algorithm 1,
 * generalised to extents that depend on several outer dims).
 *
 * For a layout d_0 .. d_{n-1} with extents E_k(d_0 .. d_{k-1}), slice sizes are built from the
 * inside out: S_n = 1; if S_{k+1} does not depend on d_k then the offset term of d_k is
 * d_k * S_{k+1} and S_k = E_k * S_{k+1}; otherwise the term is a prefix-sum aux array
 * P_k(deps, d_k) = sum_{x < d_k} S_{k+1}(.., x) built by the prelude, and S_k = P_k(deps, E_k).
 * The offset is the sum of the terms and the size is S_0. An aux array whose index depends on
 * several dims is itself a ragged tensor, flattened by the same algorithm (recursion ends since
 * its layout has fewer dims). Access cost: one aux load per ragged dependence, O(1). */
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "analysis/AuxTable.h"
#include "ir/Tensor.h"

namespace cora::ir {

struct FlatLayout {
    Expr offset; ///< flat element offset, in terms of the layout's dim variables
    Expr size;   ///< number of elements
    /** Aux arrays this layout's offset/size use, dependencies first. */
    std::vector<std::shared_ptr<const UFNode>> aux;
};

/** Check that every extent uses only the variables of outer dims (CompileError naming the
 * tensor and dims otherwise). `what` names the owner in messages. */
void validate_layout(const Layout &layout, const std::string &what);

/** Dimension graph: edge (j, k) when the extent of dim k uses the index of dim j. */
std::vector<std::pair<int, int>> dim_graph(const Layout &layout);

/** The aux arrays it creates come from `table` (AuxTable.h), as for every function below. */
FlatLayout flatten_layout(AuxTable &table, const Layout &layout);

/** The prefix-sum aux array over `layout` (last dim: summed range + 1) of `summand`, interned
 * by a canonical key (positions, not dim identities). */
std::shared_ptr<const UFNode> prefix_sum_aux(AuxTable &table, Layout layout, Expr summand);

/** The fusion maps of a loop over (o < outer_extent, i < E_i(o)) where prefix = P_{E_i}. */
struct FusionMaps {
    std::shared_ptr<const UFNode> outer, inner; ///< fo, fi
    Expr total;                                 ///< P(outer_extent)
    Expr padded_total;                          ///< ceil_mult(total, pad)
};
FusionMaps fusion_maps(AuxTable &table, const std::shared_ptr<const DimNode> &fused,
                       const std::shared_ptr<const UFNode> &prefix, const Expr &outer_extent, int64_t pad);

/** The prelude's longest-first permutation of loop `d` (extent E, loop-invariant) by `cost`. */
std::shared_ptr<const UFNode> longest_first_aux(AuxTable &table, const std::shared_ptr<const DimNode> &d,
                                                const Expr &extent, const Expr &cost);

/** ((e + m - 1) / m) * m (floor division; e >= 0). */
Expr ceil_mult_expr(const Expr &e, int64_t m);

/** A tensor's storage with its storage transforms applied (what is flattened and allocated). */
Layout physical_layout(AuxTable &table, const TensorNode &t);
/** The physical indices of the element at logical storage indices `logical`. */
std::vector<Expr> physical_indices(AuxTable &table, const TensorNode &t, const std::vector<Expr> &logical);

/** Offset of an element at `indices` (substituted into the flattened offset). */
Expr flat_offset(const FlatLayout &flat, const Layout &layout, const std::vector<Expr> &indices);

/** Aux arrays used by `e` (through UF calls) and everything they depend on, dependencies first. */
std::vector<std::shared_ptr<const UFNode>> aux_closure(AuxTable &table, const std::vector<Expr> &exprs);

} // namespace cora::ir
