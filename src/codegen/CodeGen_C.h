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
    /** On the CPU: the launch emulated, every block in turn calling the kernel's C function
     * (emulated_kernel_function). A GPU host printer overrides it. */
    void visit_node(const LaunchKernel *op) override;

    /** In a device kernel's body: this block's or thread's index along the axis a GPU-bound loop
     * is bound to (blockIdx.x in CUDA). A bound loop prints as its variable set from it, with the
     * body under `index < extent`. Printers of host code have none (InternalError). */
    virtual std::string gpu_index(ForKind kind);

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

/** A device kernel as a C++ function of the CPU (Target::CudaEmulated): `static void name(params...,
 * const int64_t *cora_block)`, the body run for one block, its thread loops as loops (the phases
 * between barriers one after another). */
std::string emulated_kernel_function(const LoweredFunc &kernel);

/** The JIT source of a module: the prologue, then codegen_c_body with the module's entry_symbol. */
std::string codegen_c(const Module &m);

/** A module's code after the prologue: its device kernels emulated (if any), then its entry
 * (EntryFunction.h) as `extern "C"` function `symbol`. */
std::string codegen_c_body(const Module &m, const std::string &symbol);

/** One JIT source for several modules (KernelBatch): the prologue once, then each module's body in
 * a namespace of its own (`cora_batch_<i>`: their kernels' names may repeat), its entry named
 * `symbols[i]` (the symbols must differ). One compiler run builds them all. */
std::string codegen_c_batch(const std::vector<const Module *> &modules, const std::vector<std::string> &symbols);

} // namespace cora::ir
