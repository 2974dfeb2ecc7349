/** \file Barriers between the phases of a CUDA block (CudaPhaseBarriers.h). */
#include "codegen/CudaPhaseBarriers.h"

#include "ir/IRVisitor.h"

namespace cora::ir {

PhaseAccesses phase_accesses(const Stmt &s, const std::set<const VarNode *> &per_thread) {
    PhaseAccesses a;
    std::set<const VarNode *> private_buffers = per_thread;
    visit_stmts(s, [&](const Stmt &st) {
        if (const Allocate *alloc = st.as<Allocate>())
            if (alloc->memory != MemoryType::GpuShared) private_buffers.insert(alloc->buffer.get());
    });
    visit_stmts(s, [&](const Stmt &st) {
        if (const Store *store = st.as<Store>())
            if (!private_buffers.count(store->buffer.get())) a.writes.insert(store->buffer.get());
    });
    visit_exprs(s, [&](const Expr &e) {
        if (const Load *load = e.as<Load>())
            if (!private_buffers.count(load->buffer.get())) a.reads.insert(load->buffer.get());
    });
    return a;
}

bool has_block_phases(const Stmt &s) {
    bool found = false;
    visit_stmts(s, [&](const Stmt &st) {
        if (const For *f = st.as<For>())
            found = found || is_gpu_thread(f->for_kind) || f->for_kind == ForKind::GpuLanes;
    });
    return found;
}

namespace {

bool intersects(const std::set<const VarNode *> &a, const std::set<const VarNode *> &b) {
    for (const VarNode *v : a)
        if (b.count(v)) return true;
    return false;
}

/** Walks the block-level statements of a loop body in order, as the printer would, until the first
 * barrier; `hazard` once a phase conflicts with the state. */
class LoopHeadWalk {
public:
    LoopHeadWalk(PhaseOrder state, const std::set<const VarNode *> &per_thread)
        : state_(std::move(state)), per_thread_(per_thread) {}
    /** Returns whether the walk may go on after `s` (no barrier on every path through it). */
    bool walk(const Stmt &s) {
        if (!s.defined() || hazard) return false;
        if (const Block *b = s.as<Block>()) {
            for (const Stmt &x : b->stmts)
                if (!walk(x)) return false;
            return true;
        }
        if (const LetStmt *l = s.as<LetStmt>()) return walk(l->body);
        if (const Allocate *a = s.as<Allocate>()) {
            if (a->memory != MemoryType::GpuShared) per_thread_.insert(a->buffer.get());
            return walk(a->body);
        }
        if (const IfThenElse *i = s.as<IfThenElse>()) {
            // Either branch may run: a hazard on either counts; go on unless both end at a barrier.
            PhaseOrder saved = state_;
            bool then_goes_on = walk(i->then_case);
            PhaseOrder after_then = state_;
            state_ = saved;
            bool else_goes_on = !i->else_case.defined() || walk(i->else_case);
            state_.merge(after_then);
            return then_goes_on || else_goes_on;
        }
        if (const For *f = s.as<For>()) {
            if (f->for_kind == ForKind::GpuLanes) return false; // bracketed by barriers
            if (is_gpu_thread(f->for_kind)) {
                PhaseAccesses a = phase_accesses(f->body, per_thread_);
                if (state_.needs_barrier(a)) hazard = true;
                state_.add(a);
                return !hazard;
            }
            walk(f->body); // may run no iteration: go on either way
            return !hazard;
        }
        return true;
    }
    bool hazard = false;

private:
    PhaseOrder state_;
    std::set<const VarNode *> per_thread_;
};

} // namespace

bool PhaseOrder::needs_barrier(const PhaseAccesses &next) const {
    return intersects(next.reads, pending_.writes) || intersects(next.writes, pending_.writes) ||
           intersects(next.writes, pending_.reads);
}

void PhaseOrder::add(const PhaseAccesses &a) {
    pending_.reads.insert(a.reads.begin(), a.reads.end());
    pending_.writes.insert(a.writes.begin(), a.writes.end());
}

void PhaseOrder::merge(const PhaseOrder &other) { add(other.pending_); }

bool loop_back_needs_barrier(const Stmt &body, PhaseOrder at_end, const std::set<const VarNode *> &per_thread) {
    LoopHeadWalk walk(std::move(at_end), per_thread);
    walk.walk(body);
    return walk.hazard;
}

} // namespace cora::ir
