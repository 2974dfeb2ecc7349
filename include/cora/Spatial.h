/** \file Spatial sparsity (DynaSpa, SIGE, SBNet): a run-time mask says which output positions of a
 * [batch, rows, cols] grid matter, and a kernel computes only the tiles that hold one.
 *
 * An ActiveTiles is the list of the active tile_h x tile_w tiles of that grid, built by the
 * prelude once per mask (RaggedShape) and shared by every kernel that iterates it; a Func
 * iterates it with Func::over_active_tiles, which turns its batch and position loops into a loop
 * over the active tiles and two loops inside a tile. Each tile reads its inputs directly from the
 * dense tensors (no gathered copy); positions past the grid's edge are neither computed nor
 * written. Positions outside the active tiles keep what the output held (incremental inference
 * on a cached output, as SIGE does), or get a value (Func::fill_inactive_tiles).
 *
 *     Param N("N", 1, 64), H("H", 1, 4096), W("W", 1, 4096);
 *     ShapeTensor mask("mask", {N, H, W}, 0, 1);          // uint8 or int32 [N, H, W] at run time
 *     ActiveTiles tiles = ActiveTiles::from_mask("tiles", mask, 8, 8);
 *     Func out("out", {{n, N}, {y, H}, {x, W}, {c, 64}});
 *     out.compute(...);                                   // the dense definition (a convolution)
 *     out.over_active_tiles(tiles, n, y, x, tile, yi, xi);
 *
 * The masks users hold come in three forms: a dense mask [N, H, W] (from_mask), active
 * coordinates [K, 3] = (batch, y, x), batch first as spconv and TorchSparse hold them
 * (from_coordinates), and tile origins [K, 3] = (batch, y0, x0), as SIGE and SBNet produce them
 * (from_tile_origins). A layer whose output feeds a convolution computed on a list must cover the
 * positions that convolution reads: grown() gives that list (the halo of a 3x3 convolution is 1).
 *
 * Every list is checked when it is built: a coordinate or origin out of range, repeated, or an
 * origin off the tile grid is a RuntimeError naming the entry, and nothing is written. Design:
 * docs/design.md ("Spatial sparsity"); the format's code: src/formats/spatial/. */
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cora/Expr.h"

namespace cora {

namespace ir {
struct TileList;
}

class ActiveTiles {
public:
    /** The tiles of the grid [N, ceil(H / stride), ceil(W / stride)] whose positions cover an
     * active (nonzero) element of `mask` ([N, H, W], values in [0, 1]): output position (y, x)
     * covers mask elements [y * stride, (y + 1) * stride) x [x * stride, (x + 1) * stride), so a
     * stride-2 layer takes the mask of its input. CompileError for a mask that is not 3-D or has
     * values outside [0, 1], a tile size or stride that is not positive, or an empty name. */
    static ActiveTiles from_mask(const std::string &name, const ShapeTensor &mask, int64_t tile_h, int64_t tile_w,
                                 int64_t stride = 1);
    /** The tiles of the grid [batch, rows, cols] holding one of the active positions listed in
     * `coordinates` ([K, 3]: batch index, y, x per row). At run time each must lie in the grid and
     * appear once. */
    static ActiveTiles from_coordinates(const std::string &name, const ShapeTensor &coordinates, const Expr &batch,
                                        const Expr &rows, const Expr &cols, int64_t tile_h, int64_t tile_w);
    /** The tiles listed in `origins` ([K, 3]: batch index, y0, x0 of a tile's first position). At
     * run time each must lie in the grid, on the tile grid (y0 a multiple of tile_h, x0 of
     * tile_w), and appear once. */
    static ActiveTiles from_tile_origins(const std::string &name, const ShapeTensor &origins, const Expr &batch,
                                         const Expr &rows, const Expr &cols, int64_t tile_h, int64_t tile_w);

    /** The tiles (tile_h x tile_w, on the same grid) that a producer must compute so that a
     * consumer computing these tiles can read up to `halo` positions around each of its
     * positions: a tile is active when it lies within `halo` positions of an active tile here.
     * (For a consumer of stride 1; halo 1 for a 3x3 convolution.) */
    ActiveTiles grown(const std::string &name, int64_t halo, int64_t tile_h, int64_t tile_w) const;

    /** The same tiles, each widened by `halo` positions on every side and laid side by side: a
     * grid of [batch, TR * (tile_h + 2 halo), TC * (tile_w + 2 halo)] positions whose tile (n, ty,
     * tx) is the halo-padded copy of tile (n, ty, tx) here. A Func over it holds the gathered
     * input of a gather -> dense -> scatter schedule (apps/spatial/conv_layer.h, GatheredConv):
     * each active tile's region with its halo, copied once, read without bounds checks. The
     * arrays are this list's (no second build). */
    ActiveTiles gathered(const std::string &name, int64_t halo) const;

    const std::string &name() const;
    int64_t tile_h() const;
    int64_t tile_w() const;
    /** The grid's extents: batch, rows and cols of positions. */
    Expr batch() const;
    Expr rows() const;
    Expr cols() const;
    /** The number of active tiles (the prelude's count) and of all tiles of the grid. */
    Expr count() const;
    Expr grid_tiles() const;
    const std::shared_ptr<const ir::TileList> &node() const { return node_; }
    /** Wraps a list made by the format (src/formats/spatial/). */
    explicit ActiveTiles(std::shared_ptr<const ir::TileList> node) : node_(std::move(node)) {}

private:
    std::shared_ptr<const ir::TileList> node_;
};

/** Token sparsity (DynamicViT, A-ViT): a per-token keep mask [batch, tokens] makes a batch of
 * token sequences ragged, so the ragged machinery computes only the kept tokens. Image b keeps
 * `lengths[b]` tokens, at the original positions `positions[sum of lengths before b + s]` (in
 * order): bind `lengths` to a LengthArray and `positions` to an int32 index tensor [b, kept(b)]
 * (apps/spatial/vit_block.h reads the tokens through it). RuntimeError, naming the element, for a
 * mask value other than 0 or 1, a negative size, or null data. */
struct KeptTokens {
    std::vector<int32_t> lengths, positions;
};
KeptTokens kept_tokens(const uint8_t *keep_mask, int64_t batch, int64_t tokens);

} // namespace cora
