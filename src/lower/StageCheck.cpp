/** \file Stage checks: after each lowering pass, the IR must be in the form the next passes
 * expect. A pass run at the wrong stage, or one that leaves behind what it should have removed,
 * fails here with the pass's name instead of in a later pass or in the C compiler.
 *   - Scheduled (after schedule_loops): loop nests of Provides; no Store into a tensor yet.
 *   - ReductionsLowered: no Reduce left.
 *   - StorageLowered (after storage_lowering and allocate_intermediates): no Provide and no
 *     Access; every element is a Store/Load through a flat index.
 *   - Materialized (after materialize_ufs and later): no UFCall either: only loads of argument
 *     arrays, what code generation accepts; and no dismantled loop (expanded after storage lowering).
 * Every Assert sits outside parallel loops (argument checks run before the work).
 * Tests: tests/unit/stage_check.cpp. */
#include "lower/StageCheck.h"

#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

const char *stage_name(Stage s) {
    switch (s) {
    case Stage::Scheduled: return "scheduled";
    case Stage::ReductionsLowered: return "reductions lowered";
    case Stage::StorageLowered: return "storage lowered";
    case Stage::Materialized: return "UFs materialized";
    }
    return "?";
}

class Checker : public IRVisitor {
public:
    Checker(Stage stage, const char *pass) : stage_(stage), pass_(pass) {}

    void visit_node(const Reduce *op) override {
        if (stage_ >= Stage::ReductionsLowered) fail("a reduction over '", op->var->name, "'");
        IRVisitor::visit_node(op);
    }
    void visit_node(const Access *op) override {
        if (stage_ >= Stage::StorageLowered) fail("a tensor read of '", op->tensor->name, "'");
        IRVisitor::visit_node(op);
    }
    void visit_node(const Provide *op) override {
        if (stage_ >= Stage::StorageLowered) fail("a tensor write of '", op->tensor->name, "'");
        IRVisitor::visit_node(op);
    }
    void visit_node(const UFCall *op) override {
        if (stage_ >= Stage::Materialized) fail("a call of '", op->fn->name, "'");
        IRVisitor::visit_node(op);
    }
    void visit_node(const For *op) override {
        if (stage_ >= Stage::Materialized && op->for_kind == ForKind::Dismantled)
            fail("a dismantled loop over '", op->var->name, "'");
        bool par = op->for_kind == ForKind::Parallel;
        parallel_ += par;
        IRVisitor::visit_node(op);
        parallel_ -= par;
    }
    void visit_node(const Assert *op) override {
        if (parallel_ > 0) fail("an argument check inside a parallel loop");
        IRVisitor::visit_node(op);
    }

private:
    template <typename... Args> [[noreturn]] void fail(Args &&...what) {
        internal_failure("after pass ", pass_, " the IR should be ", stage_name(stage_), ", but it still holds ",
                         std::forward<Args>(what)...);
    }
    Stage stage_;
    const char *pass_;
    int parallel_ = 0;
};

} // namespace

void check_stage(const Stmt &s, Stage stage, const char *pass) {
    if (!s.defined()) return;
    Checker c(stage, pass);
    c.visit(s);
}

} // namespace cora::ir
