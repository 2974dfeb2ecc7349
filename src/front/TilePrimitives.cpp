/** \file Spatial-sparsity primitives of a Func (cora/Spatial.h): over_active_tiles, which replaces
 * the batch and position loops by a loop over an active-tile list and two loops inside a tile
 * (a Tiles transform, applied by lower/LoopPlan.cpp), and fill_inactive_tiles, an op over the
 * other tiles that writes a value into the same storage. */
#include "cora/Spatial.h"
#include "cora/Tensor.h"

#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

namespace {

const LoopTransform *tiles_transform(const Schedule &s) {
    for (const LoopTransform &t : s.transforms)
        if (t.kind == LoopTransform::Kind::Tiles) return &t;
    return nullptr;
}

} // namespace

Func &Func::over_active_tiles(const ActiveTiles &tiles, const Dim &n, const Dim &y, const Dim &x, const Dim &tile,
                              const Dim &yi, const Dim &xi) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("over_active_tiles of '", tiles.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!defined()) fail("define it (compute()) before scheduling it over tiles");
    if (tiles_transform(mutable_schedule(*node_))) fail("it already runs over a tile list");
    const Dim *tiled[3] = {&n, &y, &x}, *made[3] = {&tile, &yi, &xi};
    for (int k = 0; k < 3; k++) {
        const Dim &d = *tiled[k];
        if (!is_live_loop(*node_, d.node().get()))
            fail("'", d.name(), "' is not a loop of this Func: ", why_not_a_loop(*node_, d.node().get()));
        reject_reduction_loop(*node_, d, "over_active_tiles", "the tiles would sum only part of the reduction");
        for (int j = 0; j < k; j++)
            if (tiled[j]->same_as(d)) fail("'", d.name(), "' is named twice");
        if (is_known_dim(*node_, made[k]->node().get()))
            fail("dim '", made[k]->name(), "' already names a loop of this Func");
        for (int j = 0; j < k; j++)
            if (made[j]->same_as(*made[k])) fail("'", made[k]->name(), "' is named twice");
    }
    LoopTransform t{LoopTransform::Kind::Tiles, nullptr, nullptr, nullptr, nullptr, 1, nullptr, Expr()};
    t.tiles = tiles.node();
    t.tiled = {n.node(), y.node(), x.node()};
    t.tile_loops = {tile.node(), yi.node(), xi.node()};
    mutable_schedule(*node_).transforms.push_back(t);
    return *this;
}

Func Func::fill_inactive_tiles(const Expr &value) {
    auto fail = [&](auto &&...msg) { throw_compile_error("fill_inactive_tiles of Func '", name(), "': ", msg...); };
    Schedule &sch = mutable_schedule(*node_);
    const LoopTransform *tiles = tiles_transform(sch);
    if (!tiles) fail("schedule it with over_active_tiles() first");
    if (sch.inactive_fill) fail("the inactive tiles already get a value");
    if (!sch.op_splits.empty()) fail("its op is split; give the inactive tiles a value before splitting it");
    if (node_->is_split_tail) fail("it is an op's tail; fill the inactive tiles of the whole op");
    if (!value.defined()) fail("no value given");
    for (const ir::VarNode *v : ir::vars_of(value, ir::VarRole::Index)) {
        bool own = false;
        for (const ir::LayoutDim &d : node_->domain)
            own = own || d.dim->var.get() == v;
        if (!own) fail("the value ", ir::print(value), " uses '", v->name, "', which is not a dim of this Func");
    }
    auto fill = std::make_shared<ir::TensorNode>();
    fill->name = name() + "_inactive";
    fill->type = node_->type;
    fill->is_input = false;
    fill->domain = node_->domain;
    fill->storage = fill->domain;
    fill->value = cast(node_->type.value_type(), value); // float16 storage holds float32 values
    fill->is_split_tail = true;
    fill->stores_into = node_;
    fill->store_indices = ir::store_indices(*node_);
    LoopTransform t = *tiles;
    t.inactive_tiles = true;
    mutable_schedule(*fill).transforms.push_back(t);
    sch.inactive_fill = fill;
    return Func(fill);
}

} // namespace cora
