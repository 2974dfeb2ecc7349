/** \file Magnitude bounds of a device kernel's integers (IndexMagnitude.h). */
#include "analysis/IndexMagnitude.h"

#include <climits>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"

namespace cora::ir {

namespace {

constexpr int64_t kSaturated = INT64_MAX;

int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
int64_t magnitude_of(int64_t v) { return v == INT64_MIN ? kSaturated : (v < 0 ? -v : v); }

/** Magnitudes (non-negative Int64 expressions), folded when both sides are constants. */
Expr m_const(int64_t v) { return IntImm::make(v); }
Expr m_add(const Expr &a, const Expr &b) {
    const int64_t *x = as_const_int(a), *y = as_const_int(b);
    if (x && y) return m_const(sat_add(*x, *y));
    if (x && *x == 0) return b;
    if (y && *y == 0) return a;
    return Add::make(a, b);
}
Expr m_mul(const Expr &a, const Expr &b) {
    const int64_t *x = as_const_int(a), *y = as_const_int(b);
    if (x && y) return m_const(sat_mul(*x, *y));
    if ((x && *x == 0) || (y && *y == 0)) return m_const(0);
    if (x && *x == 1) return b;
    if (y && *y == 1) return a;
    return Mul::make(a, b);
}
Expr m_max(const Expr &a, const Expr &b) {
    const int64_t *x = as_const_int(a), *y = as_const_int(b);
    if (x && y) return m_const(std::max(*x, *y));
    if (x && *x == 0) return b;
    if (y && *y == 0) return a;
    if (equal(a, b)) return a;
    return Max::make(a, b);
}
/** |v| of a host scalar (an Int64 expression: the printers evaluate it overflow-checked). */
Expr m_abs(const Expr &v) {
    Expr wide = v.type() == Int64 ? v : Cast::make(Int64, v);
    return Max::make(wide, Sub::make(m_const(0), wide));
}

class MagnitudeWalker : public IRVisitor {
public:
    MagnitudeWalker(const LoweredFunc &k, const LaunchKernel &launch, const HostArrays &arrays, ParamBounds params)
        : launch_(launch), arrays_(arrays), params_(params) {
        for (const VarPtr &p : k.params)
            if (p->role != VarRole::Buffer && p->type.is_int()) vars_[p.get()] = host_scalar(var_expr(p));
    }

    KernelMagnitude result;

    using IRVisitor::visit;

    /** M(e) for an integer expression; records M of every Int64 value it computes. */
    Expr magnitude(const Expr &e) {
        Expr m = compute(e);
        if (e.type() == Int64) record(m);
        return m;
    }

private:
    void record(const Expr &m) {
        if (const int64_t *c = as_const_int(m)) {
            result.constant = std::max(result.constant, *c);
            return;
        }
        Expr s = simplify(m);
        if (const int64_t *c = as_const_int(s)) {
            result.constant = std::max(result.constant, *c);
            return;
        }
        for (const Expr &x : result.symbolic)
            if (equal(x, s)) return;
        result.symbolic.push_back(s);
    }
    /** |v| of a scalar the host holds: a param's declared range, else its value at the launch. */
    Expr host_scalar(const Expr &scalar) const {
        const Var *v = scalar.as<Var>();
        if (params_ == ParamBounds::Declared && v->role == VarRole::Param && v->min_value > INT64_MIN &&
            v->max_value < INT64_MAX)
            return m_const(std::max(magnitude_of(v->min_value), magnitude_of(v->max_value)));
        return m_abs(scalar);
    }
    /** A launch size (a host expression, positive at a launch): bounded like the kernel's
     * integers where it reads only params, else its value at the launch. */
    Expr launch_size(const Expr &size) {
        bool host_only = params_ == ParamBounds::Declared;
        visit_exprs(size, [&](const Expr &e) {
            if (const Var *v = e.as<Var>())
                host_only =
                    host_only && v->role == VarRole::Param && v->min_value > INT64_MIN && v->max_value < INT64_MAX;
            else if (e.as<Load>())
                host_only = false;
        });
        if (!host_only) return size.type() == Int64 ? size : Cast::make(Int64, size);
        std::map<const VarNode *, Expr> saved = vars_;
        visit_exprs(size, [&](const Expr &e) {
            if (const Var *v = e.as<Var>()) vars_[v] = host_scalar(e);
        });
        Expr m = compute(size);
        vars_ = std::move(saved);
        return m;
    }
    Expr unbounded() {
        result.bounded = false;
        return m_const(kSaturated);
    }
    /** Visits the integer subexpressions of a non-integer expression (a float's operands, a
     * comparison's sides, a load's index). */
    void visit_operands(const Expr &e) {
        for_each_child(e, [&](const Expr &c) {
            if (c.type().is_int())
                (void)magnitude(c);
            else
                visit_operands(c);
        });
    }

    Expr compute(const Expr &e) {
        if (!e.type().is_int()) {
            visit_operands(e);
            return m_const(0);
        }
        switch (e.get()->kind) {
        case NodeKind::IntImm: return m_const(magnitude_of(e.as<IntImm>()->value));
        case NodeKind::Var: {
            auto it = vars_.find(e.as<Var>());
            return it != vars_.end() ? it->second : unbounded();
        }
        case NodeKind::Add: return m_add(magnitude(e.as<Add>()->a), magnitude(e.as<Add>()->b));
        case NodeKind::Sub: return m_add(magnitude(e.as<Sub>()->a), magnitude(e.as<Sub>()->b));
        case NodeKind::Mul: return m_mul(magnitude(e.as<Mul>()->a), magnitude(e.as<Mul>()->b));
        case NodeKind::Div: {
            const Div *d = e.as<Div>();
            Expr a = magnitude(d->a);
            (void)magnitude(d->b);
            const int64_t *c = as_const_int(d->b);
            if (!c || *c == 0) return a; // |floor(a / b)| <= |a| for an integer b != 0
            if (const int64_t *x = as_const_int(a)) return m_const(*x / magnitude_of(*c) + 1);
            return Add::make(Div::make(a, m_const(magnitude_of(*c))), m_const(1));
        }
        case NodeKind::Mod: {
            const Mod *d = e.as<Mod>();
            (void)magnitude(d->a);
            Expr b = magnitude(d->b);
            const int64_t *c = as_const_int(d->b);
            if (c && *c != 0) return m_const(magnitude_of(*c) - 1);
            return b; // |a mod b| < |b|
        }
        case NodeKind::Min: return m_max(magnitude(e.as<Min>()->a), magnitude(e.as<Min>()->b));
        case NodeKind::Max: return m_max(magnitude(e.as<Max>()->a), magnitude(e.as<Max>()->b));
        case NodeKind::Select: {
            const Select *s = e.as<Select>();
            visit_operands(s->cond); // a boolean: its integer operands
            return m_max(magnitude(s->t), magnitude(s->f));
        }
        case NodeKind::Cast: {
            const Cast *c = e.as<Cast>();
            if (c->value.type().is_int()) return magnitude(c->value);
            visit_operands(e);
            // A float made an integer: bounded by the target type only.
            return e.type().bits >= 64 ? unbounded() : m_const(int64_t(1) << (e.type().bits - 1));
        }
        case NodeKind::Load: {
            const Load *l = e.as<Load>();
            (void)magnitude(l->index);
            auto it = arrays_.find(l->buffer.get());
            if (it == arrays_.end()) return unbounded(); // device memory: an intermediate, a shared array
            const UFNode *decl = it->second;
            if (decl && decl->min_value > INT64_MIN && decl->max_value < INT64_MAX)
                return m_const(std::max(magnitude_of(decl->min_value), magnitude_of(decl->max_value)));
            for (const NarrowLaunch::ArrayMagnitude &a : result.arrays)
                if (a.array == l->buffer) return var_expr(a.magnitude);
            VarPtr m = make_var(l->buffer->name + "_magnitude", VarRole::Local, Int64);
            result.arrays.push_back({m, l->buffer});
            return var_expr(m);
        }
        default: break;
        }
        // A comparison or a logical operator of integer type, a call, an access.
        visit_operands(e);
        return e.type().bits >= 64 ? unbounded() : m_const(int64_t(1) << (e.type().bits - 1));
    }

    void visit_node(const For *op) override {
        Expr mn = magnitude(op->min), ext = magnitude(op->extent);
        Expr var;
        if (is_gpu_bound(op->for_kind)) {
            const std::vector<Expr> &size = is_gpu_block(op->for_kind) ? launch_.grid : launch_.threads;
            var = m_add(mn, m_add(ext, launch_size(size[gpu_axis(op->for_kind)])));
        } else if (op->for_kind == ForKind::GpuLanes) {
            var = m_add(m_add(mn, ext), m_const(1024)); // a lane steps past the end by the block's size
        } else {
            var = m_add(mn, ext);
        }
        record(var);
        vars_[op->var.get()] = var;
        visit(op->body);
    }
    void visit_node(const LetStmt *op) override {
        vars_[op->var.get()] =
            op->value.type().is_int() ? magnitude(op->value) : (visit_operands(op->value), m_const(0));
        visit(op->body);
    }
    void visit_node(const LocalVar *op) override {
        if (op->var->type.is_int()) {
            (void)magnitude(op->init);
            vars_[op->var.get()] = unbounded(); // reassigned: no bound without a loop analysis
        } else {
            visit_operands(op->init);
        }
        visit(op->body);
    }
    void visit(const Expr &e) override {
        if (!e.defined()) return;
        if (e.type().is_int())
            (void)magnitude(e);
        else
            visit_operands(e);
    }

    const LaunchKernel &launch_;
    const HostArrays &arrays_;
    const ParamBounds params_;
    std::map<const VarNode *, Expr> vars_;
};

} // namespace

KernelMagnitude kernel_magnitude(const LoweredFunc &kernel, const LaunchKernel &launch, const HostArrays &arrays,
                                 ParamBounds params) {
    MagnitudeWalker w(kernel, launch, arrays, params);
    w.visit(kernel.body);
    KernelMagnitude m = std::move(w.result);
    if (!m.bounded || m.constant == kSaturated) m.symbolic.clear();
    // A bound that another exceeds by a constant (x + 4224 and x + 4351) says nothing more: the
    // host evaluates one per distinct term.
    std::vector<Expr> kept;
    for (size_t i = 0; i < m.symbolic.size(); i++) {
        bool dominated = false;
        for (size_t j = 0; j < m.symbolic.size() && !dominated; j++) {
            if (i == j) continue;
            const Expr gap = simplify(Sub::make(m.symbolic[j], m.symbolic[i]));
            const int64_t *c = as_const_int(gap);
            dominated = c && (*c > 0 || (*c == 0 && j < i)); // equal ones: keep the first
        }
        if (!dominated) kept.push_back(m.symbolic[i]);
    }
    m.symbolic = std::move(kept);
    return m;
}

} // namespace cora::ir
