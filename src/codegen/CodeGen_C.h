/** \file The C++ printer of lowered IR (CodeGen_C), and the JIT source of a module (codegen_c).
 *
 * The printer spells each node in C++: floor division and Euclidean modulo helpers for integer
 * `/` and `%`, overflow-checked + - * inside argument checks and allocation sizes, heap
 * allocations that report failure through the entry's error buffer, and loops as lowering decided
 * them (lower/LoopExecution.cpp): a Parallel loop becomes an OpenMP loop split as its WorkSplit
 * says, a Vectorized one a whole-vector statement where the C vector extension can say it (else a
 * loop under `omp simd`). A printer for another language derives from CodeGen_C and overrides the
 * nodes it spells differently (a CUDA printer: parallel loops bound to blocks and threads,
 * allocations in shared memory); the entry function around the body is EntryFunction.h's. */
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir/IRVisitor.h"
#include "ir/Module.h"

namespace cora::ir {

class CodeGen_C : public IRVisitor {
public:
    /** The printed text so far. */
    std::ostringstream os;
    /** Current indentation, in steps of four spaces. */
    int indent = 1;
    /** In a device kernel: the axes whose launch size equals their loop's extent (LoweredFunc). */
    std::vector<ForKind> exact_bindings;

    /** The C name of a variable: its IR name made an identifier, suffixed with '_' (never a
     * keyword or an ABI name) and numbered when two variables share a name. */
    std::string name_of(const VarNode *v);
    /** `e` printed, without touching `os`. */
    std::string expr(const Expr &e);
    /** One indented line of `os`. */
    void line(const std::string &s);

    using IRVisitor::visit;

protected:
    int parallel_depth = 0; ///< OpenMP parallel loops around the node printed
    int simd_depth = 0;     ///< loops under `omp simd` around it

    void bin(const Expr &a, const char *op, const Expr &b);
    /** + - * of integers: overflow-checked inside argument checks and allocation sizes. */
    void arith(Type t, const Expr &a, const char *op, const char *checked_fn, const Expr &b);
    /** The calls that release the enclosing heap allocations, for early returns. */
    std::string release_live_allocations() const;
    int checked_ = 0; ///< > 0: integer + - * are emitted overflow-checked into `cora_ov`
    /** The statement releasing each enclosing heap allocation, innermost last. */
    std::vector<std::string> live_allocations_;
    /** Inside a parallel loop whose body allocates (a sliced producer per iteration): the flag a
     * failed allocation sets (its index in `parallel_allocations_` + 1), checked after the loop,
     * since no iteration may return out of the OpenMP loop. */
    std::string parallel_failure_flag_;
    std::vector<std::string> parallel_allocations_;
    /** `{ declaration body }`: a variable visible in `body` only. */
    void scoped(const std::string &declaration, const Stmt &body);
    /** An address printed with its terms in loop order (IndexTerms.h): outer loops' first,
     * constants last, so that unrolled offsets fold into one base. */
    std::string index_expr(const Expr &index);
    /** The loop depth of each loop and let variable in scope (IndexTerms.h), and the current one. */
    std::map<const VarNode *, int> scope_depth_;
    int loop_depth_ = 0;

    void visit_node(const IntImm *op) override;
    void visit_node(const FloatImm *op) override;
    void visit_node(const Var *op) override;
    void visit_node(const Add *op) override;
    void visit_node(const Sub *op) override;
    void visit_node(const Mul *op) override;
    void visit_node(const Div *op) override;
    void visit_node(const Mod *op) override;
    void visit_node(const Min *op) override;
    void visit_node(const Max *op) override;
    void visit_node(const EQ *op) override;
    void visit_node(const NE *op) override;
    void visit_node(const LT *op) override;
    void visit_node(const LE *op) override;
    void visit_node(const GT *op) override;
    void visit_node(const GE *op) override;
    void visit_node(const And *op) override;
    void visit_node(const Or *op) override;
    void visit_node(const Not *op) override;
    void visit_node(const Select *op) override;
    void visit_node(const Cast *op) override;
    void visit_node(const Call *op) override;
    void visit_node(const UFCall *op) override;
    void visit_node(const Access *op) override;
    void visit_node(const Load *op) override;
    void visit_node(const Reduce *) override;
    void visit_node(const For *op) override;
    void visit_node(const Provide *op) override;
    void visit_node(const Store *op) override;
    void visit_node(const IfThenElse *op) override;
    void visit_node(const LetStmt *op) override;
    void visit_node(const LocalVar *op) override;
    void visit_node(const Assign *op) override;
    void visit_node(const Allocate *op) override;
    void visit_node(const Assert *op) override;
    /** Host code for the CPU alone has no launches (InternalError): the printers of a GPU
     * backend's host code override it (CodeGen_Emulated: the launch as loops over the blocks;
     * CodeGen_CUDA: through the device runtime). */
    void visit_node(const LaunchKernel *op) override;

    /** In a device kernel's body: this block's or thread's index along the axis a GPU-bound loop
     * is bound to (blockIdx.x in CUDA). A bound loop prints as its variable set from it, with the
     * body under `index < extent`. Printers of host code have none (InternalError). */
    virtual std::string gpu_index(ForKind kind);
    /** The C type of a scalar value of type `t` (a let, a loop variable, a cast, an integer
     * constant): t's own, except in a device kernel that computes in 32 bits (CodeGen_CUDA). */
    virtual std::string scalar_type(Type t) { return t.c_name(); }

    /** A vectorized loop of constant extent W whose body is one Store (under lets) at
     * base + i, reading only base' + i (contiguous) or values that do not use i, through
     * + - * (and / for floats), becomes one statement on W-wide vectors (clang's vector
     * extension). After the enclosing tile loops are unrolled, every access of a cache_write
     * tile has a constant offset, so clang keeps the tile in vector registers; the scalar
     * loop under `omp simd` often spills it. Returns false (nothing emitted) otherwise. */
    virtual bool emit_vector_loop(const For *op);

private:
    std::map<const VarNode *, std::string> names_;
    std::set<std::string> used_;
};

/** The C symbol of the module's entry point. */
std::string entry_symbol(const Module &m);

/** A device kernel's parameters as `g` declares them: a buffer the kernel writes is `T *__restrict__`,
 * one it only reads `const T *__restrict__`, a scalar `const T`. */
std::vector<std::string> kernel_parameters(CodeGen_C &g, const LoweredFunc &kernel);

} // namespace cora::ir
