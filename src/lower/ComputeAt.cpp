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
 * consumer keeps).
 * Tests: tests/correctness/compute_at.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>
#include <functional>
#include <optional>

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

/** Places the pending producer bodies of op `k` into its nest. */
void place_pending(size_t k, std::vector<Stmt> &nests, PendingInserts &pending) {
    for (auto &entry : pending[k]) {
        const VarNode *var = entry.first; // (clang 14 cannot capture structured bindings)
        const std::vector<Stmt> &bodies = entry.second;
        std::function<Stmt(const Stmt &)> insert = [&](const Stmt &s) {
            const For *loop = s.as<For>();
            CORA_CHECK(loop != nullptr, "compute_at loop vanished");
            Stmt body;
            if (loop->var.get() == var) {
                std::vector<Stmt> all = bodies;
                all.push_back(loop->body);
                body = Block::make(all);
            } else {
                body = insert(loop->body);
            }
            return loop->with([&](For &f) { f.body = body; });
        };
        nests[k] = insert(nests[k]);
    }
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

/** Whether `f`, computed at `g`'s loops `outer` (over f's first `shared` dims, each loop one
 * dim), can be stored one slice at a time: on the host (a GPU kernel's loops are threads and
 * blocks), the loops plain (not dismantled, not fused from several dims), `g` not horizontally
 * fused (its loop would become another), `f` not an output and written only by its own op, read
 * only by `g` and by ops computed at `g` inside those loops (`inside_loops`), and the shared
 * dims the outermost of f's storage, untransformed, so that one iteration's elements are one
 * contiguous slice of the whole layout. */
bool can_slice(const TensorPtr &f, const TensorPtr &g, const std::vector<const For *> &outer, size_t shared,
               const std::vector<TensorPtr> &ops, const std::function<bool(const TensorNode &)> &inside_loops,
               const LoweringContext &ctx) {
    if (ctx.target != Target::Host || ctx.is_output(f.get()) || shared != outer.size()) return false;
    for (const For *loop : outer)
        if (loop->for_kind != ForKind::Serial && loop->for_kind != ForKind::Parallel &&
            loop->for_kind != ForKind::Unrolled)
            return false;
    const front::Schedule &gs = ctx.schedule_of(*g);
    if (!gs.hfuse.empty() || gs.hfuse_member) return false;
    for (const TensorPtr &op : ops) {
        if (op == f) continue;
        if (&store_target(*op) == f.get()) return false;
        if (op != g && reads(op, f, ctx) && !(ctx.schedule_of(*op).at_consumer.lock() == g && inside_loops(*op)))
            return false;
    }
    Layout phys = physical_layout(ctx.aux, *f);
    std::vector<Expr> logical;
    for (const LayoutDim &ld : f->domain)
        logical.push_back(var_expr(ld.dim->var));
    std::vector<Expr> idx = physical_indices(ctx.aux, *f, logical);
    if (phys.size() < shared || idx.size() < shared) return false;
    for (size_t j = 0; j < shared; j++)
        if (phys[j].dim != f->domain[j].dim || !equal(simplify(idx[j]), logical[j])) return false;
    return true;
}

/** compute_at: takes the nest of `f` (with its own producers placed), strips the outermost
 * loops it shares with the consumer down to `at_loop`, and queues the rest for the start of
 * the body of the consumer's loop `at_loop`. Returns whether f can be stored in slices
 * (can_slice) and, if so, their loop and dims. */
std::optional<SlicedStorage> compute_at_nest(const TensorPtr &f, const std::vector<TensorPtr> &ops,
                                             std::vector<Stmt> &nests, PendingInserts &pending,
                                             const LoweringContext &ctx) {
    const TensorPtr g = ctx.schedule_of(*f).at_consumer.lock();
    const DimPtr &d = ctx.schedule_of(*f).at_loop;
    if (!g)
        throw_compile_error("compute_at of Func '", f->name, "' at '", d->name,
                            "': its consumer no longer exists, so this pipeline cannot compute it");
    auto fail = [&](auto &&...msg) {
        throw_compile_error("compute_at of Func '", f->name, "' in '", g->name, "' at '", d->name, "': ", msg...);
    };
    if (!ctx.schedule_of(*f).op_splits.empty())
        fail("its op is split (split_op), so it runs as several loop nests (head and tails), while compute_at moves ",
             "one nest into the consumer's loop; drop compute_at (it then runs on its own before '", g->name,
             "') or drop split_op");
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
        if (!(ctx.schedule_of(*ops[k]).at_consumer.lock() == g && depth_at(*ops[k]) >= depth))
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
    // f's own outermost loops must be the same, unguarded.
    place_pending(fp, nests, pending);
    Stmt inner = nests[fp];
    for (size_t j = 0; j < depth; j++) {
        const For *loop = inner.as<For>();
        if (covered[j].size() > 1 && (!loop || loop->var != outer[j]->var ||
                                      dims_of_loop(loop->var.get(), *f, ctx.schedule_of(*f)) != covered[j] ||
                                      !equal(simplify(loop->extent), simplify(outer[j]->extent))))
            fail("the consumer's loop '", outer[j]->var->name,
                 "' fuses several of its dims, and its own nest does not ",
                 "start with the same fused loop over the same extent; ", rule);
        if (!loop || loop->var != outer[j]->var)
            fail("its own loop nest must start with its dims down to '", d->name,
                 "', unsplit and unguarded (schedule only the loops inside them)");
        if (!equal(simplify(loop->extent), simplify(outer[j]->extent)))
            fail("the consumer's loop '", outer[j]->var->name, "' runs to ", print(outer[j]->extent), ", its own to ",
                 print(loop->extent));
        inner = loop->body;
    }
    pending[gp][d->var.get()].push_back(inner);
    nests[fp] = Block::make({});
    auto inside_loops = [&](const TensorNode &r) { return depth_at(r) >= depth; };
    if (!can_slice(f, g, outer, shared, ops, inside_loops, ctx)) return std::nullopt;
    return SlicedStorage{d->var.get(), shared};
}

} // namespace

SlicedStorageMap apply_compute_at(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                                  const LoweringContext &ctx) {
    PendingInserts pending(ops.size());
    SlicedStorageMap sliced;
    for (const TensorPtr &op : ops)
        if (ctx.schedule_of(*op).has_compute_at())
            if (std::optional<SlicedStorage> s = compute_at_nest(op, ops, nests, pending, ctx)) sliced[op.get()] = *s;
    for (size_t k = 0; k < ops.size(); k++)
        place_pending(k, nests, pending);
    return sliced;
}

} // namespace cora::ir
