/** \file Pass: storage lowering. Every tensor gets a buffer variable and a flattened layout
 * (formats/ragged/StorageLayout: dimension graph -> offsets through prefix-sum aux arrays).
 * Provide becomes Store and Access becomes Load at the flat offset of the indices (through the
 * tensor's storage transforms, if any); offsets are simplified so fused-loop maps cancel.
 * A blocked layout (split_storage) divides an index by the block: where the offset has a
 * division or modulo, the enclosing domain-dim lets (if any) are substituted and the quotients
 * the loop ranges make constant are folded (a cache_read copy's chunk loops too), e.g.
 * (no * 32 + ni) / 32 -> no for ni in [0, 32), so a vectorized loop over ni reads contiguous
 * elements instead of gathering.
 * A sliced producer (compute_at) is indexed within one slice; its size is the difference of two
 * consecutive slices' first offsets, or, inside a fused loop, that size's constant upper bound
 * over the declared ranges when it fits kStackSliceBytes (else the producer stays whole).
 * Requires: no Reduce. Ensures: no Provide/Access; offsets use UF calls (aux, length arrays)
 * that materialize_ufs turns into loads.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/unit/storage_layout.cpp,
 * tests/correctness/vector_codegen.cpp (blocked layouts). */
#include "analysis/Bounds.h"
#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

class Flattener : public IRMutator {
public:
    Flattener(const LoweringContext &ctx, const SlicedStorageMap &sliced) : ctx_(ctx), sliced_(sliced) {}

    const TensorStorage &storage_of(const TensorPtr &t) {
        auto it = storage.find(t.get());
        if (it != storage.end()) return it->second;
        TensorStorage st;
        st.buffer = make_var(t->name, VarRole::Buffer, t->type);
        st.layout = physical_layout(ctx_.aux, *t);
        st.flat = flatten_layout(ctx_.aux, st.layout);
        if (auto s = sliced_.find(t.get()); s != sliced_.end()) {
            // One slice: from the element at the slice's first index to the next slice's first
            // (the fixed dims are the storage's outermost, so the slices are consecutive).
            const size_t k = s->second.shared_dims;
            std::vector<Expr> next = domain_vars(*t, k);
            next.back() = next.back() + 1;
            Expr size = simplify(distribute(whole_offset(st, *t, slice_start(*t, next)) -
                                            whole_offset(st, *t, slice_start(*t, domain_vars(*t, k)))));
            if (s->second.through_fused_loop) {
                // The fixed dims are not variables inside a fused loop: the slice takes its
                // largest size, on the stack, or the producer stays whole.
                std::optional<int64_t> most = constant_bound(size, true);
                size = most && *most >= 0 && *most <= kStackSliceBytes / t->type.bytes()
                           ? IntImm::make(std::max<int64_t>(*most, 1))
                           : Expr();
            }
            if (size.defined()) {
                st.slice_loop = s->second.loop;
                st.slice_size = size;
            }
        }
        return storage.emplace(t.get(), st).first->second;
    }

protected:
    Expr mutate_node(const Access *op, const Expr &) override {
        bool changed = false;
        auto idx = mutate_all(op->indices, changed);
        const TensorStorage &st = storage_of(op->tensor);
        return Load::make(st.buffer, offset_of(st, *op->tensor, idx));
    }
    Stmt mutate_node(const Provide *op, const Stmt &) override {
        bool changed = false;
        auto idx = mutate_all(op->indices, changed);
        Expr v = mutate(op->value);
        const TensorStorage &st = storage_of(op->tensor);
        return Store::make(st.buffer, offset_of(st, *op->tensor, idx), v);
    }
    Stmt mutate_node(const LetStmt *op, const Stmt &self) override {
        lets_.emplace_back(op->var.get(), op->value);
        Stmt s = IRMutator::mutate_node(op, self);
        lets_.pop_back();
        return s;
    }
    Stmt mutate_node(const For *op, const Stmt &self) override {
        loops_.push_back(ScopeEntry{op->var.get(), op->min, op->extent});
        Stmt s = IRMutator::mutate_node(op, self);
        loops_.pop_back();
        return s;
    }

private:
    /** Integer products distributed over sums, so that the simplifier's linear form cancels
     * the terms of a slice's two ends: (i + 1) * len(b) - i * len(b) -> len(b), a size that
     * does not change with i (the allocation then moves out of the row loop). */
    static Expr distribute(const Expr &e) {
        if (const Add *a = e.as<Add>()) return distribute(a->a) + distribute(a->b);
        if (const Sub *d = e.as<Sub>()) return distribute(d->a) - distribute(d->b);
        if (const Mul *m = e.as<Mul>(); m && m->type.is_int()) {
            Expr x = distribute(m->a), y = distribute(m->b);
            if (const Add *a = x.as<Add>()) return distribute(a->a * y) + distribute(a->b * y);
            if (const Sub *d = x.as<Sub>()) return distribute(d->a * y) - distribute(d->b * y);
            if (const Add *a = y.as<Add>()) return distribute(x * a->a) + distribute(x * a->b);
            if (const Sub *d = y.as<Sub>()) return distribute(x * d->a) - distribute(x * d->b);
            return x * y;
        }
        return e;
    }
    static std::vector<Expr> domain_vars(const TensorNode &t, size_t k) {
        std::vector<Expr> v;
        for (size_t j = 0; j < k; j++)
            v.push_back(var_expr(t.domain[j].dim->var));
        return v;
    }
    /** The indices of the first element of the slice at `fixed` (the fixed dims' indices). */
    static std::vector<Expr> slice_start(const TensorNode &t, std::vector<Expr> fixed) {
        while (fixed.size() < t.domain.size())
            fixed.push_back(IntImm::make(0));
        return fixed;
    }
    Expr whole_offset(const TensorStorage &st, const TensorNode &t, const std::vector<Expr> &idx) {
        return flat_offset(st.flat, st.layout, physical_indices(ctx_.aux, t, idx));
    }
    /** Simplified here, while fusion-map calls are still UF calls: P(fo(t)) + fi(t) -> t. A sliced
     * producer's offset is counted from its slice's first element. */
    Expr offset_of(const TensorStorage &st, const TensorNode &t, const std::vector<Expr> &idx) {
        Expr whole = whole_offset(st, t, idx);
        if (st.slice_loop) {
            std::vector<Expr> fixed(idx.begin(), idx.begin() + (std::ptrdiff_t)sliced_.at(&t).shared_dims);
            whole = whole - whole_offset(st, t, slice_start(t, fixed));
        }
        Expr offset = simplify(whole);
        size_t before = count_div_mod(offset);
        if (before == 0) return offset;
        Expr in_loops = offset;
        for (size_t k = lets_.size(); k-- > 0;) // innermost first: a let's value may use outer ones
            in_loops = substitute(in_loops, lets_[k].first, lets_[k].second);
        in_loops = fold_small_div_mod(simplify(in_loops), loops_, *ctx_.prover);
        return count_div_mod(in_loops) < before ? in_loops : offset;
    }
    static size_t count_div_mod(const Expr &e) {
        size_t n = 0;
        visit_exprs(e, [&](const Expr &x) { n += x.as<Div>() || x.as<Mod>(); });
        return n;
    }
    const LoweringContext &ctx_;
    const SlicedStorageMap &sliced_;

public:
    StorageMap storage; ///< the result: every tensor's buffer and layout

private:
    std::vector<std::pair<const VarNode *, Expr>> lets_; ///< enclosing lets, outermost first
    Scope loops_;                                        ///< enclosing loops, outermost first
};

} // namespace

StorageLowered storage_lowering(const Stmt &s, const LoweringContext &ctx, const SlicedStorageMap &sliced) {
    Flattener f(ctx, sliced);
    for (auto &t : ctx.inputs)
        f.storage_of(t);
    for (auto &t : ctx.funcs)
        f.storage_of(t);
    Stmt body = f.mutate(s);
    return StorageLowered{body, std::move(f.storage)};
}

} // namespace cora::ir
