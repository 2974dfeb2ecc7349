/** \file Pass: how each loop runs, decided once for every target (the printers only spell it).
 *
 * Does: one level of parallelism: a Parallel loop inside another Parallel loop, inside a
 * Vectorized one or inside a GPU-bound loop (a block or thread of a kernel), becomes Serial
 * (OpenMP allows no parallel construct inside a simd region, a GPU grid has one level of blocks,
 * and one level is enough to fill the cores). Each remaining Parallel loop gets its WorkSplit:
 * Dynamic when the work of its iterations may differ — a loop bound or a condition inside its body
 * depends on its index, directly or through lets (ragged rows, longest-first ranks, the if-chain of
 * horizontally fused ops) —, Static otherwise (one contiguous range per thread, no shared counter).
 * Left to the printer: how a Vectorized loop is spelled (the C target writes a loop of constant
 * extent whose body is one contiguous store as a single vector statement, other loops under
 * `omp simd`, and no simd construct inside another); a target without vectors runs it serially.
 * Requires: the final loop structure (after hoist_loads). Ensures: no Parallel loop nested in a
 * Parallel, Vectorized or GPU-bound loop. Tests: tests/correctness/vector_codegen.cpp (work
 * splits), tests/pass/loop_execution.cpp, tests/correctness/gpu_schedules.cpp. */
#include <algorithm>
#include <set>

#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

/** Whether the work of a loop's iterations may differ with its index. */
class TripCountsVary : public IRVisitor {
public:
    explicit TripCountsVary(const VarNode *index) { dependent_.insert(index); }
    bool varies = false;

    void visit_node(const LetStmt *op) override {
        if (depends(op->value)) dependent_.insert(op->var.get());
        IRVisitor::visit_node(op);
    }
    void visit_node(const For *op) override {
        if (depends(op->min) || depends(op->extent)) varies = true;
        IRVisitor::visit_node(op);
    }
    void visit_node(const IfThenElse *op) override {
        if (depends(op->cond)) varies = true;
        IRVisitor::visit_node(op);
    }

private:
    std::set<const VarNode *> dependent_;
    bool depends(const Expr &e) const {
        return std::any_of(dependent_.begin(), dependent_.end(), [&](const VarNode *v) { return uses_var(e, v); });
    }
};

class DecideLoopExecution : public IRMutator {
    int enclosing_ = 0; ///< Parallel, Vectorized or GPU-bound loops around the current node

    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        bool opens_region =
            op->for_kind == ForKind::Parallel || op->for_kind == ForKind::Vectorized || is_gpu_bound(op->for_kind);
        bool parallel = op->for_kind == ForKind::Parallel && enclosing_ == 0;
        if (opens_region) enclosing_++;
        Stmt body = mutate(op->body);
        if (opens_region) enclosing_--;
        WorkSplit split = WorkSplit::Static;
        if (parallel) {
            TripCountsVary vary(op->var.get());
            vary.visit(body);
            if (vary.varies) split = WorkSplit::Dynamic;
        }
        ForKind kind = op->for_kind == ForKind::Parallel && !parallel ? ForKind::Serial : op->for_kind;
        if (body.same_as(op->body) && kind == op->for_kind && split == op->work_split) return self;
        return op->with([&](For &f) {
            f.body = body;
            f.for_kind = kind;
            f.work_split = split;
        });
    }
};

} // namespace

Stmt decide_loop_execution(const Stmt &s) { return DecideLoopExecution().mutate(s); }

} // namespace cora::ir
