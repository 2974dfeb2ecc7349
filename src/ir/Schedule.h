/** \file How a Func's loop nest is built, as data: the record the front end's primitives append to
 * (and check) and lowering applies (lower/LoopPlan.cpp and the
 * passes after it). It lives in the IR so that a TensorNode owns its schedule without naming a
 * front-end type; front/Schedule.h replays it (LoopReplay). */
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/IR.h"

namespace cora::ir {

struct TensorNode;
using TensorPtr = std::shared_ptr<const TensorNode>;
using DimPtr = std::shared_ptr<const DimNode>;

/** How a loop runs, as the schedule says, is a ForKind (one vocabulary from the schedule to
 * the printers): Parallel, Vectorized, Unrolled, Dismantled, GpuMma (a 16-step reduction loop as
 * one tensor-core instruction per warp, Func::gpu_mma) and the Gpu block and thread axes. */

/** One step of a loop schedule, applied in the order given.
 *  - Split: loop `parent` becomes `outer` (extent ceil(E / factor)) and `inner` (extent factor),
 *    parent = outer * factor + inner.
 *  - Fuse: adjacent loops `outer`, `inner` become one loop `fused` over every (outer, inner)
 *    pair; a ragged inner extent uses the prelude's fusion maps fo(fused), fi(fused).
 *  - Pad: the extent E of loop `parent` becomes ceil_mult(E, factor); the extra iterations
 *    compute values nobody reads, so they must stay inside storage (else they are guarded). */
struct LoopTransform {
    enum class Kind : uint8_t { Split, Fuse, Pad, Remap };
    Kind kind;
    DimPtr parent, outer, inner, fused;
    int64_t factor = 1;
    /** Remap: loop `parent` becomes loop `outer` (its rank) with parent = perm(rank), where perm
     * is `permutation` (a user LengthArray) or, when that is null, the prelude's ordering of
     * the parent's indices by decreasing `cost` (longest first; ties by index). */
    std::shared_ptr<const UFNode> permutation;
    Expr cost;
};

/** Operation splitting: the op's loops cover only [0, point) of its domain dim `dim`; `tail`, a
 * Func node that writes the same storage, covers [point, E) (its dim runs from 0, shifted). */
struct OpSplit {
    DimPtr dim;
    Expr point; ///< in terms of the dims outside `dim`, params and length arrays
    TensorPtr tail;
};

/** How a Func's loop nest is built from its domain, recorded as data and applied by
 * lower/ (LoopPlan, ScheduleLoops). Empty: the default schedule (domain order, outermost loop parallel). */
struct Schedule {
    std::vector<LoopTransform> transforms; ///< applied in order
    std::vector<DimPtr> order;             ///< reorder requests, outermost first
    std::vector<std::pair<DimPtr, ForKind>> annotations;
    /** Horizontal fusion: this Func's outermost loop and those of `hfuse` run as one loop. Weak:
     * a member may read the leader's inputs or be read by it; see hfuse_members(). */
    std::vector<std::weak_ptr<const TensorNode>> hfuse;
    bool hfuse_member = false; ///< listed in another Func's hfuse group
    /** Operation splits, in order: each cuts the op's loops at its point (in the range the
     * earlier ones left) and hands the rest to its tail. Empty: the op is not split. */
    std::vector<OpSplit> op_splits;
    bool inlined = false; ///< compute_inline: expanded into its readers, never stored
    /** compute_at: this Func's loops run inside `at_consumer`'s loop over `at_loop` (set
     * together). Weak: the consumer reads this Func, so it owns it; a strong pointer back would be
     * a cycle that is never freed. */
    std::weak_ptr<const TensorNode> at_consumer;
    DimPtr at_loop;
    bool has_compute_at() const { return at_loop != nullptr; }
    /** The dim of a definition that is one reduction (sum/maximum/minimum over it), once a
     * primitive names it: it is then a loop of the nest (innermost, until split or reordered),
     * the elements are initialised before the first reduction loop and updated inside it. */
    DimPtr reduction_loop;
    /** cache_write: the elements computed inside this loop live in a per-iteration dense tile
     * (initialised, updated, then written to storage once). */
    DimPtr cache_write_at;
    /** cache_read: the region of `tensor` read inside loop `at` is copied into a dense tile at
     * the start of each iteration of `at`, and read from there. */
    struct CacheRead {
        TensorPtr tensor;
        DimPtr at;
    };
    std::vector<CacheRead> cache_reads;
    bool empty() const {
        return transforms.empty() && order.empty() && annotations.empty() && !reduction_loop && !cache_write_at &&
               cache_reads.empty();
    }
};

} // namespace cora::ir
