/** \file The trmm pipeline and schedule, shared by the app and the benchmarks. */
#pragma once

#include <cora/cora.h>

#include <optional>

namespace cora::apps {

/** The blocking (defaults: what the app and the benchmarks run; the tests use smaller blocks
 * so that small sizes exercise every part). tile_rows is also the unit of the triangle's
 * padding. block_rows: the rows per block, the unit of load balancing and of the head/tail op
 * split (a multiple of tile_rows). panel_depth: the k-panel length; a tile's last panel may be
 * partial (its k loop is bounded, not guarded). block_cols is a multiple of tile_cols. */
struct TrmmBlocking {
    int64_t tile_rows = 8, tile_cols = 32, block_rows = 128, block_cols = 256, panel_depth = 512;
};

/** The blocking for a CPU's vector width: with 512-bit registers (32 of them) 4 x 64 register tiles
 * (4 vectors per row, the default contraction tile of cora's default schedule), else the 8 x 32
 * tiles tuned on an AVX2 Zen 3. Measured on a 2-core AVX-512 EPYC against cblas_strmm (OpenBLAS
 * SkylakeX kernel), 8 x 32 -> 4 x 64: M = 1024 0.84x -> 0.85x, 2048 0.86x -> 0.90x (1 thread
 * 0.87-0.90x -> 0.92-0.95x), 4096 0.90x -> 0.94x (apps/trmm/README.md). */
inline TrmmBlocking trmm_blocking_for(int vector_bits) {
    TrmmBlocking b;
    if (vector_bits >= 512) {
        b.tile_rows = 4;
        b.tile_cols = 64;
    }
    return b;
}

/** The trmm pipeline. The reduction runs over r < min(floor_mult(i, tile_rows) + tile_rows, M),
 * over the tile-padded lower triangle Lb: per register tile the reduction is rectangular, so the
 * k-panel loop can run outside the tiles (to the block's longest reduction; each tile's k loop
 * stops at its own). */
struct Trmm {
    Dim m{"m"}, n{"n"}, r{"r"}, nb{"nb"}, nc{"nc"}, mb{"mb"}, mr{"mr"}, mo{"mo"}, mi{"mi"}, no{"no"}, ni{"ni"},
        ko{"ko"}, ki{"ki"}, rank{"rank"};
    Param M{"M", 1, 16384}, N{"N", 1, 16384};
    Tensor L{"L", {{m, M}, {r, M}}}, B{"B", {{r, M}, {n, N}}};
    /** Row i of L up to the end of its tile's rows, upper triangle zeroed: a ragged tensor of
     * about M^2 / 2 + M * tile_rows / 2 elements, so the tile reads plain loads (no select in
     * the vector loop). */
    Func Lb;
    /** B in tile_cols-column panels, each panel's rows contiguous: a tile's k-steps read one stream. */
    Func Bp{"Bp", {{r, M}, {n, N}}};
    Func C{"C", {{m, M}, {n, N}}};

    explicit Trmm(const TrmmBlocking &blocking = {})
        : Lb("Lb", {{m, M}, {r, min(floor_mult(m.var(), blocking.tile_rows) + blocking.tile_rows, M)}}) {
        const int64_t kTileRows = blocking.tile_rows, kTileCols = blocking.tile_cols;
        const int64_t kBlockRows = blocking.block_rows, kPanel = blocking.panel_depth, kBlockCols = blocking.block_cols;
        Lb.compute([&](Expr i, Expr k) { return select(k <= i, L(i, k), 0.0f); });
        // One row per iteration (dynamic chunks), not a fused (row, column) loop: that loop would
        // read L through fusion maps with an entry per element (2.1 M at M = 2048), checked on
        // every call; the copy then cost more than the tiles' gap to cblas_strmm. (The default
        // made that fused loop before fusion_maps_cancel; it now makes this choice too.)
        Lb.parallel(m);
        Bp.compute([&](Expr k, Expr j) { return B(k, j); });
        Bp.split_storage(n, no, ni, kTileCols).reorder_storage({no, r, ni});
        // The copy writes Bp in storage order, a panel row (tile_cols floats) per statement, with
        // no column guard: the last N mod tile_cols columns are a separate op. (Guarded, the copy
        // was an `omp simd` loop with a branch: M = N = 2000, 1 thread, 0.78x -> 0.82x strmm.)
        Func bp_tail = Bp.split_op(n, floor_mult(N, kTileCols));
        Bp.split(n, no, ni, kTileCols).reorder({no, r, ni}).vectorize(ni);
        bp_tail.reorder({r, n});
        C.compute(
            [&](Expr i, Expr j) { return sum(r, min(floor_mult(i, kTileRows) + kTileRows, M), Lb(i, r) * Bp(r, j)); });
        // Operation splits: a head of full 128-row blocks and 32-column tiles (no guard at all);
        // the last rows (fewer than 128: full 32-column tiles, then the last columns); the last
        // columns of the head rows (fewer than 32).
        // Each column tail splits again: vector tiles tile_cols / 4 wide, then (when those are
        // wider than 4) vector tiles of 4 columns, then single columns. (A tail's dim counts from
        // its split point: N mod tile_cols columns.) With 4 x 64 tiles, N = 1500 leaves 28
        // columns: one 16-column tile and three of 4 columns. With 12 single columns after the
        // 16-column tile instead, M = N = 1500 ran 7% slower (apps/trmm/README.md).
        const int64_t kNarrowCols = std::max<int64_t>(kTileCols / 4, 1);
        const bool quads = kNarrowCols > 4;
        const Expr tail_cols = N - floor_mult(N, kTileCols);
        const Expr after_narrow = tail_cols - floor_mult(tail_cols, kNarrowCols);
        Func rows_tail = C.split_op(m, floor_mult(M, kBlockRows));
        Func corner = rows_tail.split_op(n, floor_mult(N, kTileCols));
        Func corner_next = corner.split_op(n, floor_mult(tail_cols, kNarrowCols));
        Func cols_tail = C.split_op(n, floor_mult(N, kTileCols));
        Func cols_next = cols_tail.split_op(n, floor_mult(tail_cols, kNarrowCols));
        std::optional<Func> corner_last, cols_last;
        if (quads) {
            corner_last = corner_next.split_op(n, floor_mult(after_narrow, 4));
            cols_last = cols_next.split_op(n, floor_mult(after_narrow, 4));
        }
        // Per 128-row block (longest first, in parallel), per 256-column block, per k-panel of
        // 512 rows: each 8 x 32 register tile accumulates its part of the panel into C (all of
        // it, or up to the end of the tile's triangle), reading the panel of Bp (512 x 32,
        // contiguous) and 8 rows of Lb. The column block keeps C's 128 x 256 block in L2 across
        // the panels; deep panels make the C-tile loads and stores rare.
        C.split(m, mb, mr, kBlockRows)
            .split(mr, mo, mi, kTileRows)
            .remap_longest_first(mb, rank, mb.var())
            .split(n, nc, ni, kTileCols)
            .split(nc, nb, no, kBlockCols / kTileCols)
            .split(r, ko, ki, kPanel)
            .reorder({rank, nb, ko, no, mo, ki, mi, ni})
            .parallel(rank)
            .unroll(mi)
            .vectorize(ni)
            .cache_write(mo);
        // The last rows run over the whole reduction: 8 x 32 tiles, in parallel over columns.
        rows_tail.split(m, mb, mr, kBlockRows)
            .split(mr, mo, mi, kTileRows)
            .split(n, no, ni, kTileCols)
            .reorder({mb, no, mo, r, mi, ni})
            .parallel(no)
            .unroll(mi)
            .vectorize(ni)
            .cache_write(mo);
        // The last columns, over the whole reduction: tile_rows x `cols` vector tiles, or
        // tile_rows x 1 scalar tiles (cols = 1). (Scalar tiles alone made M = N = 2000, 16 columns
        // past the last full 32-column tile, run at 0.84x of 2048's speed.) The head rows' column
        // tails run their 128-row blocks longest first, as the head does (parallel either way: a
        // nest's outermost loop is by default).
        auto last_columns = [&](Func &f, int64_t cols, bool head_rows) {
            f.split(m, mb, mr, kBlockRows).split(mr, mo, mi, kTileRows);
            if (head_rows) f.remap_longest_first(mb, rank, mb.var());
            const Dim &rows = head_rows ? rank : mb;
            if (cols == 1)
                f.reorder({rows, mo, n, r, mi}).unroll(mi).cache_write(n);
            else
                f.split(n, no, ni, cols).reorder({rows, mo, no, r, mi, ni}).unroll(mi).vectorize(ni).cache_write(no);
            if (head_rows) f.parallel(rank);
        };
        last_columns(corner, kNarrowCols, false);
        last_columns(cols_tail, kNarrowCols, true);
        last_columns(corner_next, quads ? 4 : 1, false);
        last_columns(cols_next, quads ? 4 : 1, true);
        if (quads) {
            last_columns(*corner_last, 1, false);
            last_columns(*cols_last, 1, true);
        }
    }
};

} // namespace cora::apps
