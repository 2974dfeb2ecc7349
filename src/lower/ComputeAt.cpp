/** \file Step: compute_at, and which op reads which.
 *
 * compute_at(consumer, d) moves a producer's nest, minus the outermost loops it shares with the
 * consumer down to d, to the start of the body of the consumer's loop d. Checked: the shared dims
 * are the producer's outermost dims, in order, with equal extents; the consumer reads only the
 * current indices of them; an op in between that reads the producer is computed at the same
 * consumer, as deep, and reads only those current indices too; no op horizontally fused with the
 * consumer reads the producer. A shared loop may be a fused loop over several of the producer's
 * outermost dims when the producer fuses the same dims into the same loop (the same Dim) over
 * the same extent: a default's fused row loop (DefaultRowFusion.cpp), or a user's. The schedules
 * are the context's (a default may compute_at). Producers first: a Func computed at a consumer
 * that is itself computed at another moves along with it (when it sits inside the loops the
 * consumer keeps). A producer's op-split tails move with it (after it); a consumer's tails that
 * read such producers move into the consumer's loop after them (move_consumer_tails), when their
 * nests start with the same loops.
 * Sliced storage: apply_compute_at returns the producers that need only one iteration's slice
 * (can_slice: host target, plain loops, fused ones too, read and written only inside those loops,
 * shared dims outermost in storage); StorageLowering.cpp indexes within the slice and
 * AllocateIntermediates.cpp allocates it in the loop.
 * Tests: tests/correctness/compute_at.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>
#include <functional>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

/** Whether op `consumer` reads what op `producer` writes. */
bool reads(const TensorPtr &consumer, const TensorPtr &producer, const LoweringContext &ctx) {
    bool found = false;
    visit_exprs(inline_reads(consumer->value, ctx), [&](const Expr &e) {
        if (const Access *a = e.as<Access>()) found = found || a->tensor.get() == &store_target(*producer);
    });
    return found;
}

std::vector<TensorPtr> scheduled_ops(const LoweringContext &ctx) {
    std::vector<TensorPtr> ops;
    std::function<void(const TensorPtr &)> add = [&](const TensorPtr &op) {
        ops.push_back(op);
        for (const front::OpSplit &s : front::schedule_of(*op).op_splits)
            add(s.tail);
        if (const TensorPtr &fill = front::schedule_of(*op).inactive_fill) add(fill);
    };
    for (const TensorPtr &f : ctx.funcs)
        add(f);
    return ops;
}

namespace {

/** compute_at bookkeeping: producers' loop bodies waiting to be placed at the start of a
 * consumer's loop body (per op, per loop variable), in producer order. */
using PendingInserts = std::vector<std::map<const VarNode *, std::vector<Stmt>>>;

/** Places the pending producer bodies of op `k` into its nest: down the chain of loops to the
 * innermost loop that receives any, each loop's bodies placed after those of the loops inside it
 * (placing an outer loop's first made its body a Block, and an inner loop's insertion then found no
 * loop: which one came first depended on the variables' addresses, the map's order). */
void place_pending(size_t k, std::vector<Stmt> &nests, PendingInserts &pending) {
    const std::map<const VarNode *, std::vector<Stmt>> &at = pending[k];
    std::function<Stmt(const Stmt &, size_t)> place = [&](const Stmt &s, size_t remaining) {
        if (remaining == 0) return s;
        const For *loop = s.as<For>();
        CORA_CHECK(loop != nullptr, "compute_at loop vanished");
        auto here = at.find(loop->var.get());
        Stmt body = place(loop->body, remaining - (here != at.end() ? 1 : 0));
        if (here != at.end()) {
            std::vector<Stmt> all = here->second;
            all.push_back(body);
            body = Block::make(all);
        }
        return loop->with([&](For &f) { f.body = body; });
    };
    nests[k] = place(nests[k], at.size());
    pending[k].clear();
}

} // namespace

std::vector<DimPtr> dims_of_loop(const VarNode *v, const TensorNode &t, const front::Schedule &s) {
    for (const LayoutDim &ld : t.domain)
        if (ld.dim->var.get() == v) return {ld.dim};
    for (const front::LoopTransform &tr : s.transforms)
        if (tr.kind == front::LoopTransform::Kind::Fuse && tr.fused->var.get() == v) {
            std::vector<DimPtr> a = dims_of_loop(tr.outer->var.get(), t, s),
                                b = dims_of_loop(tr.inner->var.get(), t, s);
            if (a.empty() || b.empty()) return {};
            a.insert(a.end(), b.begin(), b.end());
            return a;
        }
    return {};
}

namespace {

/** Where compute_at put an op: inside `g`'s loops down to `loop` (`depth` of them); `plain`: each
 * of those loops is over one dim and runs as a loop (serial, parallel or unrolled). */
struct Placement {
    TensorPtr g;
    const VarNode *loop = nullptr;
    size_t depth = 0;  ///< the consumer's loops down to `loop`
    size_t shared = 0; ///< the producer's outermost dims they cover (more than depth: a fused loop)
    bool plain = false;
};
using Placements = std::map<const TensorNode *, Placement>;

/** Every op-split tail of `f` (tails of tails included), in pipeline order. */
std::vector<TensorPtr> split_tails(const TensorNode &f) {
    std::vector<TensorPtr> tails;
    for (const front::OpSplit &s : front::schedule_of(f).op_splits) {
        tails.push_back(s.tail);
        std::vector<TensorPtr> more = split_tails(*s.tail);
        tails.insert(tails.end(), more.begin(), more.end());
    }
    return tails;
}

/** Whether `f`, placed at `at`, can be stored one slice at a time: on the host (a GPU kernel's
 * loops are threads and blocks), the loops plain, the consumer not horizontally fused (its loop
 * would become another), `f` not an output and written only by its own op and its tails (which
 * move with it), read only by the consumer and by ops placed inside the same loops (producers
 * computed at the consumer, the consumer's tails that moved into its loop), and the shared dims
 * the outermost of f's storage, untransformed, so that one iteration's elements are one
 * contiguous slice of the whole layout. A loop that fuses several shared dims counts each of
 * them (the default's fused row loop): storage lowering then sizes the slice by its largest
 * value, on the stack, or keeps f whole (SlicedStorage::through_fused_loop). */
bool can_slice(const TensorPtr &f, const Placement &at, const Placements &placed, const std::vector<TensorPtr> &ops,
               const LoweringContext &ctx) {
    if (ctx.target != Target::Host || ctx.is_output(f.get()) || !at.plain) return false;
    const front::Schedule &gs = ctx.schedule_of(*at.g);
    if (!gs.hfuse.empty() || gs.hfuse_member) return false;
    for (const TensorPtr &op : ops) {
        if (op == f) continue;
        auto p = placed.find(op.get());
        bool inside = op == at.g || (p != placed.end() && p->second.g == at.g && p->second.depth >= at.depth);
        if (&store_target(*op) == f.get() && !(p != placed.end() && p->second.loop == at.loop)) return false;
        if (!inside && reads(op, f, ctx)) return false;
    }
    Layout phys = physical_layout(ctx.aux, *f);
    std::vector<Expr> logical;
    for (const LayoutDim &ld : f->domain)
        logical.push_back(var_expr(ld.dim->var));
    std::vector<Expr> idx = physical_indices(ctx.aux, *f, logical);
    if (phys.size() < at.shared || idx.size() < at.shared) return false;
    for (size_t j = 0; j < at.shared; j++)
        if (phys[j].dim != f->domain[j].dim || !equal(simplify(idx[j]), logical[j])) return false;
    return true;
}

/** compute_at: takes the nest of `f` (with its own producers placed), strips the outermost
 * loops it shares with the consumer down to `at_loop`, and queues the rest for the start of
 * the body of the consumer's loop `at_loop`; the nests of f's op-split tails (which write f's
 * storage) move the same way, after f's. Returns where f went. */
Placement compute_at_nest(const TensorPtr &f, const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                          PendingInserts &pending, const LoweringContext &ctx) {
    const TensorPtr g = ctx.schedule_of(*f).at_consumer.lock();
    const DimPtr &d = ctx.schedule_of(*f).at_loop;
    if (!g)
        throw_compile_error("compute_at of Func '", f->name, "' at '", d->name,
                            "': its consumer no longer exists, so this pipeline cannot compute it");
    auto fail = [&](auto &&...msg) {
        throw_compile_error("compute_at of Func '", f->name, "' in '", g->name, "' at '", d->name, "': ", msg...);
    };
    const std::vector<TensorPtr> tails = split_tails(*f);
    for (const TensorPtr &m : tails)
        if (!ctx.schedule_of(*m).hfuse.empty() || ctx.schedule_of(*m).hfuse_member)
            fail("its op-split tail '", m->name, "' is horizontally fused (hfuse), while compute_at moves the tails ",
                 "into a loop of '", g->name, "' with the op; drop one of the two");
    if (!ctx.schedule_of(*f).hfuse.empty() || ctx.schedule_of(*f).hfuse_member)
        fail("it is horizontally fused (hfuse), so its loop runs with other ops' loops, while compute_at moves it ",
             "inside a loop of '", g->name, "'; drop one of the two");
    size_t fp = (size_t)(std::find(ops.begin(), ops.end(), f) - ops.begin());
    size_t gp = (size_t)(std::find(ops.begin(), ops.end(), g) - ops.begin());
    if (gp == ops.size() || gp < fp) fail("'", g->name, "' is not computed after it by this pipeline");
    // The consumer's outermost loops down to d: directly nested, over f's outermost dims.
    std::vector<const For *> outer;
    for (const For *loop = nests[gp].as<For>(); loop; loop = loop->body.as<For>()) {
        outer.push_back(loop);
        if (loop->var == d->var) break;
    }
    // The rule, stated where it is broken.
    const std::string rule = concat("compute_at needs the consumer's loops down to '", d->name,
                                    "' to be its outermost dims in domain order, as declared (not split, fused, "
                                    "remapped or reordered); schedule only loops inside '",
                                    d->name, "', or drop compute_at (then '", f->name, "' runs on its own)");
    if (outer.empty() || outer.back()->var != d->var) {
        std::vector<DimPtr> live = front::final_loops(*g, true);
        bool is_loop = std::any_of(live.begin(), live.end(), [&](const DimPtr &l) { return l == d; });
        fail(is_loop ? concat("'", d->name, "' is a loop of '", g->name,
                              "' but not among its outermost loops (reordered, or under a guard)")
                     : front::why_not_a_loop(*g, d.get()),
             "; ", rule);
    }
    const size_t depth = outer.size();
    // Each loop covers one of f's outermost dims, or several when it is a fused loop (which f must
    // fuse the same way: checked where f's loops are stripped); `shared` counts the dims.
    std::vector<std::vector<DimPtr>> covered(depth);
    size_t shared = 0;
    for (size_t j = 0; j < depth; j++) {
        covered[j] = dims_of_loop(outer[j]->var.get(), *g, ctx.schedule_of(*g));
        if (covered[j].size() > 1) {
            for (const DimPtr &c : covered[j]) {
                if (shared == f->domain.size() || f->domain[shared].dim != c)
                    fail("the consumer's loop '", outer[j]->var->name, "' fuses dim '", c->name,
                         "', which is not its dim ", shared, "; ", rule);
                shared++;
            }
            continue;
        }
        if (shared == f->domain.size()) fail("it has fewer dims than the consumer's loops down to '", d->name, "'");
        const LayoutDim &fd = f->domain[shared++];
        if (outer[j]->var != fd.dim->var) {
            bool consumer_dim = j < g->domain.size() && g->domain[j].dim == fd.dim;
            std::vector<DimPtr> live = front::final_loops(*g, true);
            bool live_dim = std::any_of(live.begin(), live.end(), [&](const DimPtr &l) { return l == fd.dim; });
            fail("the consumer's loop ", j, " is '", outer[j]->var->name, "' but its dim ", shared - 1, " is '",
                 fd.dim->name, "'",
                 consumer_dim && !live_dim
                     ? concat(" (in '", g->name, "': ", front::why_not_a_loop(*g, fd.dim.get()), ")")
                     : std::string(),
                 "; ", rule);
        }
        // Inside a fused loop the extent is in the fused index: compared with f's own loop below.
        if (shared == j + 1 && !equal(simplify(outer[j]->extent), simplify(fd.extent)))
            fail("the consumer's loop '", fd.dim->name, "' runs to ", print(outer[j]->extent), ", not over its extent ",
                 print(fd.extent));
    }
    // A split op moves as its parts, each inside the same loops: every split must be inside them.
    std::vector<TensorPtr> parts = tails;
    parts.insert(parts.begin(), f);
    for (const TensorPtr &part : parts)
        for (const front::OpSplit &sp : front::schedule_of(*part).op_splits)
            for (size_t j = 0; j < shared; j++)
                if (sp.dim == f->domain[j].dim)
                    fail("its op is split (split_op) at dim '", sp.dim->name, "', one of the dims it shares with '",
                         g->name, "''s loops down to '", d->name,
                         "', so its parts do not run over the same loops; split it at a dim inside them, or drop "
                         "compute_at (it then runs on its own before '",
                         g->name, "') or split_op");
    // An op between f and g that reads f must run after f: computed at g at least as deep.
    auto depth_at = [&](const TensorNode &r) {
        const DimPtr &at = ctx.schedule_of(r).at_loop;
        size_t j = 0;
        for (const For *loop = nests[gp].as<For>(); loop; loop = loop->body.as<For>(), j++)
            if (at && loop->var == at->var) return j + 1;
        for (j = 0; j < g->domain.size(); j++)
            if (g->domain[j].dim == at) return j + 1;
        return (size_t)0;
    };
    // And it reads only the elements of the current iteration of those loops: the others are
    // computed in other iterations (other threads, when a loop is parallel).
    auto read_at_current = [&](const TensorPtr &reader) {
        visit_exprs(inline_reads(reader->value, ctx), [&](const Expr &e) {
            const Access *a = e.as<Access>();
            if (!a || a->tensor != f) return;
            for (size_t j = 0; j < shared; j++)
                if (!equal(a->indices[j], var_expr(f->domain[j].dim->var)))
                    fail("'", reader->name, "' reads it at ", print(a->indices[j]), " in dim '", f->domain[j].dim->name,
                         "', but only the elements at its current '", f->domain[j].dim->name, "' are computed there");
        });
    };
    for (size_t k = fp + 1; k < gp; k++) {
        if (!reads(ops[k], f, ctx)) continue;
        // An op-split tail runs where its op runs.
        TensorPtr placed_as = ops[k];
        while (placed_as->is_split_tail)
            placed_as = split_head(*placed_as);
        if (!(ctx.schedule_of(*placed_as).at_consumer.lock() == g && depth_at(*placed_as) >= depth))
            fail("'", ops[k]->name, "', computed before '", g->name, "', reads it");
        read_at_current(ops[k]);
    }
    // Ops horizontally fused with the consumer run concurrently with its iterations, so none
    // of them may read f (it is computed inside those iterations).
    std::vector<TensorPtr> group;
    for (const TensorPtr &op : ops) {
        std::vector<TensorPtr> members = front::hfuse_members(*op);
        if (op == g || std::find(members.begin(), members.end(), g) != members.end()) {
            group.push_back(op);
            group.insert(group.end(), members.begin(), members.end());
        }
    }
    for (const TensorPtr &m : group)
        if (m != g && reads(m, f, ctx))
            fail("'", m->name, "' runs in one loop with '", g->name, "' (hfuse) and reads it, but it is computed ",
                 "inside the iterations of '", g->name, "'");
    // The consumer reads f only at its current indices of those dims.
    read_at_current(g);
    // f's own outermost loops must be the same, unguarded; so must each tail's.
    auto move = [&](const TensorPtr &op) {
        size_t p = (size_t)(std::find(ops.begin(), ops.end(), op) - ops.begin());
        CORA_CHECK(p < ops.size(), "compute_at: op '", op->name, "' is not in the pipeline");
        place_pending(p, nests, pending);
        const std::string whose = op == f ? "its own" : concat("its op-split tail '", op->name, "''s");
        Stmt inner = nests[p];
        for (size_t j = 0; j < depth; j++) {
            const For *loop = inner.as<For>();
            if (covered[j].size() > 1 && (!loop || loop->var != outer[j]->var ||
                                          dims_of_loop(loop->var.get(), *op, ctx.schedule_of(*op)) != covered[j] ||
                                          !equal(simplify(loop->extent), simplify(outer[j]->extent))))
                fail("the consumer's loop '", outer[j]->var->name, "' fuses several of its dims, and ", whose,
                     " nest does not start with the same fused loop over the same extent; ", rule);
            if (!loop || loop->var != outer[j]->var)
                fail(whose, " loop nest must start with its dims down to '", d->name,
                     "', unsplit and unguarded (schedule only the loops inside them)");
            if (!equal(simplify(loop->extent), simplify(outer[j]->extent)))
                fail("the consumer's loop '", outer[j]->var->name, "' runs to ", print(outer[j]->extent), ", ", whose,
                     " to ", print(loop->extent));
            inner = loop->body;
        }
        pending[gp][d->var.get()].push_back(inner);
        nests[p] = Block::make({});
    };
    move(f);
    for (const TensorPtr &t : tails)
        move(t);
    Placement at{g, d->var.get(), depth, shared, true};
    for (const For *loop : outer)
        at.plain = at.plain && (loop->for_kind == ForKind::Serial || loop->for_kind == ForKind::Parallel ||
                                loop->for_kind == ForKind::Unrolled);
    return at;
}

/** The op-split tails of a consumer that read what is computed inside its loops run inside them
 * too, after those producers, so that the producers can be stored one iteration's slice at a
 * time: each such tail moves into the deepest of the consumer's loops that it reads a producer
 * of, when its own nest starts with the same loops over the same extents (it writes other
 * elements than the consumer, so it may run in any order with it); otherwise it stays a nest of
 * its own and those producers are stored whole. */
void move_consumer_tails(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests, PendingInserts &pending,
                         const Placements &producers, Placements &placed, const LoweringContext &ctx) {
    for (size_t gp = 0; gp < ops.size(); gp++) {
        const TensorPtr &g = ops[gp];
        for (const TensorPtr &tail : split_tails(*g)) {
            // The deepest loop it reads a producer of; it must read each only at the current
            // indices of the loops the producer is computed in.
            const Placement *deepest = nullptr;
            bool current = true;
            for (const TensorPtr &f : ops) {
                auto at = producers.find(f.get());
                if (at == producers.end() || at->second.g != g || !reads(tail, f, ctx)) continue;
                if (!deepest || at->second.depth > deepest->depth) deepest = &at->second;
                visit_exprs(inline_reads(tail->value, ctx), [&](const Expr &e) {
                    const Access *a = e.as<Access>();
                    if (!a || a->tensor != f) return;
                    for (size_t j = 0; j < at->second.shared && j < a->indices.size(); j++)
                        current = current && equal(a->indices[j], var_expr(f->domain[j].dim->var));
                });
            }
            if (!current) continue;
            size_t p = (size_t)(std::find(ops.begin(), ops.end(), tail) - ops.begin());
            if (!deepest || p == ops.size()) continue;
            std::vector<const For *> outer;
            for (const For *loop = nests[gp].as<For>(); loop && outer.size() < deepest->depth;
                 loop = loop->body.as<For>())
                outer.push_back(loop);
            Stmt inner = nests[p];
            bool same = outer.size() == deepest->depth;
            for (size_t j = 0; same && j < outer.size(); j++) {
                const For *loop = inner.as<For>();
                same = loop && loop->var == outer[j]->var && equal(simplify(loop->extent), simplify(outer[j]->extent));
                if (same) inner = loop->body;
            }
            if (!same) continue;
            pending[gp][deepest->loop].push_back(inner);
            nests[p] = Block::make({});
            placed[tail.get()] = *deepest;
        }
    }
}

} // namespace

SlicedStorageMap apply_compute_at(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                                  const LoweringContext &ctx) {
    PendingInserts pending(ops.size());
    Placements placed;
    for (const TensorPtr &op : ops)
        if (ctx.schedule_of(*op).has_compute_at()) {
            placed[op.get()] = compute_at_nest(op, ops, nests, pending, ctx);
            for (const TensorPtr &tail : split_tails(*op)) // moved with it
                placed[tail.get()] = placed[op.get()];
        }
    const Placements producers = placed;
    move_consumer_tails(ops, nests, pending, producers, placed, ctx);
    for (size_t k = 0; k < ops.size(); k++)
        place_pending(k, nests, pending);
    SlicedStorageMap sliced;
    for (const TensorPtr &op : ops) { // the producers themselves (their tails write their storage)
        if (!ctx.schedule_of(*op).has_compute_at()) continue;
        const Placement &at = producers.at(op.get());
        if (can_slice(op, at, placed, ops, ctx))
            sliced[op.get()] = SlicedStorage{at.loop, at.shared, at.shared > at.depth};
    }
    return sliced;
}

} // namespace cora::ir
