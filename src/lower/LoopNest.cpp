/** \file Step: an op's loop nest from its plan, guards and cache_read tiles.
 *
 * The leaf computes the element (reading cache_read tiles) and stores it through the Func's
 * storage (a Provide; an op-split tail writes its Func's storage). Reduction loops: from the inner
 * position (the cache_write loop's body, else the outermost reduction loop) the nest is an init
 * nest over the inner loops over the Func's dims (their guards only) storing the identity, then
 * the update nest over all inner loops. cache_write(at): the element state is a stack tile
 * indexed by the inner loops over the Func's dims (constant extents, at most kMaxTileElements),
 * written back under their guards. With reduction loops outside `at` (k-panels), storage holds
 * the partial result between the tile's visits. When every element provably gets a first and a
 * last visit (each k-panel loop runs at least once, and no guard or extent from the outermost
 * k-panel loop to the tile uses a k-panel loop), the tile starts from the identity at the first
 * panel and from storage after it, and the last panel's write-back applies the epilogue: no pass
 * over storage before or after the panels (a GEMM's output was zeroed, then read and written
 * again for its bias, in two extra passes: the encoder's FF1 ran at 0.78-0.84x sgemm with them,
 * 0.88-0.92x without, on an AVX2 Zen 3). Otherwise (a ragged K that may be 0, a triangle's panels), storage
 * is initialised before the outermost panel loop, each visit starts from storage and the
 * epilogue runs in a pass after the panels. On the GPU the first form stays (SliceThreadTiles
 * expects it). A reduction with an epilogue (ir/Epilogue.h) has it applied once per element when
 * the reduction is complete: at the tile's write-back, else in a pass over the element loops
 * after the reduction loops.
 * On the GPU a tile's update that reads only cache_read tiles runs for every element of the tile:
 * the guards over the Func's dims stay on its start and write-back only, those over reduction
 * loops become a select after a let of the term (update_guards_kept; on the CPU also where it
 * reads tensors, keeping the guards that protect those reads).
 * Unscheduled reductions stay Reduce nodes for lower_reductions; both combine their values with
 * reduce_combine. A float16 Func accumulates in float32 (its tile, or lower_reductions' locals):
 * a scheduled reduction that would keep partial sums in its storage is a CompileError.
 * Tests: tests/correctness/caching.cpp (k-panels, tiles), vgemm.cpp, trmm.cpp, default_schedule.cpp
 * (a ragged row's update without its column guard). */
#include <set>

#include "analysis/ProverChain.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Whether every element of a tile that accumulates across the k-panel loops at
 * [first_reduction, inner) is visited at the first and at the last iteration of each of them:
 * each runs at least once and nothing there (a guard, an element loop's extent) depends on one. */
bool panels_visit_every_element(const LoopPlan &plan, const PlacedGuards &guards, size_t first_reduction, size_t inner,
                                const LoweringContext &ctx) {
    for (ForKind k : plan.kinds)
        if (is_gpu_bound(k)) return false;
    for (size_t k = first_reduction; k < inner; k++) {
        if (plan.is_reduction[k]) {
            Scope visible(plan.scope.begin(), plan.scope.begin() + (long)k);
            if (!ctx.prover->prove_nonneg(Sub::make(guards.loop_extents[k], IntImm::make(1)), visible)) return false;
        } else if (plan.uses_reduction_loop(guards.loop_extents[k])) {
            return false;
        }
        for (const Expr &c : guards.at[k + 1])
            if (plan.uses_reduction_loop(c)) return false;
    }
    return true;
}

/** Which guards a tile's update keeps when it may run for (nearly) every element of the tile, the
 * other guards over the Func's dims left to the initialisation and the write-back; nullopt
 * when it keeps them all. Why: on the GPU those guards sat around each multiply-add of the
 * register tile, so each one was a branch with its own two shared-memory loads (a 4 x 4 tile did
 * 2 loads per FMA instead of 0.5: trmm ran at 3.5 TFLOP/s on an H200). Safe when nothing the
 * update reads can be out of bounds without them: it reads only cache_read tiles (sized by the
 * loops' full extents, filled with zeros outside the tensor) and length arrays at indices that
 * no loop inside the tile moves. A tile element outside the Func then holds a sum nobody stores.
 * Guards over reduction loops (a triangle's `r < i + 1`) decide what is summed: they become a
 * select of the old value (a branch would again reload the operands per element). On the GPU
 * the update reads nothing but tiles, or keeps every guard. On the CPU such guards mostly became
 * loop bounds or were peeled off vector loops already; there a tensor read stays without
 * guards when its indices provably lie in the tensor for every value of the loops (read_in_bounds
 * below), and a read that does not is kept safe by keeping the guards that use a loop its
 * indices use: a grouped GEMM's row operand A(e, t, k) keeps the guard over its ragged rows t,
 * while the guard over a ragged column tile (n < N(e), read only from W's zero-filled panel)
 * leaves the vector loop (it had stayed an if around every multiply-add of the vector). */
std::optional<std::vector<const ExprNode *>> update_guards_kept(const LoopPlan &plan, const PlacedGuards &guards,
                                                                const CacheReads &reads,
                                                                const std::vector<size_t> &inner_all,
                                                                const LoweringContext &ctx) {
    bool on_gpu = false;
    for (ForKind k : plan.kinds)
        on_gpu = on_gpu || is_gpu_bound(k);
    // Floating-point sums only: an integer element could divide by a zero it reads for an
    // element or a reduction step the guards excluded (a trap on the CPU-threads backend).
    if (!plan.red || !plan.op->type.value_type().is_float()) return std::nullopt;
    // The lets, innermost first, substituted: an index in the loop variables.
    auto in_loop_vars = [&](Expr i) {
        for (const auto &[v, e] : reads.lets)
            i = substitute(i, v.get(), e);
        return i;
    };
    // On the CPU, a guard over a Func's dim inside the tile (the pixels of a partial tile of an
    // active-tile list: an unrolled loop that cannot take the guard as its bound) stayed a branch
    // around every multiply-add. A tensor read there may stay when its indices provably lie in
    // the tensor for every value of the loops, guards or not (a convolution's clamped reads of
    // its input): a 3x3 convolution over 8x8 active tiles took 2.4x as long with the branches.
    auto read_in_bounds = [&](const Access &a) {
        const Layout &dom = a.tensor->domain;
        if (dom.size() != a.indices.size()) return false;
        for (size_t k = 0; k < dom.size(); k++) {
            if (!vars_of(dom[k].extent, VarRole::Index).empty()) return false;
            Expr i = in_loop_vars(a.indices[k]);
            if (!ctx.prover->prove_nonneg(i, plan.scope) ||
                !ctx.prover->prove_nonneg(Sub::make(Sub::make(dom[k].extent, IntImm::make(1)), i), plan.scope))
                return false;
        }
        return true;
    };
    std::set<const VarNode *> moving; // the tile's loops, and the lets computed from them
    for (size_t k : inner_all)
        moving.insert(plan.loops[k]->var.get());
    for (const auto &[v, e] : reads.lets)
        moving.insert(v.get());
    bool in_bounds = true;
    std::set<const VarNode *> guarded_reads; // the tile's loops that reads out of bounds without guards use
    auto check = [&](const Expr &x) {
        if (const Access *a = x.as<Access>(); a && !read_in_bounds(*a)) {
            if (on_gpu) in_bounds = false;
            for (const Expr &index : a->indices) {
                const Expr i = in_loop_vars(index);
                for (size_t k : inner_all)
                    if (uses_var(i, plan.loops[k]->var.get())) guarded_reads.insert(plan.loops[k]->var.get());
            }
        }
        if (const UFCall *u = x.as<UFCall>())
            for (const Expr &a : u->args)
                for (const VarNode *v : moving)
                    if (uses_var(a, v)) in_bounds = false;
        if (const Div *d = x.as<Div>(); d && !d->type.is_float() && !as_const_int(d->b)) in_bounds = false;
        if (const Mod *d = x.as<Mod>(); d && !d->type.is_float() && !as_const_int(d->b)) in_bounds = false;
    };
    // Everything now evaluated for every element of the tile: the term, its lets, the guards
    // over reduction loops (the select's condition) and the loops' extents (a ragged extent
    // lens(i) read for an i past the Func's end would read past the length array).
    visit_exprs(reads.element, check);
    for (const auto &[v, e] : reads.lets)
        visit_exprs(e, check);
    for (size_t k : inner_all) {
        visit_exprs(guards.loop_extents[k], check);
        for (const Expr &c : guards.at[k + 1])
            if (plan.uses_reduction_loop(c)) visit_exprs(c, check);
    }
    if (!in_bounds) return std::nullopt;
    // A guard over a reduction loop becomes a select evaluated after the term: with a read that is
    // not in bounds by itself the term could read past the tensor for the steps it excludes.
    if (!guarded_reads.empty())
        for (size_t k : inner_all)
            for (const Expr &c : guards.at[k + 1])
                if (plan.uses_reduction_loop(c)) return std::nullopt;
    // The guards over the Func's dims that use a loop an unsafe read uses stay.
    std::vector<const ExprNode *> kept;
    for (size_t k : inner_all)
        for (const Expr &c : guards.at[k + 1])
            if (!plan.uses_reduction_loop(c))
                for (const VarNode *v : guarded_reads)
                    if (uses_var(c, v)) {
                        kept.push_back(c.get());
                        break;
                    }
    return kept;
}

} // namespace

Stmt build_loop_nest(const LoopPlan &plan, const PlacedGuards &guards, const CacheReads &reads,
                     const LoweringContext &ctx) {
    const TensorPtr &f = plan.op;
    const front::Schedule &sch = *plan.schedule;
    const std::vector<DimPtr> &loops = plan.loops;
    const std::vector<Expr> &extents = plan.extents;
    const std::vector<bool> &is_reduction = plan.is_reduction;
    const size_t n = loops.size();
    const Reduce *red = plan.red;
    const TensorPtr &target = plan.target;
    const std::vector<Expr> &at = reads.store_at;
    const Expr &element = reads.element;
    auto with_lets = [&](Stmt s, bool elements_only) {
        for (auto &[v, e] : reads.lets)
            if (!(elements_only && red && v == sch.reduction_loop->var)) s = LetStmt::make(v, e, s);
        return s;
    };

    // Where the per-element state starts: the cache_write loop's body, else the outermost
    // reduction loop; the loops from there on form the inner part.
    size_t first_reduction = n;
    for (size_t k = n; k-- > 0;)
        if (is_reduction[k]) first_reduction = k;
    std::optional<size_t> cache_pos;
    if (sch.cache_write_at) cache_pos = plan.position_of(sch.cache_write_at, "cache_write");
    size_t inner = cache_pos ? *cache_pos + 1 : first_reduction;
    // Reduction loops outside the tile (k-panels): storage holds the partial result between
    // the tile's visits; it is initialised before the outermost reduction loop and each visit
    // loads it into the tile.
    const bool tile_accumulates = cache_pos && red && first_reduction < inner;
    // The first panel starts each tile from the identity and the last one finishes it.
    const bool panels_fused = tile_accumulates && panels_visit_every_element(plan, guards, first_reduction, inner, ctx);
    Expr first_panel, last_panel;
    if (panels_fused)
        for (size_t k = first_reduction; k < inner; k++) {
            if (!plan.is_reduction[k]) continue;
            Expr v = var_expr(loops[k]->var);
            Expr first = EQ::make(v, IntImm::make(0));
            Expr last = EQ::make(v, simplify(Sub::make(guards.loop_extents[k], IntImm::make(1))));
            first_panel = first_panel.defined() ? And::make(first_panel, first) : first;
            last_panel = last_panel.defined() ? And::make(last_panel, last) : last;
        }
    // float16 storage rounds every store, so partial results must never live there.
    if (red && f->type.is_storage_only())
        for (size_t k = 0; k < n; k++)
            if (is_reduction[k] && is_gpu_thread(plan.kinds[k]))
                throw_compile_error("Func '", f->name, "' holds ", f->type.str(), " and reduces across threads (loop '",
                                    loops[k]->name,
                                    "'): the threads' parts would be combined in its float16 "
                                    "storage; reduce into a float32 Func and convert in a consumer");
    if (red && f->type.is_storage_only() && (!cache_pos || tile_accumulates))
        throw_compile_error("Func '", f->name, "' holds ", f->type.str(), " and its scheduled reduction loop '",
                            loops[first_reduction]->name, "' is outside ",
                            cache_pos ? "its cache_write tile" : "any cache_write tile",
                            ", so partial sums would be rounded in its storage; cache_write it at a loop that "
                            "encloses all its reduction loops (float32 accumulators, one rounding at the write-back)");
    /** The loops at `positions` around `leaf`, each with its guards (only those over the
     * Func's dims when `elements_only`; with `only_kept`, only those in it) and, for full nests,
     * its prologue. */
    auto nest = [&](const std::vector<size_t> &positions, Stmt s, bool elements_only,
                    const std::vector<const ExprNode *> *only_kept = nullptr) {
        for (size_t j = positions.size(); j-- > 0;) {
            size_t k = positions[j];
            if (!elements_only && reads.prologue.count(k))
                for (const CacheTile &c : reads.prologue.at(k))
                    s = Allocate::make(c.buffer, IntImm::make(c.size), Block::make({c.copy, s}), MemoryType::Stack);
            for (const Expr &c : guards.at[k + 1])
                if (only_kept ? std::find(only_kept->begin(), only_kept->end(), c.get()) != only_kept->end()
                              : !(elements_only && plan.uses_reduction_loop(c)))
                    s = IfThenElse::make(c, s);
            s = For::make(loops[k]->var, IntImm::make(0), guards.loop_extents[k], plan.kinds[k], s);
        }
        return s;
    };
    std::vector<size_t> inner_all, inner_elements;
    for (size_t k = inner; k < n; k++) {
        inner_all.push_back(k);
        if (!is_reduction[k]) inner_elements.push_back(k);
    }
    auto combine = [&](const Expr &old) { return reduce_combine(red->op, old, element); };
    // The stored value of a finished reduction: its epilogue applied, if it has one.
    auto finish = [&](const Expr &acc) {
        return reads.epilogue.defined() ? substitute(reads.epilogue, plan.acc.get(), acc) : acc;
    };
    // A pass over the element loops at `positions` applying the epilogue to stored results.
    auto epilogue_pass = [&](const std::vector<size_t> &positions) {
        return nest(positions, with_lets(Provide::make(target, at, finish(Access::make(target, at))), true), true);
    };
    Stmt inner_part;
    if (cache_pos) {
        // The tile: one element per iteration of the loops over the Func's dims inside `at`.
        // Register accumulators hold values: float32 for a float16 Func (fp32 accumulation).
        VarPtr tile = make_var(f->name + "_tile", VarRole::Buffer, f->type.value_type());
        Expr tile_index = IntImm::make(0);
        int64_t tile_size = 1;
        for (size_t k : inner_elements) {
            const int64_t *e = as_const_int(extents[k]);
            if (!e)
                throw_compile_error("cache_write at '", sch.cache_write_at->name, "' in Func '", f->name, "': loop '",
                                    loops[k]->name, "' has extent ", print(extents[k]),
                                    ", not a constant; the tile needs constant extents (split it first)");
            tile_size *= std::max<int64_t>(*e, 1);
            tile_index = simplify(Add::make(Mul::make(tile_index, IntImm::make(*e)), var_expr(loops[k]->var)));
        }
        if (tile_size > kMaxTileElements)
            throw_compile_error("cache_write at '", sch.cache_write_at->name, "' in Func '", f->name,
                                "': the tile has ", tile_size, " elements, more than ", kMaxTileElements,
                                "; cache at an inner loop");
        std::vector<Stmt> parts;
        const std::optional<std::vector<const ExprNode *>> kept =
            update_guards_kept(plan, guards, reads, inner_all, ctx);
        const bool update_unguarded = kept.has_value();
        const std::vector<const ExprNode *> none;
        // With an unguarded update every element of the tile starts from the identity too (it
        // is read and added to, though never stored).
        Stmt from_identity =
            red ? nest(inner_elements, Store::make(tile, tile_index, reduce_identity(red->op, f->type.value_type())),
                       true, update_unguarded ? &none : nullptr)
                : Stmt();
        if (tile_accumulates) {
            Stmt from_storage =
                nest(inner_elements, with_lets(Store::make(tile, tile_index, Access::make(target, at)), true), true);
            parts.push_back(panels_fused ? IfThenElse::make(first_panel, from_identity, from_storage) : from_storage);
        } else if (red) {
            parts.push_back(from_identity);
        }
        Expr updated = red ? combine(Load::make(tile, tile_index)) : element;
        if (update_unguarded) {
            // Every element of the tile updated, without branches: the guards over the Func's
            // dims dropped, those over reduction loops (which decide what is summed) kept as a
            // select of the old value, so the operands loaded for one element serve the others.
            // The term is a let ahead of the select: printed as C's ?: the select would evaluate
            // its operands only when taken, and the CUDA compiler then loads them per element.
            Expr summed;
            for (size_t k : inner_all)
                for (const Expr &c : guards.at[k + 1])
                    if (plan.uses_reduction_loop(c)) summed = summed.defined() ? And::make(summed, c) : c;
            Stmt update = Store::make(tile, tile_index, updated);
            if (summed.defined()) {
                VarPtr term = make_var(f->name + "_term", VarRole::Local, element.type());
                Expr old = Load::make(tile, tile_index);
                update =
                    LetStmt::make(term, element,
                                  Store::make(tile, tile_index,
                                              Select::make(summed, reduce_combine(red->op, old, var_expr(term)), old)));
            }
            parts.push_back(nest(inner_all, with_lets(update, false), false, &*kept));
        } else {
            parts.push_back(nest(inner_all, with_lets(Store::make(tile, tile_index, updated), false), false));
        }
        // Written back complete unless k-panels outside the tile still add to it.
        Expr tile_value = Load::make(tile, tile_index);
        auto write_back = [&](const Expr &value) {
            return nest(inner_elements, with_lets(Provide::make(target, at, value), true), true);
        };
        if (panels_fused && reads.epilogue.defined())
            parts.push_back(IfThenElse::make(last_panel, write_back(finish(tile_value)), write_back(tile_value)));
        else
            parts.push_back(write_back(red && (!tile_accumulates || panels_fused) ? finish(tile_value) : tile_value));
        inner_part = Allocate::make(tile, IntImm::make(tile_size), Block::make(parts), MemoryType::Stack);
    } else if (red) {
        Stmt init =
            nest(inner_elements,
                 with_lets(Provide::make(target, at, reduce_identity(red->op, f->type.value_type())), true), true);
        Stmt update =
            nest(inner_all, with_lets(Provide::make(target, at, combine(Access::make(target, at))), false), false);
        inner_part = Block::make({init, update, reads.epilogue.defined() ? epilogue_pass(inner_elements) : Stmt()});
    } else {
        inner_part = with_lets(Provide::make(target, at, element), false);
    }
    std::vector<size_t> outer_positions, panel_positions, panel_elements;
    for (size_t k = 0; k < inner; k++)
        (tile_accumulates && !panels_fused && k >= first_reduction ? panel_positions : outer_positions).push_back(k);
    if (tile_accumulates && !panels_fused) {
        // The loops from the outermost reduction loop to the tile, after an init of storage
        // over all the element loops from there on.
        for (size_t k = first_reduction; k < n; k++)
            if (!is_reduction[k]) panel_elements.push_back(k);
        Stmt init =
            nest(panel_elements,
                 with_lets(Provide::make(target, at, reduce_identity(red->op, f->type.value_type())), true), true);
        inner_part = Block::make({init, nest(panel_positions, inner_part, false),
                                  reads.epilogue.defined() ? epilogue_pass(panel_elements) : Stmt()});
    }
    Stmt body = nest(outer_positions, inner_part, false);
    for (const Expr &c : guards.at[0])
        body = IfThenElse::make(c, body);
    return body;
}

} // namespace cora::ir
