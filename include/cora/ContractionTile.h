/** \file The register tile a contraction left unscheduled gets: a compile option, and what the
 * tuner (cora/Tune.h) measures and records. */
#pragma once

namespace cora {

/** The register tile of a contraction left unscheduled (user guide §4b: a float32 `sum` over k of
 * a row operand times a column operand read along a constant-width row), chosen by Func name in
 * CompileOptions::contraction_tiles; Pipeline::tune measures candidates and records the winner.
 * A choice that does not fit the Func (vectors that do not divide its row, a panel larger than a
 * cache tile) is a CompileError naming it. */
struct ContractionTile {
    bool tiled = true; ///< false: the untiled default (the reduction outside a vectorized row)
    int rows = 4;      ///< rows of the tile, 1 to 16 (an unrolled loop)
    /** Vectors per tile row: 1, 2, 4 or 8. 0: 4 with 512-bit registers, else 2 (or the largest
     * smaller one that divides the row). */
    int vectors = 0;
    int panel = 256; ///< depth of the column operand's panels (copied once per tile column)
    bool operator==(const ContractionTile &o) const {
        return tiled == o.tiled && rows == o.rows && vectors == o.vectors && panel == o.panel;
    }
};

} // namespace cora
