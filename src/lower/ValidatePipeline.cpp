/** \file Pass: validate the pipeline before any lowering.
 *
 * Does: for every tensor layout and every definition, checks that
 *   - index variables are dims of the Func's domain or of an enclosing reduction (else: the
 *     dim is unknown to this op), and reduction extents use only outer dims;
 *   - every extent is provably non-negative for all inputs in the declared ranges;
 *   - every tensor access and length-array index provably stays inside its dim's extent (a
 *     Func's loop domain, an input's storage);
 *   - a Func's storage layout covers its loop domain.
 * Requires: funcs collected (producers first). Ensures: later passes may assume in-bounds
 * accesses; generated code never reads or writes outside a buffer whose size was checked.
 * Errors: CompileError naming the tensor, dim and the bound that could not be shown.
 * Tests: tests/error/definition_errors.cpp. */
#include <algorithm>
#include <functional>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

class Checker {
public:
    Checker(const LoweringContext &ctx, std::string where) : ctx_(ctx), where_(std::move(where)) {}
    Scope scope;

    bool in_scope(const VarNode *v) const {
        return std::any_of(scope.begin(), scope.end(), [&](const ScopeEntry &s) { return s.var == v; });
    }

    void require_nonneg(const Expr &e, const std::string &what) {
        if (!ctx_.prover->prove_nonneg(e, scope))
            throw_compile_error(where_, ": ", what, " (", ctx_.prover->last_failure(), ")");
    }

    /** 0 <= idx < extent. `context` (the access as written), built only for a failure, is appended
     * to the message. */
    void require_in_range(
        const Expr &idx, const Expr &extent, const std::string &what,
        const std::function<std::string()> &context = [] { return std::string(); }) {
        if (!ctx_.prover->prove_nonneg(idx, scope))
            throw_compile_error(where_, ": ", what, ": index ", print(idx), " may be negative (",
                                ctx_.prover->last_failure(), ")", context());
        Expr room = Sub::make(Sub::make(extent, idx), IntImm::make(1));
        if (!ctx_.prover->prove_nonneg(room, scope))
            throw_compile_error(where_, ": ", what, ": index ", print(idx), " may reach or pass the extent ",
                                print(extent), " (", ctx_.prover->last_failure(), ")", context());
    }

    /** The range of a dim in scope, or undefined. */
    Expr scope_extent(const VarNode *v) const {
        for (const ScopeEntry &s : scope)
            if (s.var == v) return s.extent;
        return Expr();
    }

    /** "; 'X' is declared X[batch < B][s < len(batch)][f < 64], read here as X(batch, f, s)" and,
     * when index k fits another of X's dims j (it is j's dim, or its range is j's extent) and
     * index j fits dim k, a hint that the two are swapped: only where swapping would fix the read. */
    std::string access_context(const Access *a, size_t k) const {
        const Layout &dims = a->tensor->domain;
        std::string declared, read;
        for (const LayoutDim &ld : dims)
            declared += "[" + ld.dim->name + " < " + print(ld.extent) + "]";
        for (const Expr &i : a->indices)
            read += (read.empty() ? "" : ", ") + print(i);
        std::string s = concat("; '", a->tensor->name, "' is declared ", a->tensor->name, declared, ", read here as ",
                               a->tensor->name, "(", read, ")");
        // Index i fits dim d when it is d's own variable or a dim whose range is d's extent.
        auto fits = [&](size_t i, size_t d, bool *same_dim) {
            const VarNode *v = a->indices[i].as<VarNode>();
            if (!v) return false;
            *same_dim = dims[d].dim->var.get() == v;
            Expr range = scope_extent(v);
            return *same_dim || (range.defined() && equal(simplify(range), simplify(dims[d].extent)));
        };
        // The hint only where swapping indices k and j would make both fit.
        for (size_t j = 0; j < dims.size(); j++) {
            bool k_same = false, j_same = false;
            if (j == k || !fits(k, j, &k_same) || !fits(j, k, &j_same)) continue;
            return concat(s, "; index ", k, " is '", print(a->indices[k]), "', ",
                          k_same ? "which is" : "whose range matches", " dim ", j, " ('", dims[j].dim->name,
                          "'), and index ", j, " fits dim ", k, " ('", dims[k].dim->name, "'): are the two swapped?");
        }
        return s;
    }

    void check(const Expr &e) {
        if (!e.defined()) return;
        if (const VarNode *v = e.as<VarNode>()) {
            if (v->role == VarRole::Index && !in_scope(v))
                throw_compile_error(where_, ": uses dim '", v->name,
                                    "', which is not a dim of this op's domain nor an enclosing reduction");
            return;
        }
        if (const Reduce *r = e.as<Reduce>()) {
            if (in_scope(r->var.get()))
                throw_compile_error(where_, ": reduction over dim '", r->var->name,
                                    "', which is already a loop dim here; reduce over a dim of its own");
            check(r->extent);
            require_nonneg(r->extent, "extent of the reduction over '" + r->var->name + "' may be negative");
            scope.push_back(ScopeEntry{r->var.get(), IntImm::make(0), r->extent});
            check(r->body);
            scope.pop_back();
            return;
        }
        if (const Access *a = e.as<Access>()) {
            for (const Expr &i : a->indices)
                check(i);
            // A tensor is read within its domain (what was computed, or the input's logical
            // shape), not its storage, which may be padded and hold uncomputed elements.
            const Layout &bounds = a->tensor->domain;
            std::map<const VarNode *, Expr> m;
            for (size_t k = 0; k < a->indices.size(); k++) {
                const LayoutDim &ld = bounds[k];
                Expr extent = substitute(ld.extent, m);
                require_in_range(a->indices[k], extent,
                                 "read of '" + a->tensor->name + "' in dim '" + ld.dim->name + "'",
                                 [&] { return access_context(a, k); });
                m[ld.dim->var.get()] = a->indices[k];
            }
            return;
        }
        if (const UFCall *u = e.as<UFCall>()) {
            for (const Expr &x : u->args)
                check(x);
            if (u->fn->kind == UFKind::LengthArray)
                for (size_t k = 0; k < u->args.size(); k++)
                    require_in_range(u->args[k], input_array_extent(*u->fn, k),
                                     input_array_title(*u->fn) +
                                         (u->fn->dims.empty() ? "" : " in dim " + std::to_string(k)));
            return;
        }
        visit_children(e);
    }

    void check_layout(const Layout &l, const std::string &owner) {
        size_t base = scope.size();
        for (const LayoutDim &ld : l) {
            check(ld.extent);
            require_nonneg(ld.extent, "extent of dim '" + ld.dim->name + "' of " + owner + " (" + print(ld.extent) +
                                          ") may be negative; narrow the declared ranges");
            scope.push_back(ScopeEntry{ld.dim->var.get(), IntImm::make(0), ld.extent});
        }
        scope.resize(base);
    }

private:
    void visit_children(const Expr &e) {
        for_each_child(e, [&](const Expr &x) { check(x); });
    }

    const LoweringContext &ctx_;
    std::string where_;
};

} // namespace

namespace {

/** The storage layout (possibly padded) must cover the domain in every dim. */
void check_storage_covers(const LoweringContext &ctx, const TensorPtr &t, Checker &c) {
    bool own_storage = false; // store_in()/pad_storage() gave a layout other than the domain
    for (size_t k = 0; k < t->domain.size(); k++)
        own_storage |= !equal(t->domain[k].extent, t->storage[k].extent);
    if (own_storage) c.check_layout(t->storage, "the storage of '" + t->name + "'");
    for (size_t k = 0; k < t->domain.size(); k++) {
        const LayoutDim &d = t->domain[k];
        if (!equal(d.extent, t->storage[k].extent)) {
            Expr cover = Sub::make(t->storage[k].extent, d.extent);
            if (!ctx.prover->prove_nonneg(cover, c.scope))
                throw_compile_error(t->is_input ? "input '" : "Func '", t->name,
                                    "': storage layout too small for the loop range: dim '", d.dim->name,
                                    "' is stored with extent ", print(t->storage[k].extent), " but the ",
                                    t->is_input ? "shape has " : "loop runs over ", print(d.extent), " (",
                                    ctx.prover->last_failure(), ")");
        }
        c.scope.push_back(ScopeEntry{d.dim->var.get(), IntImm::make(0), d.extent});
    }
}

} // namespace

void validate_pipeline(const LoweringContext &ctx) {
    for (auto &t : ctx.inputs) {
        Checker c(ctx, "input '" + t->name + "'");
        c.check_layout(t->domain, "'" + t->name + "'");
        check_storage_covers(ctx, t, c);
    }
    for (auto &f : ctx.funcs) {
        Checker c(ctx, "Func '" + f->name + "'");
        c.check_layout(f->domain, "'" + f->name + "'");
        check_storage_covers(ctx, f, c);
        Checker body(ctx,
                     "definition of '" + f->name + "'" + (f->defined_at.empty() ? "" : " (" + f->defined_at + ")"));
        body.scope = c.scope;
        body.check(f->value);
    }
}

} // namespace cora::ir
