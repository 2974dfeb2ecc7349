/** \file The public expression API (operators, math, reductions, Dim, Param, LengthArray).
 * Constants adapt to the other operand's type (so `2 * A(b, s)` is fp32); any other mix of
 * types is a CompileError asking for an explicit cast. Every user mistake is reported here, as a
 * CompileError; the IR factories behind these functions only check cora's own invariants. */
#include <atomic>
#include <cctype>
#include <cmath>

#include "ir/IR.h"
#include "ir/IRPrinter.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

namespace {
std::atomic<uint64_t> next_symbol_id{1};
} // namespace

uint64_t ir::new_symbol_id() { return next_symbol_id++; }

namespace {

Expr adapt_constant(const Expr &c, Type t) {
    if (const IntImm *i = c.as<IntImm>()) {
        return t.is_float() ? FloatImm::make((double)i->value, t) : IntImm::make(i->value, t);
    }
    if (const FloatImm *f = c.as<FloatImm>()) {
        if (t.is_float()) return FloatImm::make(f->value, t);
    }
    return c;
}

void require_defined(const Expr &e, const char *op) {
    if (!e.defined()) throw_compile_error("operand of '", op, "' is an undefined (default-constructed) Expr");
}

/** Brings a constant operand to the type of the other operand. */
void unify(Expr &a, Expr &b, const char *op) {
    require_defined(a, op);
    require_defined(b, op);
    if (a.type() == b.type()) return;
    bool ca = a.as<IntImm>() || a.as<FloatImm>(), cb = b.as<IntImm>() || b.as<FloatImm>();
    if (cb && !b.type().is_bool())
        b = adapt_constant(b, a.type());
    else if (ca && !a.type().is_bool())
        a = adapt_constant(a, b.type());
}

/** Operands of one type (after unify): the user must cast explicitly. */
void require_same_type(const Expr &a, const Expr &b, const char *op) {
    if (a.type() != b.type()) {
        auto api_name = [](Type t) { // the constant's name in the API: float32 -> Float32
            std::string n = t.str();
            n[0] = (char)std::toupper((unsigned char)n[0]);
            return n;
        };
        throw_compile_error("operands of '", op, "' have different types ", a.type().str(), " and ", b.type().str(),
                            " (", to_string(a), ", ", to_string(b), "); convert one of them: cast(", api_name(a.type()),
                            ", e) or cast(", api_name(b.type()), ", e)");
    }
}

Expr arithmetic(Expr a, Expr b, const char *op, Expr (*make)(Expr, Expr)) {
    unify(a, b, op);
    require_same_type(a, b, op);
    if (a.type().is_bool()) throw_compile_error("arithmetic '", op, "' on boolean operands");
    return make(a, b);
}
Expr comparison(Expr a, Expr b, const char *op, Expr (*make)(Expr, Expr)) {
    unify(a, b, op);
    require_same_type(a, b, op);
    return make(a, b);
}
Expr logical(const Expr &a, const Expr &b, const char *op, Expr (*make)(Expr, Expr)) {
    require_defined(a, op);
    require_defined(b, op);
    if (!a.type().is_bool() || !b.type().is_bool())
        throw_compile_error("operands of '", op, "' must be boolean, got ", a.type().str(), " and ", b.type().str());
    return make(a, b);
}

Expr float_intrinsic(const char *name, const Expr &e) {
    if (!e.defined()) throw_compile_error(name, "() of an undefined (default-constructed) Expr");
    Expr x = e;
    if (const IntImm *i = e.as<IntImm>()) x = FloatImm::make((double)i->value, Float32);
    if (!x.type().is_float())
        throw_compile_error(name, "() needs a floating-point argument, got ", x.type().str(), " (", to_string(x),
                            "); cast it first");
    return Call::make(x.type(), name, {x});
}

Expr make_reduce(ReduceOp op, const Dim &k, const Expr &extent, const Expr &body) {
    require_defined(extent, "reduction extent");
    require_defined(body, "reduction");
    if (!extent.type().is_int()) throw_compile_error("reduction extent over '", k.name(), "' must be an integer");
    if (body.type().is_bool()) throw_compile_error("reduction over '", k.name(), "' of a boolean expression");
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
    case Code::Float: return bits == 64 ? "double" : bits == 16 ? "uint16_t" : "float";
    case Code::Bool: return "bool";
    }
    return "?";
}

Expr::Expr(int v) : node_(IntImm::make(v).ptr()) {}
Expr::Expr(int64_t v) : node_(IntImm::make(v).ptr()) {}
Expr::Expr(float v) : node_(FloatImm::make(v, Float32).ptr()) {}
Expr::Expr(double v) : node_(FloatImm::make(v, Float32).ptr()) {}
Type Expr::type() const {
    CORA_CHECK(defined(), "type() of an undefined expression");
    return node_->type;
}

Expr operator+(const Expr &a, const Expr &b) { return arithmetic(a, b, "+", Add::make); }
Expr operator-(const Expr &a, const Expr &b) { return arithmetic(a, b, "-", Sub::make); }
Expr operator*(const Expr &a, const Expr &b) { return arithmetic(a, b, "*", Mul::make); }
Expr operator/(const Expr &a, const Expr &b) { return arithmetic(a, b, "/", Div::make); }
Expr operator%(const Expr &a, const Expr &b) { return arithmetic(a, b, "%", Mod::make); }
Expr min(const Expr &a, const Expr &b) { return arithmetic(a, b, "min", Min::make); }
Expr max(const Expr &a, const Expr &b) { return arithmetic(a, b, "max", Max::make); }
Expr operator==(const Expr &a, const Expr &b) { return comparison(a, b, "==", EQ::make); }
Expr operator!=(const Expr &a, const Expr &b) { return comparison(a, b, "!=", NE::make); }
Expr operator<(const Expr &a, const Expr &b) { return comparison(a, b, "<", LT::make); }
Expr operator<=(const Expr &a, const Expr &b) { return comparison(a, b, "<=", LE::make); }
Expr operator>(const Expr &a, const Expr &b) { return comparison(a, b, ">", GT::make); }
Expr operator>=(const Expr &a, const Expr &b) { return comparison(a, b, ">=", GE::make); }

Expr operator&&(const Expr &a, const Expr &b) { return logical(a, b, "&&", And::make); }
Expr operator||(const Expr &a, const Expr &b) { return logical(a, b, "||", Or::make); }
Expr operator!(const Expr &a) {
    require_defined(a, "!");
    if (!a.type().is_bool()) throw_compile_error("operand of '!' must be boolean, got ", a.type().str());
    return Not::make(a);
}
Expr operator-(const Expr &a) {
    require_defined(a, "-");
    return make_zero(a.type()) - a;
}

Expr select(const Expr &cond, const Expr &t, const Expr &f) {
    require_defined(cond, "select");
    if (!cond.type().is_bool())
        throw_compile_error("select condition must be boolean, got ", cond.type().str(), " (", to_string(cond), ")");
    Expr x = t, y = f;
    unify(x, y, "select");
    require_same_type(x, y, "select");
    return Select::make(cond, x, y);
}
Expr cast(Type t, const Expr &e) {
    require_defined(e, "cast");
    if (t.is_storage_only())
        throw_compile_error("cast to ", t.str(), " of ", print(e), ": float16 is a storage type; values are float32, ",
                            "and storing one into a float16 tensor rounds it");
    return Cast::make(t, e);
}
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
LengthArray LengthArray::constant(const std::string &name, const std::vector<int32_t> &values, int64_t min_value,
                                  int64_t max_value) {
    LengthArray la(name, IntImm::make((int64_t)values.size()), min_value, max_value);
    auto u = std::make_shared<UFNode>(*la.node_);
    auto v = std::make_shared<std::vector<int64_t>>(values.begin(), values.end());
    for (size_t i = 0; i < v->size(); i++)
        if ((*v)[i] < min_value || (*v)[i] > max_value)
            throw_compile_error("LengthArray '", name, "': constant value ", (*v)[i], " at index ", i,
                                " is outside its declared range [", min_value, ", ", max_value, "]");
    u->static_values = std::move(v);
    LengthArray out;
    out.node_ = std::move(u);
    return out;
}
const std::vector<int64_t> *LengthArray::static_values() const { return node_->static_values.get(); }
const std::string &LengthArray::name() const { return node_->name; }
Expr LengthArray::count() const { return node_->count; }
int64_t LengthArray::min_value() const { return node_->min_value; }
int64_t LengthArray::max_value() const { return node_->max_value; }
// --- ShapeTensor -------------------------------------------------------------------------------

ShapeTensor::ShapeTensor(const std::string &name, std::vector<Expr> dims, int64_t min_value, int64_t max_value) {
    if (name.empty()) throw_compile_error("a ShapeTensor needs a non-empty name");
    if (dims.empty()) throw_compile_error("ShapeTensor '", name, "' needs at least one dim");
    if (min_value > max_value)
        throw_compile_error("ShapeTensor '", name, "': empty range [", min_value, ", ", max_value, "]");
    if (min_value < INT32_MIN || max_value > INT32_MAX)
        throw_compile_error("ShapeTensor '", name, "': range [", min_value, ", ", max_value, "] does not fit int32");
    Expr count;
    for (size_t k = 0; k < dims.size(); k++) {
        if (!dims[k].defined() || !dims[k].type().is_int())
            throw_compile_error("ShapeTensor '", name, "': dim ", k, " must be an integer expression");
        count = count.defined() ? Mul::make(count, dims[k]) : dims[k];
    }
    auto u = std::make_shared<UFNode>();
    u->name = name;
    u->id = next_symbol_id++;
    u->kind = UFKind::LengthArray;
    u->arity = (int)dims.size();
    u->min_value = min_value;
    u->max_value = max_value;
    u->count = count;
    u->dims = std::move(dims);
    node_ = u;
}
const std::string &ShapeTensor::name() const { return node_->name; }
const std::vector<Expr> &ShapeTensor::dims() const { return node_->dims; }
Expr ShapeTensor::count() const { return node_->count; }
int64_t ShapeTensor::min_value() const { return node_->min_value; }
int64_t ShapeTensor::max_value() const { return node_->max_value; }
Expr ShapeTensor::operator()(const std::vector<Expr> &index) const {
    if ((int)index.size() != node_->arity)
        throw_compile_error("ShapeTensor '", node_->name, "' has ", node_->arity, " dims, indexed with ", index.size());
    for (size_t k = 0; k < index.size(); k++)
        if (!index[k].defined() || !index[k].type().is_int())
            throw_compile_error("index ", k, " of '", node_->name, "' must be an integer expression, got ",
                                index[k].defined() ? index[k].type().str() : std::string("an undefined Expr"));
    return UFCall::make(node_, index);
}

Expr LengthArray::operator()(const Expr &index) const {
    if (!index.defined() || !index.type().is_int())
        throw_compile_error("argument of '", node_->name, "' must be an integer index, got ",
                            index.defined() ? index.type().str() : std::string("an undefined Expr"));
    return UFCall::make(node_, {index});
}

} // namespace cora
