/** \file The steps that turn each op's schedule into a loop nest, in the order Lower.cpp runs
 * them, and the plan they share. One file per step:
 *   choose_default_schedules (DefaultSchedule.cpp)  the schedule of ops left unscheduled
 *   row_fused_defaults (DefaultRowFusion.cpp)       a row's reductions computed at the row
 *   plan_loops (LoopPlan.cpp)             transforms replayed on front::LoopReplay, reorder,
 *                                         extents in loop variables, loop kinds
 *   check_gpu_bindings (GpuBindings.cpp)  loops bound to GPU blocks/threads fit the target
 *   check_padded_iterations (PadSafety)   whether padded iterations stay inside storage
 *   add_guards (Guards.cpp)               each guard at the innermost loop it uses; proved
 *                                         guards dropped
 *   bound_loops_by_guards (Guards.cpp)    a kept guard `i + rest < e` becomes loop i's bound
 *   apply_cache_reads (CacheRead.cpp)     cache_read tiles and the element reading them
 *   build_loop_nest (LoopNest.cpp)        the nest: cache_write tiles, reduction init/update
 *   apply_compute_at (ComputeAt.cpp)      producers moved into their consumers' loops
 *   apply_specialize_interior             a loop's body copied without the border checks that
 *     (SpecializeInterior.cpp)            hold inside it, run when they do
 *   apply_hfuse (HFuse.cpp)               independent ops joined into one loop
 * Requires: a validated pipeline, inlined Funcs selected. Ensures: one loop nest per op
 * (producers first), each ending in Provides. Errors: CompileError naming the Func and loop. */
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "front/Schedule.h"
#include "lower/LoweringContext.h"

namespace cora::ir {

using front::DimPtr;

/** The body runs only when value < extent (both in the op's root variables). */
struct Guard {
    Expr value, extent;
    std::string dim;
    bool pad; ///< from pad_loop: removable when the padded iterations are safe
};

/** The loops of one op after its transforms, before reordering. */
struct TransformedLoops {
    std::vector<DimPtr> loops;
    std::map<const DimNode *, Expr> extent; ///< in terms of domain (root) variables
    /** value[d]: the value of dim d (domain or intermediate) in terms of the loop variables. */
    std::map<const VarNode *, Expr> value;
    std::vector<Guard> guards;
    std::vector<Permutation> permutations; ///< remaps, checked at run time
};

/** Applies the op's loop transforms in order. With `skip_splits`, splits are left out: the result
 * runs the same (guarded) iterations in a simpler nest, where padded iterations are checked;
 * nullopt when a later transform uses a loop a split made. (LoopPlan.cpp) */
std::optional<TransformedLoops> apply_transforms(const TensorPtr &f, bool skip_splits, const LoweringContext &ctx);

/** Everything decided about one op's loops before its nest is built. */
struct LoopPlan {
    TensorPtr op;
    TransformedLoops transformed;
    std::vector<DimPtr> loops;  ///< outermost first, after reordering
    std::vector<Expr> extents;  ///< in loop variables (a split's outer loop widened where needed)
    Scope scope;                ///< each loop over its extent
    Scope constant_loops;       ///< the loops of constant extent
    std::vector<ForKind> kinds; ///< default parallel outermost loop, then the annotations
    std::vector<bool> is_reduction;
    Expr value;                                ///< the definition, inlined Funcs expanded
    const Reduce *red = nullptr;               ///< the scheduled reduction (its dim a loop of the nest), if any
    Expr red_body;                             ///< its body, in the reduction loop's variable
    VarPtr acc;                                ///< stands for the finished reduction in `epilogue`
    Expr epilogue;                             ///< applied to the finished reduction (ir/Epilogue.h); undefined: none
    std::vector<Expr> store_at;                ///< the stored indices, in root variables
    TensorPtr target;                          ///< the tensor whose storage the op writes
    const front::Schedule *schedule = nullptr; ///< the user's, or the default (ctx.schedule_of)

    /** `e` (in root variables) in terms of the loop variables, simplified. */
    Expr now(const Expr &e) const;
    /** The position of loop `d` in the final nest; CompileError naming `what` otherwise. */
    size_t position_of(const DimPtr &d, const char *what) const;
    /** Whether `e` uses a reduction loop. */
    bool uses_reduction_loop(const Expr &e) const;
    /** The element computed per iteration: the reduction's body, else the definition. */
    Expr element() const { return red ? red_body : value; }
};

/** Checks the op splits, replays the transforms, applies the reorder requests, resolves extents
 * and loop kinds. (LoopPlan.cpp) */
LoopPlan plan_loops(const TensorPtr &f, const LoweringContext &ctx);

/** The op's GPU bindings against the target: none on the host; on a GPU, block loops outermost,
 * threads inside them, no parallel loop. (GpuBindings.cpp) */
void check_gpu_bindings(const LoopPlan &plan, Target target);

/** With padded loops: why a padded iteration may read outside storage ("" when every read stays
 * inside, or nothing is padded); CompileError when the store itself may leave storage.
 * (PadSafety.cpp) */
std::string check_padded_iterations(const LoopPlan &plan, const LoweringContext &ctx);

/** The kept guards, by depth: at[k] guards the body of loop k-1 (at[0]: the whole nest). */
struct PlacedGuards {
    std::vector<std::vector<Expr>> at;
    int removed = 0, kept = 0;      ///< schedule guards proved redundant / kept
    std::vector<Expr> loop_extents; ///< extents after bound_loops_by_guards
};
/** Attaches each guard to the innermost loop it uses, unless the prover shows it always holds
 * (pad guards: unless `pad_unsafe` says why not). (Guards.cpp) */
PlacedGuards add_guards(const LoopPlan &plan, const std::string &pad_unsafe, const LoweringContext &ctx);
/** A kept guard `i + rest < e` on the serial loop over i it is attached to becomes the loop's
 * bound min(extent, e - rest). (Guards.cpp) */
void bound_loops_by_guards(const LoopPlan &plan, PlacedGuards &guards);

/** The largest per-tile cache (elements); it lives on the stack of a loop body. */
constexpr int64_t kMaxTileElements = 16384;

/** A cache_read tile: filled by `copy` at the start of its loop's body. */
struct CacheTile {
    VarPtr buffer;
    int64_t size;
    Stmt copy;
};
struct CacheReads {
    std::map<size_t, std::vector<CacheTile>> prologue; ///< loop position -> tiles filled as its body starts
    Expr element;                              ///< the element, reading the tiles, fusion-map values substituted
    std::vector<std::pair<VarPtr, Expr>> lets; ///< dims bound around each leaf (the others substituted)
    std::vector<Expr> store_at;                ///< the stored indices, fusion-map values substituted
    Expr epilogue;                             ///< the plan's epilogue, fusion-map values substituted
};
/** cache_read tiles of the op, and the element and indices of its leaf statements. (CacheRead.cpp) */
CacheReads apply_cache_reads(const LoopPlan &plan, const LoweringContext &ctx);

/** The op's loop nest, with its cache_write tile or reduction init/update nests. (LoopNest.cpp) */
Stmt build_loop_nest(const LoopPlan &plan, const PlacedGuards &guards, const CacheReads &reads,
                     const LoweringContext &ctx);

/** The ops in execution order: each Func, followed by the tails of its op splits. */
std::vector<TensorPtr> scheduled_ops(const LoweringContext &ctx);
/** A schedule for each op the user left unscheduled (DefaultSchedule.cpp). */
/** What the default schedules are chosen for: the target, and the vector registers' width in bits
 * on a CPU target (0: no register-tiled contractions). */
struct DefaultScheduleTarget {
    Target target = Target::Host;
    int vector_bits = 0;
    /** Register tiles chosen by Func name (CompileOptions::contraction_tiles), or null. */
    const std::map<std::string, ContractionTile> *tiles = nullptr;
};
/** The schedules chosen, and for each op given a register-tiled contraction the untiled default,
 * which Lower.cpp uses instead when the tiled one cannot be lowered. */
struct DefaultSchedules {
    ScheduleMap schedules, untiled;
    std::vector<TunableContraction> tunable; ///< the contractions the tile rules apply to
};
/** Vectors per row of a contraction's default register tile: 4 with 512-bit vectors, else 2, or
 * the largest smaller power of two whose columns divide `width`; 0 when none does. */
int default_tile_vectors(int64_t width, int vector_bits);
/** The reduction loop of a default schedule over `red`: a Dim of its own whose variable is the
 * reduction's (the user's Dim may no longer exist). (DefaultSchedule.cpp) */
DimPtr default_reduction_loop(const Reduce &red);
/** Whether `e` contains a reduction. (DefaultSchedule.cpp) */
bool has_reduction(const Expr &e);
/** Whether `f`'s storage keeps its innermost dim as declared (no transform but fuses), so its
 * innermost loop is a contiguous storage row. (DefaultSchedule.cpp) */
bool storage_keeps_innermost_dim(const TensorNode &f);
/** Step 5 of the default schedule (DefaultBlockSparseTiles.cpp): the register tiles of a
 * BsrMatrix row_times product over one token loop `tokens`, on top of step 1's fuses in `fused`;
 * nullopt when `f` is not that shape. */
std::optional<front::Schedule> block_sparse_tiles(const TensorNode &f, const front::Schedule &fused,
                                                  const DimPtr &tokens, const DefaultScheduleTarget &target);
/** The default schedule of each op of `ops` left unscheduled (DefaultSchedule.cpp).
 * `inline_reads_of`: an op's definition with the reads of inlined Funcs substituted
 * (lower/InlineFuncs.cpp's inline_reads), which the rules that look at its reads see; empty when
 * nothing is inlined. */
DefaultSchedules choose_default_schedules(const std::vector<TensorPtr> &ops, const DefaultScheduleTarget &target,
                                          const std::function<Expr(const Expr &)> &inline_reads_of = {});
/** The defaults of a row-wise op left unscheduled and of the per-row Funcs it reads replaced by
 * those Funcs computed at its row loop (compute_at), the row loop parallel: the replacement
 * schedules, to merge into `defaults` (DefaultRowFusion.cpp; host target only). */
ScheduleMap row_fused_defaults(const std::vector<TensorPtr> &ops, const ScheduleMap &defaults,
                               const LoweringContext &ctx);
/** Whether every read in `body` is contiguous in `v` (the last index steps by one as v does, the
 * others not at all, in a tensor stored in its declared order) or does not move with it.
 * (LowerReductions.cpp) */
bool reads_contiguously(const Expr &body, const VarPtr &v);
/** How `index` changes when `k` steps by one: 0, 1, or something else (-1). (LowerReductions.cpp) */
int step_of(const Expr &index, const VarPtr &k);
/** The domain dims of `t` that its loop `v` covers under schedule `s`, outermost first: the dim
 * itself, or both parts' dims for a loop made by fuse; empty for a loop made otherwise.
 * (ComputeAt.cpp) */
std::vector<DimPtr> dims_of_loop(const VarNode *v, const TensorNode &t, const front::Schedule &s);
/** Whether op `consumer` reads what op `producer` writes. (ComputeAt.cpp) */
bool reads(const TensorPtr &consumer, const TensorPtr &producer, const LoweringContext &ctx);
/** Moves each compute_at producer's nest into its consumer's loop; returns the producers whose
 * storage can hold one iteration's slice (ComputeAt.cpp). */
SlicedStorageMap apply_compute_at(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                                  const LoweringContext &ctx);
/** Each op's specialize_interior loop gets a copy of its body without the border checks that
 * provably hold inside it, run when they do. (SpecializeInterior.cpp) */
void apply_specialize_interior(const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests, const LoweringContext &ctx);
/** `nest` with the body of the loop over `loop` split into the interior copy and the original
 * (`found`: the loop was there). (SpecializeInterior.cpp) */
Stmt specialize_interior_loop(const Stmt &nest, const VarNode *loop, bool &found);
/** Joins each hfuse group into one loop; returns the whole body. (HFuse.cpp) */
Stmt apply_hfuse(const std::vector<TensorPtr> &ops, std::vector<Stmt> nests, const LoweringContext &ctx);

} // namespace cora::ir
