/** \file Where an op's loops run and what they write (operation splitting); declared value ranges. */
#include "ir/Tensor.h"

#include "util/Error.h"

namespace cora::ir {

std::optional<std::pair<int64_t, int64_t>> declared_range(const Expr &e) {
    if (const UFCall *u = e.as<UFCall>()) return std::make_pair(u->fn->min_value, u->fn->max_value);
    if (const Access *a = e.as<Access>()) {
        if (a->tensor->has_value_range) return std::make_pair(a->tensor->min_value, a->tensor->max_value);
        return std::nullopt;
    }
    if (const Cast *c = e.as<Cast>()) {
        if (c->type.is_int() && c->value.type().is_int() && c->type.bits >= c->value.type().bits)
            return declared_range(c->value);
    }
    return std::nullopt;
}

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
