/** \file Barriers between the phases of a CUDA block, for the CUDA printer (CodeGen_CUDA.cpp).
 *
 * A device kernel's body, inside its block loops, is a sequence of phases: thread loops, each run
 * by every thread of the block for its own indices, and gpu_lanes loops (copies and folds shared by
 * the block, which the printer brackets with __syncthreads). The emulation (CodeGen_Emulated) runs
 * the phases one after another for the whole block, so a phase sees everything the phases before
 * it wrote. On a GPU that holds only across a barrier: a thread may start phase 2 while others are
 * still in phase 1. That happens when a Func computed at a block loop (compute_at) is read by its
 * consumer's threads at other indices: a row of scores written by a thread per key, then reduced
 * by a warp.
 *
 * PhaseOrder keeps what the phases since the last barrier read and wrote in shared or global
 * memory (per-thread arrays are private: local memory in CUDA, even when allocated outside the
 * thread loops); a phase that reads what one of them wrote, or writes what one of them read or
 * wrote, needs a barrier before it. The order is conservative: it does not prove that two phases
 * touch an element from the same thread (a reduction's init and update nests bind the same
 * threads to the same indices, and get a barrier between them all the same when they are separate
 * phases over global memory).
 *
 * Loops and branches at block level: a loop's body is checked once more after itself (the next
 * iteration's first phases against its last ones: loop_back_needs_barrier); after a branch or a
 * loop, what either path (or no iteration) may have left is kept. */
#pragma once

#include <set>

#include "ir/IR.h"

namespace cora::ir {

/** Buffers read and written in shared or global memory. */
struct PhaseAccesses {
    std::set<const VarNode *> reads, writes;
};

/** The loads and stores of `s` (a thread loop's body), leaving out the buffers in `per_thread` and
 * those `s` allocates per thread. */
PhaseAccesses phase_accesses(const Stmt &s, const std::set<const VarNode *> &per_thread);

/** Whether `s` contains a gpu_lanes loop (which the printer brackets with barriers) or a thread loop. */
bool has_block_phases(const Stmt &s);

class PhaseOrder {
public:
    /** Whether a phase with accesses `next` must wait for the phases since the last barrier. */
    bool needs_barrier(const PhaseAccesses &next) const;
    /** A phase ran (no barrier before it, or after barrier()). */
    void add(const PhaseAccesses &a);
    /** A barrier: nothing before it is pending. */
    void barrier() { pending_ = {}; }
    /** What either `this` or `other` may have pending (after a branch, or a loop that may not run). */
    void merge(const PhaseOrder &other);

private:
    PhaseAccesses pending_;
};

/** Whether a loop whose body is `body` needs a barrier at the end of the body: the body's first
 * phases, before any barrier, conflict with what its end leaves pending (`at_end`). */
bool loop_back_needs_barrier(const Stmt &body, PhaseOrder at_end, const std::set<const VarNode *> &per_thread);

} // namespace cora::ir
