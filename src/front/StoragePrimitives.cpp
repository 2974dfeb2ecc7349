/** \file Storage transforms of a Tensor or Func: pad_storage, fuse_storage, split_storage,
 * reorder_storage (recorded on the tensor node; lowering applies them in order). */
#include <algorithm>

#include "cora/Tensor.h"

#include "formats/ragged/StorageLayout.h"
#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

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

} // namespace cora
