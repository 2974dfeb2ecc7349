/** \file How a Func is scheduled, as the front end records it and lowering reads it.
 *
 * The primitives of Func (the front/ files named *Primitives.cpp) append to a Func's Schedule and check it for
 * local mistakes; lowering (lower/LoopPlan.cpp and the passes after it) applies it. LoopReplay is
 * the one place that knows how each loop transform changes the list of loops: the front end asks
 * it which dims are loops now, lowering builds extents and values on the same steps. */
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/Tensor.h"

namespace cora::front {

using DimPtr = std::shared_ptr<const ir::DimNode>;

/** How a loop runs, as the schedule says, is an ir::ForKind (one vocabulary from the schedule to
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
    std::shared_ptr<const ir::UFNode> permutation;
    Expr cost;
};

/** Operation splitting: the op's loops cover only [0, point) of its domain dim `dim`; `tail`, a
 * Func node that writes the same storage, covers [point, E) (its dim runs from 0, shifted). */
struct OpSplit {
    DimPtr dim;
    Expr point; ///< in terms of the dims outside `dim`, params and length arrays
    ir::TensorPtr tail;
};

/** How a Func's loop nest is built from its domain, recorded as data and applied by
 * lower/ (LoopPlan, ScheduleLoops). Empty: the default schedule (domain order, outermost loop parallel). */
struct Schedule {
    std::vector<LoopTransform> transforms; ///< applied in order
    std::vector<DimPtr> order;             ///< reorder requests, outermost first
    std::vector<std::pair<DimPtr, ir::ForKind>> annotations;
    /** Horizontal fusion: this Func's outermost loop and those of `hfuse` run as one loop. Weak:
     * a member may read the leader's inputs or be read by it; see hfuse_members(). */
    std::vector<std::weak_ptr<const ir::TensorNode>> hfuse;
    bool hfuse_member = false; ///< listed in another Func's hfuse group
    /** Operation splits, in order: each cuts the op's loops at its point (in the range the
     * earlier ones left) and hands the rest to its tail. Empty: the op is not split. */
    std::vector<OpSplit> op_splits;
    bool inlined = false; ///< compute_inline: expanded into its readers, never stored
    /** compute_at: this Func's loops run inside `at_consumer`'s loop over `at_loop` (set
     * together). Weak: the consumer reads this Func, so it owns it; a strong pointer back would be
     * a cycle that is never freed. */
    std::weak_ptr<const ir::TensorNode> at_consumer;
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
        ir::TensorPtr tensor;
        DimPtr at;
    };
    std::vector<CacheRead> cache_reads;
    bool empty() const {
        return transforms.empty() && order.empty() && annotations.empty() && !reduction_loop && !cache_write_at &&
               cache_reads.empty();
    }
};

/** The schedule of `t`: empty for inputs and for Funcs never scheduled. */
const Schedule &schedule_of(const ir::TensorNode &t);
/** The schedule of a Func being defined (created on first use). */
Schedule &mutable_schedule(ir::TensorNode &t);

/** The ranges the op's loops run over: the domain, with an op-split dim cut at its point. */
ir::Layout loop_domain(const ir::TensorNode &t);

/** The members of `t`'s horizontal fusion group, without `t` (CompileError when one no longer
 * exists). */
std::vector<ir::TensorPtr> hfuse_members(const ir::TensorNode &t);

/** The dim of t's definition when it is one reduction (sum/maximum/minimum over it). */
const ir::DimNode *reduction_dim(const ir::TensorNode &t);
/** The reduction dim and the loops split from it. */
bool is_reduction_loop(const ir::TensorNode &t, const ir::DimNode *d);
/** Whether `d` is a dim of t's loops at any point of its schedule (domain, reduction, made by a
 * transform). */
bool is_known_dim(const ir::TensorNode &t, const ir::DimNode *d);

/** Why `d` is not a loop of `t` now, and what to name instead (for "not a loop" errors): split,
 * fused or remapped away, the dim of a reduction that cannot be scheduled (several reductions,
 * or nested in another's body), or not one of its dims at all. */
std::string why_not_a_loop(const ir::TensorNode &t, const ir::DimNode *d);

/** The loops of a Func, transform after transform. Starts from its loop domain (then the
 * scheduled reduction loop, or with `with_reduction_dim` the definition's reduction dim, which
 * the front end can name before it becomes a loop). */
class LoopReplay {
public:
    explicit LoopReplay(const ir::TensorNode &f, bool with_reduction_dim = false);
    const std::vector<DimPtr> &loops() const { return loops_; }
    bool is_loop(const DimPtr &d) const;
    /** Whether `t` acts on loops of the current list (a transform after a skipped split may not). */
    bool applies(const LoopTransform &t) const;
    /** Applies `t` to the loop list; returns the position it acted on (the first of a fused pair). */
    size_t apply(const LoopTransform &t);

private:
    std::vector<DimPtr> loops_;
};

/** The loops of `f` after all its transforms, before reordering. */
std::vector<DimPtr> final_loops(const ir::TensorNode &f, bool with_reduction_dim = false);

} // namespace cora::front
