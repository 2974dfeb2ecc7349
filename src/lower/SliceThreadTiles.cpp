/** \file Pass: per-thread slices of block-level register tiles (Target::Cuda, device kernels).
 *
 * Why. A GEMM that reads shared-memory k-panels keeps its accumulators across the panels: its
 * cache_write tile sits at a block loop, outside the k-panel loop and the thread loops, so the
 * tile covers the whole block's outputs (e.g. 8 x 8 threads of 4 x 4 = 1024 floats) and each
 * thread touches only its own part. On the CPU and in Target::CudaEmulated, where thread loops
 * are loops, that tile is what the semantics needs. In CUDA, a local array is per thread: kept
 * whole it would be 1024 floats of local memory per thread. This pass gives each thread only
 * its slice (16 floats, registers once the tile loops are unrolled).
 *
 * Does: a Stack allocation in a kernel, outside every thread loop, is sliced when
 *  - every load and store of it lies inside thread loops binding exactly the kernel's thread
 *    axes, with constant extents E_a;
 *  - each index (lets inlined; no mutable local in it) is  sum_a c_a * t_a + r  with t_a the
 *    thread loop variables, c_a > 0 constants, the same for every access, and r free of them;
 *  - the strides are a mixed radix: sorted, c_(1) >= S and c_(a+1) >= c_(a) * E_(a), where
 *    S = c_(1), and every r is proved in [0, S) over the loops around it (Bounds.h).
 * Then distinct threads touch disjoint elements (no element of the block tile is shared), so a
 * private tile of S elements indexed by r computes the same values. The allocation's size
 * becomes S and each index r. Anything else is left as it was (correct, one whole tile per thread).
 * Requires: split_host_device (kernels, loop kinds final). Ensures: the sliced tile's accesses
 * do not mention thread variables.
 * Tests: tests/correctness/gpu_schedules.cpp ("accumulators across shared-memory k-panels"). */
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "analysis/Bounds.h"
#include "analysis/Simplify.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"

namespace cora::ir {

namespace {

/** The thread loops around an access: axis -> (variable, constant extent). */
using ThreadLoops = std::map<int, std::pair<const VarNode *, int64_t>>;

/** Decides whether one tile can be sliced, and the new index of each access. */
class TileSlicer : public IRVisitor {
public:
    TileSlicer(const VarNode *tile, std::set<int> kernel_axes) : tile_(tile), kernel_axes_(std::move(kernel_axes)) {}

    bool ok = true;
    int64_t slice = 0;                      ///< S
    std::map<const void *, Expr> new_index; ///< by Load/Store node
    std::map<int, int64_t> strides;         ///< c_a by axis

    /** After the walk: the mixed-radix condition and the ranges of the rests. */
    bool finish() {
        if (!ok || new_index.empty()) return false;
        std::vector<std::pair<int64_t, int64_t>> by_stride; // (c_a, E_a)
        for (const auto &[axis, c] : strides)
            by_stride.push_back({c, extents_.at(axis)});
        std::sort(by_stride.begin(), by_stride.end());
        slice = by_stride.front().first;
        for (size_t a = 0; a + 1 < by_stride.size(); a++)
            if (by_stride[a + 1].first < by_stride[a].first * by_stride[a].second) return false;
        for (const auto &[lo, hi] : rest_bounds_)
            if (lo < 0 || hi >= slice) return false;
        return true;
    }

protected:
    using IRVisitor::visit_node;
    void visit_node(const For *op) override {
        visit(op->min);
        visit(op->extent);
        scope_.push_back({op->var.get(), op->min, op->extent});
        bool bound = is_gpu_thread(op->for_kind);
        if (bound) {
            const int64_t *e = as_const_int(op->extent);
            const int64_t *m = as_const_int(op->min);
            if (!e || !m || *m != 0) ok = false;
            threads_[gpu_axis(op->for_kind)] = {op->var.get(), e ? *e : 0};
        }
        visit(op->body);
        if (bound) threads_.erase(gpu_axis(op->for_kind));
        scope_.pop_back();
    }
    void visit_node(const LetStmt *op) override {
        visit(op->value);
        lets_[op->var.get()] = inline_lets(op->value);
        visit(op->body);
        lets_.erase(op->var.get());
    }
    void visit_node(const LocalVar *op) override {
        locals_.insert(op->var.get());
        IRVisitor::visit_node(op);
    }
    void visit_node(const Load *op) override {
        IRVisitor::visit_node(op);
        if (op->buffer.get() == tile_) access(op, op->index);
    }
    void visit_node(const Store *op) override {
        IRVisitor::visit_node(op);
        if (op->buffer.get() == tile_) access(op, op->index);
    }

private:
    const VarNode *tile_;
    std::set<int> kernel_axes_;
    ThreadLoops threads_;
    std::map<int, int64_t> extents_;
    Scope scope_;
    std::map<const VarNode *, Expr> lets_;
    std::set<const VarNode *> locals_;
    std::vector<std::pair<int64_t, int64_t>> rest_bounds_;

    Expr inline_lets(const Expr &e) const { return lets_.empty() ? e : substitute(e, lets_); }

    void access(const void *node, const Expr &raw_index) {
        if (!ok) return;
        std::set<int> axes;
        for (const auto &[axis, loop] : threads_)
            axes.insert(axis);
        if (axes.empty() || axes != kernel_axes_) {
            ok = false;
            return;
        }
        Expr index = simplify(inline_lets(raw_index));
        for (const VarNode *v : locals_)
            if (uses_var(index, v)) {
                ok = false;
                return;
            }
        std::map<const VarNode *, Expr> zero;
        for (const auto &[axis, loop] : threads_) {
            const VarNode *thread_var = loop.first; // (a lambda may not capture a structured binding in C++17)
            auto at = [&](int64_t value) { return substitute(index, thread_var, IntImm::make(value)); };
            const Expr d1 = simplify(Sub::make(at(1), at(0))), d2 = simplify(Sub::make(at(2), at(0)));
            const int64_t *c = as_const_int(d1), *c2 = as_const_int(d2);
            if (!c || !c2 || *c <= 0 || *c2 != 2 * *c) {
                ok = false;
                return;
            }
            auto [it, fresh] = strides.insert({axis, *c});
            if (!fresh && it->second != *c) {
                ok = false;
                return;
            }
            extents_[axis] = std::max(extents_[axis], loop.second);
            zero[loop.first] = IntImm::make(0);
        }
        Expr rest = simplify(substitute(index, zero));
        // Cross terms (c * t_x * t_y) would make the coefficient non-constant above; what is left
        // must not mention a thread variable.
        for (const auto &[axis, loop] : threads_)
            if (uses_var(rest, loop.first)) {
                ok = false;
                return;
            }
        Expr lo = symbolic_bound(rest, scope_, false), hi = symbolic_bound(rest, scope_, true);
        std::optional<int64_t> lo_c = lo.defined() ? constant_bound(simplify(lo), false) : std::nullopt;
        std::optional<int64_t> hi_c = hi.defined() ? constant_bound(simplify(hi), true) : std::nullopt;
        if (!lo_c || !hi_c) {
            ok = false;
            return;
        }
        rest_bounds_.push_back({*lo_c, *hi_c});
        auto [it, fresh] = new_index.insert({node, rest});
        if (!fresh && !equal(it->second, rest)) ok = false;
    }
};

/** Rewrites the accesses of one sliced tile. */
class ApplySlice : public IRMutator {
public:
    ApplySlice(const VarNode *tile, const std::map<const void *, Expr> &index) : tile_(tile), index_(index) {}

protected:
    using IRMutator::mutate_node;
    Expr mutate_node(const Load *op, const Expr &self) override {
        Expr e = IRMutator::mutate_node(op, self);
        if (op->buffer.get() != tile_) return e;
        return Load::make(op->buffer, index_.at(op));
    }
    Stmt mutate_node(const Store *op, const Stmt &self) override {
        if (op->buffer.get() != tile_) return IRMutator::mutate_node(op, self);
        return Store::make(op->buffer, index_.at(op), mutate(op->value));
    }

private:
    const VarNode *tile_;
    const std::map<const void *, Expr> &index_;
};

class SliceThreadTiles : public IRMutator {
public:
    explicit SliceThreadTiles(std::set<int> axes) : axes_(std::move(axes)) {}

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const For *op, const Stmt &self) override {
        threads_ += is_gpu_thread(op->for_kind);
        Stmt r = IRMutator::mutate_node(op, self);
        threads_ -= is_gpu_thread(op->for_kind);
        return r;
    }
    Stmt mutate_node(const Allocate *op, const Stmt &self) override {
        if (threads_ > 0 || op->memory != MemoryType::Stack || axes_.empty()) return IRMutator::mutate_node(op, self);
        TileSlicer slicer(op->buffer.get(), axes_);
        slicer.visit(op->body);
        const int64_t *size = as_const_int(op->size);
        if (!size || !slicer.finish() || slicer.slice >= *size) return IRMutator::mutate_node(op, self);
        Stmt body = ApplySlice(op->buffer.get(), slicer.new_index).mutate(op->body);
        return Allocate::make(op->buffer, IntImm::make(slicer.slice), mutate(body), op->memory);
    }

private:
    std::set<int> axes_;
    int threads_ = 0;
};

} // namespace

Stmt slice_thread_tiles(const Stmt &kernel_body) {
    std::set<int> axes;
    visit_stmts(kernel_body, [&](const Stmt &s) {
        if (const For *f = s.as<For>())
            if (is_gpu_thread(f->for_kind)) axes.insert(gpu_axis(f->for_kind));
    });
    return SliceThreadTiles(axes).mutate(kernel_body);
}

} // namespace cora::ir
