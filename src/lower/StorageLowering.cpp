/** \file Pass: storage lowering. Every tensor gets a buffer variable and a flattened layout
 * (analysis/StorageLayout: dimension graph -> offsets through prefix-sum aux arrays).
 * Provide becomes Store and Access becomes Load at the flat offset of the indices (through the
 * tensor's storage transforms, if any); offsets are simplified so fused-loop maps cancel.
 * Requires: no Reduce. Ensures: no Provide/Access; offsets use UF calls (aux, length arrays)
 * that materialize_ufs turns into loads. Tests: tests/unit/storage_layout.cpp. */
#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

class Flattener : public IRMutator {
public:
    explicit Flattener(LoweringContext &ctx) : ctx_(ctx) {}

    const TensorStorage &storage_of(const TensorPtr &t) {
        auto it = ctx_.storage.find(t.get());
        if (it != ctx_.storage.end()) return it->second;
        TensorStorage st;
        st.buffer = make_var(t->name, VarRole::Buffer, t->type);
        st.layout = physical_layout(*t);
        st.flat = flatten_layout(st.layout);
        return ctx_.storage.emplace(t.get(), st).first->second;
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

private:
    /** Simplified here, while fusion-map calls are still UF calls: P(fo(t)) + fi(t) -> t. */
    static Expr offset_of(const TensorStorage &st, const TensorNode &t, const std::vector<Expr> &idx) {
        return simplify(flat_offset(st.flat, st.layout, physical_indices(t, idx)));
    }
    LoweringContext &ctx_;
};

} // namespace

Stmt storage_lowering(const Stmt &s, LoweringContext &ctx) {
    Flattener f(ctx);
    for (auto &t : ctx.inputs)
        f.storage_of(t);
    for (auto &t : ctx.funcs)
        f.storage_of(t);
    return f.mutate(s);
}

} // namespace cora::ir
