/** \file Step: the GPU bindings of one op's loops, checked against the target.
 *
 * Does: on the host target, rejects any loop bound with gpu_blocks / gpu_threads (the user asked
 * for a GPU and compiled for the CPU). On a GPU target: every op that is not computed inside
 * another (compute_at) binds its outermost loops to blocks — its nest becomes one launch — and
 * no other loop of it; thread loops lie inside the block loops; `parallel` has no meaning on a
 * GPU (its loops are blocks and threads). An op computed inside its consumer binds no block
 * loop (it runs inside the consumer's kernel). What depends on the whole kernel (stores outside
 * thread loops, launch sizes) is checked by split_host_device (SplitHostDevice.cpp).
 * Requires: the plan's final loop kinds (plan_loops). Errors: CompileError naming the Func, the
 * loop and the fix. Tests: tests/correctness/gpu_schedules.cpp. */
#include "ir/IRPrinter.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

void check_gpu_bindings(const LoopPlan &plan, Target target) {
    const std::string &f = plan.op->name;
    const std::vector<ForKind> &kinds = plan.kinds;
    const size_t n = kinds.size();
    if (!is_gpu(target)) {
        for (size_t k = 0; k < n; k++)
            if (is_gpu_bound(kinds[k]) || kinds[k] == ForKind::GpuMma)
                throw_compile_error("Func '", f, "': loop '", plan.loops[k]->name, "' is bound to ",
                                    for_kind_name(kinds[k]),
                                    ", but the target is the host CPU; compile with CompileOptions::target = "
                                    "Target::Cuda (or Target::CudaEmulated, which runs the device code on the CPU)");
        return;
    }
    const bool inside_consumer = plan.schedule->has_compute_at();
    bool any_block = false;
    for (ForKind k : kinds)
        any_block = any_block || is_gpu_block(k);
    if (!any_block && !inside_consumer)
        throw_compile_error("Func '", f, "' has no loop bound to gpu_blocks: on a ", target_name(target),
                            " target every op runs on the device; bind its outer loops, e.g. split a loop and call "
                            "gpu_blocks(outer).gpu_threads(inner)");
    for (size_t k = 0; k < n; k++) {
        const std::string loop = plan.loops[k]->name;
        // (An op inside its consumer keeps its default parallel loop: decide_loop_execution makes
        // it serial under the consumer's block loops.)
        if (kinds[k] == ForKind::Parallel && !inside_consumer)
            throw_compile_error("Func '", f, "': loop '", loop, "' is marked parallel, but on a ", target_name(target),
                                " target a kernel's loops run on blocks and threads; bind it with gpu_blocks or "
                                "gpu_threads instead");
        if (!is_gpu_block(kinds[k])) continue;
        if (inside_consumer)
            throw_compile_error("Func '", f, "': loop '", loop, "' is bound to ", for_kind_name(kinds[k]),
                                ", but the Func is computed inside its consumer (compute_at), whose kernel it joins; "
                                "bind its loops with gpu_threads only");
        for (size_t j = 0; j < k; j++)
            if (!is_gpu_block(kinds[j]))
                throw_compile_error("Func '", f, "': the block loop '", loop, "' (", for_kind_name(kinds[k]),
                                    ") is inside loop '", plan.loops[j]->name, "' (", for_kind_name(kinds[j]),
                                    "); block loops must be the outermost loops of a nest (reorder them)");
    }
}

} // namespace cora::ir
