/** \file Pass: warp-shuffle reductions (Target::Cuda, device kernels).
 *
 * Why. lower_thread_reductions combines a reduction's per-thread parts in shared memory: one
 * thread folds them, between two barriers — correct on every target (the emulation runs thread
 * loops as loops). When the block is exactly one warp, CUDA can do better: the 32 lanes exchange
 * their parts through registers (__shfl_xor_sync, 5 butterfly steps), with no shared memory and no
 * barrier.
 *
 * Does: in a kernel whose only thread loops are bound to x and cover the launch exactly
 * (LoweredFunc::exact_bindings) with extent 32 — so blockDim = (32, 1, 1), one full warp — the
 * form lower_thread_reductions writes for a float reduction,
 *     allocate in shared memory P[32]
 *     gpu_threads.x for t in [m, m + 32): { allocate acc[1]; ...; P[t - m] = acc[0] }
 *     gpu_lanes for lane in [0, 1): { X[I] = init; for p in [0, 32): X[I] = op(X[I], P[p]); epilogue }
 * becomes
 *     gpu_threads.x for t in [m, m + 32): { allocate acc[1]; ...;
 *         acc[0] = cora_warp_<op>(acc[0])           (every lane gets the combination of all parts)
 *         if (t == m): { X[I] = init; X[I] = op(X[I], acc[0]); epilogue } }
 * op is + (sum), * (product), max or min, and nothing else in the kernel reads X (lane 0 writes
 * it with no barrier after).
 * A block of E = 2, 4, 8 or 16 threads in x is one partial warp: the same rewrite, with the
 * shuffles over its E lanes (cora_warp_<op>_w<E>, butterfly steps E/2 .. 1, mask of lanes 0..E-1).
 * With W = E / 32 > 1 warps (a block of E = 64 .. 1024 threads, all of them in x loops of extent E)
 * the reduction takes two levels: each warp combines its lanes' parts with shuffles and its lane 0
 * stores the warp's value in P[(t - m) / 32] (P shrinks to W elements); the fold after the barrier
 * runs over the W warp values instead of the E parts. The barriers stay, and so may consumers in
 * the kernel. The butterfly combines the parts in another order than the fold (a float sum may
 * differ in its last bits from the emulation's); it is the same on every run. Anything else is
 * left as it is.
 * Requires: split_host_device (kernels, exact bindings). Ensures: no shared memory or barrier left
 * for a rewritten reduction.
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/gpu_schedules.cpp ("cross-thread reductions"). */
#include <map>
#include <set>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

/** The CUDA helper for the fold's operation (the fold's update is op(X[I], P[p])). */
const char *warp_helper(const Expr &update) {
    if (update.as<Add>()) return "cora_warp_sum";
    if (update.as<Mul>()) return "cora_warp_product";
    if (update.as<Max>()) return "cora_warp_max";
    if (update.as<Min>()) return "cora_warp_min";
    return nullptr;
}

Expr with_operands(const Expr &e, const Expr &a, const Expr &b) {
    if (e.as<Add>()) return Add::make(a, b);
    if (e.as<Mul>()) return Mul::make(a, b);
    if (e.as<Max>()) return Max::make(a, b);
    return Min::make(a, b);
}

/** Whether a block of `threads` in x is whole warps (up to 1024 threads) or one partial warp of a
 * power-of-two size. */
bool warp_sized(int64_t threads) {
    return (threads % 32 == 0 && threads > 0 && threads <= 1024) ||
           (threads >= 2 && threads < 32 && (threads & (threads - 1)) == 0);
}

/** How often each buffer is read in `s`. */
std::map<const VarNode *, int> reads(const Stmt &s) {
    std::map<const VarNode *, int> n;
    visit_exprs(s, [&](const Expr &e) {
        if (const Load *l = e.as<Load>()) n[l->buffer.get()]++;
    });
    return n;
}

class WarpReductions : public IRMutator {
public:
    explicit WarpReductions(std::map<const VarNode *, int> kernel_reads) : kernel_reads_(std::move(kernel_reads)) {}

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const Allocate *op, const Stmt &self) override {
        if (op->memory != MemoryType::GpuShared) return IRMutator::mutate_node(op, self);
        if (Stmt s = rewrite(op); s.defined()) return s;
        return IRMutator::mutate_node(op, self);
    }

private:
    std::map<const VarNode *, int> kernel_reads_;

    /** The rewritten reduction, or an undefined Stmt when `op` is not one (see the file comment). */
    Stmt rewrite(const Allocate *op) {
        const VarNode *part = op->buffer.get();
        const int64_t *size = as_const_int(op->size);
        const Block *list = op->body.as<Block>();
        if (!size || !list || list->stmts.size() != 2 || !op->buffer->type.is_float()) return {};
        const For *threads = list->stmts[0].as<For>();
        const For *lanes = list->stmts[1].as<For>();
        if (!threads || threads->for_kind != ForKind::GpuThreadX || !lanes || lanes->for_kind != ForKind::GpuLanes)
            return {};
        const int64_t *extent = as_const_int(threads->extent);
        const int64_t *lanes_extent = as_const_int(lanes->extent);
        if (!extent || *extent != *size || !warp_sized(*extent) || !lanes_extent || *lanes_extent != 1) return {};
        // The thread's part: allocate acc[1] { ...; P[slot] = acc[0] }.
        const Allocate *acc = threads->body.as<Allocate>();
        const Block *acc_list = acc ? acc->body.as<Block>() : nullptr;
        if (!acc || acc->memory != MemoryType::Stack || !acc_list || acc_list->stmts.empty()) return {};
        const Store *publish = acc_list->stmts.back().as<Store>();
        if (!publish || publish->buffer.get() != part) return {};
        // Thread t's part goes to slot t - m, so a slot's lane in its warp is the slot mod 32.
        const Expr slot = simplify(Sub::make(var_expr(threads->var), threads->min));
        if (!equal(simplify(publish->index), slot)) return {};
        // The combine: X[I] = init; for p: X[I] = op(X[I], P[p]); epilogue.
        const Block *single = lanes->body.as<Block>();
        if (!single || single->stmts.size() < 2) return {};
        const Store *init = single->stmts[0].as<Store>();
        const For *fold = single->stmts[1].as<For>();
        const Store *update = fold ? fold->body.as<Store>() : nullptr;
        if (!init || !update || update->buffer.get() != init->buffer.get()) return {};
        const char *helper = warp_helper(update->value);
        if (!helper) return {};
        // Nothing else reads the parts.
        int uses = 0;
        visit_exprs(op->body, [&](const Expr &e) {
            if (const Load *l = e.as<Load>()) uses += l->buffer.get() == part;
        });
        if (uses != 1) return {};
        const Expr acc0 = Load::make(acc->buffer, IntImm::make(0));
        std::vector<Stmt> thread_body(acc_list->stmts.begin(), acc_list->stmts.end() - 1);
        const std::string shuffle = *extent < 32 ? std::string(helper) + "_w" + std::to_string(*extent) : helper;
        thread_body.push_back(
            Store::make(acc->buffer, IntImm::make(0), Call::make(acc->buffer->type, shuffle, {acc0})));
        if (*extent > 32) {
            // Several warps: each combines its lanes' parts with shuffles and lane 0 publishes the
            // warp's value; the one-thread fold after the barrier then reads one part per warp.
            const int64_t warps = *extent / 32;
            thread_body.push_back(IfThenElse::make(EQ::make(Mod::make(slot, IntImm::make(32)), IntImm::make(0)),
                                                   Store::make(op->buffer, Div::make(slot, IntImm::make(32)), acc0)));
            Stmt per_thread = For::make(threads->var, threads->min, threads->extent, threads->for_kind,
                                        Allocate::make(acc->buffer, acc->size, Block::make(thread_body), acc->memory));
            std::vector<Stmt> combine(single->stmts.begin(), single->stmts.end());
            combine[1] = For::make(fold->var, fold->min, IntImm::make(warps), fold->for_kind, fold->body);
            Stmt fold_warps = For::make(lanes->var, lanes->min, lanes->extent, lanes->for_kind, Block::make(combine));
            return Allocate::make(op->buffer, IntImm::make(warps), Block::make({per_thread, fold_warps}), op->memory);
        }
        // One warp: the result is written by lane 0 with no barrier after it: nothing else in the
        // kernel may read it (a consumer computed in the same kernel keeps the shared-memory form).
        if (reads(op->body)[init->buffer.get()] != kernel_reads_[init->buffer.get()]) return {};
        std::vector<Stmt> first = {
            single->stmts[0], Store::make(init->buffer, init->index,
                                          with_operands(update->value, Load::make(init->buffer, init->index), acc0))};
        first.insert(first.end(), single->stmts.begin() + 2, single->stmts.end());
        thread_body.push_back(IfThenElse::make(EQ::make(var_expr(threads->var), threads->min), Block::make(first)));
        Stmt body = Allocate::make(acc->buffer, acc->size, Block::make(thread_body), acc->memory);
        return For::make(threads->var, threads->min, threads->extent, threads->for_kind, body);
    }
};

} // namespace

Stmt warp_reductions(const Stmt &kernel_body, const std::vector<ForKind> &exact_bindings) {
    bool x_exact = false;
    for (ForKind k : exact_bindings)
        x_exact = x_exact || k == ForKind::GpuThreadX;
    bool only_x = true, any = false;
    int64_t block = -1; // every x loop's extent: the block's threads, exactly
    visit_stmts(kernel_body, [&](const Stmt &s) {
        if (const For *f = s.as<For>()) {
            if (is_gpu_thread(f->for_kind) && f->for_kind != ForKind::GpuThreadX) only_x = false;
            if (f->for_kind == ForKind::GpuThreadX) {
                const int64_t *e = as_const_int(f->extent);
                only_x = only_x && e && warp_sized(*e) && (block < 0 || *e == block);
                if (e) block = *e;
                any = true;
            }
        }
    });
    if (!x_exact || !only_x || !any) return kernel_body;
    return WarpReductions(reads(kernel_body)).mutate(kernel_body);
}

} // namespace cora::ir
