/** \file Values known when compiling, folded into expressions: a static sparsity pattern's block
 * counts (LengthArray::constant) and column indices (Tensor::index_values), and the prefix sums
 * built from them.
 *
 * Once a dismantled loop's index is a constant (lower/DismantleLoops.cpp), `W_blocks(3)` is the
 * number of present blocks in block row 3, `prefix_W_rb(3)` where its blocks start, and the
 * column index read at a constant packed offset is the column itself: the folder replaces each by
 * its value, so the kernel neither loads an index nor loops over a run-time count. What does not
 * fold (a non-constant index, a run-time length array) is left as it is. */
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "ir/IRVisitor.h"

namespace cora::ir {

class StaticValues {
public:
    /** `tensor_values`: the buffer variable of each tensor with static values (after storage
     * lowering, its reads are loads of that buffer at a flat offset). */
    explicit StaticValues(std::map<const VarNode *, const std::vector<int64_t> *> tensor_values = {})
        : tensor_values_(std::move(tensor_values)) {}

    /** `e` with every read of a static value at a constant index replaced by the value, simplified. */
    Expr fold(const Expr &e);
    Stmt fold(const Stmt &s);

    /** The value of a UF call with constant arguments, when it is known: a constant length array's
     * element, or a prefix sum whose summand folds at every index it adds up. */
    std::optional<int64_t> uf_value(const UFNode &fn, const std::vector<int64_t> &args);

private:
    friend class StaticFolder;
    std::map<const VarNode *, const std::vector<int64_t> *> tensor_values_;
    /** Prefix sums computed so far, per aux array and outer indices: entry x is A[outer..., x]. */
    std::map<std::pair<const UFNode *, std::vector<int64_t>>, std::vector<int64_t>> prefix_sums_;
};

} // namespace cora::ir
