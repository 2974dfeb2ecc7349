/** \file The IR: expression and statement nodes, generated from one list of node kinds.
 *
 * Semantics (what every pass may assume):
 * - Nodes are immutable and shared; rewrite by building new nodes (see IRMutator).
 * - Integer arithmetic is 64-bit. `/` is floor division and `%` floor modulo (sign of the divisor), both for a
 *   non-zero divisor; the code generator and the interpreter implement exactly that.
 * - A Var is identified by its node, not its name. A Dim owns exactly one index Var.
 * - UFCall applies an uninterpreted function (length array, prefix-sum aux array) known to the
 *   compiler by name, arity and value range. Access reads a tensor by multi-dimensional index
 *   (before storage lowering); Load/Store use a flat index into a buffer variable (after).
 * - Reduce is an expression; LowerReductions turns it into a local accumulator loop. */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cora/Expr.h"

namespace cora::ir {

#define CORA_EXPR_NODES(X)                                                                                             \
    X(IntImm)                                                                                                          \
    X(FloatImm)                                                                                                        \
    X(Var)                                                                                                             \
    X(Add)                                                                                                             \
    X(Sub)                                                                                                             \
    X(Mul)                                                                                                             \
    X(Div)                                                                                                             \
    X(Mod)                                                                                                             \
    X(Min)                                                                                                             \
    X(Max)                                                                                                             \
    X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or) X(Not) X(Select) X(Cast) X(Call) X(UFCall) X(Access) X(Load)      \
        X(Reduce)

#define CORA_STMT_NODES(X)                                                                                             \
    X(For)                                                                                                             \
    X(Provide) X(Store) X(Block) X(IfThenElse) X(LetStmt) X(LocalVar) X(Assign) X(Allocate) X(Assert) X(LaunchKernel)

enum class NodeKind : uint8_t {
#define CORA_KIND(N) N,
    CORA_EXPR_NODES(CORA_KIND) CORA_STMT_NODES(CORA_KIND)
#undef CORA_KIND
};

struct ExprNode {
    NodeKind kind;
    Type type;
    ExprNode(NodeKind k, Type t) : kind(k), type(t) {}
    virtual ~ExprNode() = default;
};

struct StmtNode {
    NodeKind kind;
    explicit StmtNode(NodeKind k) : kind(k) {}
    virtual ~StmtNode() = default;
};

class Stmt {
public:
    Stmt() = default;
    Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
    bool defined() const { return node_ != nullptr; }
    const StmtNode *get() const { return node_.get(); }
    bool same_as(const Stmt &o) const { return node_ == o.node_; }
    template <typename T> const T *as() const {
        return node_ && node_->kind == T::kKind ? static_cast<const T *>(node_.get()) : nullptr;
    }

private:
    std::shared_ptr<const StmtNode> node_;
};

// ---------------------------------------------------------------------------------------------
// Symbols: dims, vars, uninterpreted functions, tensors.

struct VarNode;
struct TensorNode;

/** A named dimension. `var` is its index variable. */
struct DimNode {
    std::string name;
    uint64_t id;
    std::shared_ptr<const VarNode> var;
};

enum class UFKind : uint8_t {
    LengthArray, ///< user input: int32 array, values in [min, max]: a length array (one index) or a
                 ///< shape tensor (ShapeTensor: one index per dim, row-major)
    Aux,         ///< built by the prelude (prefix sums); indexed by the dims of its layout
};

struct AuxSpec;

/** An uninterpreted function. */
struct UFNode {
    std::string name;
    uint64_t id;
    UFKind kind;
    int arity;
    int64_t min_value, max_value; ///< inclusive value range: an axiom for the prover
    Expr count;                   ///< LengthArray: number of elements
    /** A shape tensor's dims (row-major; count is their product); empty for a length array. */
    std::vector<Expr> dims;
    std::shared_ptr<const AuxSpec> aux; ///< Aux: how the prelude builds it
    /** LengthArray: values known when compiling (LengthArray::constant), or null. Reads at a
     * constant index fold to them (analysis/StaticValues.h); kernels check that the array passed
     * at run time holds exactly these values. */
    std::shared_ptr<const std::vector<int64_t>> static_values;
};

// ---------------------------------------------------------------------------------------------
// Expressions.

#define CORA_NODE_KIND(N) static constexpr NodeKind kKind = NodeKind::N;

struct IntImm : ExprNode {
    CORA_NODE_KIND(IntImm)
    int64_t value;
    IntImm(int64_t v, Type t = Int64) : ExprNode(kKind, t), value(v) {}
    static Expr make(int64_t v, Type t = Int64);
};

struct FloatImm : ExprNode {
    CORA_NODE_KIND(FloatImm)
    double value;
    FloatImm(double v, Type t) : ExprNode(kKind, t), value(v) {}
    static Expr make(double v, Type t = Float32);
};

enum class VarRole : uint8_t {
    Index,  ///< loop / dimension index
    Param,  ///< symbolic runtime integer with a range
    Local,  ///< scalar temporary (accumulators, lets)
    Buffer, ///< a pointer to memory (Load/Store target); `type` is the element type
};

struct VarNode : ExprNode {
    CORA_NODE_KIND(Var)
    std::string name;
    uint64_t id;
    VarRole role;
    const DimNode *dim = nullptr;                         ///< set for a dim's index variable
    int64_t min_value = INT64_MIN, max_value = INT64_MAX; ///< Param range
    VarNode(std::string n, uint64_t i, VarRole r, Type t) : ExprNode(kKind, t), name(std::move(n)), id(i), role(r) {}
};
using Var = VarNode; // the node-kind list calls it Var
using VarPtr = std::shared_ptr<const VarNode>;

/** A fresh variable (ids are unique per process; printing uses names, so keep names distinct). */
VarPtr make_var(const std::string &name, VarRole role, Type t = Int64);
/** A fresh id for a symbol the public API makes (a Dim, a Param, a length array, a format's
 * arrays): ids tell symbols apart in structural keys and debug prints. */
uint64_t new_symbol_id();
Expr var_expr(const VarPtr &v);

#define CORA_BINARY(N)                                                                                                 \
    struct N : ExprNode {                                                                                              \
        CORA_NODE_KIND(N)                                                                                              \
        Expr a, b;                                                                                                     \
        N(Type t, Expr x, Expr y) : ExprNode(kKind, t), a(std::move(x)), b(std::move(y)) {}                            \
        static Expr make(Expr x, Expr y);                                                                              \
    };
CORA_BINARY(Add)
CORA_BINARY(Sub)
CORA_BINARY(Mul)
CORA_BINARY(Div)
CORA_BINARY(Mod)
CORA_BINARY(Min)
CORA_BINARY(Max)
CORA_BINARY(EQ)
CORA_BINARY(NE)
CORA_BINARY(LT)
CORA_BINARY(LE)
CORA_BINARY(GT)
CORA_BINARY(GE)
CORA_BINARY(And)
CORA_BINARY(Or)
#undef CORA_BINARY

struct Not : ExprNode {
    CORA_NODE_KIND(Not)
    Expr a;
    explicit Not(Expr x) : ExprNode(kKind, Bool), a(std::move(x)) {}
    static Expr make(Expr x);
};

struct Select : ExprNode {
    CORA_NODE_KIND(Select)
    Expr cond, t, f;
    Select(Type ty, Expr c, Expr a, Expr b)
        : ExprNode(kKind, ty), cond(std::move(c)), t(std::move(a)), f(std::move(b)) {}
    static Expr make(Expr c, Expr a, Expr b);
};

struct Cast : ExprNode {
    CORA_NODE_KIND(Cast)
    Expr value;
    Cast(Type t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
    static Expr make(Type t, Expr v);
};

/** A pure math intrinsic on floats: exp, log, sqrt, tanh, erf, abs. */
struct Call : ExprNode {
    CORA_NODE_KIND(Call)
    std::string name;
    std::vector<Expr> args;
    Call(Type t, std::string n, std::vector<Expr> a) : ExprNode(kKind, t), name(std::move(n)), args(std::move(a)) {}
    static Expr make(Type t, const std::string &name, std::vector<Expr> args);
};

struct UFCall : ExprNode {
    CORA_NODE_KIND(UFCall)
    std::shared_ptr<const UFNode> fn;
    std::vector<Expr> args;
    UFCall(std::shared_ptr<const UFNode> f, std::vector<Expr> a)
        : ExprNode(kKind, Int64), fn(std::move(f)), args(std::move(a)) {}
    static Expr make(std::shared_ptr<const UFNode> f, std::vector<Expr> args);
};

/** A read of a tensor at a multi-dimensional index (before storage lowering). */
struct Access : ExprNode {
    CORA_NODE_KIND(Access)
    std::shared_ptr<const TensorNode> tensor;
    std::vector<Expr> indices;
    Access(Type t, std::shared_ptr<const TensorNode> tn, std::vector<Expr> idx)
        : ExprNode(kKind, t), tensor(std::move(tn)), indices(std::move(idx)) {}
    static Expr make(std::shared_ptr<const TensorNode> t, std::vector<Expr> indices);
};

/** A read of element `index` of the memory `buffer` points to; `type` is the element type. */
struct Load : ExprNode {
    CORA_NODE_KIND(Load)
    VarPtr buffer;
    Expr index;
    Load(Type t, VarPtr b, Expr i) : ExprNode(kKind, t), buffer(std::move(b)), index(std::move(i)) {}
    static Expr make(VarPtr buffer, Expr index);
};

struct Reduce : ExprNode {
    CORA_NODE_KIND(Reduce)
    ReduceOp op;
    VarPtr var; ///< the reduction dim's index variable
    Expr extent, body;
    Reduce(ReduceOp o, VarPtr v, Expr e, Expr b)
        : ExprNode(kKind, b.type()), op(o), var(std::move(v)), extent(std::move(e)), body(std::move(b)) {}
    static Expr make(ReduceOp op, VarPtr var, Expr extent, Expr body);
};

// ---------------------------------------------------------------------------------------------
// Statements.

/** How a loop runs. The Gpu kinds bind the loop to an axis (x, y, z) of a CUDA grid's blocks or
 * of a block's threads: each block or thread runs the body for one index (with a bound check
 * where the extent is smaller than the launch), lower/SplitHostDevice.cpp turns the outermost block
 * loops of a nest into a kernel launch. */
enum class ForKind : uint8_t {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    /** Expanded in the IR by lower/DismantleLoops.cpp (Func::dismantle): one copy of the body
     * per iteration, the index a constant in each. No loop of this kind outlives that pass. */
    Dismantled,
    /** A reduction loop of extent 16 over a 2 x 2 register nest (Func::gpu_mma): as a loop
     * everywhere, except in CUDA, where each warp runs it as one mma.sync.m16n8k16 (the nest's
     * checks and the fragment layout: analysis/MmaTile.h). */
    GpuMma,
    GpuBlockX,
    GpuBlockY,
    GpuBlockZ,
    GpuThreadX,
    GpuThreadY,
    GpuThreadZ,
    /** In a kernel, outside its thread loops: the iterations are shared among all the threads of
     * the block (thread t runs t, t + T, ...), between two barriers. A copy into a shared-memory
     * tile becomes one (lower/SplitHostDevice.cpp). */
    GpuLanes
};
inline bool is_gpu_block(ForKind k) { return k >= ForKind::GpuBlockX && k <= ForKind::GpuBlockZ; }
inline bool is_gpu_thread(ForKind k) { return k >= ForKind::GpuThreadX && k <= ForKind::GpuThreadZ; }
/** Bound to a block or thread axis (not GpuLanes, which spreads over all the block's threads). */
inline bool is_gpu_bound(ForKind k) { return is_gpu_block(k) || is_gpu_thread(k); }
/** The axis of a GPU-bound loop: 0 (x), 1 (y) or 2 (z). */
inline int gpu_axis(ForKind k) {
    return is_gpu_block(k) ? int(k) - int(ForKind::GpuBlockX) : int(k) - int(ForKind::GpuThreadX);
}
/** The loop kind's name as schedules and messages spell it ("gpu_blocks.x", "parallel", ...). */
const char *for_kind_name(ForKind k);

/** How a parallel loop's iterations are shared among threads; decided by lowering
 * (lower/LoopExecution.cpp), printed by each target in its own terms. */
enum class WorkSplit : uint8_t {
    Static, ///< every iteration does the same work: one contiguous range per thread
    Dynamic ///< the work varies with the index (ragged rows, longest-first orders): balanced at run time
};

struct For : StmtNode {
    CORA_NODE_KIND(For)
    VarPtr var;
    Expr min, extent;
    ForKind for_kind;
    Stmt body;
    WorkSplit work_split = WorkSplit::Static; ///< Parallel loops only
    /** Target::Cuda, a serial loop of a kernel at block level: its body starts with the gpu_lanes
     * copies of shared tiles that hold `pipeline_stages` panels, one per iteration in turn
     * (lower/PipelineSharedPanels.cpp). Its meaning is the serial loop's; the CUDA printer issues
     * each iteration's copies (cp.async) pipeline_stages - 1 iterations ahead. 1: not pipelined. */
    int pipeline_stages = 1;
    For(VarPtr v, Expr m, Expr e, ForKind k, Stmt b)
        : StmtNode(kKind), var(std::move(v)), min(std::move(m)), extent(std::move(e)), for_kind(k), body(std::move(b)) {
    }
    static Stmt make(VarPtr v, Expr min, Expr extent, ForKind k, Stmt body);
    /** A copy of this loop with the fields `edit` changes, e.g.
     * `loop->with([&](For &f) { f.body = body; })`. Every other field, including ones added later
     * (a device binding), carries over, so code that rebuilds a loop needs no change when For grows. */
    template <typename Edit> Stmt with(Edit &&edit) const {
        auto copy = std::make_shared<For>(*this);
        edit(*copy);
        return Stmt(std::shared_ptr<const StmtNode>(std::move(copy)));
    }
};

/** A write of a tensor element at a multi-dimensional index (before storage lowering). */
struct Provide : StmtNode {
    CORA_NODE_KIND(Provide)
    std::shared_ptr<const TensorNode> tensor;
    std::vector<Expr> indices;
    Expr value;
    Provide(std::shared_ptr<const TensorNode> t, std::vector<Expr> i, Expr v)
        : StmtNode(kKind), tensor(std::move(t)), indices(std::move(i)), value(std::move(v)) {}
    static Stmt make(std::shared_ptr<const TensorNode> t, std::vector<Expr> i, Expr v);
};

struct Store : StmtNode {
    CORA_NODE_KIND(Store)
    VarPtr buffer;
    Expr index, value;
    Store(VarPtr b, Expr i, Expr v) : StmtNode(kKind), buffer(std::move(b)), index(std::move(i)), value(std::move(v)) {}
    static Stmt make(VarPtr b, Expr i, Expr v);
};

struct Block : StmtNode {
    CORA_NODE_KIND(Block)
    std::vector<Stmt> stmts;
    explicit Block(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
    /** Flattens nested blocks and drops undefined statements; one statement is returned as is. */
    static Stmt make(std::vector<Stmt> s);
};

struct IfThenElse : StmtNode {
    CORA_NODE_KIND(IfThenElse)
    Expr cond;
    Stmt then_case, else_case;
    IfThenElse(Expr c, Stmt t, Stmt e)
        : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
    static Stmt make(Expr c, Stmt t, Stmt e = Stmt());
};

/** An immutable binding of `var` to `value` over `body`. */
struct LetStmt : StmtNode {
    CORA_NODE_KIND(LetStmt)
    VarPtr var;
    Expr value;
    Stmt body;
    LetStmt(VarPtr v, Expr e, Stmt b) : StmtNode(kKind), var(std::move(v)), value(std::move(e)), body(std::move(b)) {}
    static Stmt make(VarPtr v, Expr value, Stmt body);
};

/** A mutable scalar local, initialised to `init`, in scope over `body`. */
struct LocalVar : StmtNode {
    CORA_NODE_KIND(LocalVar)
    VarPtr var;
    Expr init;
    Stmt body;
    LocalVar(VarPtr v, Expr i, Stmt b) : StmtNode(kKind), var(std::move(v)), init(std::move(i)), body(std::move(b)) {}
    static Stmt make(VarPtr v, Expr init, Stmt body);
};

struct Assign : StmtNode {
    CORA_NODE_KIND(Assign)
    VarPtr var;
    Expr value;
    Assign(VarPtr v, Expr e) : StmtNode(kKind), var(std::move(v)), value(std::move(e)) {}
    static Stmt make(VarPtr v, Expr value);
};

/** Where an Allocate's memory lives: the heap (any size, may fail), the stack of the enclosing
 * loop body (a constant size; a per-tile cache the C compiler may keep in registers; in a GPU
 * kernel, per thread), or a GPU block's shared memory (a constant size, one per block, filled by
 * GpuLanes loops). */
enum class MemoryType : uint8_t { Heap, Stack, GpuShared };

/** Memory of `size` elements of buffer->type, live over `body`. */
struct Allocate : StmtNode {
    CORA_NODE_KIND(Allocate)
    VarPtr buffer;
    Expr size;
    Stmt body;
    MemoryType memory;
    Allocate(VarPtr b, Expr s, Stmt bd, MemoryType m)
        : StmtNode(kKind), buffer(std::move(b)), size(std::move(s)), body(std::move(bd)), memory(m) {}
    static Stmt make(VarPtr b, Expr size, Stmt body, MemoryType memory = MemoryType::Heap);
};

/** If `cond` is false, fail with a message built from text pieces and values (the run stops,
 * nothing more is written, and the caller receives the message). */
struct Assert : StmtNode {
    CORA_NODE_KIND(Assert)
    Expr cond;
    std::vector<std::string> text; ///< text[i] precedes values[i]; text.size() == values.size()+1
    std::vector<Expr> values;
    Assert(Expr c, std::vector<std::string> t, std::vector<Expr> v)
        : StmtNode(kKind), cond(std::move(c)), text(std::move(t)), values(std::move(v)) {}
    static Stmt make(Expr c, std::vector<std::string> text, std::vector<Expr> values);
};

/** A launch that may take the 32-bit twin of its kernel (lower/NarrowIndices.cpp): the host
 * evaluates `bounds` (expressions of host scalars and of `arrays`' magnitudes, overflow-checked)
 * before the launch and runs `kernel32` when every bound is at most INT32_MAX, else `kernel`. */
struct NarrowLaunch {
    /** The magnitude of an integer array the host holds (a length or aux array): the largest |v|
     * of its values, computed by the host before the launch into `magnitude` (an Int64 local). */
    struct ArrayMagnitude {
        VarPtr magnitude, array;
    };
    std::string kernel32; ///< empty: no choice, the launch runs `kernel`
    std::vector<Expr> bounds;
    std::vector<ArrayMagnitude> arrays;
};

/** A launch of the device kernel `kernel` (a function of the module) over a grid of
 * grid[0] x grid[1] x grid[2] blocks of threads[0] x threads[1] x threads[2] threads, passing
 * `args` (host variables: buffers and scalars, in the kernel's parameter order). Made by
 * lower/SplitHostDevice.cpp from a nest of GPU-bound loops. */
struct LaunchKernel : StmtNode {
    CORA_NODE_KIND(LaunchKernel)
    std::string kernel;
    std::vector<Expr> grid, threads; ///< three each (x, y, z)
    std::vector<VarPtr> args;
    NarrowLaunch narrow;
    LaunchKernel(std::string k, std::vector<Expr> g, std::vector<Expr> t, std::vector<VarPtr> a, NarrowLaunch n)
        : StmtNode(kKind), kernel(std::move(k)), grid(std::move(g)), threads(std::move(t)), args(std::move(a)),
          narrow(std::move(n)) {}
    static Stmt make(std::string kernel, std::vector<Expr> grid, std::vector<Expr> threads, std::vector<VarPtr> args,
                     NarrowLaunch narrow = {});
};

#undef CORA_NODE_KIND

// ---------------------------------------------------------------------------------------------
// Small helpers used everywhere.

/** The constant value of an integer immediate, or nullptr. */
const int64_t *as_const_int(const Expr &e);
bool is_const(const Expr &e, int64_t v);
Expr make_zero(Type t);
Expr make_one(Type t);
/** The identity of a reduction (0, -inf, +inf) in type t. */
Expr reduce_identity(ReduceOp op, Type t);
/** acc combined with x by `op` (acc + x, max, min): one definition for every reduction lowering. */
Expr reduce_combine(ReduceOp op, const Expr &acc, const Expr &x);
const char *reduce_op_name(ReduceOp op);

/** The element of input array `fn` (a length array or a shape tensor) that the call `fn(args)`
 * reads, in its row-major storage: args[0] for a length array. */
Expr input_array_flat_index(const UFNode &fn, const std::vector<Expr> &args);
/** The bound index k of a call of `fn` stays below: its count for a length array, dim k for a
 * shape tensor. */
Expr input_array_extent(const UFNode &fn, size_t k);
/** "length array 'len'" or "shape tensor 'mask'": what messages call `fn`. */
std::string input_array_title(const UFNode &fn);

} // namespace cora::ir

namespace cora {
template <typename T> const T *Expr::as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T *>(node_.get()) : nullptr;
}
} // namespace cora
