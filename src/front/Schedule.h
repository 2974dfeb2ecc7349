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

#include "ir/Schedule.h"
#include "ir/Tensor.h"

namespace cora::front {

using DimPtr = std::shared_ptr<const ir::DimNode>;

/** The schedule's data (LoopTransform, OpSplit, Schedule) belongs to the IR (ir/Schedule.h), which
 * holds it in each TensorNode; the front end records it and replays it. */
using ir::LoopTransform;
using ir::OpSplit;
using ir::Schedule;

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
    /** Starting from the loop domain, then `reduction_loop` unless null: the schedule lowering
     * chose (a default's reduction loop is a Dim of its own, since the user's may be gone). */
    LoopReplay(const ir::TensorNode &f, const DimPtr &reduction_loop);
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
