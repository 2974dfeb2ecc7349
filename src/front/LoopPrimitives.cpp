/** \file Loop primitives of a Func: split, fuse, remap, pad_loop, reorder, parallel, vectorize, gpu_blocks,
 * gpu_threads, unroll. Each checks the loops it names against LoopReplay (front/Schedule.h) and appends to the Func's
 * schedule. */
#include <algorithm>

#include "cora/Tensor.h"

#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

Func &Func::split(const Dim &d, const Dim &outer, const Dim &inner, int64_t factor) {
    if (factor <= 0)
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': factor must be positive, got ", factor);
    if (!is_live_loop(*node_, d.node().get()))
        throw_compile_error("split of '", d.name(), "' in Func '", name(),
                            "': not a loop of this Func: ", why_not_a_loop(*node_, d.node().get()));
    if (outer.same_as(inner))
        throw_compile_error("split of '", d.name(), "' in Func '", name(), "': outer and inner must be different dims");
    for (const Dim *n : {&outer, &inner}) {
        if (is_known_dim(*node_, n->node().get()))
            throw_compile_error("split of '", d.name(), "' in Func '", name(), "': dim '", n->name(),
                                "' already names a loop of this Func");
    }
    claim_reduction_loop(*node_, d);
    LoopTransform t{LoopTransform::Kind::Split, d.node(), outer.node(), inner.node(), nullptr, factor, nullptr, Expr()};
    mutable_schedule(*node_).transforms.push_back(t);
    return *this;
}

Func &Func::fuse(const Dim &outer, const Dim &inner, const Dim &fused) {
    std::vector<DimPtr> live = final_loops(*node_, /*with_reduction_dim=*/true);
    auto at = [&](const Dim &d) {
        return std::find_if(live.begin(), live.end(), [&](const DimPtr &l) { return l.get() == d.node().get(); });
    };
    auto po = at(outer), pi = at(inner);
    for (const Dim *d : {&outer, &inner})
        if (!is_live_loop(*node_, d->node().get()))
            throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(),
                                "': not a loop of this Func: ", why_not_a_loop(*node_, d->node().get()));
    for (const Dim *d : {&outer, &inner})
        reject_reduction_loop(*node_, *d, "fuse", "a fused loop would mix reduction and element iterations");
    if (pi != po + 1)
        throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(), "': '",
                            inner.name(), "' must be the loop directly inside '", outer.name(),
                            "' (fuse before reordering)");
    if (is_known_dim(*node_, fused.node().get()))
        throw_compile_error("fuse of '", outer.name(), "' and '", inner.name(), "' in Func '", name(), "': dim '",
                            fused.name(), "' already names a loop of this Func");
    LoopTransform t{LoopTransform::Kind::Fuse, nullptr, outer.node(), inner.node(), fused.node(), 1, nullptr, Expr()};
    mutable_schedule(*node_).transforms.push_back(t);
    return *this;
}

static Func &add_remap(Func &f, const std::shared_ptr<ir::TensorNode> &node, const Dim &d, const Dim &rank,
                       std::shared_ptr<const ir::UFNode> perm, const Expr &cost) {
    if (!is_live_loop(*node, d.node().get()))
        throw_compile_error("remap of '", d.name(), "' in Func '", node->name,
                            "': not a loop of this Func: ", why_not_a_loop(*node, d.node().get()));
    reject_reduction_loop(*node, d, "remap", "its order is the order of the reduction");
    if (is_known_dim(*node, rank.node().get()))
        throw_compile_error("remap of '", d.name(), "' in Func '", node->name, "': dim '", rank.name(),
                            "' already names a loop of this Func");
    LoopTransform t{LoopTransform::Kind::Remap, d.node(), rank.node(), nullptr, nullptr, 1, perm, cost};
    mutable_schedule(*node).transforms.push_back(t);
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

Func &Func::pad_loop(const Dim &d, int64_t multiple) {
    if (multiple <= 0)
        throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(), "': multiple must be positive, got ",
                            multiple);
    if (!is_live_loop(*node_, d.node().get()))
        throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(),
                            "': not a loop of this Func: ", why_not_a_loop(*node_, d.node().get()));
    reject_reduction_loop(*node_, d, "pad_loop", "its padded iterations would add to the result");
    for (auto &tr : mutable_schedule(*node_).transforms)
        if (tr.kind == LoopTransform::Kind::Pad && tr.parent == d.node())
            throw_compile_error("pad_loop of '", d.name(), "' in Func '", name(), "': the loop is already padded");
    LoopTransform t{LoopTransform::Kind::Pad, d.node(), nullptr, nullptr, nullptr, multiple, nullptr, Expr()};
    mutable_schedule(*node_).transforms.push_back(t);
    return *this;
}

Func &Func::reorder(const std::vector<Dim> &outermost_first) {
    for (size_t i = 0; i < outermost_first.size(); i++) {
        const Dim &d = outermost_first[i];
        if (!is_known_dim(*node_, d.node().get()))
            throw_compile_error("reorder in Func '", name(),
                                "': not a loop of this Func: ", why_not_a_loop(*node_, d.node().get()));
        for (size_t j = 0; j < i; j++)
            if (outermost_first[j].same_as(d))
                throw_compile_error("reorder in Func '", name(), "': '", d.name(), "' is listed twice");
    }
    mutable_schedule(*node_).order.clear();
    for (const Dim &d : outermost_first) {
        claim_reduction_loop(*node_, d);
        mutable_schedule(*node_).order.push_back(d.node());
    }
    return *this;
}

static Func &annotate(Func &f, const std::shared_ptr<ir::TensorNode> &node, const Dim &d, ir::ForKind a,
                      const char *what) {
    if (!is_known_dim(*node, d.node().get()))
        throw_compile_error(what, " in Func '", node->name,
                            "': not a loop of this Func: ", why_not_a_loop(*node, d.node().get()));
    for (auto &[dim, ann] : mutable_schedule(*node).annotations)
        if (dim == d.node())
            throw_compile_error(what, " in Func '", node->name, "': loop '", d.name(), "' is already marked");
    // A reduction loop may be unrolled, or bound to threads (a cross-thread reduction: each
    // thread reduces its part, then the block combines the parts; lower/ThreadReductions.cpp).
    const bool thread = ir::is_gpu_thread(a);
    if (a != ir::ForKind::Unrolled && a != ir::ForKind::Dismantled && a != ir::ForKind::GpuMma && !thread)
        reject_reduction_loop(*node, d, what, "its iterations update the same elements");
    for (auto &[dim, ann] : mutable_schedule(*node).annotations)
        if (ann == a && ir::is_gpu_bound(a))
            throw_compile_error(what, " in Func '", node->name, "': loop '", dim->name, "' is already bound to ", what,
                                "; each grid axis takes one loop");
    claim_reduction_loop(*node, d);
    mutable_schedule(*node).annotations.emplace_back(d.node(), a);
    return f;
}
Func &Func::parallel(const Dim &d) { return annotate(*this, node_, d, ir::ForKind::Parallel, "parallel"); }
Func &Func::vectorize(const Dim &d) { return annotate(*this, node_, d, ir::ForKind::Vectorized, "vectorize"); }
Func &Func::unroll(const Dim &d) { return annotate(*this, node_, d, ir::ForKind::Unrolled, "unroll"); }
Func &Func::dismantle(const Dim &d) { return annotate(*this, node_, d, ir::ForKind::Dismantled, "dismantle"); }
Func &Func::specialize_interior(const Dim &d) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("specialize_interior at '", d.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!is_known_dim(*node_, d.node().get()))
        fail("not a loop of this Func: ", why_not_a_loop(*node_, d.node().get()));
    if (mutable_schedule(*node_).interior_at) fail("it already specializes a loop");
    mutable_schedule(*node_).interior_at = d.node();
    return *this;
}
Func &Func::gpu_mma(const Dim &k) {
    if (!is_known_dim(*node_, k.node().get()))
        throw_compile_error("gpu_mma in Func '", name(),
                            "': not a loop of this Func: ", why_not_a_loop(*node_, k.node().get()));
    if (!is_reduction_loop(*node_, k.node().get()))
        throw_compile_error("gpu_mma in Func '", name(), "': '", k.name(),
                            "' is not a loop of the reduction; name the 16-step loop split from the sum's dim");
    return annotate(*this, node_, k, ir::ForKind::GpuMma, "gpu_mma");
}
Func &Func::gpu_blocks(const Dim &x) { return annotate(*this, node_, x, ir::ForKind::GpuBlockX, "gpu_blocks.x"); }
Func &Func::gpu_blocks(const Dim &x, const Dim &y) {
    gpu_blocks(x);
    return annotate(*this, node_, y, ir::ForKind::GpuBlockY, "gpu_blocks.y");
}
Func &Func::gpu_blocks(const Dim &x, const Dim &y, const Dim &z) {
    gpu_blocks(x, y);
    return annotate(*this, node_, z, ir::ForKind::GpuBlockZ, "gpu_blocks.z");
}
Func &Func::gpu_threads(const Dim &x) { return annotate(*this, node_, x, ir::ForKind::GpuThreadX, "gpu_threads.x"); }
Func &Func::gpu_threads(const Dim &x, const Dim &y) {
    gpu_threads(x);
    return annotate(*this, node_, y, ir::ForKind::GpuThreadY, "gpu_threads.y");
}

Func &Func::gpu_threads(const Dim &x, const Dim &y, const Dim &z) {
    gpu_threads(x, y);
    return annotate(*this, node_, z, ir::ForKind::GpuThreadZ, "gpu_threads.z");
}

} // namespace cora
