#include "analysis/Interpreter.h"

#include <cmath>
#include <optional>

#include "analysis/IntMath.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

namespace {
[[noreturn]] void cannot(const Expr &e, const char *why) {
    throw InternalError(concat("interpreter: cannot evaluate ", print(e), ": ", why));
}
/** Sizes and offsets come from user params and lengths: a result that does not fit in 64 bits is
 * bad input, reported instead of wrapping around into a small size that checks would accept. */
[[noreturn]] void overflow(const Expr &e, int64_t a, int64_t b) {
    throw RuntimeError(concat("integer overflow: ", print(e), " with operands ", a, " and ", b,
                              " does not fit in 64 bits (are the params or lengths too large?)"));
}
/** The node of `e` as a T, its kind already switched on (Expr::as checks it again; it was not
 * inlined under the sanitizers, where it cost a tenth of the reference evaluator's time). */
template <typename T> const T *node(const Expr &e) { return static_cast<const T *>(e.get()); }

} // namespace

int64_t Interpreter::eval_int(const Expr &e) {
    switch (e.get()->kind) {
    case NodeKind::IntImm: return node<IntImm>(e)->value;
    case NodeKind::Var: {
        auto it = ints.find(node<VarNode>(e));
        if (it == ints.end()) {
            if (node<VarNode>(e)->role == VarRole::Param)
                throw RuntimeError("param '" + node<VarNode>(e)->name + "' is not set in the RaggedShape");
            cannot(e, "unbound variable");
        }
        return it->second;
    }
    case NodeKind::Add: {
        int64_t a = eval_int(node<Add>(e)->a), b = eval_int(node<Add>(e)->b), r;
        if (__builtin_add_overflow(a, b, &r)) overflow(e, a, b);
        return r;
    }
    case NodeKind::Sub: {
        int64_t a = eval_int(node<Sub>(e)->a), b = eval_int(node<Sub>(e)->b), r;
        if (__builtin_sub_overflow(a, b, &r)) overflow(e, a, b);
        return r;
    }
    case NodeKind::Mul: {
        int64_t a = eval_int(node<Mul>(e)->a), b = eval_int(node<Mul>(e)->b), r;
        if (__builtin_mul_overflow(a, b, &r)) overflow(e, a, b);
        return r;
    }
    case NodeKind::Div: {
        int64_t b = eval_int(node<Div>(e)->b);
        if (b == 0) cannot(e, "division by zero");
        int64_t a = eval_int(node<Div>(e)->a);
        if (a == INT64_MIN && b == -1) overflow(e, a, b);
        return div_floor(a, b);
    }
    case NodeKind::Mod: {
        int64_t b = eval_int(node<Mod>(e)->b);
        if (b == 0) cannot(e, "modulo by zero");
        if (b == -1) return 0; // INT64_MIN % -1 traps on x86
        return mod_floor(eval_int(node<Mod>(e)->a), b);
    }
    case NodeKind::Min: return std::min(eval_int(node<Min>(e)->a), eval_int(node<Min>(e)->b));
    case NodeKind::Max: return std::max(eval_int(node<Max>(e)->a), eval_int(node<Max>(e)->b));
    case NodeKind::Select: {
        const Select *s = node<Select>(e);
        return eval_bool(s->cond) ? eval_int(s->t) : eval_int(s->f);
    }
    case NodeKind::Cast: {
        const Cast *c = node<Cast>(e);
        if (c->value.type().is_float()) {
            double v = eval_float(c->value);
            // Out of range (or NaN) the conversion is undefined: report it instead.
            if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
                throw RuntimeError(concat("conversion of ", v, " to an integer overflows in ", print(e)));
            return (int64_t)v;
        }
        if (c->value.type().is_bool()) return eval_bool(c->value) ? 1 : 0;
        int64_t v = eval_int(c->value);
        return c->type.bits == 32 ? (int64_t)(int32_t)v : v;
    }
    case NodeKind::UFCall: {
        const UFCall *u = node<UFCall>(e);
        if (u->fn->kind == UFKind::LengthArray) {
            if (!length_value) cannot(e, "no length arrays bound");
            if (u->fn->dims.empty()) return length_value(u->fn.get(), eval_int(u->args.at(0)));
            // A shape tensor: its row-major element, each index checked against its dim (a flat
            // index in range could still be the wrong element).
            int64_t flat = 0;
            for (size_t k = 0; k < u->args.size(); k++) {
                int64_t i = eval_int(u->args[k]), extent = eval_int(u->fn->dims[k]);
                if (i < 0 || i >= extent)
                    throw RuntimeError(concat(input_array_title(*u->fn), ": index ", i, " of dim ", k,
                                              " is outside [0, ", extent, ") in ", print(e)));
                flat = flat * extent + i;
            }
            return length_value(u->fn.get(), flat);
        }
        std::vector<int64_t> args;
        for (const Expr &a : u->args)
            args.push_back(eval_int(a));
        if (!aux_value) cannot(e, "no aux arrays bound");
        return aux_value(u->fn.get(), args);
    }
    case NodeKind::Load: {
        const Load *l = node<Load>(e);
        auto it = int_buffers.find(l->buffer.get());
        if (it == int_buffers.end()) cannot(e, "no integer buffer bound");
        int64_t i = eval_int(l->index);
        if (i < 0 || i >= (int64_t)it->second->size())
            throw InternalError(concat("interpreter: ", print(e), " reads index ", i, " of a buffer of ",
                                       it->second->size(), " elements"));
        return (*it->second)[(size_t)i];
    }
    case NodeKind::Access: return (int64_t)eval_float(e);
    case NodeKind::Reduce: return (int64_t)eval_float(e);
    default:
        if (e.type().is_bool()) return eval_bool(e) ? 1 : 0;
        cannot(e, "not an integer expression");
    }
}

bool Interpreter::eval_bool(const Expr &e) {
    auto cmp = [&](const Expr &a, const Expr &b, auto op) -> bool {
        if (a.get()->type.is_float()) return op(eval_float(a), eval_float(b));
        return op(eval_int(a), eval_int(b));
    };
    switch (e.get()->kind) {
    case NodeKind::IntImm: return node<IntImm>(e)->value != 0;
    case NodeKind::EQ: return cmp(node<EQ>(e)->a, node<EQ>(e)->b, [](auto x, auto y) { return x == y; });
    case NodeKind::NE: return cmp(node<NE>(e)->a, node<NE>(e)->b, [](auto x, auto y) { return x != y; });
    case NodeKind::LT: return cmp(node<LT>(e)->a, node<LT>(e)->b, [](auto x, auto y) { return x < y; });
    case NodeKind::LE: return cmp(node<LE>(e)->a, node<LE>(e)->b, [](auto x, auto y) { return x <= y; });
    case NodeKind::GT: return cmp(node<GT>(e)->a, node<GT>(e)->b, [](auto x, auto y) { return x > y; });
    case NodeKind::GE: return cmp(node<GE>(e)->a, node<GE>(e)->b, [](auto x, auto y) { return x >= y; });
    case NodeKind::And: return eval_bool(node<And>(e)->a) && eval_bool(node<And>(e)->b);
    case NodeKind::Or: return eval_bool(node<Or>(e)->a) || eval_bool(node<Or>(e)->b);
    case NodeKind::Not: return !eval_bool(node<Not>(e)->a);
    case NodeKind::Select: {
        const Select *s = node<Select>(e);
        return eval_bool(s->cond) ? eval_bool(s->t) : eval_bool(s->f);
    }
    case NodeKind::Cast: {
        const Cast *c = node<Cast>(e);
        return c->value.type().is_float() ? eval_float(c->value) != 0 : eval_int(c->value) != 0;
    }
    default: cannot(e, "not a boolean expression");
    }
}

double Interpreter::eval_float(const Expr &e) {
    // Tensor reads and reductions of any type are evaluated here (eval_int converts their value):
    // an integer tensor read as an index (Tensor::index_range) or an integer reduction.
    const ExprNode *n = e.get();
    const bool read_or_reduce = n->kind == NodeKind::Access || n->kind == NodeKind::Reduce;
    if (!n->type.is_float() && !read_or_reduce)
        return n->type.is_bool() ? (eval_bool(e) ? 1.0 : 0.0) : (double)eval_int(e);
    switch (n->kind) {
    case NodeKind::FloatImm: return node<FloatImm>(e)->value;
    case NodeKind::Add: return eval_float(node<Add>(e)->a) + eval_float(node<Add>(e)->b);
    case NodeKind::Sub: return eval_float(node<Sub>(e)->a) - eval_float(node<Sub>(e)->b);
    case NodeKind::Mul: return eval_float(node<Mul>(e)->a) * eval_float(node<Mul>(e)->b);
    case NodeKind::Div: return eval_float(node<Div>(e)->a) / eval_float(node<Div>(e)->b);
    case NodeKind::Mod: {
        double a = eval_float(node<Mod>(e)->a), b = eval_float(node<Mod>(e)->b);
        return a - b * std::floor(a / b);
    }
    case NodeKind::Min: return std::fmin(eval_float(node<Min>(e)->a), eval_float(node<Min>(e)->b));
    case NodeKind::Max: return std::fmax(eval_float(node<Max>(e)->a), eval_float(node<Max>(e)->b));
    case NodeKind::Select: {
        const Select *s = node<Select>(e);
        return eval_bool(s->cond) ? eval_float(s->t) : eval_float(s->f);
    }
    case NodeKind::Cast: return eval_float(node<Cast>(e)->value);
    case NodeKind::Call: {
        const Call *c = node<Call>(e);
        double x = eval_float(c->args[0]);
        if (c->name == "exp") return std::exp(x);
        if (c->name == "log") return std::log(x);
        if (c->name == "sqrt") return std::sqrt(x);
        if (c->name == "tanh") return std::tanh(x);
        if (c->name == "erf") return std::erf(x);
        if (c->name == "abs") return std::fabs(x);
        cannot(e, "unknown intrinsic");
    }
    case NodeKind::Access: {
        const Access *a = node<Access>(e);
        if (!tensor_value) cannot(e, "no tensors bound");
        const size_t n = a->indices.size();
        int64_t small[8];
        std::vector<int64_t> large(n > 8 ? n : 0);
        int64_t *idx = n > 8 ? large.data() : small;
        for (size_t k = 0; k < n; k++)
            idx[k] = eval_int(a->indices[k]);
        return tensor_value(a->tensor.get(), idx, n);
    }
    case NodeKind::Reduce: {
        const Reduce *r = node<Reduce>(e);
        int64_t n = eval_int(r->extent);
        double acc = r->op == ReduceOp::Sum ? 0.0 : (r->op == ReduceOp::Max ? -INFINITY : INFINITY);
        auto found = ints.find(r->var.get());
        auto saved = found != ints.end() ? std::optional<int64_t>(found->second) : std::nullopt;
        int64_t &slot = ints[r->var.get()]; // entries stay put while the body binds others (VarValues)
        for (int64_t k = 0; k < n; k++) {
            slot = k;
            double v = eval_float(r->body);
            acc = r->op == ReduceOp::Sum ? acc + v : (r->op == ReduceOp::Max ? std::fmax(acc, v) : std::fmin(acc, v));
        }
        if (saved)
            ints[r->var.get()] = *saved;
        else
            ints.erase(r->var.get());
        return acc;
    }
    default: cannot(e, "not a floating-point expression");
    }
}

double Interpreter::eval(const Expr &e) { return eval_float(e); }

void Interpreter::for_each_index(const Layout &layout, const std::function<void(const std::vector<int64_t> &)> &f) {
    std::vector<int64_t> idx(layout.size());
    std::function<void(size_t)> rec = [&](size_t k) {
        if (k == layout.size()) {
            f(idx);
            return;
        }
        int64_t n = eval_int(layout[k].extent);
        const VarNode *v = layout[k].dim->var.get();
        for (int64_t i = 0; i < n; i++) {
            idx[k] = i;
            ints[v] = i;
            rec(k + 1);
        }
        ints.erase(v);
    };
    rec(0);
}

} // namespace cora::ir
