/** \file Pass: compute_inline. A Func marked with Func::compute_inline() is not computed or
 * stored: every read of it becomes its definition at the read's indices.
 *
 * By default (inlined_by_default below) an elementwise Func left unscheduled and read at one place of
 * one Func, at that reader's own indices and outside reductions, is inlined too; compute_root
 * keeps it stored.
 * Does: select_inlined returns which Funcs are inlined and which are computed (after validation,
 * so their own reads were checked; Lower.cpp records them in the context), rejecting outputs and Funcs with a loop
 * schedule, an op split, a horizontal fusion or storage changes (none of which would mean anything); inline_reads()
 * expands reads, recursively, giving each expanded reduction a fresh variable (a definition
 * read twice, or inside a reduction of its own dim, must not share the accumulator loop).
 * Requires: a validated pipeline. Ensures: `computed` holds only computed Funcs, producers first.
 * Errors: CompileError naming the Func. Tests: tests/pass/passes.cpp (the pass alone),
 * tests/correctness/compute_inline.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>

#include "front/Schedule.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The reads of one tensor in a definition: how many, and whether one is inside a reduction. */
struct ReadsOf {
    std::vector<const Access *> reads;
    bool in_reduction = false;
};

void collect_reads(const Expr &e, const TensorNode *t, bool in_reduction, ReadsOf &out) {
    if (const Access *a = e.as<Access>(); a && a->tensor.get() == t) {
        out.reads.push_back(a);
        out.in_reduction = out.in_reduction || in_reduction;
    }
    bool inner = in_reduction || e.as<Reduce>() != nullptr;
    for_each_child(e, [&](const Expr &c) { collect_reads(c, t, inner, out); });
}

/** Whether `f`, which the user did not mark, is inlined by default: an elementwise Func (no
 * reduction) left entirely to the defaults (no schedule, no compute_root, nothing computed at or
 * cached from it, not an output), whose storage is its domain, read at exactly one place of one
 * computed Func, outside any reduction, at that reader's own loop indices (distinct dims of its
 * domain, one per dim of f's): each element is then computed once, where it is used, as by hand.
 * Why: storing a token-wise intermediate costs a write and a read of the whole tensor (a
 * bias-add before an activation ran at 0.46x a hand-written loop; inlined, 1.04x). A Func read
 * twice, read inside a reduction (recomputed for each step), or broadcast stays stored. */
bool inlined_by_default(const TensorPtr &f, const LoweringContext &ctx) {
    const front::Schedule &sch = front::schedule_of(*f);
    if (ctx.is_output(f.get()) || !sch.empty() || sch.has_compute_at() || !sch.op_splits.empty() ||
        !sch.hfuse.empty() || sch.hfuse_member || sch.keep_stored || sch.inactive_fill || f->is_split_tail ||
        f->type.is_storage_only() || !f->storage_transforms.empty())
        return false;
    for (size_t k = 0; k < f->domain.size(); k++)
        if (!equal(f->domain[k].extent, f->storage[k].extent)) return false;
    bool reduces = false;
    visit_exprs(f->value, [&](const Expr &x) { reduces = reduces || x.as<Reduce>() != nullptr; });
    if (reduces) return false;
    const TensorNode *reader = nullptr;
    const Access *read = nullptr;
    for (const TensorPtr &g : ctx.funcs) {
        const front::Schedule &gs = front::schedule_of(*g);
        if (gs.at_consumer.lock() == f) return false;
        for (const front::Schedule::CacheRead &c : gs.cache_reads)
            if (c.tensor == f) return false;
        if (g == f) continue;
        ReadsOf r;
        collect_reads(g->value, f.get(), false, r);
        if (r.reads.empty()) continue;
        if (reader || r.reads.size() != 1 || r.in_reduction || gs.inlined) return false;
        reader = g.get();
        read = r.reads[0];
    }
    if (!reader || read->indices.size() != f->domain.size() || reader->domain.size() != f->domain.size()) return false;
    std::vector<const VarNode *> seen;
    for (const Expr &i : read->indices) {
        const VarNode *v = i.as<VarNode>();
        if (!v) return false;
        bool reader_dim = false;
        for (const LayoutDim &d : reader->domain)
            reader_dim = reader_dim || d.dim->var.get() == v;
        if (!reader_dim || std::find(seen.begin(), seen.end(), v) != seen.end()) return false;
        seen.push_back(v);
    }
    return true;
}

} // namespace

InlineSelection select_inlined(const LoweringContext &ctx) {
    InlineSelection out;
    for (const TensorPtr &f : ctx.funcs) {
        const front::Schedule &sch = front::schedule_of(*f);
        if (!sch.inlined) {
            if (inlined_by_default(f, ctx))
                out.inlined.push_back(f);
            else
                out.computed.push_back(f);
            continue;
        }
        auto fail = [&](auto &&...msg) { throw_compile_error("compute_inline of Func '", f->name, "': ", msg...); };
        if (ctx.is_output(f.get())) fail("it is an output of the pipeline, so it must be stored");
        if (!sch.empty() || sch.has_compute_at())
            fail("it has a loop schedule, but an inlined Func has no loops of its own");
        if (!sch.op_splits.empty()) fail("its op is split, but an inlined Func has no loops of its own");
        if (!sch.hfuse.empty() || sch.hfuse_member) fail("it is horizontally fused, but it has no loops of its own");
        if (f->type.is_storage_only())
            fail("it holds ", f->type.str(),
                 ", a storage type whose stores round, and an inlined Func is not "
                 "stored; declare it float32 to inline it");
        bool own_storage = !f->storage_transforms.empty();
        for (size_t k = 0; k < f->domain.size(); k++)
            own_storage = own_storage || !equal(f->domain[k].extent, f->storage[k].extent);
        if (own_storage) fail("its storage was changed, but an inlined Func is not stored");
        out.inlined.push_back(f);
    }
    return out;
}

namespace {

class Inliner : public IRMutator {
public:
    explicit Inliner(const LoweringContext &ctx) : ctx_(ctx) {}

protected:
    Expr mutate_node(const Access *op, const Expr &self) override {
        bool changed = false;
        std::vector<Expr> idx = mutate_all(op->indices, changed);
        if (std::find(ctx_.inlined.begin(), ctx_.inlined.end(), op->tensor) == ctx_.inlined.end())
            return changed ? Access::make(op->tensor, idx) : self;
        std::map<const VarNode *, Expr> at;
        for (size_t k = 0; k < idx.size(); k++)
            at[op->tensor->domain[k].dim->var.get()] = idx[k];
        return mutate(substitute(op->tensor->value, at));
    }
    Expr mutate_node(const Reduce *op, const Expr &) override {
        VarPtr fresh = make_var(op->var->name, op->var->role, op->var->type);
        Expr body = substitute(op->body, op->var.get(), var_expr(fresh));
        return Reduce::make(op->op, fresh, mutate(op->extent), mutate(body));
    }

private:
    const LoweringContext &ctx_;
};

} // namespace

Expr inline_reads(const Expr &e, const LoweringContext &ctx) {
    if (ctx.inlined.empty()) return e;
    return Inliner(ctx).mutate(e);
}

} // namespace cora::ir
