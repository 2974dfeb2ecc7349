/** \file Steps: schedule guards, placed and proved, then turned into loop bounds.
 *
 * Each guard (split: parent < E; pad_loop: d < E) is attached to the innermost loop it uses,
 * after folding small div/mod over constant loop ranges and peeling aligned inner loops out of
 * it (nb * 1024 + no * 32 + ni < floor_mult(N, 32) holds exactly when nb * 1024 + no * 32 <
 * floor_mult(N, 32), outside the vectorized ni loop). A split guard is dropped when the prover
 * shows it always holds; a pad guard when the padded iterations are safe (PadSafety.cpp). With
 * LowerOptions::remove_guards off, every guard stays: results never depend on the prover.
 * Then a kept guard `i + rest < e` on the serial loop over i it is attached to becomes that
 * loop's bound, min(extent, e - rest): the same iterations run and the body has no branch (a
 * partial last k-panel keeps its register tile; a guarded body did not, at half speed). (Not when
 * a loop over the Func's dims would get a bound that uses a reduction loop: the nests over the
 * Func's dims alone, e.g. a tile's write-back, have no such loop.)
 * Tests: tests/correctness/schedules.cpp, vector_codegen.cpp (peeled guards), caching.cpp. */
#include <iostream>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Whether e is a multiple of c (c > 0) for every value of its variables, shown syntactically. */
bool multiple_of(const Expr &e, int64_t c) {
    if (const int64_t *k = as_const_int(e)) return *k % c == 0;
    if (const Add *a = e.as<Add>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Sub *a = e.as<Sub>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Min *a = e.as<Min>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Max *a = e.as<Max>()) return multiple_of(a->a, c) && multiple_of(a->b, c);
    if (const Mul *a = e.as<Mul>()) return multiple_of(a->a, c) || multiple_of(a->b, c);
    return false;
}

/** The terms of a sum (nested Adds). */
std::vector<Expr> additive_terms(const Expr &e) {
    std::vector<Expr> terms, todo{e};
    while (!todo.empty()) {
        Expr t = todo.back();
        todo.pop_back();
        if (const Add *a = t.as<Add>()) {
            todo.push_back(a->a);
            todo.push_back(a->b);
        } else {
            terms.push_back(t);
        }
    }
    return terms;
}

/** A guard `i + rest < e` on the loop over i, with rest and e free of i, holds exactly for
 * i < e - rest: that bound (undefined when the guard has another form). */
Expr loop_bound_from_guard(const Expr &guard, const VarNode *i) {
    const LT *lt = guard.as<LT>();
    if (!lt || uses_var(lt->b, i)) return Expr();
    Expr rest = IntImm::make(0);
    int uses = 0;
    for (const Expr &t : additive_terms(lt->a)) {
        if (t.as<VarNode>() == i)
            uses++;
        else if (uses_var(t, i))
            return Expr();
        else
            rest = Add::make(rest, t);
    }
    return uses == 1 ? simplify(Sub::make(lt->b, rest)) : Expr();
}

/** The value of a guard `value < extent` without the innermost loops it does not need:
 * a + i * s < e, with i a loop over [0, c) that a and e do not use and a, e multiples of c * s,
 * holds exactly when a < e (a < e means a <= e - c * s). E.g. the split guard
 * nb * 1024 + no * 32 + ni < floor_mult(N, 32) moves out of the vectorized ni loop. */
Expr peel_aligned_loops(Expr value, const Expr &extent, const std::vector<DimPtr> &loops,
                        const std::vector<Expr> &extents) {
    for (size_t k = loops.size(); k-- > 0;) {
        const VarNode *i = loops[k]->var.get();
        if (!uses_var(value, i)) continue;
        const int64_t *c = as_const_int(extents[k]);
        if (!c || *c <= 0 || uses_var(extent, i)) break;
        // The additive terms of value: exactly one uses i, as i or i * s.
        std::vector<Expr> terms = additive_terms(value);
        Expr rest;
        int64_t step = 0;
        for (const Expr &t : terms) {
            if (!uses_var(t, i)) {
                rest = rest.defined() ? Add::make(rest, t) : t;
                continue;
            }
            const VarNode *v = t.as<VarNode>();
            const Mul *m = t.as<Mul>();
            if (step == 0 && v == i) {
                step = 1;
            } else if (step == 0 && m && (m->a.as<VarNode>() == i || m->b.as<VarNode>() == i)) {
                const int64_t *s = as_const_int(m->a.as<VarNode>() == i ? m->b : m->a);
                if (!s || *s <= 0) return value;
                step = *s;
            } else {
                return value;
            }
        }
        if (step == 0 || !rest.defined() || !multiple_of(rest, *c * step) || !multiple_of(extent, *c * step))
            return value;
        value = simplify(rest);
    }
    return value;
}

} // namespace

PlacedGuards add_guards(const LoopPlan &plan, const std::string &pad_unsafe, const LoweringContext &ctx) {
    const std::vector<DimPtr> &loops = plan.loops;
    PlacedGuards placed;
    placed.at.resize(loops.size() + 1);
    placed.loop_extents = plan.extents;
    for (const Guard &g : plan.transformed.guards) {
        // (As for extents: a guard min(floor_mult(m, 128) + 128, M) with m = mb * 128 + mo * 8 + mi
        // then uses mb only, and sits outside the tile's loops.)
        Expr v = fold_small_div_mod(plan.now(g.value), plan.constant_loops, *ctx.prover);
        Expr e = fold_small_div_mod(plan.now(g.extent), plan.constant_loops, *ctx.prover);
        v = peel_aligned_loops(v, e, loops, plan.extents);
        size_t depth = 0;
        for (size_t k = 0; k < loops.size(); k++) {
            if (uses_var(v, loops[k]->var.get()) || uses_var(e, loops[k]->var.get())) depth = k + 1;
        }
        Scope visible(plan.scope.begin(), plan.scope.begin() + (long)depth);
        std::string reason;
        if (!ctx.remove_guards)
            reason = "guard removal is off";
        else if (g.pad)
            reason = pad_unsafe.empty() ? "" : "a padded iteration may read outside storage: " + pad_unsafe;
        else if (!ctx.prover->prove_nonneg(Sub::make(Sub::make(e, v), IntImm::make(1)), visible))
            reason = ctx.prover->last_failure();
        if (reason.empty()) {
            placed.removed++;
            continue;
        }
        placed.kept++;
        if (ctx.debug >= 1)
            std::cerr << "-- cora: guard kept in '" << plan.op->name << "': " << print(v) << " < " << print(e) << " ("
                      << reason << ")\n";
        placed.at[depth].push_back(LT::make(v, e));
    }
    return placed;
}

void bound_loops_by_guards(const LoopPlan &plan, PlacedGuards &guards) {
    for (size_t k = 0; k < plan.loops.size(); k++) {
        if (plan.kinds[k] != ForKind::Serial) continue;
        std::vector<Expr> &kept = guards.at[k + 1];
        for (size_t g = 0; g < kept.size();) {
            Expr bound = loop_bound_from_guard(kept[g], plan.loops[k]->var.get());
            if (!bound.defined() || (!plan.is_reduction[k] && plan.uses_reduction_loop(bound))) {
                g++;
                continue;
            }
            guards.loop_extents[k] = simplify(Max::make(Min::make(guards.loop_extents[k], bound), IntImm::make(0)));
            kept.erase(kept.begin() + (long)g);
        }
    }
}

} // namespace cora::ir
