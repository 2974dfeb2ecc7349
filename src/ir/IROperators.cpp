/** \file The public expression API (operators, math, reductions, Dim, Param, LengthArray).
 * Constants adapt to the other operand's type (so `2 * A(b, s)` is fp32); any other mix of
 * types is a CompileError asking for an explicit cast. */
#include <atomic>
#include <cmath>

#include "ir/IR.h"
#include "ir/IRPrinter.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

namespace {
std::atomic<uint64_t> next_symbol_id{1};

Expr adapt_constant(const Expr &c, Type t) {
    if (const IntImm *i = c.as<IntImm>()) {
        return t.is_float() ? FloatImm::make((double)i->value, t) : IntImm::make(i->value, t);
    }
    if (const FloatImm *f = c.as<FloatImm>()) {
        if (t.is_float()) return FloatImm::make(f->value, t);
    }
    return c;
}

/** Brings a constant operand to the type of the other operand. */
void unify(Expr &a, Expr &b) {
    internal_check(a.defined() && b.defined(), "operation on an undefined expression");
    if (a.type() == b.type()) return;
    bool ca = a.as<IntImm>() || a.as<FloatImm>(), cb = b.as<IntImm>() || b.as<FloatImm>();
    if (cb && !b.type().is_bool())
        b = adapt_constant(b, a.type());
    else if (ca && !a.type().is_bool())
        a = adapt_constant(a, b.type());
}

Expr float_intrinsic(const char *name, const Expr &e) {
    internal_check(e.defined(), name, "() of an undefined expression");
    Expr x = e;
    if (const IntImm *i = e.as<IntImm>()) x = FloatImm::make((double)i->value, Float32);
    return Call::make(x.type(), name, {x});
}

Expr make_reduce(ReduceOp op, const Dim &k, const Expr &extent, const Expr &body) {
    return Reduce::make(op, k.node()->var, extent, body);
}
} // namespace

std::string Type::str() const {
    switch (code) {
    case Code::Int: return "int" + std::to_string(bits);
    case Code::Float: return "float" + std::to_string(bits);
    case Code::Bool: return "bool";
    }
    return "?";
}
std::string Type::c_name() const {
    switch (code) {
    case Code::Int: return "int" + std::to_string(bits) + "_t";
    case Code::Float: return bits == 64 ? "double" : "float";
    case Code::Bool: return "bool";
    }
    return "?";
}

Expr::Expr(int v) : node_(IntImm::make(v).ptr()) {}
Expr::Expr(int64_t v) : node_(IntImm::make(v).ptr()) {}
Expr::Expr(float v) : node_(FloatImm::make(v, Float32).ptr()) {}
Expr::Expr(double v) : node_(FloatImm::make(v, Float32).ptr()) {}
Type Expr::type() const {
    internal_check(defined(), "type() of an undefined expression");
    return node_->type;
}

#define CORA_PUBLIC_BINARY(OP, NODE)                                                                                   \
    Expr OP(const Expr &a, const Expr &b) {                                                                            \
        Expr x = a, y = b;                                                                                             \
        unify(x, y);                                                                                                   \
        return NODE::make(x, y);                                                                                       \
    }
CORA_PUBLIC_BINARY(operator+, Add)
CORA_PUBLIC_BINARY(operator-, Sub)
CORA_PUBLIC_BINARY(operator*, Mul)
CORA_PUBLIC_BINARY(operator/, Div)
CORA_PUBLIC_BINARY(operator%, Mod)
CORA_PUBLIC_BINARY(operator==, EQ)
CORA_PUBLIC_BINARY(operator!=, NE)
CORA_PUBLIC_BINARY(operator<, LT)
CORA_PUBLIC_BINARY(operator<=, LE)
CORA_PUBLIC_BINARY(operator>, GT)
CORA_PUBLIC_BINARY(operator>=, GE)
CORA_PUBLIC_BINARY(min, Min)
CORA_PUBLIC_BINARY(max, Max)
#undef CORA_PUBLIC_BINARY

Expr operator&&(const Expr &a, const Expr &b) { return And::make(a, b); }
Expr operator||(const Expr &a, const Expr &b) { return Or::make(a, b); }
Expr operator!(const Expr &a) { return Not::make(a); }
Expr operator-(const Expr &a) { return make_zero(a.type()) - a; }

Expr select(const Expr &cond, const Expr &t, const Expr &f) {
    Expr x = t, y = f;
    unify(x, y);
    return Select::make(cond, x, y);
}
Expr cast(Type t, const Expr &e) { return Cast::make(t, e); }
Expr exp(const Expr &e) { return float_intrinsic("exp", e); }
Expr log(const Expr &e) { return float_intrinsic("log", e); }
Expr sqrt(const Expr &e) { return float_intrinsic("sqrt", e); }
Expr tanh(const Expr &e) { return float_intrinsic("tanh", e); }
Expr erf(const Expr &e) { return float_intrinsic("erf", e); }
Expr abs(const Expr &e) {
    if (e.type().is_int()) return select(e < 0, -e, e);
    return float_intrinsic("abs", e);
}

Expr ceil_mult(const Expr &e, int64_t m) {
    if (m <= 0) throw_compile_error("ceil_mult: multiple must be positive, got ", m);
    return ((e + (m - 1)) / m) * m;
}
Expr floor_mult(const Expr &e, int64_t m) {
    if (m <= 0) throw_compile_error("floor_mult: multiple must be positive, got ", m);
    return (e / m) * m;
}
Expr ceil_div(const Expr &e, int64_t m) {
    if (m <= 0) throw_compile_error("ceil_div: divisor must be positive, got ", m);
    return (e + (m - 1)) / m;
}

Expr sum(const Dim &k, const Expr &extent, const Expr &body) { return make_reduce(ReduceOp::Sum, k, extent, body); }
Expr maximum(const Dim &k, const Expr &extent, const Expr &body) { return make_reduce(ReduceOp::Max, k, extent, body); }
Expr minimum(const Dim &k, const Expr &extent, const Expr &body) { return make_reduce(ReduceOp::Min, k, extent, body); }

std::string to_string(const Expr &e) { return ir::print(e); }

// --- Dim ---------------------------------------------------------------------------------------

Dim::Dim(const std::string &name) {
    if (name.empty()) throw_compile_error("a Dim needs a non-empty name");
    auto d = std::make_shared<DimNode>();
    d->name = name;
    d->id = next_symbol_id++;
    auto v = std::make_shared<VarNode>(name, d->id, VarRole::Index, Int64);
    v->dim = d.get();
    d->var = v;
    node_ = d;
}
const std::string &Dim::name() const { return node_->name; }
Expr Dim::var() const { return var_expr(node_->var); }

// --- Param -------------------------------------------------------------------------------------

Param::Param(const std::string &name, int64_t min_value, int64_t max_value) {
    if (name.empty()) throw_compile_error("a Param needs a non-empty name");
    if (min_value > max_value)
        throw_compile_error("Param '", name, "': empty range [", min_value, ", ", max_value, "]");
    auto v = std::make_shared<VarNode>(name, next_symbol_id++, VarRole::Param, Int64);
    v->min_value = min_value;
    v->max_value = max_value;
    var_ = var_expr(v);
}
const std::string &Param::name() const { return var_.as<VarNode>()->name; }
int64_t Param::min_value() const { return var_.as<VarNode>()->min_value; }
int64_t Param::max_value() const { return var_.as<VarNode>()->max_value; }

// --- LengthArray -------------------------------------------------------------------------------

LengthArray::LengthArray(const std::string &name, Expr count, int64_t min_value, int64_t max_value) {
    if (name.empty()) throw_compile_error("a LengthArray needs a non-empty name");
    if (min_value > max_value)
        throw_compile_error("LengthArray '", name, "': empty range [", min_value, ", ", max_value, "]");
    if (min_value < INT32_MIN || max_value > INT32_MAX)
        throw_compile_error("LengthArray '", name, "': range [", min_value, ", ", max_value, "] does not fit int32");
    if (!count.defined() || !count.type().is_int())
        throw_compile_error("LengthArray '", name, "': count must be an integer expression");
    auto u = std::make_shared<UFNode>();
    u->name = name;
    u->id = next_symbol_id++;
    u->kind = UFKind::LengthArray;
    u->arity = 1;
    u->min_value = min_value;
    u->max_value = max_value;
    u->count = count;
    node_ = u;
}
const std::string &LengthArray::name() const { return node_->name; }
Expr LengthArray::count() const { return node_->count; }
int64_t LengthArray::min_value() const { return node_->min_value; }
int64_t LengthArray::max_value() const { return node_->max_value; }
Expr LengthArray::operator()(const Expr &index) const { return UFCall::make(node_, {index}); }

} // namespace cora
