#include "front/Schedule.h"

#include <algorithm>

#include "ir/Epilogue.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::front {

const Schedule &schedule_of(const ir::TensorNode &t) {
    static const Schedule none; // immutable: the schedule of inputs and unscheduled Funcs
    return t.schedule ? *t.schedule : none;
}

Schedule &mutable_schedule(ir::TensorNode &t) {
    if (!t.schedule) t.schedule = std::make_shared<Schedule>();
    return *t.schedule;
}

ir::Layout loop_domain(const ir::TensorNode &t) {
    ir::Layout l = t.domain;
    for (const OpSplit &s : schedule_of(t).op_splits)
        for (ir::LayoutDim &d : l)
            if (d.dim == s.dim) d.extent = s.point;
    return l;
}

std::vector<ir::TensorPtr> hfuse_members(const ir::TensorNode &t) {
    std::vector<ir::TensorPtr> v;
    for (const std::weak_ptr<const ir::TensorNode> &w : schedule_of(t).hfuse) {
        ir::TensorPtr m = w.lock();
        if (!m)
            throw_compile_error("hfuse of Func '", t.name,
                                "': a member of its group no longer exists; keep the Funcs you fuse alive");
        v.push_back(m);
    }
    return v;
}

const ir::DimNode *reduction_dim(const ir::TensorNode &t) {
    const ir::Reduce *r = ir::scheduled_reduce(t.value); // epilogues around it included
    return r ? r->var->dim : nullptr;
}

bool is_reduction_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    std::vector<const ir::DimNode *> from{reduction_dim(t)};
    if (!from[0]) return false;
    for (const LoopTransform &tr : schedule_of(t).transforms)
        if (tr.kind == LoopTransform::Kind::Split &&
            std::find(from.begin(), from.end(), tr.parent.get()) != from.end()) {
            from.push_back(tr.outer.get());
            from.push_back(tr.inner.get());
        }
    return std::find(from.begin(), from.end(), d) != from.end();
}

bool is_known_dim(const ir::TensorNode &t, const ir::DimNode *d) {
    for (const ir::LayoutDim &ld : t.domain)
        if (ld.dim.get() == d) return true;
    if (d == reduction_dim(t)) return true;
    for (const LoopTransform &tr : schedule_of(t).transforms) {
        if (tr.outer.get() == d || tr.inner.get() == d || tr.fused.get() == d) return true;
        for (const DimPtr &l : tr.tile_loops)
            if (l.get() == d) return true;
    }
    return false;
}

std::string why_not_a_loop(const ir::TensorNode &t, const ir::DimNode *d) {
    const std::string dn = "'" + d->name + "'";
    for (const LoopTransform &tr : schedule_of(t).transforms) {
        if (tr.parent.get() == d && tr.kind == LoopTransform::Kind::Split)
            return concat(dn, " was split into '", tr.outer->name, "' and '", tr.inner->name, "'");
        if (tr.parent.get() == d && tr.kind == LoopTransform::Kind::Remap)
            return concat(dn, " was remapped: its loop is now '", tr.outer->name, "'");
        if (tr.kind == LoopTransform::Kind::Fuse && (tr.outer.get() == d || tr.inner.get() == d))
            return concat(dn, " was fused into '", tr.fused->name, "'");
        for (size_t k = 0; k < tr.tiled.size(); k++)
            if (tr.tiled[k].get() == d)
                return concat(dn, " runs over the tiles of '", tr.tiles->name, "': its loop is now '",
                              tr.tile_loops[k]->name, "'");
    }
    // The reductions of the definition: how many are outermost, and whether d is one's dim.
    struct Finder : ir::IRVisitor {
        const ir::DimNode *d;
        int depth = 0, outermost = 0;
        bool d_outer = false, d_nested = false;
        void visit(const Expr &x) override {
            const ir::Reduce *r = x.as<ir::Reduce>();
            if (!r) return ir::IRVisitor::visit(x);
            if (depth == 0) outermost++;
            if (r->var->dim == d) (depth == 0 ? d_outer : d_nested) = true;
            depth++;
            ir::IRVisitor::visit(x);
            depth--;
        }
        using ir::IRVisitor::visit;
    } f;
    f.d = d;
    if (t.value.defined()) f.visit(t.value);
    if (f.d_nested)
        return concat(dn, " is the dim of a reduction nested in another reduction's body; only a definition's ",
                      "outermost reduction can be scheduled: compute the inner one in a Func of its own");
    if (f.d_outer)
        return concat(dn, " is the dim of one of the ", f.outermost, " reductions in the definition of '", t.name,
                      "'; a reduction dim becomes a loop only when the definition has exactly one, alone or inside ",
                      "elementwise work on its result (e.g. sum(...) / 8, max(sum(...) + bias(o), 0)): compute each ",
                      "reduction in a Func of its own and combine them in this one");
    std::string dims;
    bool same_name = false;
    for (const ir::LayoutDim &ld : t.domain) {
        dims += (dims.empty() ? "" : ", ") + ld.dim->name;
        same_name |= ld.dim->name == d->name;
    }
    return concat(dn, " is not a dim of this Func (its dims: ", dims, ")",
                  same_name ? concat("; its dim '", d->name,
                                     "' is another Dim with the same name: Dims are matched by identity, so "
                                     "schedule with the Dim object the Func was defined with")
                            : std::string());
}

LoopReplay::LoopReplay(const ir::TensorNode &f, bool with_reduction_dim) {
    for (const ir::LayoutDim &d : f.domain)
        loops_.push_back(d.dim);
    const Schedule &sch = schedule_of(f);
    if (sch.reduction_loop) {
        loops_.push_back(sch.reduction_loop);
    } else if (with_reduction_dim) {
        if (const ir::Reduce *r = ir::scheduled_reduce(f.value)) {
            // The reduction's Dim node is reachable from its variable only as a raw pointer; the
            // loop list holds it through a non-owning alias (the definition keeps it alive).
            const ir::DimNode *k = r->var->dim;
            if (k) loops_.push_back(DimPtr(DimPtr(), k));
        }
    }
}

LoopReplay::LoopReplay(const ir::TensorNode &f, const DimPtr &reduction_loop) {
    for (const ir::LayoutDim &d : f.domain)
        loops_.push_back(d.dim);
    if (reduction_loop) loops_.push_back(reduction_loop);
}

bool LoopReplay::is_loop(const DimPtr &d) const {
    return std::any_of(loops_.begin(), loops_.end(), [&](const DimPtr &l) { return l.get() == d.get(); });
}

bool LoopReplay::applies(const LoopTransform &t) const {
    using Kind = LoopTransform::Kind;
    if (t.kind == Kind::Tiles)
        return std::all_of(t.tiled.begin(), t.tiled.end(), [&](const DimPtr &d) { return is_loop(d); });
    return t.kind == Kind::Pad || t.kind == Kind::Remap || t.kind == Kind::Split ? is_loop(t.parent)
                                                                                 : is_loop(t.outer) && is_loop(t.inner);
}

size_t LoopReplay::apply(const LoopTransform &t) {
    using Kind = LoopTransform::Kind;
    auto find = [&](const DimPtr &d) {
        auto it = std::find_if(loops_.begin(), loops_.end(), [&](const DimPtr &l) { return l.get() == d.get(); });
        CORA_CHECK(it != loops_.end(), "loop transform on '", d->name, "', which is not a loop");
        return it;
    };
    switch (t.kind) {
    case Kind::Split: {
        auto it = find(t.parent);
        size_t pos = (size_t)(it - loops_.begin());
        *it = t.inner;
        loops_.insert(loops_.begin() + (long)pos, t.outer);
        return pos;
    }
    case Kind::Remap: {
        auto it = find(t.parent);
        *it = t.outer;
        return (size_t)(it - loops_.begin());
    }
    case Kind::Pad: return (size_t)(find(t.parent) - loops_.begin());
    case Kind::Tiles: {
        size_t first = loops_.size();
        for (size_t k = 0; k < t.tiled.size(); k++) {
            auto it = find(t.tiled[k]);
            *it = t.tile_loops[k];
            first = std::min(first, (size_t)(it - loops_.begin()));
        }
        return first;
    }
    case Kind::Fuse: {
        auto it = find(t.outer);
        CORA_CHECK(it + 1 != loops_.end() && (it + 1)->get() == t.inner.get(), "fused loops '", t.outer->name,
                   "' and '", t.inner->name, "' are not adjacent");
        size_t pos = (size_t)(it - loops_.begin());
        *it = t.fused;
        loops_.erase(loops_.begin() + (long)pos + 1);
        return pos;
    }
    }
    return 0;
}

std::vector<DimPtr> final_loops(const ir::TensorNode &f, bool with_reduction_dim) {
    LoopReplay r(f, with_reduction_dim);
    for (const LoopTransform &t : schedule_of(f).transforms)
        r.apply(t);
    return r.loops();
}

} // namespace cora::front
