#include "analysis/Simplify.h"

#include <cmath>

#include "analysis/AuxKind.h"
#include "analysis/IntMath.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** c0 + sum(coeff * atom). */
struct Linear {
    int64_t c0 = 0;
    std::vector<std::pair<Expr, int64_t>> terms;
    bool overflow = false;

    void add_term(const Expr &atom, int64_t k) {
        if (k == 0) return;
        for (auto &t : terms) {
            if (equal(t.first, atom)) {
                if (__builtin_add_overflow(t.second, k, &t.second)) overflow = true;
                return;
            }
        }
        terms.emplace_back(atom, k);
    }
    void add(const Linear &o, int64_t scale) {
        int64_t c;
        if (__builtin_mul_overflow(o.c0, scale, &c) || __builtin_add_overflow(c0, c, &c0)) overflow = true;
        for (auto &t : o.terms) {
            int64_t k;
            if (__builtin_mul_overflow(t.second, scale, &k)) overflow = true;
            add_term(t.first, k);
        }
        overflow = overflow || o.overflow;
    }
    void prune() {
        std::vector<std::pair<Expr, int64_t>> kept;
        for (auto &t : terms)
            if (t.second != 0) kept.push_back(t);
        terms = std::move(kept);
    }
};

Linear linearize(const Expr &e) {
    Linear l;
    if (const int64_t *c = as_const_int(e)) {
        l.c0 = *c;
    } else if (const Add *a = e.as<Add>()) {
        l = linearize(a->a);
        l.add(linearize(a->b), 1);
    } else if (const Sub *s = e.as<Sub>()) {
        l = linearize(s->a);
        l.add(linearize(s->b), -1);
    } else if (const Mul *m = e.as<Mul>()) {
        const int64_t *ca = as_const_int(m->a), *cb = as_const_int(m->b);
        if (cb)
            l.add(linearize(m->a), *cb);
        else if (ca)
            l.add(linearize(m->b), *ca);
        else
            l.add_term(e, 1);
    } else {
        l.add_term(e, 1);
    }
    l.prune();
    return l;
}

/** The inverse law of fusion maps: P(fo(x)) + fi(x) = x, where fo/fi invert the prefix sum P
 * (both with the same coefficient). Holds for every x in the fused loop, the pad segment
 * included (see AuxSpec); it is what turns a packed [batch, seq] offset back into the token. */
void cancel_fusion_maps(Linear &l) {
    for (size_t i = 0; i < l.terms.size(); i++) {
        const UFCall *p = l.terms[i].first.as<UFCall>();
        if (!p || p->args.size() != 1) continue;
        const UFCall *fo = p->args[0].as<UFCall>();
        const AuxKind *fo_kind = fo ? aux_kind_of(*fo->fn) : nullptr;
        std::optional<FusedLoopMap> fo_map = fo_kind ? fo_kind->fused_loop_map() : std::nullopt;
        if (!fo_map || !fo_map->outer || fo_map->prefix != p->fn.get()) continue;
        for (size_t j = 0; j < l.terms.size(); j++) {
            const UFCall *fi = l.terms[j].first.as<UFCall>();
            if (!fi || l.terms[j].second != l.terms[i].second) continue;
            const AuxKind *fi_kind = aux_kind_of(*fi->fn);
            std::optional<FusedLoopMap> fi_map = fi_kind ? fi_kind->fused_loop_map() : std::nullopt;
            if (!fi_map || fi_map->outer || fi_map->partner != fo->fn.get() || !equal(fi->args[0], fo->args[0]))
                continue;
            int64_t k = l.terms[i].second;
            Expr x = fo->args[0];
            l.terms[i].second = 0;
            l.terms[j].second = 0;
            l.prune();
            l.add(linearize(x), k);
            cancel_fusion_maps(l);
            return;
        }
    }
}

Expr rebuild(const Linear &l, Type t) {
    Expr out;
    auto term = [&](const Expr &a, int64_t k) { return k == 1 ? a : Mul::make(a, IntImm::make(k, t)); };
    for (auto &tk : l.terms) {
        if (tk.second > 0) out = out.defined() ? Add::make(out, term(tk.first, tk.second)) : term(tk.first, tk.second);
    }
    for (auto &tk : l.terms) {
        if (tk.second < 0) {
            out = out.defined() ? Sub::make(out, term(tk.first, -tk.second))
                                : Mul::make(tk.first, IntImm::make(tk.second, t));
        }
    }
    if (!out.defined()) return IntImm::make(l.c0, t);
    if (l.c0 > 0) out = Add::make(out, IntImm::make(l.c0, t));
    if (l.c0 < 0 && l.c0 != INT64_MIN) out = Sub::make(out, IntImm::make(-l.c0, t));
    return out;
}

bool is_float_const(const Expr &e, double *v) {
    if (const FloatImm *f = e.as<FloatImm>()) {
        *v = f->value;
        return true;
    }
    return false;
}

class Simplifier : public IRMutator {
public:
    using IRMutator::mutate;

protected:
    /** k*c*(x / c) + k*(x % c) is k*x (floor division and Euclidean modulo, c > 0), e.g. a flat
     * index split into a row and a column and joined again (a GPU lanes loop over a tile). */
    static void join_div_mod(Linear &l) {
        for (size_t i = 0; i < l.terms.size(); i++) {
            const Div *d = l.terms[i].first.as<Div>();
            const int64_t *c = d ? as_const_int(d->b) : nullptr;
            if (!c || *c <= 0 || l.terms[i].second == 0) continue;
            for (size_t j = 0; j < l.terms.size(); j++) {
                const Mod *m = l.terms[j].first.as<Mod>();
                const int64_t *cm = m ? as_const_int(m->b) : nullptr;
                int64_t kc;
                if (!cm || *cm != *c || !equal(m->a, d->a) || l.terms[j].second == 0 ||
                    __builtin_mul_overflow(l.terms[j].second, *c, &kc) || kc != l.terms[i].second)
                    continue;
                int64_t k = l.terms[j].second;
                Expr x = d->a;
                l.terms[i].second = 0;
                l.terms[j].second = 0;
                l.add(linearize(x), k);
                break;
            }
        }
        l.prune();
    }

    Expr linear_result(const Expr &e) {
        Linear l = linearize(e);
        join_div_mod(l);
        cancel_fusion_maps(l);
        if (l.overflow) return e;
        return rebuild(l, e.type());
    }

    Expr float_fold(const Expr &a, const Expr &b, double (*f)(double, double), const Expr &self_rebuilt) {
        double x, y;
        if (is_float_const(a, &x) && is_float_const(b, &y)) return FloatImm::make(f(x, y), a.type());
        return self_rebuilt;
    }

    Expr mutate_node(const Add *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (op->type.is_int()) return linear_result(Add::make(a, b));
        double v;
        if (is_float_const(b, &v) && v == 0) return a;
        if (is_float_const(a, &v) && v == 0) return b;
        return float_fold(
            a, b, [](double x, double y) { return x + y; }, Add::make(a, b));
    }
    Expr mutate_node(const Sub *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (op->type.is_int()) return linear_result(Sub::make(a, b));
        double v;
        if (is_float_const(b, &v) && v == 0) return a;
        return float_fold(
            a, b, [](double x, double y) { return x - y; }, Sub::make(a, b));
    }
    Expr mutate_node(const Mul *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (op->type.is_int()) {
            if (is_const(a, 0) || is_const(b, 0)) return make_zero(op->type);
            if (as_const_int(a) || as_const_int(b)) return linear_result(Mul::make(a, b));
            return Mul::make(a, b);
        }
        double v;
        if (is_float_const(b, &v) && v == 1) return a;
        if (is_float_const(a, &v) && v == 1) return b;
        return float_fold(
            a, b, [](double x, double y) { return x * y; }, Mul::make(a, b));
    }
    Expr mutate_node(const Div *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (!op->type.is_int())
            return float_fold(
                a, b, [](double x, double y) { return x / y; }, Div::make(a, b));
        const int64_t *cb = as_const_int(b);
        if (!cb || *cb <= 0) {
            const int64_t *ca = as_const_int(a);
            if (ca && cb && *cb != 0) return IntImm::make(div_floor(*ca, *cb), op->type);
            return Div::make(a, b);
        }
        int64_t c = *cb;
        if (c == 1) return a;
        Linear l = linearize(a);
        if (l.overflow) return Div::make(a, b);
        // (c*q + r) / c == q + r / c exactly for floor division.
        Linear q, r;
        q.c0 = div_floor(l.c0, c);
        r.c0 = mod_floor(l.c0, c);
        for (auto &t : l.terms) {
            if (t.second % c == 0)
                q.add_term(t.first, t.second / c);
            else
                r.add_term(t.first, t.second);
        }
        Expr qe = rebuild(q, op->type);
        if (r.terms.empty()) return qe; // r.c0 in [0, c) contributes 0
        Expr re = Div::make(rebuild(r, op->type), b);
        return linear_result(Add::make(qe, re));
    }
    Expr mutate_node(const Mod *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (!op->type.is_int()) return Mod::make(a, b);
        const int64_t *cb = as_const_int(b);
        const int64_t *ca = as_const_int(a);
        if (ca && cb && *cb != 0) return IntImm::make(mod_floor(*ca, *cb), op->type);
        if (!cb || *cb <= 0) return Mod::make(a, b);
        int64_t c = *cb;
        if (c == 1) return make_zero(op->type);
        Linear l = linearize(a);
        if (l.overflow) return Mod::make(a, b);
        Linear r;
        r.c0 = mod_floor(l.c0, c);
        for (auto &t : l.terms)
            if (t.second % c != 0) r.add_term(t.first, t.second);
        if (r.terms.empty()) return IntImm::make(r.c0, op->type);
        return Mod::make(rebuild(r, op->type), b);
    }
    template <typename Node, bool IsMin> Expr minmax(const Node *op) {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (equal(a, b)) return a;
        if (op->type.is_int()) {
            Linear d = linearize(Sub::make(a, b));
            if (!d.overflow && d.terms.empty()) return (d.c0 <= 0) == IsMin ? a : b;
        } else {
            double x, y;
            if (is_float_const(a, &x) && is_float_const(b, &y))
                return FloatImm::make(IsMin ? std::fmin(x, y) : std::fmax(x, y), op->type);
        }
        return Node::make(a, b);
    }
    Expr mutate_node(const Min *op, const Expr &) override { return minmax<Min, true>(op); }
    Expr mutate_node(const Max *op, const Expr &) override { return minmax<Max, false>(op); }

    /** Compare a and b when their difference is a constant (ints) or both are constants. */
    template <typename Node> Expr compare(const Node *op, bool (*cmp)(double, double)) {
        Expr a = mutate(op->a), b = mutate(op->b);
        if (a.type().is_int()) {
            Linear d = linearize(Sub::make(a, b));
            if (!d.overflow && d.terms.empty()) return IntImm::make(cmp((double)d.c0, 0.0) ? 1 : 0, Bool);
        } else {
            double x, y;
            if (is_float_const(a, &x) && is_float_const(b, &y)) return IntImm::make(cmp(x, y) ? 1 : 0, Bool);
        }
        return Node::make(a, b);
    }
    Expr mutate_node(const EQ *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x == y; });
    }
    Expr mutate_node(const NE *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x != y; });
    }
    Expr mutate_node(const LT *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x < y; });
    }
    Expr mutate_node(const LE *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x <= y; });
    }
    Expr mutate_node(const GT *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x > y; });
    }
    Expr mutate_node(const GE *op, const Expr &) override {
        return compare(op, [](double x, double y) { return x >= y; });
    }

    Expr mutate_node(const And *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        const int64_t *ca = as_const_int(a), *cb = as_const_int(b);
        if ((ca && !*ca) || (cb && !*cb)) return IntImm::make(0, Bool);
        if (ca) return b;
        if (cb) return a;
        return And::make(a, b);
    }
    Expr mutate_node(const Or *op, const Expr &) override {
        Expr a = mutate(op->a), b = mutate(op->b);
        const int64_t *ca = as_const_int(a), *cb = as_const_int(b);
        if ((ca && *ca) || (cb && *cb)) return IntImm::make(1, Bool);
        if (ca) return b;
        if (cb) return a;
        return Or::make(a, b);
    }
    Expr mutate_node(const Not *op, const Expr &) override {
        Expr a = mutate(op->a);
        if (const int64_t *c = as_const_int(a)) return IntImm::make(*c ? 0 : 1, Bool);
        return Not::make(a);
    }
    Expr mutate_node(const Select *op, const Expr &) override {
        Expr c = mutate(op->cond), t = mutate(op->t), f = mutate(op->f);
        if (const int64_t *cc = as_const_int(c)) return *cc ? t : f;
        if (equal(t, f)) return t;
        return Select::make(c, t, f);
    }
    Expr mutate_node(const Cast *op, const Expr &) override {
        Expr v = mutate(op->value);
        if (const int64_t *c = as_const_int(v)) {
            if (op->type.is_float()) return FloatImm::make((double)*c, op->type);
            if (op->type.is_int() && op->type.bits == 64) return IntImm::make(*c, op->type);
        }
        return Cast::make(op->type, v);
    }
};

} // namespace

Expr simplify(const Expr &e) {
    Simplifier s;
    return s.mutate(e);
}
Stmt simplify(const Stmt &st) {
    Simplifier s;
    return s.mutate(st);
}

} // namespace cora::ir
