/** \file Step: an op's loop plan, from its schedule (or the default schedule).
 *
 * Starting from the domain dims (an op-split dim cut at its point), applies the loop transforms in
 * order on front::LoopReplay, which owns how each one changes the loop list; here each also gets
 * its extent, its dims' values and its guard:
 *  - split: parent = outer * f + inner, outer extent ceil(E / f), guard parent < E.
 *  - fuse(o, i -> f): o's extent must be loop-invariant and i's may use only o. A dense inner
 *    extent E_i gives o = f / E_i, i = f % E_i; a ragged one gives o = fo(f), i = fi(f) over
 *    f < P(E_o), where P is the prefix sum of E_i and fo/fi are prelude arrays (AuxSpec).
 *  - pad_loop(d, m): d's extent E becomes ceil_mult(E, m), with the guard d < E. On a fused
 *    ragged loop the fusion maps get the pad segment (bulk padding).
 *  - remap(d -> rank): d = perm(rank) over the same (loop-invariant) extent; perm is a user
 *    length array or the prelude's longest-first order. Each is kept in the plan's permutations and
 *    checked to be a permutation at run time (add_argument_checks).
 *  - tiles (over_active_tiles): n, y, x from an active-tile list's entries and the loops inside a
 *    tile (apply_tiles below).
 * Then the reorder requests, and every loop extent in terms of the final loop variables: a loop
 * whose extent uses a loop inside it is rejected, unless it is a split's outer loop and the loops
 * it uses have constant extents: it then runs to its largest value over them, and the split guard
 * (kept, or the inner loop's bound) skips the extra iterations. Then the loop kinds: by default
 * the outermost loop is parallel; annotations mark loops parallel, vectorized or unrolled.
 * Operation splitting: each split point is proved to lie in [0, E]; a padded loop covering the
 * split dim is rejected (its extra iterations would write the other part).
 * Reduction loops: when a primitive names the dim of a definition that is one reduction, that dim
 * is the innermost loop before the transforms.
 * Tests: tests/correctness/schedules.cpp, fusion_padding.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>

#include "analysis/Simplify.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/Epilogue.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

using front::LoopTransform;
using front::OpSplit;
using front::Schedule;

namespace {

/** Tiles: (n, y, x) = (order(r, 0), order(r, 1) * th + yi, order(r, 2) * tw + xi) over the active
 * tiles r = tile < count, or the inactive ones r = count + tile < tiles; guards y < rows and
 * x < cols (a partial last tile). The loops' extents must be the list's grid: the order's entries
 * are bounded by the grid (the prover's facts), so the positions then stay in the Func. */
void apply_tiles(const TensorNode &f, const LoopTransform &s, TransformedLoops &plan, const LoweringContext &ctx) {
    const TileList &list = *s.tiles;
    auto now = [&](const Expr &e) { return simplify(substitute(e, plan.value)); };
    const Expr grid[3] = {list.batch, list.rows, list.cols};
    const char *what[3] = {"batch", "rows", "cols"};
    for (int k = 0; k < 3; k++) {
        const DimPtr &d = s.tiled[k];
        Expr e = now(plan.extent.at(d.get()));
        for (const VarNode *v : vars_of(e, VarRole::Index))
            throw_compile_error("over_active_tiles of '", list.name, "' in Func '", f.name, "': the extent of '",
                                d->name, "' (", print(e), ") depends on loop '", v->name,
                                "'; the tiled loops must have loop-invariant extents");
        Expr diff = simplify(Sub::make(e, grid[k]));
        if (!ctx.prover->prove_nonneg(diff, {}) || !ctx.prover->prove_nonneg(Sub::make(IntImm::make(0), diff), {}))
            throw_compile_error("over_active_tiles of '", list.name, "' in Func '", f.name, "': loop '", d->name,
                                "' has extent ", print(e), ", but the tiles' grid has ", print(grid[k]), " ", what[k],
                                "; tile a Func over the positions the list was made for");
    }
    for (int k = 1; k < 3; k++)
        plan.guards.push_back(
            Guard{now(var_expr(s.tiled[k]->var)), now(plan.extent.at(s.tiled[k].get())), s.tiled[k]->name, false});
    Expr count = UFCall::make(list.count, {IntImm::make(0)});
    Expr tile = var_expr(s.tile_loops[0]->var);
    Expr rank = s.inactive_tiles ? Add::make(count, tile) : tile;
    auto entry = [&](int field) { return UFCall::make(list.order, {rank, IntImm::make(field)}); };
    auto rebind = [&](const VarNode *v, const Expr &e) {
        for (auto &[w, x] : plan.value)
            x = substitute(x, v, e);
        plan.value[v] = e;
    };
    rebind(s.tiled[0]->var.get(), entry(0));
    rebind(s.tiled[1]->var.get(),
           Add::make(Mul::make(entry(1), IntImm::make(list.tile_h)), var_expr(s.tile_loops[1]->var)));
    rebind(s.tiled[2]->var.get(),
           Add::make(Mul::make(entry(2), IntImm::make(list.tile_w)), var_expr(s.tile_loops[2]->var)));
    plan.extent[s.tile_loops[0].get()] = s.inactive_tiles ? simplify(Sub::make(list.grid_tiles(), count)) : count;
    plan.extent[s.tile_loops[1].get()] = IntImm::make(list.tile_h);
    plan.extent[s.tile_loops[2].get()] = IntImm::make(list.tile_w);
}

} // namespace

std::optional<TransformedLoops> apply_transforms(const TensorPtr &f, bool skip_splits, const LoweringContext &ctx) {
    const Schedule &sch = ctx.schedule_of(*f);
    TransformedLoops plan;
    auto &extent = plan.extent;
    auto &value = plan.value;
    auto &guards = plan.guards;
    front::LoopReplay replay(*f, sch.reduction_loop); // the user's or a default schedule's reduction loop
    for (const LayoutDim &d : front::loop_domain(*f))
        extent[d.dim.get()] = d.extent;
    if (sch.reduction_loop) {
        const Reduce *red = scheduled_reduce(f->value);
        CORA_CHECK(red && red->var == sch.reduction_loop->var, "reduction loop without its reduction");
        extent[sch.reduction_loop.get()] = red->extent;
    }
    auto now = [&](const Expr &e) { return simplify(substitute(e, value)); };
    auto rebind = [&](const VarNode *v, const Expr &e) {
        for (auto &[w, x] : value)
            x = substitute(x, v, e);
        value[v] = e;
    };
    using Kind = LoopTransform::Kind;
    for (size_t n = 0; n < sch.transforms.size(); n++) {
        const LoopTransform &s = sch.transforms[n];
        if (skip_splits && s.kind == Kind::Split) continue;
        if (skip_splits && !replay.applies(s)) return std::nullopt;
        if (s.kind == Kind::Split) {
            Expr ep = extent.at(s.parent.get());
            guards.push_back(Guard{now(var_expr(s.parent->var)), now(ep), s.parent->name, false});
            rebind(s.parent->var.get(),
                   Add::make(Mul::make(var_expr(s.outer->var), IntImm::make(s.factor)), var_expr(s.inner->var)));
            extent[s.outer.get()] =
                simplify(Div::make(Add::make(ep, IntImm::make(s.factor - 1)), IntImm::make(s.factor)));
            extent[s.inner.get()] = IntImm::make(s.factor);
        } else if (s.kind == Kind::Remap) {
            Expr e = now(extent.at(s.parent.get()));
            auto remap_error = [&](auto &&...msg) {
                throw_compile_error("remap of '", s.parent->name, "' in Func '", f->name, "': ", msg...);
            };
            for (const VarNode *v : vars_of(e, VarRole::Index))
                remap_error("its extent (", print(e), ") depends on loop '", v->name,
                            "'; only a loop with a loop-invariant extent can be remapped");
            std::shared_ptr<const UFNode> perm = s.permutation;
            for (const Guard &g : guards)
                if (g.pad && uses_var(g.value, s.parent->var.get()))
                    remap_error("'", s.parent->name, "' is padded; remap it before padding");
            if (!perm) {
                Expr cost = now(s.cost);
                for (const VarNode *v : vars_of(cost, VarRole::Index))
                    if (v != s.parent->var.get())
                        remap_error("the cost ", print(cost), " uses '", v->name, "'; it may use only '",
                                    s.parent->name, "'");
                perm = longest_first_aux(ctx.aux, s.parent, e, cost);
            }
            plan.permutations.push_back(Permutation{perm, e, s.parent->name});
            rebind(s.parent->var.get(), UFCall::make(perm, {var_expr(s.outer->var)}));
            extent[s.outer.get()] = extent.at(s.parent.get());
        } else if (s.kind == Kind::Tiles) {
            apply_tiles(*f, s, plan, ctx);
        } else if (s.kind == Kind::Pad) {
            Expr ep = extent.at(s.parent.get());
            for (const OpSplit &split : sch.op_splits)
                if (uses_var(now(var_expr(split.dim->var)), s.parent->var.get()))
                    throw_compile_error("pad_loop of '", s.parent->name, "' in Func '", f->name, "': the loop covers '",
                                        split.dim->name, "', where the op is split, so its padded iterations would ",
                                        "write the other part; pad a loop of the tail, or split at a multiple instead");
            guards.push_back(Guard{now(var_expr(s.parent->var)), now(ep), s.parent->name, true});
            extent[s.parent.get()] = simplify(ceil_mult_expr(ep, s.factor));
        } else {
            Expr eo = now(extent.at(s.outer.get())), ei = now(extent.at(s.inner.get()));
            auto fuse_error = [&](auto &&...msg) {
                throw_compile_error("fuse of '", s.outer->name, "' and '", s.inner->name, "' in Func '", f->name,
                                    "': ", msg...);
            };
            for (const VarNode *v : vars_of(eo, VarRole::Index))
                fuse_error("the extent of '", s.outer->name, "' (", print(eo), ") depends on loop '", v->name,
                           "'; only a loop with a loop-invariant extent can be the outer one");
            for (const VarNode *v : vars_of(ei, VarRole::Index))
                if (v != s.outer->var.get())
                    fuse_error("the extent of '", s.inner->name, "' (", print(ei), ") depends on loop '", v->name,
                               "', not only on '", s.outer->name, "'");
            Expr fv = var_expr(s.fused->var);
            if (vars_of(ei, VarRole::Index).empty()) {
                rebind(s.outer->var.get(), Div::make(fv, ei));
                rebind(s.inner->var.get(), Mod::make(fv, ei));
                extent[s.fused.get()] = simplify(Mul::make(eo, ei));
            } else {
                for (const Guard &g : guards)
                    if (g.pad && g.dim == s.outer->name && uses_var(g.value, s.outer->var.get()))
                        fuse_error("'", s.outer->name, "' is padded, so the prelude would evaluate the extent of '",
                                   s.inner->name, "' past its range; pad the fused loop instead (bulk padding)");
                int64_t bulk_pad = 1; // a later pad_loop of the fused loop pads the maps themselves
                for (size_t k = n + 1; k < sch.transforms.size(); k++)
                    if (sch.transforms[k].kind == Kind::Pad && sch.transforms[k].parent == s.fused)
                        bulk_pad = sch.transforms[k].factor;
                auto prefix =
                    prefix_sum_aux(ctx.aux, {LayoutDim{s.outer, simplify(Add::make(eo, IntImm::make(1)))}}, ei);
                FusionMaps maps = fusion_maps(ctx.aux, s.fused, prefix, eo, bulk_pad);
                rebind(s.outer->var.get(), UFCall::make(maps.outer, {fv}));
                rebind(s.inner->var.get(), UFCall::make(maps.inner, {fv}));
                extent[s.fused.get()] = maps.total;
            }
        }
        replay.apply(s);
    }
    plan.loops = replay.loops();
    return plan;
}

namespace {

void check_split_point(const TensorNode &f, const OpSplit &split, const Layout &dom, const LoweringContext &ctx) {
    Scope outside;
    for (const LayoutDim &d : dom) {
        if (d.dim == split.dim) {
            Expr point = simplify(split.point), e = simplify(d.extent);
            const char *bad = !ctx.prover->prove_nonneg(point, outside)                 ? "may be negative"
                              : !ctx.prover->prove_nonneg(Sub::make(e, point), outside) ? "may exceed the extent"
                                                                                        : nullptr;
            if (bad)
                throw_compile_error("split_op of '", d.dim->name, "' in Func '", f.name, "': the split point ",
                                    print(point), " ", bad, " ", print(e), " (", ctx.prover->last_failure(),
                                    "); it must lie in [0, ", print(e), "], e.g. clamp it with min()");
            return;
        }
        outside.push_back(ScopeEntry{d.dim->var.get(), IntImm::make(0), d.extent});
    }
}

/** Each op split's point must lie in [0, E] for every index of the dims outside it, where E is
 * the extent the earlier splits left. */
void check_split_points(const TensorNode &f, const LoweringContext &ctx) {
    Layout dom = f.domain;
    for (const OpSplit &split : front::schedule_of(f).op_splits) {
        check_split_point(f, split, dom, ctx);
        for (LayoutDim &d : dom)
            if (d.dim == split.dim) d.extent = split.point;
    }
}

} // namespace

Expr LoopPlan::now(const Expr &e) const { return simplify(substitute(e, transformed.value)); }

size_t LoopPlan::position_of(const DimPtr &d, const char *what) const {
    auto it = std::find(loops.begin(), loops.end(), d);
    if (it == loops.end())
        throw_compile_error(what, " at '", d->name, "' in Func '", op->name,
                            "': not a loop of the final nest: ", front::why_not_a_loop(*op, d.get()));
    return (size_t)(it - loops.begin());
}

bool LoopPlan::uses_reduction_loop(const Expr &e) const {
    for (size_t j = 0; j < loops.size(); j++)
        if (is_reduction[j] && uses_var(e, loops[j]->var.get())) return true;
    return false;
}

LoopPlan plan_loops(const TensorPtr &f, const LoweringContext &ctx) {
    const Schedule &sch = ctx.schedule_of(*f);
    check_split_points(*f, ctx);
    LoopPlan plan;
    plan.op = f;
    plan.schedule = &sch;
    plan.value = inline_reads(f->value, ctx);
    // A scheduled reduction: its body is computed per iteration of the reduction loops.
    // The reduction is found in the definition as written (inlining may add reductions to the
    // epilogue); its body and the epilogue are inlined like the rest.
    if (sch.reduction_loop) {
        plan.red = scheduled_reduce(f->value);
        CORA_CHECK(plan.red != nullptr, "scheduled reduction vanished");
        plan.red_body =
            substitute(inline_reads(plan.red->body, ctx), plan.red->var.get(), var_expr(sch.reduction_loop->var));
        plan.acc = make_var(f->name + "_acc", VarRole::Local, plan.red->type);
        Expr epilogue = epilogue_of(f->value, var_expr(plan.acc));
        if (epilogue.defined()) plan.epilogue = inline_reads(epilogue, ctx);
    }
    plan.transformed = *apply_transforms(f, false, ctx);
    plan.store_at = store_indices(*f);
    plan.target = f->is_split_tail ? split_head(*f) : f;
    for (const Permutation &p : plan.transformed.permutations) {
        if (p.fn->kind == UFKind::LengthArray && !ctx.prover->prove_nonneg(Sub::make(p.fn->count, p.extent), {}))
            throw_compile_error("remap of '", p.loop, "' in Func '", f->name, "': length array '", p.fn->name, "' has ",
                                print(p.fn->count), " elements, fewer than the loop's ", print(p.extent));
    }
    // Reorder: the named loops take the positions they occupy, in the order given.
    std::vector<DimPtr> &loops = plan.loops;
    loops = plan.transformed.loops;
    if (!sch.order.empty()) {
        std::vector<size_t> positions;
        for (const DimPtr &d : sch.order) {
            auto it = std::find(loops.begin(), loops.end(), d);
            // reorder() checked its dims when called; a split, fuse or remap made after it took one away.
            if (it == loops.end())
                throw_compile_error("reorder in Func '", f->name,
                                    "': not a loop of the final nest: ", front::why_not_a_loop(*f, d.get()),
                                    "; reorder names the loops that remain after every split, fuse and remap, "
                                    "whenever it is called: name those, or transform the loop before reordering");
            positions.push_back((size_t)(it - loops.begin()));
        }
        std::sort(positions.begin(), positions.end());
        for (size_t i = 0; i < positions.size(); i++)
            loops[positions[i]] = sch.order[i];
    }
    // Everything in terms of the final loop variables. A split's inner loop often leaves
    // (o * f + i) / f = o + i / f in an extent (e.g. floor_mult(m, 4) with m = mo * 4 + mi):
    // with the constant ranges of the loops, i / f folds to 0, so the extent uses only mo.
    const auto &extent = plan.transformed.extent;
    for (const DimPtr &d : loops)
        if (as_const_int(plan.now(extent.at(d.get()))))
            plan.constant_loops.push_back(ScopeEntry{d->var.get(), IntImm::make(0), plan.now(extent.at(d.get()))});
    auto is_split_outer = [&](const DimPtr &d) {
        return std::any_of(sch.transforms.begin(), sch.transforms.end(), [&](const LoopTransform &t) {
            return t.kind == LoopTransform::Kind::Split && t.outer == d;
        });
    };
    for (size_t k = 0; k < loops.size(); k++) {
        Expr e = fold_small_div_mod(plan.now(extent.at(loops[k].get())), plan.constant_loops, *ctx.prover);
        // A split's outer loop whose extent uses loops inside it (k-panels of a reduction whose
        // length varies by tile: trmm with the triangle cut at each tile's last row) runs to its
        // largest value over those loops' constant ranges. The split's guard, parent < E, skips
        // the extra iterations (it stays: with the wider range it no longer always holds).
        Scope inside;
        for (size_t j = k; j < loops.size(); j++)
            if (uses_var(e, loops[j]->var.get())) {
                const int64_t *c = as_const_int(plan.now(extent.at(loops[j].get())));
                if (c) inside.push_back(ScopeEntry{loops[j]->var.get(), IntImm::make(0), IntImm::make(*c)});
            }
        if (!inside.empty() && is_split_outer(loops[k]))
            if (Expr widest = symbolic_bound(e, inside, true); widest.defined()) e = simplify(widest);
        for (const VarNode *v : vars_of(e, VarRole::Index)) {
            bool outside = false;
            for (size_t j = 0; j < k; j++)
                outside = outside || loops[j]->var.get() == v;
            if (!outside)
                throw_compile_error("schedule of Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                    print(e), ", which depends on loop '", v->name,
                                    "'; that loop must stay outside it");
        }
        plan.extents.push_back(e);
        plan.scope.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), e});
    }

    // The loop kinds: default parallel outermost loop, then the annotations.
    const size_t n = loops.size();
    plan.is_reduction.assign(n, false);
    if (plan.red) {
        Expr r = plan.now(var_expr(sch.reduction_loop->var)); // in terms of the loops made from it
        for (size_t k = 0; k < n; k++)
            plan.is_reduction[k] = uses_var(r, loops[k]->var.get());
    }
    std::vector<ForKind> &kinds = plan.kinds;
    kinds.assign(n, ForKind::Serial);
    bool user_parallel = false;
    for (auto &[d, a] : sch.annotations) // a GPU binding replaces the default parallel loop
        user_parallel = user_parallel || a == ForKind::Parallel || is_gpu_bound(a);
    if (!user_parallel && n > 0 && !plan.is_reduction[0]) kinds[0] = ForKind::Parallel;
    for (size_t k = 0; k < n; k++)
        for (auto &[d, a] : sch.annotations) {
            if (d != loops[k]) continue;
            if (a == ForKind::Parallel) kinds[k] = ForKind::Parallel;
            if (is_gpu_bound(a)) kinds[k] = a;
            if (a == ForKind::Vectorized || a == ForKind::Unrolled) {
                const char *what = a == ForKind::Vectorized ? "vectorize" : "unroll";
                if (!as_const_int(plan.extents[k]))
                    throw_compile_error(what, " in Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                        print(plan.extents[k]), ", not a constant; split it first");
                kinds[k] = a == ForKind::Vectorized ? ForKind::Vectorized : ForKind::Unrolled;
            }
            if (a == ForKind::Dismantled) kinds[k] = ForKind::Dismantled; // extent checked when expanded
            if (a == ForKind::GpuMma) {
                const int64_t *e = as_const_int(plan.extents[k]);
                if (!e || *e != 16)
                    throw_compile_error("gpu_mma in Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                        print(plan.extents[k]),
                                        "; a tensor-core step (mma.sync.m16n8k16) reduces over exactly 16: split "
                                        "the reduction by 16 and name the inner loop");
                kinds[k] = ForKind::GpuMma;
            }
        }
    // Annotations on dims that are no longer loops (split after being marked).
    for (auto &[d, a] : sch.annotations)
        if (std::find(loops.begin(), loops.end(), d) == loops.end())
            throw_compile_error("schedule of Func '", f->name, "': '", d->name,
                                "' was marked (parallel, vectorize, unroll, ...) but is not a loop of the final nest: ",
                                front::why_not_a_loop(*f, d.get()),
                                "; mark the loops that remain after every split, fuse and remap");
    return plan;
}

} // namespace cora::ir
