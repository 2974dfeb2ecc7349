#include "analysis/Bounds.h"

#include "analysis/IntMath.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Does e use v outside the arguments of UF calls (and of reads of tensors with a declared value
 * range, Tensor::index_range)? Such a call is an atom for elimination: its
 * value is bounded by its declared range only at the end, which keeps equal calls correlated
 * (len(b) - len(b) cancels) and stays sound because the final bound quantifies over the range. */
bool uses_var_directly(const Expr &e, const VarNode *v) {
    if (e.get() == v) return true;
    if (is_ranged_atom(e)) return false;
    bool found = false;
    struct Walker : IRVisitor {
        const VarNode *v;
        bool *found;
        void visit(const Expr &x) override {
            if (*found || !x.defined() || is_ranged_atom(x)) return;
            if (x.get() == v)
                *found = true;
            else
                IRVisitor::visit(x);
        }
        using IRVisitor::visit;
    } w;
    w.v = v;
    w.found = &found;
    w.visit(e);
    return found;
}

/** Distribute sums and constant products over min/max: x - min(a, b) = max(x - a, x - b), so
 * that correlated terms meet and cancel before a variable is bounded. */
class LiftMinMax : public IRMutator {
public:
    using IRMutator::mutate;

protected:
    template <typename Outer> static Expr distribute(const Expr &x, const Expr &y, bool minmax_on_right, bool flips) {
        const Expr &mm = minmax_on_right ? y : x;
        const Expr &other = minmax_on_right ? x : y;
        Expr a, b;
        bool is_min;
        if (const Min *m = mm.as<Min>())
            a = m->a, b = m->b, is_min = true;
        else if (const Max *m = mm.as<Max>())
            a = m->a, b = m->b, is_min = false;
        else
            return Expr();
        Expr pa = minmax_on_right ? Outer::make(other, a) : Outer::make(a, other);
        Expr pb = minmax_on_right ? Outer::make(other, b) : Outer::make(b, other);
        return (is_min != flips) ? Min::make(pa, pb) : Max::make(pa, pb);
    }
    static bool is_mm(const Expr &e) { return e.as<Min>() || e.as<Max>(); }
    Expr mutate_node(const Add *op, const Expr &self) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (a.type().is_int() && is_mm(b)) return mutate(distribute<Add>(a, b, true, false));
        if (a.type().is_int() && is_mm(a)) return mutate(distribute<Add>(a, b, false, false));
        return a.same_as(op->a) && b.same_as(op->b) ? self : Add::make(a, b);
    }
    Expr mutate_node(const Sub *op, const Expr &self) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (a.type().is_int() && is_mm(b)) return mutate(distribute<Sub>(a, b, true, true));
        if (a.type().is_int() && is_mm(a)) return mutate(distribute<Sub>(a, b, false, false));
        return a.same_as(op->a) && b.same_as(op->b) ? self : Sub::make(a, b);
    }
    Expr mutate_node(const Mul *op, const Expr &self) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        const int64_t *k = as_const_int(b);
        if (k && is_mm(a)) return mutate(distribute<Mul>(a, b, false, *k < 0));
        return a.same_as(op->a) && b.same_as(op->b) ? self : Mul::make(a, b);
    }
};

/** Bound of e over v in [lo, hi] (symbolic), or undefined when no rule applies. */
Expr bound_over(const Expr &e, const VarNode *v, const Expr &lo, const Expr &hi, bool upper) {
    if (!uses_var_directly(e, v)) return e;
    auto rec = [&](const Expr &x, bool up) { return bound_over(x, v, lo, hi, up); };
    if (e.get() == v) return upper ? hi : lo;
    if (const Add *a = e.as<Add>()) {
        Expr x = rec(a->a, upper), y = rec(a->b, upper);
        return x.defined() && y.defined() ? Add::make(x, y) : Expr();
    }
    if (const Sub *s = e.as<Sub>()) {
        Expr x = rec(s->a, upper), y = rec(s->b, !upper);
        return x.defined() && y.defined() ? Sub::make(x, y) : Expr();
    }
    if (const Mul *m = e.as<Mul>()) {
        const int64_t *ca = as_const_int(m->a), *cb = as_const_int(m->b);
        const int64_t *k = cb ? cb : ca;
        const Expr &x = cb ? m->a : m->b;
        if (!k) return Expr();
        Expr bx = rec(x, *k >= 0 ? upper : !upper);
        return bx.defined() ? Mul::make(bx, IntImm::make(*k)) : Expr();
    }
    if (const Min *m = e.as<Min>()) {
        Expr x = rec(m->a, upper), y = rec(m->b, upper);
        return x.defined() && y.defined() ? Min::make(x, y) : Expr();
    }
    if (const Max *m = e.as<Max>()) {
        Expr x = rec(m->a, upper), y = rec(m->b, upper);
        return x.defined() && y.defined() ? Max::make(x, y) : Expr();
    }
    if (const Div *d = e.as<Div>()) {
        const int64_t *c = as_const_int(d->b);
        if (!c || *c <= 0) return Expr();
        Expr x = rec(d->a, upper);
        return x.defined() ? Div::make(x, d->b) : Expr();
    }
    if (const Mod *m = e.as<Mod>()) {
        const int64_t *c = as_const_int(m->b);
        if (!c || *c <= 0) return Expr();
        return IntImm::make(upper ? *c - 1 : 0);
    }
    if (const Select *s = e.as<Select>()) {
        Expr x = rec(s->t, upper), y = rec(s->f, upper);
        if (!x.defined() || !y.defined()) return Expr();
        return upper ? Max::make(x, y) : Min::make(x, y);
    }
    return Expr();
}

/** Replace each k * (y / c) (c > 0, k a multiple of c) by a linear bound in the direction the
 * enclosing context needs: c * (y / c) lies in [y - c + 1, y]. `upper` is the direction wanted
 * for e itself; it flips under the right side of a subtraction and under negative factors. */
Expr relax_divisions(const Expr &e, bool upper) {
    if (const Add *a = e.as<Add>()) return Add::make(relax_divisions(a->a, upper), relax_divisions(a->b, upper));
    if (const Sub *s = e.as<Sub>()) return Sub::make(relax_divisions(s->a, upper), relax_divisions(s->b, !upper));
    if (const Min *m = e.as<Min>()) return Min::make(relax_divisions(m->a, upper), relax_divisions(m->b, upper));
    if (const Max *m = e.as<Max>()) return Max::make(relax_divisions(m->a, upper), relax_divisions(m->b, upper));
    if (const Mul *m = e.as<Mul>()) {
        const int64_t *k = as_const_int(m->b);
        if (!k) return e;
        if (const Div *d = m->a.as<Div>()) {
            const int64_t *c = as_const_int(d->b);
            if (c && *c > 0 && *k % *c == 0) {
                int64_t f = *k / *c;
                bool take_upper = (f > 0) == upper;
                Expr y = take_upper ? d->a : Sub::make(d->a, IntImm::make(*c - 1));
                return Mul::make(y, IntImm::make(f));
            }
        }
        return Mul::make(relax_divisions(m->a, *k >= 0 ? upper : !upper), m->b);
    }
    return e;
}

/** Checked arithmetic on optional bounds (nullopt on overflow or when unbounded). */
template <typename F>
std::optional<int64_t> checked(const std::optional<int64_t> &x, const std::optional<int64_t> &y, F op) {
    if (!x || !y) return std::nullopt;
    int64_t r;
    if (op(*x, *y, &r)) return std::nullopt;
    return r;
}
bool add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
bool sub_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }
bool mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }

} // namespace

Expr symbolic_bound(const Expr &e, const Scope &scope, bool upper) {
    Expr cur = simplify(e);
    for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
        Expr lo = it->min;
        Expr hi = simplify(Sub::make(Add::make(it->min, it->extent), IntImm::make(1)));
        LiftMinMax lift;
        cur = simplify(lift.mutate(cur));
        cur = bound_over(cur, it->var, lo, hi, upper);
        if (!cur.defined()) return cur;
        cur = simplify(cur);
    }
    return cur;
}

std::optional<int64_t> constant_bound(const Expr &e, bool upper) {
    if (const int64_t *c = as_const_int(e)) return *c;
    if (const VarNode *v = e.as<VarNode>()) {
        if (v->role == VarRole::Param) return upper ? v->max_value : v->min_value;
        return std::nullopt;
    }
    if (auto range = declared_range(e)) return upper ? range->second : range->first;
    if (const Add *a = e.as<Add>()) {
        return checked(constant_bound(a->a, upper), constant_bound(a->b, upper), add_ovf);
    }
    if (const Sub *s = e.as<Sub>()) {
        return checked(constant_bound(s->a, upper), constant_bound(s->b, !upper), sub_ovf);
    }
    if (const Mul *m = e.as<Mul>()) {
        const int64_t *k = as_const_int(m->b);
        Expr x = m->a;
        if (!k && as_const_int(m->a)) {
            k = as_const_int(m->a);
            x = m->b;
        }
        if (!k) {
            // Product of two non-constant factors: bound it when both are non-negative.
            auto alo = constant_bound(m->a, false), blo = constant_bound(m->b, false);
            if (!alo || !blo || *alo < 0 || *blo < 0) return std::nullopt;
            return checked(constant_bound(m->a, upper), constant_bound(m->b, upper), mul_ovf);
        }
        return checked(constant_bound(x, *k >= 0 ? upper : !upper), std::optional<int64_t>(*k), mul_ovf);
    }
    if (const Div *d = e.as<Div>()) {
        const int64_t *c = as_const_int(d->b);
        if (!c || *c <= 0) return std::nullopt;
        auto b = constant_bound(d->a, upper);
        return b ? std::optional<int64_t>(div_floor(*b, *c)) : std::nullopt;
    }
    if (const Mod *m = e.as<Mod>()) {
        const int64_t *c = as_const_int(m->b);
        if (!c || *c <= 0) return std::nullopt;
        return upper ? *c - 1 : 0;
    }
    if (const Min *m = e.as<Min>()) {
        auto x = constant_bound(m->a, upper), y = constant_bound(m->b, upper);
        if (upper) { // min(a, b) <= either bound
            if (x && y) return std::min(*x, *y);
            return x ? x : y;
        }
        return x && y ? std::optional<int64_t>(std::min(*x, *y)) : std::nullopt;
    }
    if (const Max *m = e.as<Max>()) {
        auto x = constant_bound(m->a, upper), y = constant_bound(m->b, upper);
        if (!upper) {
            if (x && y) return std::max(*x, *y);
            return x ? x : y;
        }
        return x && y ? std::optional<int64_t>(std::max(*x, *y)) : std::nullopt;
    }
    if (const Select *s = e.as<Select>()) {
        auto x = constant_bound(s->t, upper), y = constant_bound(s->f, upper);
        if (!x || !y) return std::nullopt;
        return upper ? std::max(*x, *y) : std::min(*x, *y);
    }
    return std::nullopt;
}

bool BoundsProver::prove_nonneg(const Expr &e, const Scope &scope) {
    Expr lb = symbolic_bound(e, scope, /*upper=*/false);
    if (!lb.defined()) {
        failure_ = "no bound found for " + print(simplify(e));
        return false;
    }
    Expr relaxed = simplify(relax_divisions(lb, /*upper=*/false));
    // Both are sound lower bounds; relaxing divisions helps when they correlate with other
    // terms, bounding them directly (floor(lb / c)) when they stand alone. Take the better.
    auto c = constant_bound(relaxed, false), direct = constant_bound(lb, false);
    if (!c || (direct && *direct > *c)) c = direct;
    if (c && *c >= 0) return true;
    // Say what had to hold and how far the bound found falls short, in the terms of the goal.
    const std::string value = print(simplify(e)), bound = print(lb), goal = value + " >= 0";
    if (!c)
        failure_ = "needed " + goal + "; the built-in prover found no constant lower bound (" + bound + ")";
    else if (as_const_int(lb) || bound == value)
        failure_ = "needed " + goal + ", but it can be as low as " + std::to_string(*c);
    else
        failure_ = "needed " + goal + ", but its lower bound " + print(lb) + " can be as low as " + std::to_string(*c);
    return false;
}

Expr fold_small_div_mod(const Expr &e, const Scope &scope, Prover &prover) {
    struct Folder : IRMutator {
        const Scope *scope;
        Prover *prover;
        bool small(const Expr &x, const Expr &c) {
            const int64_t *k = as_const_int(c);
            return k && *k > 0 && x.type().is_int() && prover->prove_nonneg(x, *scope) &&
                   prover->prove_nonneg(Sub::make(IntImm::make(*k - 1), x), *scope);
        }
        Expr mutate_node(const Div *op, const Expr &self) override {
            Expr a = mutate(op->a);
            if (small(a, op->b)) return make_zero(op->type);
            return a.same_as(op->a) ? self : Div::make(a, op->b);
        }
        Expr mutate_node(const Mod *op, const Expr &self) override {
            Expr a = mutate(op->a);
            if (small(a, op->b)) return a;
            return a.same_as(op->a) ? self : Mod::make(a, op->b);
        }
        using IRMutator::mutate_node;
    } folder;
    folder.scope = &scope;
    folder.prover = &prover;
    return simplify(folder.mutate(e));
}

} // namespace cora::ir
