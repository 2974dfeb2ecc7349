/** \file The objects behind Tensor and Func. Definitions are recorded as data; all checking
 * that needs the whole pipeline (bounds, extents) happens in lower/ValidatePipeline. */
#include "cora/Tensor.h"

#include <algorithm>
#include <atomic>
#include <map>

#include "analysis/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora {

namespace {
std::atomic<uint64_t> next_tensor_id{1};

/** Storage transforms belong to the tensor that owns the storage, not to an op-split tail. */
void require_storage_owner(const ir::TensorNode &t, const char *what) {
    if (ir::TensorPtr head = ir::split_head(t))
        throw_compile_error(what, " of '", t.name, "': it is the tail of an op split and writes the storage of '",
                            head->name, "'; change the storage of '", head->name, "' instead");
}

ir::Layout to_layout(const Shape &shape) {
    ir::Layout l;
    for (const DimExtent &d : shape)
        l.push_back(ir::LayoutDim{d.dim.node(), d.extent});
    return l;
}
Shape to_shape(const ir::Layout &l) {
    Shape s;
    for (const ir::LayoutDim &d : l)
        s.emplace_back(Dim(d.dim), d.extent);
    return s;
}
std::shared_ptr<ir::TensorNode> make_tensor(const std::string &name, const Shape &shape, Type type, bool input) {
    if (name.empty()) throw_compile_error("a tensor needs a non-empty name");
    if (type.is_bool()) throw_compile_error("tensor '", name, "': boolean element type is not supported");
    auto t = std::make_shared<ir::TensorNode>();
    t->name = name;
    t->id = next_tensor_id++;
    t->type = type;
    t->is_input = input;
    t->domain = to_layout(shape);
    t->storage = t->domain;
    ir::validate_layout(t->domain, "tensor '" + name + "'");
    return t;
}
} // namespace

Tensor::Tensor(const std::string &name, const Shape &shape, Type type) : node_(make_tensor(name, shape, type, true)) {}
const std::string &Tensor::name() const { return node_->name; }
Type Tensor::type() const { return node_->type; }
size_t Tensor::dimensions() const { return node_->storage.size(); }
Shape Tensor::shape() const { return to_shape(node_->storage); }
Expr Tensor::access(const std::vector<Expr> &indices) const {
    if (indices.size() != node_->storage.size())
        throw_compile_error("tensor '", node_->name, "' has ", node_->storage.size(), " dimension(s), accessed with ",
                            indices.size(), " index(es)");
    for (size_t i = 0; i < indices.size(); i++)
        if (!indices[i].defined() || !indices[i].type().is_int())
            throw_compile_error("index ", i, " of '", node_->name, "' (dim '", node_->storage[i].dim->name,
                                "') must be an integer expression");
    return ir::Access::make(node_, indices);
}

Func::Func(const std::string &name, const Shape &domain, Type type) { node_ = make_tensor(name, domain, type, false); }

Func &Func::compute(const Expr &value) {
    if (!value.defined()) throw_compile_error("Func '", name(), "': compute() with an undefined expression");
    if (node_->value.defined()) throw_compile_error("Func '", name(), "' is already defined");
    Expr v = value;
    if (v.type() != node_->type) {
        if (v.as<ir::IntImm>() || v.as<ir::FloatImm>()) {
            double c = v.as<ir::IntImm>() ? (double)v.as<ir::IntImm>()->value : v.as<ir::FloatImm>()->value;
            v = node_->type.is_float() ? ir::FloatImm::make(c, node_->type) : ir::IntImm::make((int64_t)c, node_->type);
        } else {
            throw_compile_error("Func '", name(), "' holds ", node_->type.str(), " but its definition ", ir::print(v),
                                " is ", v.type().str(), "; use cast()");
        }
    }
    bool self_reference = false;
    ir::visit_exprs(v, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) self_reference |= a->tensor.get() == node_.get();
    });
    if (self_reference) throw_compile_error("Func '", name(), "' reads itself in its own definition; use a reduction");
    node_->value = v;
    return *this;
}

Func &Func::store_in(const Shape &storage) {
    require_storage_owner(*node_, "store_in");
    ir::Layout l = to_layout(storage);
    if (l.size() != node_->domain.size())
        throw_compile_error("Func '", name(), "': storage layout has ", l.size(), " dims, the loop domain has ",
                            node_->domain.size());
    for (size_t i = 0; i < l.size(); i++) {
        if (l[i].dim != node_->domain[i].dim)
            throw_compile_error("Func '", name(), "': storage dim ", i, " is '", l[i].dim->name,
                                "' but the loop domain has '", node_->domain[i].dim->name, "' there");
    }
    ir::validate_layout(l, "storage of '" + name() + "'");
    if (!node_->storage_transforms.empty())
        throw_compile_error("Func '", name(), "': store_in() after a storage transform; call store_in() first");
    node_->storage = l;
    return *this;
}

namespace {
/** The tensor's current physical layout (its aux arrays come from a table of this query alone). */
ir::Layout physical_layout_of(const ir::TensorNode &t) {
    ir::AuxTable table;
    return ir::physical_layout(table, t);
}

/** The position of `d` in layout `l` (the tensor's current physical layout, or its storage). */
size_t storage_position(const ir::TensorNode &t, const ir::Layout &l, const Dim &d, const char *what) {
    require_storage_owner(t, what);
    for (size_t k = 0; k < l.size(); k++)
        if (l[k].dim == d.node()) return k;
    throw_compile_error(what, " of tensor '", t.name, "': '", d.name(), "' is not a dim of its storage");
}
/** Whether `d` names a storage dim of `t`, now or before a storage transform. */
bool names_storage_dim(const ir::TensorNode &t, const Dim &d) {
    for (auto &ld : t.storage)
        if (ld.dim == d.node()) return true;
    for (auto &st : t.storage_transforms)
        if (st.a == d.node() || st.b == d.node()) return true;
    return false;
}
} // namespace

Tensor &Tensor::pad_storage(const Dim &d, int64_t multiple) {
    if (multiple <= 0)
        throw_compile_error("pad_storage of '", d.name(), "' in tensor '", name(), "': multiple must be positive, got ",
                            multiple);
    size_t k = storage_position(*node_, node_->storage, d, "pad_storage");
    if (!node_->storage_transforms.empty())
        throw_compile_error("pad_storage of '", d.name(), "' in tensor '", name(),
                            "': call it before fuse_storage(), split_storage() and reorder_storage()");
    for (size_t m = k + 1; m < node_->storage.size(); m++)
        if (ir::uses_var(node_->storage[m].extent, d.node()->var.get()))
            throw_compile_error("pad_storage of '", d.name(), "' in tensor '", name(), "': the extent of '",
                                node_->storage[m].dim->name, "' depends on it, so padded rows would have no extent; ",
                                "pad the inner dim, or fuse the loops and bulk-pad the fused loop");
    node_->storage[k].extent = ceil_mult(node_->storage[k].extent, multiple);
    return *this;
}

Tensor &Tensor::fuse_storage(const Dim &outer, const Dim &inner, const Dim &fused, int64_t bulk_pad) {
    const char *what = "fuse_storage";
    auto fail = [&](auto &&...msg) {
        throw_compile_error("fuse_storage of '", outer.name(), "' and '", inner.name(), "' in tensor '", name(),
                            "': ", msg...);
    };
    if (bulk_pad <= 0) fail("bulk padding must be positive, got ", bulk_pad);
    const ir::Layout l = physical_layout_of(*node_);
    size_t j = storage_position(*node_, l, outer, what), k = storage_position(*node_, l, inner, what);
    if (k != j + 1) fail("'", inner.name(), "' must be the storage dim directly inside '", outer.name(), "'");
    if (!ir::vars_of(l[j].extent, ir::VarRole::Index).empty())
        fail("the extent of '", outer.name(), "' (", ir::print(l[j].extent), ") depends on an outer dim");
    for (const ir::VarNode *v : ir::vars_of(l[k].extent, ir::VarRole::Index))
        if (v != outer.node()->var.get())
            fail("the extent of '", inner.name(), "' (", ir::print(l[k].extent), ") depends on '", v->name,
                 "', not only on '", outer.name(), "'");
    for (size_t m = k + 1; m < l.size(); m++)
        for (const ir::VarNode *v : ir::vars_of(l[m].extent, ir::VarRole::Index))
            if (v == outer.node()->var.get() || v == inner.node()->var.get())
                fail("the extent of the inner dim '", l[m].dim->name, "' depends on a fused dim");
    if (names_storage_dim(*node_, fused)) fail("dim '", fused.name(), "' is already a dim of the tensor");
    ir::StorageTransform st{ir::StorageTransform::Kind::Fuse, j, fused.node(), nullptr, bulk_pad, {}};
    node_->storage_transforms.push_back(st);
    return *this;
}

Tensor &Tensor::split_storage(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("split_storage of '", d.name(), "' in tensor '", name(), "': ", msg...);
    };
    if (factor <= 0) fail("factor must be positive, got ", factor);
    size_t k = storage_position(*node_, physical_layout_of(*node_), d, "split_storage");
    if (outer.same_as(inner)) fail("outer and inner must be different dims");
    for (const Dim *n : {&outer, &inner})
        if (names_storage_dim(*node_, *n)) fail("dim '", n->name(), "' is already a dim of the tensor");
    node_->storage_transforms.push_back(
        ir::StorageTransform{ir::StorageTransform::Kind::Split, k, outer.node(), inner.node(), factor, {}});
    return *this;
}

Tensor &Tensor::reorder_storage(const std::vector<Dim> &outermost_first) {
    auto fail = [&](auto &&...msg) { throw_compile_error("reorder_storage of tensor '", name(), "': ", msg...); };
    const ir::Layout l = physical_layout_of(*node_);
    std::vector<size_t> positions, order(l.size());
    for (size_t i = 0; i < outermost_first.size(); i++) {
        positions.push_back(storage_position(*node_, l, outermost_first[i], "reorder_storage"));
        for (size_t j = 0; j < i; j++)
            if (outermost_first[j].same_as(outermost_first[i]))
                fail("'", outermost_first[i].name(), "' is listed twice");
    }
    for (size_t k = 0; k < l.size(); k++)
        order[k] = k;
    std::vector<size_t> slots = positions;
    std::sort(slots.begin(), slots.end());
    for (size_t i = 0; i < slots.size(); i++)
        order[slots[i]] = positions[i];
    for (size_t k = 0; k < order.size(); k++)
        for (const ir::VarNode *v : ir::vars_of(l[order[k]].extent, ir::VarRole::Index)) {
            bool outside = false;
            for (size_t j = 0; j < k; j++)
                outside = outside || l[order[j]].dim->var.get() == v;
            if (!outside)
                fail("storage dim '", l[order[k]].dim->name, "' has extent ", ir::print(l[order[k]].extent),
                     ", which depends on '", v->name, "'; it must stay inside it");
        }
    node_->storage_transforms.push_back(
        ir::StorageTransform{ir::StorageTransform::Kind::Reorder, 0, nullptr, nullptr, 1, order});
    return *this;
}

Func &Func::pad_storage(const Dim &d, int64_t multiple) {
    Tensor::pad_storage(d, multiple);
    return *this;
}
Func &Func::fuse_storage(const Dim &outer, const Dim &inner, const Dim &fused, int64_t bulk_pad) {
    Tensor::fuse_storage(outer, inner, fused, bulk_pad);
    return *this;
}
Func &Func::split_storage(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor) {
    Tensor::split_storage(d, outer, inner, factor);
    return *this;
}
Func &Func::reorder_storage(const std::vector<Dim> &outermost_first) {
    Tensor::reorder_storage(outermost_first);
    return *this;
}

bool Func::defined() const { return node_->value.defined(); }
Shape Func::domain() const { return to_shape(node_->domain); }
std::vector<Expr> Func::dim_vars() const {
    std::vector<Expr> v;
    for (auto &d : node_->domain)
        v.push_back(ir::var_expr(d.dim->var));
    return v;
}
void Func::arity_error(size_t got) const {
    throw_compile_error("compute() lambda of '", name(), "' takes ", got, " argument(s) but its domain has ",
                        node_->domain.size(), " dim(s)");
}

} // namespace cora

namespace cora {

namespace {
/** The dim of t's definition when it is one reduction (sum/maximum/minimum over it). */
const ir::DimNode *reduction_dim(const ir::TensorNode &t) {
    const ir::Reduce *r = t.value.as<ir::Reduce>();
    return r ? r->var->dim : nullptr;
}
/** Dims that currently name a loop of `t` (domain dims and the reduction dim, then the results
 * of each transform). */
std::vector<const ir::DimNode *> live_loops(const ir::TensorNode &t) {
    std::vector<const ir::DimNode *> live;
    for (auto &ld : t.domain)
        live.push_back(ld.dim.get());
    if (const ir::DimNode *k = reduction_dim(t)) live.push_back(k);
    for (auto &tr : t.schedule.transforms) {
        using K = ir::LoopTransform::Kind;
        if (tr.kind == K::Split) {
            auto it = std::find(live.begin(), live.end(), tr.parent.get());
            *it = tr.inner.get();
            live.insert(it, tr.outer.get());
        } else if (tr.kind == K::Remap) {
            *std::find(live.begin(), live.end(), tr.parent.get()) = tr.outer.get();
        } else if (tr.kind == K::Fuse) {
            auto it = std::find(live.begin(), live.end(), tr.outer.get());
            *it = tr.fused.get();
            live.erase(std::find(live.begin(), live.end(), tr.inner.get()));
        }
    }
    return live;
}
bool is_live_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    auto live = live_loops(t);
    return std::find(live.begin(), live.end(), d) != live.end();
}
bool is_known_dim(const ir::TensorNode &t, const ir::DimNode *d) {
    for (auto &ld : t.domain)
        if (ld.dim.get() == d) return true;
    if (d == reduction_dim(t)) return true;
    for (auto &tr : t.schedule.transforms)
        if (tr.outer.get() == d || tr.inner.get() == d || tr.fused.get() == d) return true;
    return false;
}
/** The reduction dim and the loops split from it. */
bool is_reduction_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    std::vector<const ir::DimNode *> from{reduction_dim(t)};
    if (!from[0]) return false;
    for (auto &tr : t.schedule.transforms)
        if (tr.kind == ir::LoopTransform::Kind::Split &&
            std::find(from.begin(), from.end(), tr.parent.get()) != from.end()) {
            from.push_back(tr.outer.get());
            from.push_back(tr.inner.get());
        }
    return std::find(from.begin(), from.end(), d) != from.end();
}
/** Naming the reduction dim in a loop primitive makes it a loop of the nest. */
void claim_reduction_loop(ir::TensorNode &t, const Dim &d) {
    if (d.node().get() == reduction_dim(t)) t.schedule.reduction_loop = d.node();
}
/** Primitives whose extra or reordered iterations would change a reduction's result. */
void reject_reduction_loop(const ir::TensorNode &t, const Dim &d, const char *what, const char *why) {
    if (is_reduction_loop(t, d.node().get()))
        throw_compile_error(what, " of '", d.name(), "' in Func '", t.name, "': it is a reduction loop (", why,
                            "); apply it to a loop over the Func's dims");
}
} // namespace

Func &Func::split(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor) {
    if (factor <= 0)
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': factor must be positive, got ", factor);
    if (!is_live_loop(*node_, d.node().get()))
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': '", d.name(),
                            "' is not a loop of this Func (already split or fused, or not in its domain)");
    if (outer.same_as(inner))
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': outer and inner must be different dims");
    for (const Dim *n : {&outer, &inner}) {
        if (is_known_dim(*node_, n->node().get()))
            throw_compile_error("split of '", d.name(), "' in Func '", name(), "': dim '", n->name(),
                                "' already names a loop of this Func");
    }
    claim_reduction_loop(*node_, d);
    ir::LoopTransform t{
        ir::LoopTransform::Kind::Split, d.node(), outer.node(), inner.node(), nullptr, factor, nullptr, Expr()};
    node_->schedule.transforms.push_back(t);
    return *this;
}

Func &Func::fuse(const Dim &outer, const Dim &inner, const Dim &fused) {
    auto live = live_loops(*node_);
    auto po = std::find(live.begin(), live.end(), outer.node().get());
    auto pi = std::find(live.begin(), live.end(), inner.node().get());
    for (const Dim *d : {&outer, &inner})
        if (!is_live_loop(*node_, d->node().get()))
            throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(), "': '",
                                d->name(),
                                "' is not a loop of this Func (already split or fused, or not in its domain)");
    for (const Dim *d : {&outer, &inner})
        reject_reduction_loop(*node_, *d, "fuse", "a fused loop would mix reduction and element iterations");
    if (pi != po + 1)
        throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(), "': '",
                            inner.name(), "' must be the loop directly inside '", outer.name(),
                            "' (fuse before reordering)");
    if (is_known_dim(*node_, fused.node().get()))
        throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(), "': dim '",
                            fused.name(), "' already names a loop of this Func");
    ir::LoopTransform t{
        ir::LoopTransform::Kind::Fuse, nullptr, outer.node(), inner.node(), fused.node(), 1, nullptr, Expr()};
    node_->schedule.transforms.push_back(t);
    return *this;
}

static Func &add_remap(Func &f, const std::shared_ptr<ir::TensorNode> &node, const Dim &d, const Dim &rank,
                       std::shared_ptr<const ir::UFNode> perm, const Expr &cost) {
    if (!is_live_loop(*node, d.node().get()))
        throw_compile_error("remap of '", d.name(), "' in Func '", node->name, "': '", d.name(),
                            "' is not a loop of this Func (already split or fused, or not in its domain)");
    reject_reduction_loop(*node, d, "remap", "its order is the order of the reduction");
    if (is_known_dim(*node, rank.node().get()))
        throw_compile_error("remap of '", d.name(), "' in Func '", node->name, "': dim '", rank.name(),
                            "' already names a loop of this Func");
    ir::LoopTransform t{ir::LoopTransform::Kind::Remap, d.node(), rank.node(), nullptr, nullptr, 1, perm, cost};
    node->schedule.transforms.push_back(t);
    return f;
}

Func &Func::remap(const Dim &d, const Dim &rank, const LengthArray &permutation) {
    return add_remap(*this, node_, d, rank, permutation.node(), Expr());
}

Func &Func::remap_longest_first(const Dim &d, const Dim &rank, const Expr &cost) {
    if (!cost.defined() || !cost.type().is_int())
        throw_compile_error("remap of '", d.name(), "' in Func '", name(), "': the cost must be an integer expression");
    return add_remap(*this, node_, d, rank, nullptr, cost);
}

Func &Func::hfuse(const std::vector<Func> &others) {
    auto fail = [&](auto &&...msg) { throw_compile_error("hfuse of Func '", name(), "': ", msg...); };
    if (others.empty()) fail("no other Func given");
    if (node_->schedule.hfuse_member) fail("it is already fused into another Func's group");
    if (!node_->schedule.hfuse.empty()) fail("it already leads a group; list all members in one call");
    for (size_t i = 0; i < others.size(); i++) {
        const Func &o = others[i];
        if (o.node_ == node_) fail("it cannot be fused with itself");
        if (o.node_->schedule.hfuse_member || !o.node_->schedule.hfuse.empty())
            fail("'", o.name(), "' is already in a horizontal fusion group");
        for (size_t j = 0; j < i; j++)
            if (others[j].node_ == o.node_) fail("'", o.name(), "' is listed twice");
    }
    for (const Func &o : others) {
        o.node_->schedule.hfuse_member = true;
        node_->schedule.hfuse.push_back(o.node_);
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
    size_t splits = node_->schedule.op_splits.size();
    tail->name = name() + "_tail" + (splits ? std::to_string(splits + 1) : "");
    tail->id = next_tensor_id++;
    tail->type = node_->type;
    tail->is_input = false;
    // The tail's loop over d counts from the point: every use of d becomes d + point.
    std::map<const ir::VarNode *, Expr> shift{{d.node()->var.get(), ir::var_expr(d.node()->var) + point}};
    // The tail covers what the earlier splits left of the op, from the point on.
    ir::Layout base = ir::loop_domain(*node_);
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
    node_->schedule.op_splits.push_back(ir::OpSplit{d.node(), point, tail});
    return Func(tail);
}

Func &Func::compute_inline() {
    if (ir::TensorPtr head = ir::split_head(*node_))
        throw_compile_error("compute_inline of '", name(), "': it is the tail of an op split of '", head->name, "'");
    node_->schedule.inlined = true;
    return *this;
}

Func &Func::compute_at(const Func &consumer, const Dim &d) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("compute_at of Func '", name(), "' in '", consumer.name(), "': ", msg...);
    };
    if (consumer.node_ == node_) fail("a Func cannot be computed inside itself");
    if (node_->is_split_tail) fail("it is the tail of an op split; compute the Func itself at the consumer");
    if (node_->schedule.has_compute_at()) fail("it already has a compute_at");
    bool known = false;
    for (auto &ld : consumer.node_->domain)
        known = known || ld.dim == d.node();
    if (!known) fail("'", d.name(), "' is not a dim of '", consumer.name(), "'");
    node_->schedule.at_consumer = consumer.node_;
    node_->schedule.at_loop = d.node();
    return *this;
}

Func &Func::pad_loop(const Dim &d, int64_t multiple) {
    if (multiple <= 0)
        throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(), "': multiple must be positive, got ",
                            multiple);
    if (!is_live_loop(*node_, d.node().get()))
        throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(), "': '", d.name(),
                            "' is not a loop of this Func (already split or fused, or not in its domain)");
    reject_reduction_loop(*node_, d, "pad_loop", "its padded iterations would add to the result");
    for (auto &tr : node_->schedule.transforms)
        if (tr.kind == ir::LoopTransform::Kind::Pad && tr.parent == d.node())
            throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(), "': the loop is already padded");
    ir::LoopTransform t{ir::LoopTransform::Kind::Pad, d.node(), nullptr, nullptr, nullptr, multiple, nullptr, Expr()};
    node_->schedule.transforms.push_back(t);
    return *this;
}

Func &Func::reorder(const std::vector<Dim> &outermost_first) {
    for (size_t i = 0; i < outermost_first.size(); i++) {
        const Dim &d = outermost_first[i];
        if (!is_known_dim(*node_, d.node().get()))
            throw_compile_error("reorder in Func '", name(), "': '", d.name(), "' is not a loop of this Func");
        for (size_t j = 0; j < i; j++)
            if (outermost_first[j].same_as(d))
                throw_compile_error("reorder in Func '", name(), "': '", d.name(), "' is listed twice");
    }
    node_->schedule.order.clear();
    for (const Dim &d : outermost_first) {
        claim_reduction_loop(*node_, d);
        node_->schedule.order.push_back(d.node());
    }
    return *this;
}

static Func &annotate(Func &f, const std::shared_ptr<ir::TensorNode> &node, const Dim &d, ir::LoopAnnotation a,
                      const char *what) {
    if (!is_known_dim(*node, d.node().get()))
        throw_compile_error(what, " in Func '", node->name, "': '", d.name(), "' is not a loop of this Func");
    for (auto &[dim, ann] : node->schedule.annotations)
        if (dim == d.node())
            throw_compile_error(what, " in Func '", node->name, "': loop '", d.name(), "' is already marked");
    if (a == ir::LoopAnnotation::Parallel || a == ir::LoopAnnotation::Vectorize)
        reject_reduction_loop(*node, d, what, "its iterations update the same elements");
    claim_reduction_loop(*node, d);
    node->schedule.annotations.emplace_back(d.node(), a);
    return f;
}
Func &Func::cache_write(const Dim &at) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_write at '", at.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!is_known_dim(*node_, at.node().get())) fail("'", at.name(), "' is not a loop of this Func");
    if (node_->schedule.cache_write_at) fail("it already has a cache_write");
    node_->schedule.cache_write_at = at.node();
    return *this;
}

Func &Func::cache_read(const Tensor &t, const Dim &at) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_read of '", t.name(), "' at '", at.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!is_known_dim(*node_, at.node().get())) fail("'", at.name(), "' is not a loop of this Func");
    if (t.node() == node_) fail("a Func cannot cache its own storage; use cache_write");
    bool read = false;
    ir::visit_exprs(node_->value, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) read = read || a->tensor == t.node();
    });
    if (!read) fail("the definition does not read '", t.name(), "'");
    for (auto &c : node_->schedule.cache_reads)
        if (c.tensor == t.node()) fail("'", t.name(), "' is already cached");
    node_->schedule.cache_reads.push_back({t.node(), at.node()});
    return *this;
}

Func &Func::parallel(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Parallel, "parallel"); }
Func &Func::vectorize(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Vectorize, "vectorize"); }
Func &Func::unroll(const Dim &d) { return annotate(*this, node_, d, ir::LoopAnnotation::Unroll, "unroll"); }

} // namespace cora
