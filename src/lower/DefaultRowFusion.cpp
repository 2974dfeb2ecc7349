/** \file Step: a row's reductions computed next to the row, by default.
 *
 * A row-wise op left unscheduled, C(r, j), whose per-row inputs are Funcs also left unscheduled
 * (a jagged softmax: Mx(r) = max_j X(r, j), E(r, j) = exp(X(r, j) - Mx(r)), Z(r) = sum_j E(r, j),
 * C(r, j) = E(r, j) / Z(r)) runs, with the untiled defaults of DefaultSchedule.cpp, as one pass
 * per Func over all rows: 4 parallel loops, the row-index maps of the fused token loops built and
 * read per element, and every row streamed from memory 5 times. Computed at C's row loop
 * (compute_at), a row's max, exponentials and sum are computed right before the row is written,
 * while it is in cache: the nest of a hand-written loop (0.25 ms against 0.70 ms on a jagged
 * softmax of 4,096 rows of 0-100, 2 threads; bench/results/default_schedules.md, jagged_softmax).
 *
 * The group: C has two dims [r, j], r's extent loop-invariant, no reduction and no other
 * schedule (it got a default); a member P is a Func that got an untiled default, is not an
 * output nor marked compute_root (computed whole in its own nest), has r as its outermost dim with the same extent, and
 * is read only by C and other members, always at the reader's own r. Producers are taken from C backwards, so a
 * member's readers are decided before it. Members with no reduction join only when a reduction does: a group without
 * one gains no locality. The schedules: every member compute_at(C, r); C parallel over r (like the hand loop: one
 * thread per row at a time, so a batch of one row uses one thread); the innermost loop of C and of each member
 * vectorized when its extent is a constant and the Func has no reduction (as DefaultSchedule.cpp's step 2), else left
 * to the C compiler, which vectorizes a plain row loop once the row's max and sum are hoisted out of it
 * (HoistLoads.cpp). An op whose dims are deeper ([b, h, i, j]: attention scores) keeps the
 * fused-token defaults, which parallelize over all rows of a batch of one sentence too.
 *
 * Inputs: the ops in order, the default schedules chosen for them, the lowering context (which
 * op reads which, the outputs). Output: the replacement schedules of the group members and
 * their consumers (Lower.cpp merges them into the defaults). Host target only.
 * Tests: tests/correctness/default_schedule.cpp (jagged softmax and layer norm against a
 * reference, rows of 0 and 1 and the maximum), tests/pass/passes.cpp (the groups chosen). */
#include <algorithm>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"

namespace cora::ir {

namespace {

bool has_reduction(const Expr &e) {
    bool found = false;
    visit_exprs(e, [&](const Expr &x) { found = found || x.as<Reduce>() != nullptr; });
    return found;
}

/** Every read of `producer` in `reader`'s definition indexes its first dim at the reader's own
 * first index (the row the reader is computing). */
bool reads_current_row(const TensorNode &reader, const TensorPtr &producer, const LoweringContext &ctx) {
    const Expr row = var_expr(reader.domain[0].dim->var);
    bool ok = true;
    visit_exprs(inline_reads(reader.value, ctx), [&](const Expr &e) {
        const Access *a = e.as<Access>();
        if (a && &store_target(*a->tensor) == &store_target(*producer))
            ok = ok && !a->indices.empty() && equal(a->indices[0], row);
    });
    return ok;
}

/** The innermost loop of `f` vectorized, as the untiled default's step 2 does: a constant extent
 * of at least 2, no reduction, storage in declared order. */
void vectorize_row(const TensorNode &f, front::Schedule &s) {
    const LayoutDim &inner = f.domain.back();
    const Expr extent = simplify(inner.extent);
    const int64_t *e = as_const_int(extent);
    if (f.domain.size() < 2 || !e || *e < 2 || has_reduction(f.value)) return;
    for (const StorageTransform &st : store_target(f).storage_transforms)
        if (st.kind != StorageTransform::Kind::Fuse) return;
    s.annotations.emplace_back(inner.dim, ForKind::Vectorized);
}

} // namespace

ScheduleMap row_fused_defaults(const std::vector<TensorPtr> &ops, const ScheduleMap &defaults,
                               const LoweringContext &ctx) {
    ScheduleMap fused;
    if (ctx.target != Target::Host) return fused;
    // An op that got an untiled default (a register-tiled contraction is no row-wise member).
    auto untiled_default = [&](const TensorNode &f) {
        auto it = defaults.find(&f);
        return it != defaults.end() && !it->second.cache_write_at && !fused.count(&f);
    };
    for (size_t c = ops.size(); c-- > 0;) {
        const TensorPtr &consumer = ops[c];
        if (consumer->domain.size() != 2 || !untiled_default(*consumer) || has_reduction(consumer->value) ||
            !vars_of(consumer->domain[0].extent, VarRole::Index).empty())
            continue;
        const LayoutDim &row = consumer->domain[0];
        std::vector<const TensorNode *> group{consumer.get()};
        std::vector<TensorPtr> members;
        bool any_reduction = false;
        for (size_t p = c; p-- > 0;) {
            const TensorPtr &producer = ops[p];
            if (!untiled_default(*producer) || ctx.is_output(producer.get()) ||
                front::schedule_of(*producer).keep_stored || producer->domain.empty() ||
                producer->domain[0].dim != row.dim ||
                !equal(simplify(producer->domain[0].extent), simplify(row.extent)))
                continue;
            bool read_by_group_only = true, read = false;
            for (size_t r = p + 1; r < ops.size() && read_by_group_only; r++) {
                if (!reads(ops[r], producer, ctx)) continue;
                read = true;
                read_by_group_only = std::find(group.begin(), group.end(), ops[r].get()) != group.end() &&
                                     reads_current_row(*ops[r], producer, ctx);
            }
            if (!read || !read_by_group_only) continue;
            group.push_back(producer.get());
            members.push_back(producer);
            any_reduction = any_reduction || has_reduction(producer->value);
        }
        if (!any_reduction) continue;
        front::Schedule at_row;
        at_row.annotations.emplace_back(row.dim, ForKind::Parallel);
        vectorize_row(*consumer, at_row);
        fused[consumer.get()] = at_row;
        for (const TensorPtr &m : members) {
            front::Schedule s;
            s.at_consumer = consumer;
            s.at_loop = row.dim;
            vectorize_row(*m, s);
            fused[m.get()] = s;
        }
    }
    return fused;
}

} // namespace cora::ir
