/** \file Pass: the checks of the tensor-core tiles (gpu_mma loops) of a device kernel.
 *
 * Why. A gpu_mma loop runs as loops everywhere but in CUDA, where the warp's 32 threads run it
 * together as one mma.sync.m16n8k16, each lane supplying fragments other lanes read
 * (analysis/MmaTile.h derives why that computes the same sums). That is only sound when the
 * nest has the shape MmaTile.h describes and when every lane of the warp reaches the instruction
 * at the same time; a schedule that breaks either would compute something else, silently, on
 * the GPU alone. So both are checked here, on every GPU target (the emulation included), and a
 * violation is a CompileError before any code is printed.
 *
 * Does: for each GpuMma loop of the kernel: it lies inside loops bound to gpu_threads.x (extent
 * 4) and gpu_threads.y (extent 8), with every thread axis of the kernel bound exactly (no
 * thread skips the body), not in a gpu_lanes loop; no condition, and no bound or start of a loop,
 * between the kernel's top and the nest reads a thread index (after inlining the lets that do);
 * the nest matches match_mma_tile. Changes nothing.
 * Requires: split_host_device (kernels, exact bindings); on Target::Cuda, after
 * slice_thread_tiles (the checks then see the per-thread tile CodeGen_CUDA prints).
 * Errors: CompileError naming the gpu_mma loop and the rule. Tests:
 * tests/correctness/gpu_tensor_cores.cpp. */
#include <algorithm>
#include <set>

#include "analysis/MmaTile.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

class MmaChecks : public IRVisitor {
public:
    explicit MmaChecks(const LoweredFunc &k) : kernel_(k) {}

protected:
    using IRVisitor::visit_node;
    void visit_node(const LetStmt *op) override {
        IRVisitor::visit(op->value);
        const auto saved = lets_;
        lets_[op->var.get()] = op->value;
        visit(op->body);
        lets_ = saved;
    }
    void visit_node(const IfThenElse *op) override {
        around_.push_back({"the condition", op->cond});
        visit(op->then_case);
        if (op->else_case.defined()) visit(op->else_case);
        around_.pop_back();
    }
    void visit_node(const For *op) override {
        if (op->for_kind == ForKind::GpuMma) return check(op);
        if (is_gpu_thread(op->for_kind)) {
            const For *&slot = threads_[gpu_axis(op->for_kind)];
            const For *saved = slot;
            slot = op;
            visit(op->body);
            slot = saved;
            return;
        }
        lanes_ += op->for_kind == ForKind::GpuLanes;
        around_.push_back({"the start of loop '" + op->var->name + "'", op->min});
        around_.push_back({"the extent of loop '" + op->var->name + "'", op->extent});
        visit(op->body);
        around_.resize(around_.size() - 2);
        lanes_ -= op->for_kind == ForKind::GpuLanes;
    }

private:
    void check(const For *op) {
        const std::string where = "gpu_mma loop '" + op->var->name + "': ";
        if (!threads_[0] || !threads_[1])
            throw_compile_error(where, "it must lie inside loops bound to gpu_threads.x and gpu_threads.y (one warp "
                                       "of 4 x 8 threads per 16 x 8 output tile)");
        if (lanes_ > 0)
            throw_compile_error(where, "it lies in a loop shared among the block's threads (a cache_read copy)");
        const char *axis_rule[2] = {"4 (t, the tile's column pairs)", "8 (g, its rows)"};
        for (int a = 0; a < 2; a++) {
            const int64_t *e = as_const_int(threads_[a]->extent);
            if (!e || *e != (a == 0 ? 4 : 8))
                throw_compile_error(where, "gpu_threads.", "xy"[a], " (loop '", threads_[a]->var->name,
                                    "') has extent ", print(threads_[a]->extent), "; it must be ", axis_rule[a],
                                    ", so that a warp's lane t + 4 g holds the instruction's fragments");
        }
        std::set<const VarNode *> thread_vars;
        for (const For *t : threads_)
            if (t) {
                thread_vars.insert(t->var.get());
                if (std::find(kernel_.exact_bindings.begin(), kernel_.exact_bindings.end(), t->for_kind) ==
                    kernel_.exact_bindings.end())
                    throw_compile_error(where, for_kind_name(t->for_kind), " (loop '", t->var->name,
                                        "') is not bound exactly (another loop shares the axis, or its extent varies), "
                                        "so some threads would skip the warp's instruction");
            }
        for (const auto &[what, e] : around_)
            for (const VarNode *v : thread_vars)
                if (reads_through_lets(e, v))
                    throw_compile_error(where, "it lies under ", what, " ", print(e),
                                        ", which depends on thread index '", v->name,
                                        "'; every lane of a warp must reach the instruction (pad the sizes the "
                                        "tile covers, so that no bound check is needed)");
        match_mma_tile(op, threads_[0], threads_[1], lets_);
    }
    bool reads_through_lets(const Expr &e, const VarNode *v, int depth = 0) const {
        if (uses_var(e, v)) return true;
        if (depth > 64) return false;
        for (VarRole role : {VarRole::Index, VarRole::Local})
            for (const VarNode *u : vars_of(e, role))
                if (auto l = lets_.find(u); l != lets_.end() && reads_through_lets(l->second, v, depth + 1))
                    return true;
        return false;
    }

    const LoweredFunc &kernel_;
    const For *threads_[3] = {nullptr, nullptr, nullptr};
    std::map<const VarNode *, Expr> lets_;
    std::vector<std::pair<std::string, Expr>> around_;
    int lanes_ = 0;
};

} // namespace

void check_mma_tiles(const LoweredFunc &kernel) {
    bool any = false;
    visit_stmts(kernel.body, [&](const Stmt &s) {
        if (const For *f = s.as<For>()) any = any || f->for_kind == ForKind::GpuMma;
    });
    if (!any) return;
    MmaChecks checks(kernel);
    checks.visit(kernel.body);
}

} // namespace cora::ir
