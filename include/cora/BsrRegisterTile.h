/** \file The register tile of a block-sparse product on the CPU: one rule for the hand schedule
 * (apps/sparse/bsr_linear.h, BsrTiling::for_matrix) and the default one
 * (src/lower/DefaultBlockSparseTiles.cpp), so the two cannot drift apart. */
#pragma once

#include <algorithm>
#include <cstdint>

namespace cora {

/** A tile of `tokens` tokens x `vector_rows` output rows: each token's vector of rows (a block's
 * rows are contiguous in column-major blocks) is multiplied by one broadcast X element per
 * column of the block and accumulated in registers. */
struct BsrRegisterTile {
    int64_t tokens = 6;
    int64_t vector_rows = 16;
};

/** The tile for column-major blocks of `block_rows` rows, X rows of `x_row_bytes` bytes apart (0:
 * unknown), chunks of `chunk_tokens` tokens and `vector_bits`-bit registers. It keeps 12
 * accumulators in flight, enough for two FMA pipes through the FMA latency. Measured on a 2-core
 * Zen 5 (AVX-512), 2 threads, 3,430 BERT tokens, bench/block_sparse.cpp --only=linear, each A/B
 * alternated in 3-4 rounds (2026-11-29):
 * - vector_rows: up to two registers of rows (32 with AVX-512, 16 with AVX2, 8 with SSE), at
 *   most the block's rows; one register's where two do not divide the block's rows (48 rows with
 *   AVX-512: 16). Where one does not divide them either (40 rows with AVX-512), the hand schedule
 *   gets a guarded remainder vector and the default keeps its plain nest. A 32x32 block with
 *   AVX-512 had one register of 16 rows x 6 tokens, 6 accumulators; the whole block row (two
 *   registers) took 20-33% less time at 50 / 25% density (768 x 3072 weight at 50%: 30-33 ms ->
 *   23-24 ms; dense sgemm 46 ms).
 * - tokens: 12 where a token's vector of rows fills at most one register (8- and 16-row blocks
 *   with AVX-512, 4- and 8-row ones with AVX2) and X's rows are not a multiple of 4 KB apart,
 *   else 6 (two registers per token hold 12 accumulators already). A multiple of 4 KB puts the
 *   tile's 12 X rows in one L1 set (their addresses agree below bit 12), and a line of each is
 *   read per block column: 12 tokens then ran anywhere from 5% faster to 1.75x slower, run to
 *   run (the rows' physical pages, which decide the L2 sets, change between runs). Measured, 6 ->
 *   12 tokens, 768 x 3072 weight at 50%:
 *   - 8x8 blocks, AVX-512: X rows of 3,104 floats 60-68 -> 49-53 ms; of 3,072 (12 KB) 58-60 ->
 *     54-57 ms in four rounds, 54-64 -> 94-95 ms in three others.
 *   - 16x16 blocks, AVX-512: 31.6-33.0 -> 24.0-28.8 ms with rows of 3,104 floats, 32.9-33.7 ->
 *     36.7-37.0 ms with 3,072.
 *   - 8x8 blocks, AVX2 (kernels built with -march=x86-64-v3 on that Zen 5): 57-78 -> 49-68 ms
 *     with rows of 3,104 floats; with 3,072, 69 -> 100 and 82 -> 104 ms in two rounds, 61 -> 55
 *     in a third.
 *   Unknown strides count as multiples of 4 KB. Also 6:
 *   - 192-token chunks (weights that stream from memory) keep 6: 12 took 7-21% more time on
 *     4096^3 at 25 / 10% (8x8 blocks).
 *   - Blocks of fewer than 4 rows (element-sparse rows, nothing to vectorize) keep 6. */
inline BsrRegisterTile bsr_register_tile(int64_t block_rows, int64_t x_row_bytes, int64_t chunk_tokens,
                                         int vector_bits) {
    BsrRegisterTile t;
    const int64_t lanes = std::max<int64_t>(vector_bits / 32, 1);
    t.vector_rows = std::min<int64_t>(block_rows, 2 * lanes);
    // Vectors that do not divide the block (48 rows with AVX-512) would leave a guarded remainder
    // in the vector loop (and the default schedule takes no such shape): one register's rows.
    if (block_rows % t.vector_rows != 0) t.vector_rows = std::min<int64_t>(block_rows, lanes);
    const bool rows_alias = x_row_bytes <= 0 || x_row_bytes % 4096 == 0;
    if (block_rows >= 4 && t.vector_rows <= lanes && !rows_alias && chunk_tokens % 12 == 0 && chunk_tokens < 192)
        t.tokens = 12;
    return t;
}

} // namespace cora
