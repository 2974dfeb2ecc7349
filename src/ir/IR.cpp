#include "ir/IR.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {
std::atomic<uint64_t> next_var_id{1};

// The factories check cora's own invariants (InternalError): the public API
// (IROperators.cpp, front/) has already reported a user's mistake as a CompileError.
Type arith_result(const Expr &a, const Expr &b, const char *op) {
    CORA_CHECK(a.defined() && b.defined(), "undefined operand of ", op);
    CORA_CHECK(a.type() == b.type(), "operands of '", op, "' have different types ", a.type().str(), " and ",
               b.type().str(), " (", to_string(a), ", ", to_string(b), ")");
    return a.type();
}
} // namespace

VarPtr make_var(const std::string &name, VarRole role, Type t) {
    return std::make_shared<VarNode>(name, next_var_id++, role, t);
}
Expr var_expr(const VarPtr &v) { return Expr(std::static_pointer_cast<const ExprNode>(v)); }

Expr IntImm::make(int64_t v, Type t) { return Expr(std::make_shared<IntImm>(v, t)); }
Expr FloatImm::make(double v, Type t) { return Expr(std::make_shared<FloatImm>(v, t)); }

#define CORA_ARITH_MAKE(N, SYM)                                                                                        \
    Expr N::make(Expr x, Expr y) {                                                                                     \
        Type t = arith_result(x, y, SYM);                                                                              \
        CORA_CHECK(!t.is_bool(), "arithmetic '", SYM, "' on boolean operands");                                        \
        return Expr(std::make_shared<N>(t, std::move(x), std::move(y)));                                               \
    }
CORA_ARITH_MAKE(Add, "+")
CORA_ARITH_MAKE(Sub, "-")
CORA_ARITH_MAKE(Mul, "*")
CORA_ARITH_MAKE(Div, "/")
CORA_ARITH_MAKE(Mod, "%")
CORA_ARITH_MAKE(Min, "min")
CORA_ARITH_MAKE(Max, "max")
#undef CORA_ARITH_MAKE

#define CORA_CMP_MAKE(N, SYM)                                                                                          \
    Expr N::make(Expr x, Expr y) {                                                                                     \
        arith_result(x, y, SYM);                                                                                       \
        return Expr(std::make_shared<N>(Bool, std::move(x), std::move(y)));                                            \
    }
CORA_CMP_MAKE(EQ, "==")
CORA_CMP_MAKE(NE, "!=")
CORA_CMP_MAKE(LT, "<")
CORA_CMP_MAKE(LE, "<=")
CORA_CMP_MAKE(GT, ">")
CORA_CMP_MAKE(GE, ">=")
#undef CORA_CMP_MAKE

#define CORA_LOGIC_MAKE(N, SYM)                                                                                        \
    Expr N::make(Expr x, Expr y) {                                                                                     \
        CORA_CHECK(x.type().is_bool() && y.type().is_bool(), "operands of '", SYM, "' must be boolean, got ",          \
                   x.type().str(), " and ", y.type().str());                                                           \
        return Expr(std::make_shared<N>(Bool, std::move(x), std::move(y)));                                            \
    }
CORA_LOGIC_MAKE(And, "&&")
CORA_LOGIC_MAKE(Or, "||")
#undef CORA_LOGIC_MAKE

Expr Not::make(Expr x) {
    CORA_CHECK(x.type().is_bool(), "operand of '!' must be boolean, got ", x.type().str());
    return Expr(std::make_shared<Not>(std::move(x)));
}

Expr Select::make(Expr c, Expr a, Expr b) {
    CORA_CHECK(c.type().is_bool(), "select condition must be boolean, got ", c.type().str(), " (", to_string(c), ")");
    Type t = arith_result(a, b, "select");
    return Expr(std::make_shared<Select>(t, std::move(c), std::move(a), std::move(b)));
}

Expr Cast::make(Type t, Expr v) {
    CORA_CHECK(v.defined(), "cast of undefined expression");
    if (v.type() == t) return v;
    return Expr(std::make_shared<Cast>(t, std::move(v)));
}

Expr Call::make(Type t, const std::string &name, std::vector<Expr> args) {
    for (const Expr &a : args)
        CORA_CHECK(a.type().is_float(), name, "() of a non-float argument ", to_string(a));
    return Expr(std::make_shared<Call>(t, name, std::move(args)));
}

Expr UFCall::make(std::shared_ptr<const UFNode> f, std::vector<Expr> args) {
    CORA_CHECK((int)args.size() == f->arity, "uninterpreted function '", f->name, "' takes ", f->arity,
               " argument(s), got ", args.size());
    for (const Expr &a : args)
        CORA_CHECK(a.defined() && a.type().is_int(), "argument of '", f->name, "' is not an integer index");
    return Expr(std::make_shared<UFCall>(std::move(f), std::move(args)));
}

Expr Access::make(std::shared_ptr<const TensorNode> t, std::vector<Expr> indices) {
    CORA_CHECK(indices.size() == t->storage.size(), "tensor '", t->name, "' has ", t->storage.size(),
               " dimension(s), accessed with ", indices.size(), " index(es)");
    for (size_t i = 0; i < indices.size(); i++)
        CORA_CHECK(indices[i].defined() && indices[i].type().is_int(), "index ", i, " of '", t->name,
                   "' is not an integer expression");
    Type ty = t->type.value_type();
    return Expr(std::make_shared<Access>(ty, std::move(t), std::move(indices)));
}

Expr Load::make(VarPtr buffer, Expr index) {
    Type t = buffer->type.value_type(); // float16 storage reads as float32
    return Expr(std::make_shared<Load>(t, std::move(buffer), std::move(index)));
}

Expr Reduce::make(ReduceOp op, VarPtr var, Expr extent, Expr body) {
    CORA_CHECK(extent.type().is_int(), "reduction extent over '", var->name, "' is not an integer");
    CORA_CHECK(!body.type().is_bool(), "reduction over '", var->name, "' of a boolean expression");
    return Expr(std::make_shared<Reduce>(op, std::move(var), std::move(extent), std::move(body)));
}

Stmt For::make(VarPtr v, Expr min, Expr extent, ForKind k, Stmt body) {
    return Stmt(std::make_shared<For>(std::move(v), std::move(min), std::move(extent), k, std::move(body)));
}
Stmt Provide::make(std::shared_ptr<const TensorNode> t, std::vector<Expr> i, Expr v) {
    return Stmt(std::make_shared<Provide>(std::move(t), std::move(i), std::move(v)));
}
Stmt Store::make(VarPtr b, Expr i, Expr v) {
    CORA_CHECK(b->type.value_type() == v.type(), "store of ", v.type().str(), " into buffer ", b->name, " of ",
               b->type.str());
    return Stmt(std::make_shared<Store>(std::move(b), std::move(i), std::move(v)));
}
Stmt Block::make(std::vector<Stmt> s) {
    std::vector<Stmt> flat;
    for (Stmt &x : s) {
        if (!x.defined()) continue;
        if (const Block *b = x.as<Block>()) {
            for (const Stmt &y : b->stmts)
                flat.push_back(y);
        } else {
            flat.push_back(std::move(x));
        }
    }
    if (flat.size() == 1) return flat[0];
    return Stmt(std::make_shared<Block>(std::move(flat)));
}
Stmt IfThenElse::make(Expr c, Stmt t, Stmt e) {
    return Stmt(std::make_shared<IfThenElse>(std::move(c), std::move(t), std::move(e)));
}
Stmt LetStmt::make(VarPtr v, Expr value, Stmt body) {
    return Stmt(std::make_shared<LetStmt>(std::move(v), std::move(value), std::move(body)));
}
Stmt LocalVar::make(VarPtr v, Expr init, Stmt body) {
    return Stmt(std::make_shared<LocalVar>(std::move(v), std::move(init), std::move(body)));
}
Stmt Assign::make(VarPtr v, Expr value) { return Stmt(std::make_shared<Assign>(std::move(v), std::move(value))); }
Stmt Allocate::make(VarPtr b, Expr size, Stmt body, MemoryType memory) {
    CORA_CHECK(memory == MemoryType::Heap || as_const_int(size), "a stack allocation needs a constant size");
    return Stmt(std::make_shared<Allocate>(std::move(b), std::move(size), std::move(body), memory));
}
Stmt LaunchKernel::make(std::string kernel, std::vector<Expr> grid, std::vector<Expr> threads, std::vector<VarPtr> args,
                        NarrowLaunch narrow) {
    CORA_CHECK(grid.size() == 3 && threads.size() == 3, "LaunchKernel needs three grid and three thread extents");
    return Stmt(std::make_shared<LaunchKernel>(std::move(kernel), std::move(grid), std::move(threads), std::move(args),
                                               std::move(narrow)));
}

const char *for_kind_name(ForKind k) {
    switch (k) {
    case ForKind::Serial: return "serial";
    case ForKind::Parallel: return "parallel";
    case ForKind::Vectorized: return "vectorized";
    case ForKind::Unrolled: return "unrolled";
    case ForKind::Dismantled: return "dismantled";
    case ForKind::GpuMma: return "gpu_mma";
    case ForKind::GpuBlockX: return "gpu_blocks.x";
    case ForKind::GpuBlockY: return "gpu_blocks.y";
    case ForKind::GpuBlockZ: return "gpu_blocks.z";
    case ForKind::GpuThreadX: return "gpu_threads.x";
    case ForKind::GpuThreadY: return "gpu_threads.y";
    case ForKind::GpuThreadZ: return "gpu_threads.z";
    case ForKind::GpuLanes: return "gpu_lanes";
    }
    return "?";
}

Stmt Assert::make(Expr c, std::vector<std::string> text, std::vector<Expr> values) {
    CORA_CHECK(text.size() == values.size() + 1, "Assert text/value count mismatch");
    return Stmt(std::make_shared<Assert>(std::move(c), std::move(text), std::move(values)));
}

const int64_t *as_const_int(const Expr &e) {
    const IntImm *i = e.as<IntImm>();
    return i ? &i->value : nullptr;
}
bool is_const(const Expr &e, int64_t v) {
    const int64_t *c = as_const_int(e);
    return c && *c == v;
}
Expr input_array_flat_index(const UFNode &fn, const std::vector<Expr> &args) {
    CORA_CHECK(fn.kind == UFKind::LengthArray && (int)args.size() == fn.arity, "input_array_flat_index of ", fn.name);
    if (fn.dims.empty()) return args[0];
    Expr flat = args[0];
    for (size_t k = 1; k < args.size(); k++)
        flat = Add::make(Mul::make(flat, fn.dims[k]), args[k]);
    return flat;
}

Expr input_array_extent(const UFNode &fn, size_t k) { return fn.dims.empty() ? fn.count : fn.dims.at(k); }

std::string input_array_title(const UFNode &fn) {
    return (fn.dims.empty() ? "length array '" : "shape tensor '") + fn.name + "'";
}

Expr make_zero(Type t) { return t.is_float() ? FloatImm::make(0.0, t) : IntImm::make(0, t); }
Expr make_one(Type t) { return t.is_float() ? FloatImm::make(1.0, t) : IntImm::make(1, t); }

Expr reduce_combine(ReduceOp op, const Expr &acc, const Expr &x) {
    switch (op) {
    case ReduceOp::Sum: return Add::make(acc, x);
    case ReduceOp::Max: return Max::make(acc, x);
    case ReduceOp::Min: return Min::make(acc, x);
    }
    CORA_CHECK(false, "unknown reduction");
    return Expr();
}

Expr reduce_identity(ReduceOp op, Type t) {
    switch (op) {
    case ReduceOp::Sum: return make_zero(t);
    case ReduceOp::Max:
        return t.is_float() ? FloatImm::make(-std::numeric_limits<double>::infinity(), t)
                            : IntImm::make(std::numeric_limits<int64_t>::min(), t);
    case ReduceOp::Min:
        return t.is_float() ? FloatImm::make(std::numeric_limits<double>::infinity(), t)
                            : IntImm::make(std::numeric_limits<int64_t>::max(), t);
    }
    return Expr();
}
const char *reduce_op_name(ReduceOp op) {
    switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    }
    return "?";
}

} // namespace cora::ir
