/** \file The vgemm pipeline, shared by the generator (ahead of time) and the tests (JIT, small
 * tiles). C[b] = A[b] * W[b] for a batch of GEMMs with per-item M, N, K; each operand is
 * stored packed, item after item, each item row-major (exactly what a per-item sgemm reads). */
#pragma once

#include <cora/cora.h>

#include <algorithm>

namespace cora::apps {

/** The register tile and the k-panel depth (the generator's params). panel_depth * tile_cols
 * floats of W are packed per panel: at most 16384. */
struct VGemmTiling {
    int64_t tile_rows = 4, tile_cols = 64, panel_depth = 256;
};

struct VGemm {
    Dim batch{"batch"}, m{"m"}, n{"n"}, k{"k"}, r{"r"}, mo{"mo"}, mi{"mi"}, no{"no"}, ni{"ni"}, ko{"ko"}, ki{"ki"},
        panel{"panel"};
    Param B{"B", 1, 4096};
    LengthArray M{"M", B, 0, 8192}, N{"N", B, 0, 8192}, K{"K", B, 0, 8192};
    Tensor A{"A", {{batch, B}, {m, M(batch)}, {k, K(batch)}}};
    Tensor W{"W", {{batch, B}, {k, K(batch)}, {n, N(batch)}}};
    /** The loop domain lists n before m so that an item's column panels can be fused with the
     * batch loop (fuse takes adjacent domain loops); the storage stays row-major. */
    Func C{"C", {{batch, B}, {n, N(batch)}, {m, M(batch)}}};

    /** The schedule:
     * - Work units are (item, tile_cols-column panel) pairs: one parallel loop over the panels
     *   of every item (a fused ragged loop, dynamic chunks). One item (a dense GEMM) then uses
     *   every thread, and a batch balances without ordering the items.
     * - Per unit, per panel_depth-deep k-panel: W's panel (panel_depth x tile_cols) is packed
     *   once (cache_read: contiguous, unlike W's rows N floats apart), then every row tile of
     *   A passes over it, accumulating in registers and into C between k-panels.
     * - Operation splits: the head runs full tiles with no checks. The last M mod tile_rows
     *   rows run 1-row vector strips; the last columns of the head rows run tile_rows x
     *   (tile_cols / 4) vector tiles, then single columns. */
    explicit VGemm(const VGemmTiling &tiling = {}) {
        const int64_t kRows = tiling.tile_rows, kCols = tiling.tile_cols, kPanel = tiling.panel_depth;
        const int64_t kNarrowCols = std::max<int64_t>(kCols / 4, 1);
        C.compute([&](Expr b, Expr j, Expr i) { return sum(r, K(b), A(b, i, r) * W(b, r, j)); });
        C.reorder_storage({batch, m, n});
        Expr rows = M(batch.var()), cols = N(batch.var());
        Func rows_tail = C.split_op(m, floor_mult(rows, kRows));
        Func cols_tail = C.split_op(n, floor_mult(cols, kCols));
        Func cols_last = cols_tail.split_op(n, floor_mult(cols - floor_mult(cols, kCols), kNarrowCols));
        C.split(n, no, ni, kCols)
            .fuse(batch, no, panel)
            .split(m, mo, mi, kRows)
            .split(r, ko, ki, kPanel)
            .reorder({panel, ko, mo, ki, mi, ni})
            .parallel(panel)
            .unroll(mi)
            .vectorize(ni)
            .cache_read(W, ko)
            .cache_write(mo);
        rows_tail.split(n, no, ni, kCols).reorder({batch, m, no, r, ni}).vectorize(ni).cache_write(no);
        cols_tail.split(m, mo, mi, kRows)
            .split(n, no, ni, kNarrowCols)
            .reorder({batch, mo, no, r, mi, ni})
            .unroll(mi)
            .vectorize(ni)
            .cache_write(no);
        cols_last.reorder({batch, m, r, n});
    }
};

} // namespace cora::apps
