/** \file Where an op's loops run and what they write (operation splitting). */
#include "ir/Tensor.h"

#include "util/Error.h"

namespace cora::ir {

TensorPtr split_head(const TensorNode &t) {
    if (!t.is_split_tail) return nullptr;
    TensorPtr head = t.stores_into.lock();
    if (!head)
        throw_compile_error("'", t.name,
                            "' is the tail of an op split whose Func no longer exists; keep the Func "
                            "it was split from (its Func object) alive");
    return head;
}

std::vector<Expr> store_indices(const TensorNode &t) {
    if (t.is_split_tail) return t.store_indices;
    std::vector<Expr> idx;
    for (const LayoutDim &d : t.domain)
        idx.push_back(var_expr(d.dim->var));
    return idx;
}

} // namespace cora::ir
