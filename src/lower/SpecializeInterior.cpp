/** \file Step: specialize_interior, a copy of a loop's body without the border checks for the
 * iterations that stay inside the tensors.
 *
 * Why: a convolution's zero padding is select(inside, in(clamped), 0). Inside the image every
 * such select is true and every clamp a no-op, but the C compiler sees a conditional read per
 * multiply-add and eight clamped base addresses: over 8 x 8 active tiles the register tile was
 * no longer kept in registers, and the same tile loop ran 1.7x longer than over a gathered copy
 * with no checks. Halide partitions such loops ("likely" conditions); here the schedule names
 * the loop (Func::specialize_interior) and this step writes its body twice.
 *
 * The same holds for the guard of a split's tail: a register tile over a ragged count of rows (an
 * expert's tokens, the last chunk of packed tokens) has a guard per tile row, and with it inside
 * the tile clang kept the accumulators in memory (block-sparse tiles over unpadded tokens: 1.5x
 * dense instead of 3.8x; DefaultBlockSparseTiles.cpp). The default schedule's tiles name their
 * tile loop here.
 *
 * Does: for each op whose schedule names a loop d, in the nest holding loop d: every integer
 * comparison in a select's or an if's condition (an operand of a chain of &&: the guards of a
 * split's tail and of pad_loop are ifs), and every min/max in a tensor read's index (a clamp),
 * inside d's body, is bounded over the loops between d and it (symbolic_bound, with the lets
 * inside d's body substituted). Where the bound says "always true" (or "the clamp never
 * applies") in terms of d's variable and what is outside d alone, that bound becomes a term of
 * the condition and the comparison is replaced by true (the clamp by its operand; an if whose
 * condition is then true, by its branch) in the copy. d's body becomes: if (all terms) the copy
 * else the body as it was. A comparison or clamp whose bound is not found, or depends on an
 * inner loop (a reduction not yet a loop counts as one) or a mutable local, stays in both.
 * Exact: the copy runs only where every replaced comparison holds at every iteration inside d.
 * Requires: the loop nests after compute_at (Provides and Accesses, before storage lowering).
 * Ensures: same results; nothing changes when no comparison or clamp can be bounded.
 * Errors: CompileError when d is not a loop of the op's nest (checked where the plan is made).
 * Tests: tests/pass/passes.cpp (the step alone, selects and clamps, a split tail's guard),
 * tests/correctness/schedules.cpp (random schedules specialize random loops, a zero-padded
 * stencil among the workloads), tests/spatial/conv_over_tiles.cpp (the convolutions, every tile
 * shape, borders included, against the dense reference), tests/error/schedule_errors.cpp; the
 * default's specialised tiles in tests/correctness/default_schedule.cpp and block_sparse.cpp.
 */
#include <functional>
#include <set>

#include "analysis/Bounds.h"
#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The body of loop d copied with its provable comparisons and clamps removed; `terms` collects
 * the conditions (in d's variable and outer names) under which the copy is exact. */
class InteriorCopy : public IRMutator {
public:
    std::vector<Expr> terms;
    int replaced = 0;

protected:
    Expr mutate_node(const Select *op, const Expr &self) override {
        Expr cond = mutate_condition(op->cond);
        Expr t = mutate(op->t), f = mutate(op->f);
        cond = simplify(cond);
        if (const IntImm *c = cond.as<IntImm>()) return c->value ? t : f;
        if (cond.same_as(op->cond) && t.same_as(op->t) && f.same_as(op->f)) return self;
        return Select::make(cond, t, f);
    }
    Expr mutate_node(const Access *op, const Expr &self) override {
        bool changed = false;
        std::vector<Expr> indices;
        for (const Expr &i : op->indices) {
            Expr m = unclamp(mutate(i));
            changed = changed || !m.same_as(i);
            indices.push_back(m);
        }
        return changed ? Access::make(op->tensor, indices) : self;
    }
    Expr mutate_node(const Reduce *op, const Expr &self) override {
        // A reduction not scheduled as a loop is one still: its variable moves inside d.
        scope_.push_back(ScopeEntry{op->var.get(), IntImm::make(0), op->extent});
        inner_.insert(op->var.get());
        Expr body = mutate(op->body);
        scope_.pop_back();
        return body.same_as(op->body) ? self : Reduce::make(op->op, op->var, op->extent, body);
    }
    Stmt mutate_node(const IfThenElse *op, const Stmt &self) override {
        // A split's or pad's guard (and any other branch): kept, or its branch taken where the
        // condition holds at every iteration inside d.
        Expr cond = simplify(mutate_condition(op->cond));
        Stmt then_case = mutate(op->then_case);
        Stmt else_case = op->else_case.defined() ? mutate(op->else_case) : Stmt();
        if (const IntImm *c = cond.as<IntImm>()) {
            if (c->value) return then_case;
            if (else_case.defined()) return else_case;
        }
        if (cond.same_as(op->cond) && then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) return self;
        return IfThenElse::make(cond, then_case, else_case);
    }
    Stmt mutate_node(const LocalVar *op, const Stmt &self) override {
        inner_.insert(op->var.get()); // mutable: never part of a condition decided once
        return IRMutator::mutate_node(op, self);
    }
    Stmt mutate_node(const For *op, const Stmt &self) override {
        scope_.push_back(ScopeEntry{op->var.get(), op->min, op->extent});
        inner_.insert(op->var.get());
        Stmt body = mutate(op->body);
        scope_.pop_back();
        return body.same_as(op->body) ? self : op->with([&](For &f) { f.body = body; });
    }
    Stmt mutate_node(const LetStmt *op, const Stmt &self) override {
        Expr value = mutate(op->value);
        lets_[op->var.get()] = substitute(op->value, lets_);
        Stmt body = mutate(op->body);
        lets_.erase(op->var.get());
        if (value.same_as(op->value) && body.same_as(op->body)) return self;
        return LetStmt::make(op->var, value, body);
    }

private:
    Scope scope_;                          ///< the loops between d and the expression, outermost first
    std::set<const VarNode *> inner_;      ///< every loop variable bound inside d
    std::map<const VarNode *, Expr> lets_; ///< lets bound inside d, substituted in bounds

    /** Whether `nonneg` >= 0 at every iteration inside d can be decided once per iteration of d;
     * if so, the test is recorded as a term. */
    bool always_nonneg(const Expr &nonneg) {
        Expr lower = symbolic_bound(substitute(nonneg, lets_), scope_, false);
        if (!lower.defined()) return false;
        for (const VarNode *v : inner_)
            if (uses_var(lower, v)) return false;
        for (const auto &[v, e] : lets_)
            if (uses_var(lower, v)) return false;
        Expr term = simplify(GE::make(lower, IntImm::make(0)));
        if (const IntImm *c = term.as<IntImm>()) return c->value != 0; // proved (or refuted) already
        for (const Expr &t : terms)
            if (equal(t, term)) return true;
        terms.push_back(term);
        return true;
    }
    /** An integer comparison as "x >= 0", or undefined. */
    static Expr as_nonneg(const Expr &c) {
        auto integer = [](const Expr &a) { return !a.type().is_float(); };
        if (const LT *o = c.as<LT>(); o && integer(o->a)) return Sub::make(Sub::make(o->b, o->a), IntImm::make(1));
        if (const LE *o = c.as<LE>(); o && integer(o->a)) return Sub::make(o->b, o->a);
        if (const GT *o = c.as<GT>(); o && integer(o->a)) return Sub::make(Sub::make(o->a, o->b), IntImm::make(1));
        if (const GE *o = c.as<GE>(); o && integer(o->a)) return Sub::make(o->a, o->b);
        return Expr();
    }
    Expr mutate_condition(const Expr &c) {
        if (const And *a = c.as<And>()) {
            Expr x = mutate_condition(a->a), y = mutate_condition(a->b);
            return x.same_as(a->a) && y.same_as(a->b) ? c : And::make(x, y);
        }
        Expr nonneg = as_nonneg(c);
        if (nonneg.defined() && always_nonneg(nonneg)) {
            replaced++;
            return IntImm::make(1, Bool);
        }
        return mutate(c);
    }
    /** A read's index without the clamps that never apply inside d. */
    Expr unclamp(const Expr &i) {
        if (i.type().is_float()) return i;
        if (const Max *m = i.as<Max>()) {
            Expr a = unclamp(m->a);
            if (always_nonneg(Sub::make(a, m->b))) {
                replaced++;
                return a;
            }
            return a.same_as(m->a) ? i : Max::make(a, m->b);
        }
        if (const Min *m = i.as<Min>()) {
            Expr a = unclamp(m->a);
            if (always_nonneg(Sub::make(m->b, a))) {
                replaced++;
                return a;
            }
            return a.same_as(m->a) ? i : Min::make(a, m->b);
        }
        return i;
    }
};

} // namespace

Stmt specialize_interior_loop(const Stmt &s, const VarNode *var, bool &found) {
    struct Rewriter : IRMutator {
        const VarNode *var;
        bool &found;
        Rewriter(const VarNode *v, bool &f) : var(v), found(f) {}
        Stmt mutate_node(const For *op, const Stmt &self) override {
            if (op->var.get() != var) return IRMutator::mutate_node(op, self);
            found = true;
            InteriorCopy copy;
            Stmt interior = copy.mutate(op->body);
            if (copy.terms.empty() && copy.replaced == 0) return self;
            Expr cond = IntImm::make(1, Bool);
            for (const Expr &t : copy.terms)
                cond = cond.as<IntImm>() ? t : And::make(cond, t);
            Stmt body = cond.as<IntImm>() ? interior : IfThenElse::make(cond, interior, op->body);
            return op->with([&](For &f) { f.body = body; });
        }
    } rewriter(var, found);
    return rewriter.mutate(s);
}

void apply_specialize_interior(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                               const LoweringContext &ctx) {
    for (const TensorPtr &op : ops) {
        const DimPtr &d = ctx.schedule_of(*op).interior_at;
        if (!d) continue;
        bool found = false;
        for (Stmt &nest : nests)
            if (nest.defined() && !found) nest = specialize_interior_loop(nest, d->var.get(), found);
        CORA_CHECK(found, "specialize_interior: the loop vanished from the nests");
    }
}

} // namespace cora::ir
