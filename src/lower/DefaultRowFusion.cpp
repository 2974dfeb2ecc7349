/** \file Step: a row's reductions computed next to the row, by default.
 *
 * A row-wise op left unscheduled, C(r, j), whose per-row inputs are Funcs also left unscheduled
 * (a jagged softmax: Mx(r) = max_j X(r, j), E(r, j) = exp(X(r, j) - Mx(r)), Z(r) = sum_j E(r, j),
 * C(r, j) = E(r, j) / Z(r)) runs, with the untiled defaults of DefaultSchedule.cpp, as one pass
 * per Func over all rows: 4 parallel loops (over rows: E and C read Mx(r), Z(r), so the default
 * keeps their row loops, DefaultSchedule.cpp's fusion_maps_cancel; before that rule, fused token
 * loops that read row-index maps per element), and every row streamed from memory 5 times. Computed at C's row loop
 * (compute_at), a row's max, exponentials and sum are computed right before the row is written,
 * while it is in cache: the nest of a hand-written loop (0.25 ms against 0.70 ms on a jagged
 * softmax of 4,096 rows of 0-100, 2 threads; bench/results/default_schedules.md, jagged_softmax).
 * Computed at the row, the rows' values (Mx(r), Z(r)) are also read once per row, not per element.
 *
 * The group: C has dims [r..., j] (the rows r..., then a ragged row j), no reduction and no
 * other schedule (it got an untiled default); a member P is a Func that got an untiled default, is not
 * an output nor marked compute_root (computed whole in its own nest), has C's row dims as its
 * outermost dims with the same extents, and is read only by C and other members, always at the
 * reader's own row. Producers are taken from C backwards, so a member's readers are decided
 * before it. Members with no reduction join only when a reduction does: a group without one
 * gains no locality. The loop the members are computed at:
 *  - two dims [r, j]: r, unfused from j (where the default fused a ragged j into r, its maps
 *    cancelled only for C alone) and parallel, like the hand loop (a batch of one row uses one
 *    thread);
 *  - deeper ([b, h, i, j]: attention scores; [b, s, c]: a LayerNorm over ragged sentences): the
 *    loop C's default fused all the row dims into (the fused token loop, parallel over every row
 *    of every sentence and head), which each member fuses the same way (the same transforms);
 *    ComputeAt.cpp accepts such a shared fused loop. C keeps its default.
 * The innermost loop of each member inside the rows is vectorized when its extent is a constant
 * and it has no reduction (as DefaultSchedule.cpp's step 2), else left to the C compiler, which
 * vectorizes a plain row loop once the row's max and sum are hoisted out of it (HoistLoads.cpp).
 *
 * Not for a row of constant width (a LayerNorm over 512 features): there each Func's own nest
 * reads the row's statistics without a map and vectorizes whole rows, and computed at the row
 * it ran 0.85x as fast (0.40 ms against 0.34-0.36 ms, bench/default_schedules.sh --ops=layernorm,
 * three runs on a 2-core AVX-512 EPYC).
 *
 * Inputs: the ops in order, the default schedules chosen for them, the lowering context (which
 * op reads which, the outputs). Output: the replacement schedules of the group members and
 * their consumers (Lower.cpp merges them into the defaults). Host target only.
 * Tests: tests/correctness/default_schedule.cpp (jagged softmax and layer norm against a
 * reference, rows of 0 and 1 and the maximum), tests/pass/passes.cpp (the groups chosen). */
#include <algorithm>
#include <optional>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"

namespace cora::ir {

namespace {

/** Every read of `producer` in `reader`'s definition indexes its first `rows` dims at the
 * reader's own indices (the row the reader is computing). */
bool reads_current_row(const TensorNode &reader, const TensorPtr &producer, size_t rows, const LoweringContext &ctx) {
    bool ok = true;
    visit_exprs(inline_reads(reader.value, ctx), [&](const Expr &e) {
        const Access *a = e.as<Access>();
        if (!a || &store_target(*a->tensor) != &store_target(*producer)) return;
        ok = ok && a->indices.size() >= rows;
        for (size_t q = 0; ok && q < rows; q++)
            ok = equal(a->indices[q], var_expr(reader.domain[q].dim->var));
    });
    return ok;
}

/** The innermost loop of `f` vectorized, as the untiled default's step 2 does: a dim inside the
 * rows, a constant extent of at least 2, no reduction, storage in declared order. */
void vectorize_row(const TensorNode &f, size_t rows, front::Schedule &s) {
    const LayoutDim &inner = f.domain.back();
    const Expr extent = simplify(inner.extent);
    const int64_t *e = as_const_int(extent);
    if (f.domain.size() <= rows || !e || *e < 2 || has_reduction(f.value) || !storage_keeps_innermost_dim(f)) return;
    s.annotations.emplace_back(inner.dim, ForKind::Vectorized);
}

/** The loop over the rows of `consumer` (its dims but the last): with two dims, its first dim
 * (whose extent must not be ragged); deeper, the loop its default fused them into (every
 * transform of that default a fuse, the outermost loop covering exactly those dims), with those
 * transforms. Null when there is none. */
struct RowLoop {
    DimPtr loop;
    std::vector<front::LoopTransform> fuses;
};
std::optional<RowLoop> row_loop(const TensorNode &consumer, const front::Schedule &dflt) {
    const size_t rows = consumer.domain.size() - 1;
    if (rows == 1) {
        if (!vars_of(consumer.domain[0].extent, VarRole::Index).empty()) return std::nullopt;
        return RowLoop{consumer.domain[0].dim, {}};
    }
    if (dflt.transforms.empty()) return std::nullopt;
    for (const front::LoopTransform &t : dflt.transforms)
        if (t.kind != front::LoopTransform::Kind::Fuse) return std::nullopt;
    const DimPtr &fused = dflt.transforms.back().fused;
    std::vector<DimPtr> covered = dims_of_loop(fused->var.get(), consumer, dflt);
    if (covered.size() != rows) return std::nullopt;
    for (size_t q = 0; q < rows; q++)
        if (covered[q] != consumer.domain[q].dim) return std::nullopt;
    return RowLoop{fused, dflt.transforms};
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
        if (consumer->domain.size() < 2 || !untiled_default(*consumer) || has_reduction(consumer->value) ||
            as_const_int(simplify(consumer->domain.back().extent)))
            continue;
        const size_t rows = consumer->domain.size() - 1;
        const std::optional<RowLoop> at = row_loop(*consumer, defaults.at(consumer.get()));
        if (!at) continue;
        std::vector<const TensorNode *> group{consumer.get()};
        std::vector<TensorPtr> members;
        bool any_reduction = false;
        for (size_t p = c; p-- > 0;) {
            const TensorPtr &producer = ops[p];
            if (!untiled_default(*producer) || ctx.is_output(producer.get()) ||
                front::schedule_of(*producer).keep_stored || producer->domain.size() < rows)
                continue;
            bool same_rows = true;
            for (size_t q = 0; q < rows && same_rows; q++)
                same_rows = producer->domain[q].dim == consumer->domain[q].dim &&
                            equal(simplify(producer->domain[q].extent), simplify(consumer->domain[q].extent));
            if (!same_rows) continue;
            bool read_by_group_only = true, read = false;
            for (size_t r = p + 1; r < ops.size() && read_by_group_only; r++) {
                if (!reads(ops[r], producer, ctx)) continue;
                read = true;
                read_by_group_only = std::find(group.begin(), group.end(), ops[r].get()) != group.end() &&
                                     reads_current_row(*ops[r], producer, rows, ctx);
            }
            if (!read || !read_by_group_only) continue;
            group.push_back(producer.get());
            members.push_back(producer);
            any_reduction = any_reduction || has_reduction(producer->value);
        }
        if (!any_reduction) continue;
        if (rows == 1) { // the row loop unfused from the row (the default fuses a ragged one in)
            front::Schedule s;
            s.annotations.emplace_back(at->loop, ForKind::Parallel);
            vectorize_row(*consumer, rows, s);
            fused[consumer.get()] = s;
        }
        for (const TensorPtr &m : members) {
            front::Schedule s;
            s.transforms = at->fuses;
            s.at_consumer = consumer;
            s.at_loop = at->loop;
            vectorize_row(*m, rows, s);
            fused[m.get()] = s;
        }
    }
    return fused;
}

} // namespace cora::ir
