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

/** A list of the tiles of a grid of positions [batch, rows, cols] cut into tile_h x tile_w tiles,
 * which a Tiles transform iterates (formats/spatial/, cora/Spatial.h): `order`, an aux array of
 * [tiles][3] entries (n, ty, tx), lists the active tiles first, in row-major order, then the
 * inactive ones; `count` ([1]) holds how many are active. Both are built by the prelude from a
 * run-time mask (a ShapeTensor) and facts bound each entry by the grid. */
struct TileList {
    std::string name;
    std::shared_ptr<const UFNode> order, count;
    std::shared_ptr<const UFNode> bitmap; ///< [batch][tile rows][tile cols], 0/1: what order and count are built from
    Expr batch, rows, cols;               ///< the extents of the positions the tiles cover
    int64_t tile_h = 1, tile_w = 1;
    Expr tile_rows() const { return Div::make(Add::make(rows, IntImm::make(tile_h - 1)), IntImm::make(tile_h)); }
    Expr tile_cols() const { return Div::make(Add::make(cols, IntImm::make(tile_w - 1)), IntImm::make(tile_w)); }
    /** The number of tiles: batch * ceil(rows / tile_h) * ceil(cols / tile_w). */
    Expr grid_tiles() const { return Mul::make(batch, Mul::make(tile_rows(), tile_cols())); }
};

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
    enum class Kind : uint8_t { Split, Fuse, Pad, Remap, Tiles };
    Kind kind;
    DimPtr parent, outer, inner, fused;
    int64_t factor = 1;
    /** Remap: loop `parent` becomes loop `outer` (its rank) with parent = perm(rank), where perm
     * is `permutation` (a user LengthArray) or, when that is null, the prelude's ordering of
     * the parent's indices by decreasing `cost` (longest first; ties by index). */
    std::shared_ptr<const UFNode> permutation;
    Expr cost;
    /** Tiles: the loops `tiled` (n, y, x: the batch and the two position dims) become
     * `tile_loops` (the tile's rank in `tiles`, y and x within the tile), in place:
     * n = order(r, 0), y = order(r, 1) * tile_h + yi, x = order(r, 2) * tile_w + xi, over the
     * active tiles (r = rank < count) or, with `inactive_tiles`, the others (r = count + rank). */
    std::shared_ptr<const TileList> tiles{};
    bool inactive_tiles = false;
    std::vector<DimPtr> tiled{}, tile_loops{};
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
    /** compute_root: stored even where lowering would inline it by default (a Func read once,
     * elementwise); the loop schedule is unaffected. */
    bool keep_stored = false;
    /** fill_inactive_tiles: the op writing a value at the positions of the inactive tiles of this
     * Func's Tiles transform (a tail: it writes this Func's storage), or null. */
    TensorPtr inactive_fill;
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
     * the start of each iteration of `at`, and read from there. `order`: the positions of
     * `tensor`'s domain dims in the tile, outermost first (a transposed tile), or empty for the
     * domain's own order. */
    struct CacheRead {
        TensorPtr tensor;
        DimPtr at;
        std::vector<size_t> order;
    };
    std::vector<CacheRead> cache_reads;
    /** specialize_interior: this loop's body also runs as a copy without the border checks
     * that provably hold for every iteration inside it (lower/SpecializeInterior.cpp), or null. */
    DimPtr interior_at;
    bool empty() const {
        return transforms.empty() && order.empty() && annotations.empty() && !reduction_loop && !cache_write_at &&
               cache_reads.empty() && !interior_at;
    }
};

} // namespace cora::ir
