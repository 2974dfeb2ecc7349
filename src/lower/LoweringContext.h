/** \file What the passes of one compilation share (no global mutable state): the options, the
 * prover, the aux table, the pipeline's tensors and, after storage lowering, their storage. What a
 * pass computes for later passes (arguments, guards, permutations, the size query) it returns. */
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/Bounds.h"
#include "analysis/ProverChain.h"
#include "analysis/StorageLayout.h"
#include "cora/Target.h"
#include "front/Schedule.h"
#include "ir/Module.h"
#include "ir/Tensor.h"

namespace cora::ir {

/** Per-tensor storage facts decided by StorageLowering. */
struct TensorStorage {
    VarPtr buffer;
    Layout layout; ///< physical layout (storage transforms applied)
    FlatLayout flat;
};

/** A loop remap whose array must be a permutation of [0, extent) (checked at run time). */
struct Permutation {
    std::shared_ptr<const UFNode> fn;
    Expr extent;
    std::string loop;
};

struct LoweringContext {
    int debug = 0;
    bool remove_guards = true;        ///< false: every schedule guard stays (the prover still validates)
    bool build_aux_in_kernel = false; ///< aux arrays are built by the kernel, not passed (AOT)
    Target target = Target::Host;     ///< where the kernels run (GPU bindings allowed only on a GPU target)
    std::unique_ptr<ProverChain> prover;
    /** This compilation's aux arrays: one symbol per structure (AuxTable.h). Interning is a cache,
     * so passes with a const context may add to it. */
    mutable AuxTable aux;
    std::vector<TensorPtr> funcs;                        ///< computed tensors, producers first
    std::vector<TensorPtr> inlined;                      ///< Funcs expanded into their readers (compute_inline)
    std::vector<TensorPtr> inputs;                       ///< input tensors, in first-use order
    std::vector<TensorPtr> outputs;                      ///< the pipeline's outputs
    std::map<const TensorNode *, TensorStorage> storage; ///< set by storage_lowering
    /** The schedules chosen for ops the user left unscheduled (DefaultSchedule.cpp). */
    std::map<const TensorNode *, front::Schedule> default_schedules;
    /** The schedule an op's loops follow: the user's, or the default chosen for it. */
    const front::Schedule &schedule_of(const TensorNode &f) const {
        auto it = default_schedules.find(&f);
        return it != default_schedules.end() ? it->second : front::schedule_of(f);
    }
    bool is_output(const TensorNode *t) const {
        for (auto &o : outputs)
            if (o.get() == t) return true;
        return false;
    }
};

} // namespace cora::ir
