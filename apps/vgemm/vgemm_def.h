/** \file The vgemm pipeline, shared by the generator (ahead of time) and the app (reference
 * shapes). C[b] = A[b] * W[b] for a batch of GEMMs with per-item M, N, K; each operand is
 * stored packed, item after item, each item row-major (exactly what a per-item sgemm reads). */
#pragma once

#include <cora/cora.h>

namespace cora::apps {

struct VGemm {
    Dim batch{"batch"}, m{"m"}, n{"n"}, k{"k"}, r{"r"}, mo{"mo"}, mi{"mi"}, no{"no"}, ni{"ni"}, rank{"rank"};
    Param B{"B", 1, 4096};
    LengthArray M{"M", B, 0, 8192}, N{"N", B, 0, 8192}, K{"K", B, 0, 8192};
    Tensor A{"A", {{batch, B}, {m, M(batch)}, {k, K(batch)}}};
    Tensor W{"W", {{batch, B}, {k, K(batch)}, {n, N(batch)}}};
    Func C{"C", {{batch, B}, {m, M(batch)}, {n, N(batch)}}};

    /** The register-tiled schedule: full tile_rows x tile_cols tiles in a check-free head (two
     * operation splits take the last rows and columns of each item), items longest first
     * (cost M*N*K) across threads. For each column panel of W (K x tile_cols, kept in L2), all
     * row tiles of A pass over it; each tile accumulates in registers over the whole K. */
    VGemm(int64_t tile_rows, int64_t tile_cols) {
        C.compute([&](Expr b, Expr i, Expr j) { return sum(r, K(b), A(b, i, r) * W(b, r, j)); });
        Func rows_tail = C.split_op(m, floor_mult(M(batch.var()), tile_rows));
        Func cols_tail = C.split_op(n, floor_mult(N(batch.var()), tile_cols));
        C.remap_longest_first(batch, rank, M(batch.var()) * N(batch.var()) * K(batch.var()))
            .split(m, mo, mi, tile_rows)
            .split(n, no, ni, tile_cols)
            .reorder({rank, no, mo, r, mi, ni})
            .parallel(rank)
            .unroll(mi)
            .vectorize(ni)
            .cache_write(mo);
        rows_tail.split(n, no, ni, tile_cols).reorder({batch, m, no, r, ni}).vectorize(ni).cache_write(no);
        cols_tail.reorder({batch, m, r, n});
    }
};

} // namespace cora::apps
