/** \file Pass: turn uninterpreted-function calls into memory reads of argument arrays.
 * len(b) becomes int64(len[b]), a shape tensor's mask(n, y, x) int64(mask[(n * H + y) * W + x]); an aux call P(args)
 * becomes P[offset] where offset flattens args through P's own layout (recursively, for nested raggedness). Requires:
 * the argument list. Ensures: no UFCall is left. Tests: tests/pass/passes.cpp (the pass alone), every file in
 * tests/correctness. */
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

class Materializer : public IRMutator {
public:
    Materializer(const std::vector<ModuleArg> &args, const LoweringContext &ctx) : args_(args), ctx_(ctx) {}

protected:
    Expr mutate_node(const UFCall *op, const Expr &) override {
        bool changed = false;
        auto args = mutate_all(op->args, changed);
        const ModuleArg *arg = nullptr;
        for (const ModuleArg &a : args_)
            if (a.uf.get() == op->fn.get()) arg = &a;
        CORA_CHECK(arg != nullptr, "no argument for uninterpreted function ", op->fn->name);
        if (op->fn->kind == UFKind::LengthArray)
            return Cast::make(Int64, Load::make(arg->var, input_array_flat_index(*op->fn, args)));
        FlatLayout flat = flatten_layout(ctx_.aux, op->fn->aux->layout);
        return Load::make(arg->var, mutate(flat_offset(flat, op->fn->aux->layout, args)));
    }

private:
    const std::vector<ModuleArg> &args_;
    const LoweringContext &ctx_;
};

} // namespace

Stmt materialize_ufs(const Stmt &s, const std::vector<ModuleArg> &args, const LoweringContext &ctx) {
    return Materializer(args, ctx).mutate(s);
}

std::vector<ModuleArg> materialize_counts(const std::vector<ModuleArg> &args, const LoweringContext &ctx) {
    Materializer m(args, ctx);
    std::vector<ModuleArg> out = args;
    for (ModuleArg &a : out)
        if (a.expected_count.defined()) a.expected_count = m.mutate(a.expected_count);
    return out;
}

} // namespace cora::ir
