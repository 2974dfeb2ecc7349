/** \file Step: whether an op's padded iterations (pad_loop) are safe without their guards.
 *
 * Pad guards go when every access of the op — its store and all its reads, reductions included,
 * and the inner loop extents, which padded iterations evaluate too (e.g. len(b) for b >= B) —
 * stays inside the physical storage over the padded iteration space. It is checked in the
 * split-free nest when there is one (split guards are then implicit). A store that may leave its
 * own storage is a CompileError: the storage is padded less than the loop.
 * Tests: tests/correctness/fusion_padding.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>

#include "analysis/Simplify.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Proves that every access of one op stays inside its tensor's physical storage, over a scope
 * of loops (and the op's reductions); reports the first access that could not be shown. */
class StorageBoundsCheck {
public:
    StorageBoundsCheck(const LoweringContext &ctx, Scope scope) : ctx_(ctx), scope_(std::move(scope)) {}

    /** Empty when in bounds, else a description of the failed obligation. */
    std::string access(const TensorNode &t, const std::vector<Expr> &logical) {
        Layout phys = physical_layout(ctx_.aux, t);
        std::vector<Expr> idx = physical_indices(ctx_.aux, t, logical);
        std::map<const VarNode *, Expr> m;
        for (size_t k = 0; k < phys.size(); k++) {
            Expr i = simplify(idx[k]);
            Expr extent = simplify(substitute(phys[k].extent, m));
            std::string where = "'" + t.name + "' at " + print(i) + " in storage dim '" + phys[k].dim->name + "'";
            if (!ctx_.prover->prove_nonneg(i, scope_)) return where + " may be negative (" + failure() + ")";
            if (!ctx_.prover->prove_nonneg(Sub::make(Sub::make(extent, i), IntImm::make(1)), scope_))
                return where + " may reach its extent " + print(extent) + " (" + failure() + ")";
            m[phys[k].dim->var.get()] = i;
        }
        return "";
    }

    /** Reads of tensors and length arrays in `e` (reduction extents included). */
    std::string reads(const Expr &e) {
        if (!e.defined()) return "";
        if (const Reduce *r = e.as<Reduce>()) {
            std::string out = reads(r->extent);
            if (!out.empty()) return out;
            scope_.push_back(ScopeEntry{r->var.get(), IntImm::make(0), r->extent});
            out = reads(r->body);
            scope_.pop_back();
            return out;
        }
        std::string out;
        if (const Access *a = e.as<Access>()) out = access(*a->tensor, a->indices);
        if (const UFCall *u = e.as<UFCall>(); u && u->fn->kind == UFKind::LengthArray) {
            for (size_t k = 0; k < u->args.size() && out.empty(); k++) {
                Expr i = simplify(u->args[k]), extent = input_array_extent(*u->fn, k);
                std::string where = input_array_title(*u->fn) + " at " + print(i);
                if (!ctx_.prover->prove_nonneg(i, scope_))
                    out = where + " may be negative (" + failure() + ")";
                else if (!ctx_.prover->prove_nonneg(Sub::make(Sub::make(extent, i), IntImm::make(1)), scope_))
                    out = where + " may reach its " + (u->fn->dims.empty() ? "count " : "dim ") + print(extent) + " (" +
                          failure() + ")";
            }
        }
        if (out.empty())
            for_each_child(e, [&](const Expr &x) {
                if (out.empty()) out = reads(x);
            });
        return out;
    }

private:
    std::string failure() const { return ctx_.prover->last_failure(); }
    const LoweringContext &ctx_;
    Scope scope_;
};

} // namespace

std::string check_padded_iterations(const LoopPlan &plan, const LoweringContext &ctx) {
    const std::vector<Guard> &guards = plan.transformed.guards;
    if (std::none_of(guards.begin(), guards.end(), [](const Guard &g) { return g.pad; })) return "";
    // Check in the split-free nest when there is one: split guards are then implicit.
    std::optional<TransformedLoops> simple = apply_transforms(plan.op, true, ctx);
    const TransformedLoops &p = simple ? *simple : plan.transformed;
    auto in_p = [&](const Expr &e) { return simplify(substitute(e, p.value)); };
    Scope pad_scope;
    std::vector<Expr> pad_extents;
    for (const DimPtr &d : p.loops) {
        pad_extents.push_back(in_p(p.extent.at(d.get())));
        pad_scope.push_back(ScopeEntry{d->var.get(), IntImm::make(0), pad_extents.back()});
    }
    std::vector<Expr> at;
    for (const Expr &i : plan.store_at)
        at.push_back(in_p(i));
    StorageBoundsCheck check(ctx, pad_scope);
    std::string store = check.access(*plan.target, at);
    if (!store.empty())
        throw_compile_error("Func '", plan.op->name, "': the padded loop writes outside its storage: ", store,
                            "; pad its storage at least as much as the loop (pad_storage / fuse_storage)");
    std::string unsafe = check.reads(in_p(plan.element()));
    if (unsafe.empty() && plan.epilogue.defined()) unsafe = check.reads(in_p(plan.epilogue));
    // Inner loop extents are evaluated in padded iterations too (e.g. len(b) for b >= B).
    for (size_t k = 0; k < p.loops.size() && unsafe.empty(); k++)
        unsafe = StorageBoundsCheck(ctx, Scope(pad_scope.begin(), pad_scope.begin() + (long)k)).reads(pad_extents[k]);
    // (The split nest's extents derive from these at the same, guarded, root values.)
    return unsafe;
}

} // namespace cora::ir
