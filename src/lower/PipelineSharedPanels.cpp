/** \file Pass: shared-memory panels in stages, for copies issued ahead (Target::Cuda, device kernels).
 *
 * Why. A GEMM-like kernel's serial k-panel loop starts each iteration by copying the panels it
 * reads into shared memory (gpu_lanes loops between two barriers) and only then computes on them:
 * while a panel's global loads are in flight no thread of the block has work (docs/gpu.md, "Where
 * the gap is"). With each shared tile held in S stages, iteration k + S - 1's copies can be in flight
 * while iteration k computes: Triton's num_stages, CUTLASS's multistage main loop. This pass lays
 * the tiles out in stages; the CUDA printer issues the copies ahead (cp.async, CodeGen_CUDA.cpp).
 *
 * Does: a serial loop L of a kernel, outside its thread loops, whose body is a chain of shared
 * tiles and their gpu_lanes copies followed by the rest of the body,
 *     for k in [m, m + n):  allocate shared T1[n1] { copy T1; allocate shared T2[n2] { copy T2; rest } }
 * becomes
 *     allocate shared T1[S * n1] { allocate shared T2[S * n2] {
 *       pipelined(S) for k in [m, m + n): { copy T1; copy T2; rest } } }
 * where every access to Ti inside L (the copies' and the rest's) is offset by ((k - m) % S) * ni:
 * iteration k uses stage (k - m) % S. As a serial loop (the emulators, the interpreter, CUDA on CPU
 * threads with its copies done at once) this means what the loop did; the CUDA printer issues
 * iteration k's copies S - 1 iterations early, which is safe because
 *  - the copies store only to the chain's tiles, and load only from buffers the kernel neither
 *    allocates nor stores to, and read no variable the kernel assigns: read early, they read the
 *    same values;
 *  - the rest does not store to the tiles: stage (k - m) % S holds iteration k's panels until every
 *    thread is done with iteration k (the barrier at the start of iteration k + 1), after which
 *    iteration k + 1 issues the copies that overwrite it (for iteration k + S);
 *  - the rest does not start with a gpu_lanes loop: the printer takes a pipelined body's leading
 *    gpu_lanes loops as its copies.
 * L is left as it is when any of that does not hold, or when the kernel's shared memory with S
 * stages would pass the device's static limit. Inputs: a kernel body (after split_host_device,
 * slice_thread_tiles and warp_reductions), the stage count S (2 .. 4; 1: nothing changes), the
 * limits. Output: the body. Requires: the copies are gpu_lanes loops (SplitHostDevice.cpp). Ensures:
 * a pipelined loop's body is a Block whose leading statements are its copies, and nothing else.
 * Tests: tests/pass/cuda_pipelined_copies.cpp (the pass alone), tests/correctness/gpu_pipelined_copies.cpp. */
#include <set>
#include <vector>

#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Lower.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The shared tiles and copies at the start of a loop body, and what follows them. */
struct PanelChain {
    std::vector<const Allocate *> tiles;
    std::vector<Stmt> copies;
    std::vector<Stmt> rest;
    bool is_tile(const VarNode *b) const {
        for (const Allocate *a : tiles)
            if (a->buffer.get() == b) return true;
        return false;
    }
};

/** Whether `s` is a gpu_lanes loop that stores only to the chain's tiles. */
bool is_tile_copy(const Stmt &s, const PanelChain &chain) {
    const For *f = s.as<For>();
    if (!f || f->for_kind != ForKind::GpuLanes) return false;
    bool only_tiles = true, any = false;
    visit_stmts(s, [&](const Stmt &x) {
        if (const Store *st = x.as<Store>()) {
            any = true;
            only_tiles = only_tiles && chain.is_tile(st->buffer.get());
        }
    });
    return any && only_tiles;
}

/** Splits a loop body into its chain of shared tiles and copies, and the rest. */
void peel_chain(const Stmt &s, PanelChain &chain) {
    if (!chain.rest.empty()) {
        chain.rest.push_back(s);
        return;
    }
    if (const Allocate *a = s.as<Allocate>(); a && a->memory == MemoryType::GpuShared && as_const_int(a->size)) {
        chain.tiles.push_back(a);
        peel_chain(a->body, chain);
        return;
    }
    if (const Block *b = s.as<Block>()) {
        for (size_t i = 0; i < b->stmts.size(); i++) {
            const Stmt &x = b->stmts[i];
            // A tile allocated in the middle of a block would have to move over the statements
            // before it: only the last statement continues the chain as an allocation.
            if (chain.rest.empty() && x.as<Allocate>() && i + 1 < b->stmts.size())
                chain.rest.push_back(x);
            else
                peel_chain(x, chain);
        }
        return;
    }
    if (is_tile_copy(s, chain))
        chain.copies.push_back(s);
    else
        chain.rest.push_back(s);
}

/** Every access to `tile` offset by `offset` elements. */
class OffsetTile : public IRMutator {
public:
    OffsetTile(const VarNode *tile, Expr offset) : tile_(tile), offset_(std::move(offset)) {}

protected:
    using IRMutator::mutate_node;
    Expr mutate_node(const Load *op, const Expr &self) override {
        Expr r = IRMutator::mutate_node(op, self);
        if (op->buffer.get() != tile_) return r;
        const Load *l = r.as<Load>();
        return Load::make(l->buffer, Add::make(l->index, offset_));
    }
    Stmt mutate_node(const Store *op, const Stmt &self) override {
        Stmt r = IRMutator::mutate_node(op, self);
        if (op->buffer.get() != tile_) return r;
        const Store *st = r.as<Store>();
        return Store::make(st->buffer, Add::make(st->index, offset_), st->value);
    }

private:
    const VarNode *tile_;
    Expr offset_;
};

class PipelinePanels : public IRMutator {
public:
    PipelinePanels(const Stmt &kernel, int stages, const GpuLimits &limits) : stages_(stages), limits_(limits) {
        visit_stmts(kernel, [&](const Stmt &x) {
            if (const Store *st = x.as<Store>()) stored_.insert(st->buffer.get());
            if (const Assign *a = x.as<Assign>()) assigned_.insert(a->var.get());
            if (const Allocate *a = x.as<Allocate>()) {
                allocated_.insert(a->buffer.get());
                if (a->memory == MemoryType::GpuShared)
                    shared_bytes_ += *as_const_int(a->size) * a->buffer->type.bytes();
            }
        });
    }

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        if (is_gpu_thread(op->for_kind)) return self; // copies into shared memory are outside thread loops
        Stmt r = IRMutator::mutate_node(op, self);    // inner loops first: their tiles stay theirs
        const For *loop = r.as<For>();
        if (loop->for_kind != ForKind::Serial || loop->pipeline_stages > 1) return r;
        PanelChain chain;
        peel_chain(loop->body, chain);
        if (chain.tiles.empty() || chain.copies.empty() || chain.rest.empty() || !copies_read_inputs(chain) ||
            rest_writes_tiles(chain) || starts_with_lanes(chain.rest.front()))
            return r;
        int64_t extra = 0; // the bytes the S - 1 more stages take
        for (const Allocate *a : chain.tiles)
            extra += (stages_ - 1) * *as_const_int(a->size) * a->buffer->type.bytes();
        if (shared_bytes_ + extra > limits_.max_static_shared_bytes) return r;
        shared_bytes_ += extra;

        std::vector<Stmt> body = chain.copies;
        body.insert(body.end(), chain.rest.begin(), chain.rest.end());
        Stmt staged = Block::make(body);
        const Expr stage = Mod::make(Sub::make(var_expr(loop->var), loop->min), IntImm::make(stages_));
        for (const Allocate *a : chain.tiles)
            staged = OffsetTile(a->buffer.get(), simplify(Mul::make(stage, a->size))).mutate(staged);
        Stmt out = loop->with([&](For &f) {
            f.body = staged;
            f.pipeline_stages = stages_;
        });
        for (size_t i = chain.tiles.size(); i-- > 0;) {
            const Allocate *a = chain.tiles[i];
            out = Allocate::make(a->buffer, IntImm::make(*as_const_int(a->size) * stages_), out, MemoryType::GpuShared);
        }
        return out;
    }

private:
    const int stages_;
    const GpuLimits &limits_;
    std::set<const VarNode *> stored_, allocated_, assigned_;
    int64_t shared_bytes_ = 0;

    /** The copies load only from buffers the kernel neither allocates nor stores to, and read no
     * mutable local the kernel assigns. */
    bool copies_read_inputs(const PanelChain &chain) const {
        bool ok = true;
        for (const Stmt &c : chain.copies)
            visit_exprs(c, [&](const Expr &e) {
                if (const Load *l = e.as<Load>())
                    ok = ok && !stored_.count(l->buffer.get()) && !allocated_.count(l->buffer.get());
                if (const Var *v = e.as<Var>()) ok = ok && !assigned_.count(v);
            });
        return ok;
    }
    static bool starts_with_lanes(const Stmt &s) {
        const For *f = s.as<For>();
        return f && f->for_kind == ForKind::GpuLanes;
    }
    bool rest_writes_tiles(const PanelChain &chain) const {
        bool writes = false;
        for (const Stmt &s : chain.rest)
            visit_stmts(s, [&](const Stmt &x) {
                if (const Store *st = x.as<Store>()) writes = writes || chain.is_tile(st->buffer.get());
            });
        return writes;
    }
};

} // namespace

Stmt pipeline_shared_panels(const Stmt &kernel_body, int stages, const GpuLimits &limits) {
    CORA_CHECK(stages >= 1 && stages <= kMaxGpuCopyStages, "pipeline_shared_panels: ", stages, " stages");
    if (stages == 1) return kernel_body;
    return PipelinePanels(kernel_body, stages, limits).mutate(kernel_body);
}

} // namespace cora::ir
