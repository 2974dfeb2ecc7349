/** \file The aux kinds of active-tile lists (cora/Spatial.h): a bitmap of the active tiles of a
 * grid, built from a mask, a coordinate list, a tile-origin list or (grown) another bitmap; and
 * from a bitmap the two arrays kernels read, the tiles in order (active first) and their count.
 * Each kind builds its array in IR (compiled by AOT kernels, interpreted never: the host prelude
 * takes the native build, which tests hold equal to the IR) and checks a passed array by building
 * it again and comparing. */
#pragma once

#include <memory>

#include "analysis/AuxKind.h"

namespace cora::ir {

/** A grid of positions [batch, rows, cols] cut into tile_h x tile_w tiles (the last row and
 * column of tiles may be partial). Tile (n, ty, tx) has the flat index (n * TR + ty) * TC + tx. */
struct TileGrid {
    Expr batch, rows, cols;
    int64_t tile_h = 1, tile_w = 1;
    Expr tile_rows() const; ///< TR = ceil(rows / tile_h)
    Expr tile_cols() const; ///< TC = ceil(cols / tile_w)
    Expr tiles() const;     ///< batch * TR * TC
};

/** The bitmap [batch][TR][TC] (0/1): tile (n, ty, tx) is active when `mask` ([batch, H, W],
 * values 0/1) has a nonzero element among those its positions cover; position (y, x) covers the
 * mask elements [y * stride, (y + 1) * stride) x [x * stride, (x + 1) * stride). */
std::shared_ptr<const AuxKind> tile_bitmap_from_mask(std::shared_ptr<const UFNode> mask, TileGrid grid, int64_t stride);
/** The bitmap of the tiles holding a position listed in `coords` ([K, 3]: batch, y, x); each
 * must lie in the grid and appear once (a RuntimeError naming the row, `list_name` in it). */
std::shared_ptr<const AuxKind> tile_bitmap_from_coordinates(std::shared_ptr<const UFNode> coords, TileGrid grid);
/** The bitmap of the tiles listed in `origins` ([K, 3]: batch, y0, x0); each must lie in the
 * grid, on the tile grid, and appear once. */
std::shared_ptr<const AuxKind> tile_bitmap_from_origins(std::shared_ptr<const UFNode> origins, TileGrid grid);
/** The bitmap of the tiles of `grid` within `halo` positions of an active tile of `consumer`
 * (a bitmap over `consumer_grid`: the same positions, possibly other tiles). */
std::shared_ptr<const AuxKind> tile_bitmap_grown(std::shared_ptr<const UFNode> consumer, TileGrid consumer_grid,
                                                 int64_t halo, TileGrid grid);
/** The tiles of `bitmap` in order, [tiles][3] entries (n, ty, tx): the active ones row-major,
 * then the inactive ones row-major. */
std::shared_ptr<const AuxKind> tile_order_kind(std::shared_ptr<const UFNode> bitmap, TileGrid grid);
/** [1]: the number of active tiles of `bitmap`. */
std::shared_ptr<const AuxKind> tile_count_kind(std::shared_ptr<const UFNode> bitmap, TileGrid grid);

} // namespace cora::ir
