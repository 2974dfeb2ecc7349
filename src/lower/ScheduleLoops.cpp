/** \file Pass: build each Func's loop nest from its schedule (or the default schedule).
 *
 * Does: starting from the domain dims, applies splits in order (parent = outer * f + inner,
 * outer extent ceil(E / f)), then reorder requests, then loop annotations. Every loop extent is
 * rewritten in terms of the final loop variables; a loop whose extent uses a loop inside it is
 * rejected. Each split adds the guard parent < E at the innermost loop it needs; the guard is
 * dropped when the prover shows it always holds (e.g. a constant extent divisible by f), and
 * kept otherwise (ragged extents), so results never depend on the prover. Split dims get their
 * value through a let just around the Provide, so definitions are used unchanged.
 * Default schedule (no splits/reorders/annotations): domain order, outermost loop parallel.
 * Requires: a validated pipeline. Ensures: one loop nest per Func, producers first, each
 * ending in a Provide. Errors: CompileError naming the Func and loop (reorder across a
 * dependence, vectorize/unroll of a non-constant extent).
 * Tests: tests/correctness/schedules.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>
#include <iostream>
#include <map>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

using DimPtr = std::shared_ptr<const DimNode>;

struct Guard {
    Expr value, extent; ///< keep the body when value < extent (both in final loop variables)
    std::string dim;
};

Stmt schedule_func(const TensorPtr &f, LoweringContext &ctx) {
    const Schedule &sch = f->schedule;
    std::vector<DimPtr> loops;
    std::map<const DimNode *, Expr> extent; // in terms of domain (root) variables
    for (const LayoutDim &d : f->domain) {
        loops.push_back(d.dim);
        extent[d.dim.get()] = d.extent;
    }
    // value[d]: the value of dim d (domain or intermediate) in terms of the current loop vars.
    std::map<const VarNode *, Expr> value;
    std::vector<Guard> guards;
    for (const ScheduleSplit &s : sch.splits) {
        auto it = std::find(loops.begin(), loops.end(), s.parent);
        internal_check(it != loops.end(), "split parent is not a loop");
        Expr ep = extent.at(s.parent.get());
        Expr rebuilt = Add::make(Mul::make(var_expr(s.outer->var), IntImm::make(s.factor)), var_expr(s.inner->var));
        for (auto &[v, e] : value)
            e = substitute(e, s.parent->var.get(), rebuilt);
        value[s.parent->var.get()] = rebuilt;
        guards.push_back(Guard{var_expr(s.parent->var), ep, s.parent->name});
        extent[s.outer.get()] = simplify(Div::make(Add::make(ep, IntImm::make(s.factor - 1)), IntImm::make(s.factor)));
        extent[s.inner.get()] = IntImm::make(s.factor);
        *it = s.inner;
        loops.insert(it, s.outer);
    }
    // Reorder: the named loops take the positions they occupy, in the order given.
    if (!sch.order.empty()) {
        std::vector<size_t> positions;
        for (const DimPtr &d : sch.order) {
            auto it = std::find(loops.begin(), loops.end(), d);
            if (it == loops.end())
                throw_compile_error("reorder in Func '", f->name, "': '", d->name,
                                    "' is no longer a loop (it was split)");
            positions.push_back((size_t)(it - loops.begin()));
        }
        std::sort(positions.begin(), positions.end());
        for (size_t i = 0; i < positions.size(); i++)
            loops[positions[i]] = sch.order[i];
    }
    // Everything in terms of the final loop variables.
    auto to_loops = [&](const Expr &e) { return simplify(substitute(e, value)); };
    std::vector<Expr> extents;
    Scope scope;
    for (size_t k = 0; k < loops.size(); k++) {
        Expr e = to_loops(extent.at(loops[k].get()));
        for (const VarNode *v : vars_of(e, VarRole::Index)) {
            bool outside = false;
            for (size_t j = 0; j < k; j++)
                outside = outside || loops[j]->var.get() == v;
            if (!outside)
                throw_compile_error("schedule of Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                    print(e), ", which depends on loop '", v->name,
                                    "'; that loop must stay outside it");
        }
        extents.push_back(e);
        scope.push_back(ScopeEntry{loops[k]->var.get(), IntImm::make(0), e});
    }
    // Guards: attach each to the innermost loop it uses, unless proved redundant.
    std::vector<std::vector<Expr>> guards_at(loops.size() + 1);
    for (const Guard &g : guards) {
        Expr v = to_loops(g.value), e = to_loops(g.extent);
        size_t depth = 0;
        for (size_t k = 0; k < loops.size(); k++) {
            if (uses_var(v, loops[k]->var.get()) || uses_var(e, loops[k]->var.get())) depth = k + 1;
        }
        Scope visible(scope.begin(), scope.begin() + (long)depth);
        if (ctx.prover->prove_nonneg(Sub::make(Sub::make(e, v), IntImm::make(1)), visible)) {
            ctx.guards_removed++;
            continue;
        }
        ctx.guards_kept++;
        if (ctx.debug >= 1)
            std::cerr << "-- cora: guard kept in '" << f->name << "': " << print(v) << " < " << print(e) << " ("
                      << ctx.prover->last_failure() << ")\n";
        guards_at[depth].push_back(LT::make(v, e));
    }

    std::vector<Expr> idx;
    for (const LayoutDim &d : f->domain)
        idx.push_back(var_expr(d.dim->var));
    Stmt body = Provide::make(f, idx, f->value);
    for (const LayoutDim &d : f->domain) {
        auto it = value.find(d.dim->var.get());
        if (it != value.end()) body = LetStmt::make(d.dim->var, simplify(it->second), body);
    }
    auto wrap_guards = [&](Stmt s, size_t depth) {
        for (const Expr &c : guards_at[depth])
            s = IfThenElse::make(c, s);
        return s;
    };
    body = wrap_guards(body, loops.size());
    bool user_parallel = false;
    for (auto &[d, a] : sch.annotations)
        user_parallel = user_parallel || a == LoopAnnotation::Parallel;
    for (int k = (int)loops.size() - 1; k >= 0; k--) {
        ForKind kind = ForKind::Serial;
        if (!user_parallel && k == 0) kind = ForKind::Parallel;
        for (auto &[d, a] : sch.annotations) {
            if (d != loops[k]) continue;
            if (a == LoopAnnotation::Parallel) kind = ForKind::Parallel;
            if (a == LoopAnnotation::Vectorize || a == LoopAnnotation::Unroll) {
                const char *what = a == LoopAnnotation::Vectorize ? "vectorize" : "unroll";
                if (!as_const_int(extents[k]))
                    throw_compile_error(what, " in Func '", f->name, "': loop '", loops[k]->name, "' has extent ",
                                        print(extents[k]), ", not a constant; split it first");
                kind = a == LoopAnnotation::Vectorize ? ForKind::Vectorized : ForKind::Unrolled;
            }
        }
        body = For::make(loops[k]->var, IntImm::make(0), extents[k], kind, body);
        body = wrap_guards(body, (size_t)k);
    }
    // Annotations on dims that are no longer loops (split after being marked).
    for (auto &[d, a] : sch.annotations)
        if (std::find(loops.begin(), loops.end(), d) == loops.end())
            throw_compile_error("schedule of Func '", f->name, "': '", d->name,
                                "' is marked but is not a loop any more (it was split)");
    return body;
}

} // namespace

Stmt schedule_loops(LoweringContext &ctx) {
    std::vector<Stmt> nests;
    for (const TensorPtr &f : ctx.funcs)
        nests.push_back(schedule_func(f, ctx));
    return Block::make(nests);
}

} // namespace cora::ir
