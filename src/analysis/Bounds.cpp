#include "analysis/Bounds.h"

#include "analysis/IntMath.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Bound of e over v in [lo, hi] (symbolic), or undefined when no rule applies. */
Expr bound_over(const Expr &e, const VarNode *v, const Expr &lo, const Expr &hi, bool upper) {
    if (!uses_var(e, v)) return e;
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
    if (const UFCall *u = e.as<UFCall>()) {
        // The value of an uninterpreted function lies in its declared range whatever the index.
        return IntImm::make(upper ? u->fn->max_value : u->fn->min_value);
    }
    return Expr();
}

/** Replace k * (y / c) (k a multiple of c > 0) by its linear bound: c*(y/c) is in [y-c+1, y]. */
class RelaxDivisions : public IRMutator {
public:
    explicit RelaxDivisions(bool upper) : upper_(upper) {}

protected:
    bool upper_;
    Expr mutate_node(const Mul *op, const Expr &self) override {
        const int64_t *k = as_const_int(op->b);
        const Div *d = op->a.as<Div>();
        if (k && d) {
            const int64_t *c = as_const_int(d->b);
            if (c && *c > 0 && *k % *c == 0) {
                int64_t f = *k / *c;
                bool take_upper = (f > 0) == upper_;
                Expr y = take_upper ? d->a : Sub::make(d->a, IntImm::make(*c - 1));
                return Mul::make(y, IntImm::make(f));
            }
        }
        return IRMutator::mutate_node(op, self);
    }
};

std::optional<int64_t> sat(bool ok, int64_t v) { return ok ? std::optional<int64_t>(v) : std::nullopt; }

}  // namespace

Expr symbolic_bound(const Expr &e, const Scope &scope, bool upper) {
    Expr cur = simplify(e);
    for (auto it = scope.rbegin(); it != scope.rend(); ++it) {
        Expr lo = it->min;
        Expr hi = simplify(Sub::make(Add::make(it->min, it->extent), IntImm::make(1)));
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
    if (const UFCall *u = e.as<UFCall>()) return upper ? u->fn->max_value : u->fn->min_value;
    if (const Add *a = e.as<Add>()) {
        auto x = constant_bound(a->a, upper), y = constant_bound(a->b, upper);
        int64_t r;
        return x && y ? sat(!__builtin_add_overflow(*x, *y, &r), r) : std::nullopt;
    }
    if (const Sub *s = e.as<Sub>()) {
        auto x = constant_bound(s->a, upper), y = constant_bound(s->b, !upper);
        int64_t r;
        return x && y ? sat(!__builtin_sub_overflow(*x, *y, &r), r) : std::nullopt;
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
            auto ax = constant_bound(m->a, upper), bx = constant_bound(m->b, upper);
            int64_t r;
            return ax && bx ? sat(!__builtin_mul_overflow(*ax, *bx, &r), r) : std::nullopt;
        }
        auto b = constant_bound(x, *k >= 0 ? upper : !upper);
        int64_t r;
        return b ? sat(!__builtin_mul_overflow(*b, *k, &r), r) : std::nullopt;
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
        if (upper) {  // min(a, b) <= either bound
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
    RelaxDivisions relax(/*upper=*/false);
    Expr relaxed = simplify(relax.mutate(lb));
    auto c = constant_bound(relaxed, false);
    if (!c) c = constant_bound(lb, false);
    if (c && *c >= 0) return true;
    failure_ = "lower bound " + print(lb) + (c ? " can be " + std::to_string(*c) : " is unbounded");
    return false;
}

}  // namespace cora::ir
