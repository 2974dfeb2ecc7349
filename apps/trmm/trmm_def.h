/** \file The trmm pipeline and schedule, shared by the app and the benchmarks. */
#pragma once

#include <cora/cora.h>

namespace cora::apps {

constexpr int64_t kTileRows = 4, kTileCols = 32;

/** The trmm pipeline. The reduction runs over r < min(floor_mult(i, 4) + 4, M), over the
 * block-padded lower triangle Lb: per 4-row tile the reduction is rectangular, so r can run
 * outside the tile's rows and the 4 x 32 tile stays in registers (cache_write). */
struct Trmm {
    Dim m{"m"}, n{"n"}, r{"r"}, mo{"mo"}, mi{"mi"}, no{"no"}, ni{"ni"}, rank{"rank"};
    Param M{"M", 1, 16384}, N{"N", 1, 16384};
    Tensor L{"L", {{m, M}, {r, M}}}, B{"B", {{r, M}, {n, N}}};
    /** Row i of L up to the end of its 4-row block, upper triangle zeroed: a ragged tensor of
     * about M^2 / 2 elements, so the tile reads plain loads (no select in the vector loop). */
    Func Lb{"Lb", {{m, M}, {r, min(floor_mult(m.var(), kTileRows) + kTileRows, M)}}};
    Func C{"C", {{m, M}, {n, N}}};

    Trmm() {
        Lb.compute([&](Expr i, Expr k) { return select(k <= i, L(i, k), 0.0f); });
        C.compute(
            [&](Expr i, Expr j) { return sum(r, min(floor_mult(i, kTileRows) + kTileRows, M), Lb(i, r) * B(r, j)); });
        // Operation splits: a head of full 4 x 32 tiles (no guard at all), the last rows (fewer
        // than 4) and the last columns of the head rows (fewer than 32).
        Func rows_tail = C.split_op(m, floor_mult(M, kTileRows));
        Func cols_tail = C.split_op(n, floor_mult(N, kTileCols));
        // Tile rows have cost ~ their index: the longest start first, in parallel. The 4 x 32
        // tile accumulates in registers while r runs over the rows of B.
        C.split(m, mo, mi, kTileRows)
            .remap_longest_first(mo, rank, mo.var())
            .split(n, no, ni, kTileCols)
            .reorder({rank, no, r, mi, ni})
            .parallel(rank)
            .unroll(mi)
            .vectorize(ni)
            .cache_write(no);
        rows_tail.split(n, no, ni, kTileCols).reorder({m, no, r, ni}).vectorize(ni).cache_write(no);
        cols_tail.split(m, mo, mi, kTileRows).reorder({mo, n, r, mi}).unroll(mi).cache_write(n);
    }
};

} // namespace cora::apps
