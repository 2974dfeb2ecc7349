/** \file Where an op's loops run and what they write (operation splitting). */
#include "ir/Tensor.h"

namespace cora::ir {

std::vector<Expr> store_indices(const TensorNode &t) {
    if (t.stores_into) return t.store_indices;
    std::vector<Expr> idx;
    for (const LayoutDim &d : t.domain)
        idx.push_back(var_expr(d.dim->var));
    return idx;
}

Layout loop_domain(const TensorNode &t) {
    Layout l = t.domain;
    for (const OpSplit &s : t.schedule.op_splits)
        for (LayoutDim &d : l)
            if (d.dim == s.dim) d.extent = s.point;
    return l;
}

} // namespace cora::ir
