/** \file What the passes of one compilation share (no global mutable state): the options, the
 * prover, the aux table, the pipeline's tensors and the schedules lowering chose. Every pass takes
 * it const (the prover and the aux table are services: asking one a question or interning an
 * array changes no result); only Lower.cpp writes it, with what a pass returned
 * (select_inlined's InlineSelection, choose_default_schedules' ScheduleMap). What a later pass
 * needs from an earlier one (storage, arguments, guards, permutations, the size query) is
 * returned and passed to it as an argument in Lower.cpp, so each pass can be run alone
 * (tests/pass). */
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/Bounds.h"
#include "analysis/ProverChain.h"
#include "cora/ContractionTile.h"
#include "cora/Target.h"
#include "formats/ragged/StorageLayout.h"
#include "front/Schedule.h"
#include "ir/Module.h"
#include "ir/Tensor.h"
#include "lower/GpuLimits.h"

namespace cora::ir {

/** A contraction that got a register-tiled default schedule (what Pipeline::tune may choose for). */
struct TunableContraction {
    std::string func;        ///< the Func's name (the key of CompileOptions::contraction_tiles)
    std::string definition;  ///< its domain and definition, printed (a tuning table's key hashes it)
    int64_t width = 0;       ///< the constant row the tile's columns cover
    bool has_panels = false; ///< the reduction has a constant depth (panel sizes matter)
    int default_vectors = 0; ///< vectors per tile row of the default tile (default_tile_vectors)
};

/** A producer computed at a consumer's loop (compute_at) and stored one slice at a time: its
 * buffer holds only the elements of the current iteration of the loops it shares with the
 * consumer, allocated in that loop's body (per thread when the loop is parallel). ComputeAt.cpp
 * decides which producers are sliced; storage lowering indexes within the slice. */
struct SlicedStorage {
    const VarNode *loop = nullptr; ///< the consumer's loop whose body holds one slice
    size_t shared_dims = 0; ///< the producer's outermost dims a slice fixes (those the loops down to `loop` cover)
    /** A loop down to `loop` fuses several of those dims (a default's fused row loop), so the
     * fixed dims are not loop variables there: a slice is sized by its constant upper bound over
     * the declared ranges, on the stack (storage lowering keeps the producer whole when that bound
     * is unknown or past kStackSliceBytes). */
    bool through_fused_loop = false;
};
/** The largest slice kept on the stack (AllocateIntermediates.cpp), and the largest one of a
 * fused loop's (above). */
constexpr int64_t kStackSliceBytes = 4096;
/** The producers stored in slices (apply_compute_at's result). */
using SlicedStorageMap = std::map<const TensorNode *, SlicedStorage>;

/** Per-tensor storage facts decided by StorageLowering. */
struct TensorStorage {
    VarPtr buffer;
    Layout layout; ///< physical layout (storage transforms applied)
    FlatLayout flat;
    /** A sliced producer (SlicedStorage): the loop whose body allocates one slice, and the slice's
     * element count in terms of the dims it fixes; null / undefined when stored whole. */
    const VarNode *slice_loop = nullptr;
    Expr slice_size;
};
/** Schedules chosen by lowering, by op (choose_default_schedules' result). */
using ScheduleMap = std::map<const TensorNode *, front::Schedule>;
/** Every tensor's storage (storage_lowering's result). */
using StorageMap = std::map<const TensorNode *, TensorStorage>;

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
    GpuLimits gpu_limits;             ///< a GPU target's launch limits (the device's, from the backend)
    std::unique_ptr<ProverChain> prover;
    /** This compilation's aux arrays: one symbol per structure (AuxTable.h). Interning is a cache,
     * so passes with a const context may add to it. */
    mutable AuxTable aux;
    std::vector<TensorPtr> funcs;   ///< computed tensors, producers first
    std::vector<TensorPtr> inlined; ///< Funcs expanded into their readers (compute_inline)
    std::vector<TensorPtr> inputs;  ///< input tensors, in first-use order
    std::vector<TensorPtr> outputs; ///< the pipeline's outputs
    /** The schedules chosen for ops the user left unscheduled (DefaultSchedule.cpp). */
    ScheduleMap default_schedules;
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
