/** \file Primitives on whole ops: hfuse (horizontal fusion), split_op (operation splitting),
 * compute_inline and compute_at. */
#include <map>

#include "cora/Tensor.h"

#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

Func &Func::hfuse(const std::vector<Func> &others) {
    auto fail = [&](auto &&...msg) { throw_compile_error("hfuse of Func '", name(), "': ", msg...); };
    if (others.empty()) fail("no other Func given");
    if (mutable_schedule(*node_).hfuse_member) fail("it is already fused into another Func's group");
    if (!mutable_schedule(*node_).hfuse.empty()) fail("it already leads a group; list all members in one call");
    for (size_t i = 0; i < others.size(); i++) {
        const Func &o = others[i];
        if (o.node_ == node_) fail("it cannot be fused with itself");
        if (mutable_schedule(*o.node_).hfuse_member || !mutable_schedule(*o.node_).hfuse.empty())
            fail("'", o.name(), "' is already in a horizontal fusion group");
        for (size_t j = 0; j < i; j++)
            if (others[j].node_ == o.node_) fail("'", o.name(), "' is listed twice");
    }
    for (const Func &o : others) {
        mutable_schedule(*o.node_).hfuse_member = true;
        mutable_schedule(*node_).hfuse.push_back(o.node_);
    }
    return *this;
}

Func Func::split_op(const Dim &d, const Expr &point) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("split_op of '", d.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!defined()) fail("define it (compute()) before splitting it");
    if (!point.defined() || !point.type().is_int()) fail("the split point must be an integer expression");
    size_t k = 0;
    while (k < node_->domain.size() && node_->domain[k].dim != d.node())
        k++;
    if (k == node_->domain.size()) fail("'", d.name(), "' is not a dim of its domain");
    for (const ir::VarNode *v : ir::vars_of(point, ir::VarRole::Index)) {
        bool outside = false;
        for (size_t j = 0; j < k; j++)
            outside = outside || node_->domain[j].dim->var.get() == v;
        if (!outside)
            fail("the split point ", ir::print(point), " uses '", v->name, "'; it may use only the dims outside '",
                 d.name(), "'");
    }
    auto tail = std::make_shared<ir::TensorNode>();
    size_t splits = mutable_schedule(*node_).op_splits.size();
    tail->name = name() + "_tail" + (splits ? std::to_string(splits + 1) : "");
    tail->type = node_->type;
    tail->is_input = false;
    // The tail's loop over d counts from the point: every use of d becomes d + point.
    std::map<const ir::VarNode *, Expr> shift{{d.node()->var.get(), ir::var_expr(d.node()->var) + point}};
    // The tail covers what the earlier splits left of the op, from the point on.
    ir::Layout base = loop_domain(*node_);
    tail->domain = base;
    tail->domain[k].extent = base[k].extent - point;
    for (size_t j = k + 1; j < tail->domain.size(); j++)
        tail->domain[j].extent = ir::substitute(tail->domain[j].extent, shift);
    tail->storage = tail->domain;
    tail->value = ir::substitute(node_->value, shift);
    tail->is_split_tail = true;
    ir::TensorPtr head = ir::split_head(*node_);
    tail->stores_into = head ? head : ir::TensorPtr(node_);
    for (const Expr &i : ir::store_indices(*node_))
        tail->store_indices.push_back(ir::substitute(i, shift));
    mutable_schedule(*node_).op_splits.push_back(OpSplit{d.node(), point, tail});
    return Func(tail);
}

Func &Func::compute_inline() {
    if (ir::TensorPtr head = ir::split_head(*node_))
        throw_compile_error("compute_inline of '", name(), "': it is the tail of an op split of '", head->name, "'");
    if (mutable_schedule(*node_).keep_stored)
        throw_compile_error("compute_inline of '", name(), "': it is marked compute_root (stored); choose one");
    mutable_schedule(*node_).inlined = true;
    return *this;
}

Func &Func::compute_root() {
    if (mutable_schedule(*node_).inlined)
        throw_compile_error("compute_root of '", name(), "': it is marked compute_inline (never stored); choose one");
    mutable_schedule(*node_).keep_stored = true;
    return *this;
}

Func &Func::compute_at(const Func &consumer, const Dim &d) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("compute_at of Func '", name(), "' in '", consumer.name(), "': ", msg...);
    };
    if (consumer.node_ == node_) fail("a Func cannot be computed inside itself");
    if (node_->is_split_tail) fail("it is the tail of an op split; compute the Func itself at the consumer");
    if (mutable_schedule(*node_).has_compute_at()) fail("it already has a compute_at");
    bool known = false;
    for (auto &ld : consumer.node_->domain)
        known = known || ld.dim == d.node();
    if (!known) {
        std::string dims;
        for (auto &ld : consumer.node_->domain)
            dims += (dims.empty() ? "" : ", ") + ld.dim->name;
        fail("'", d.name(), "' is not a dim of '", consumer.name(), "' (its dims: ", dims,
             "); compute_at names one of the consumer's dims, and the consumer's loops down to it must stay as ",
             "declared (a loop made by split, fuse or remap cannot be named)");
    }
    mutable_schedule(*node_).at_consumer = consumer.node_;
    mutable_schedule(*node_).at_loop = d.node();
    return *this;
}

} // namespace cora
