/** \file A linear layer with a block-sparse (BSR) weight over ragged packed tokens, as a cora
 * definition and schedule shared by the pruned feed-forward app, the tests and the benchmark:
 *
 *     Y[b, s, n] = act(sum over W's present blocks of X[b, s, k] * W[n, k] + bias[n])
 *
 * W is [out, in] as PyTorch's Linear.weight, pruned to blocks (BsrMatrix); X and Y are packed
 * tokens (fuse_storage(b, s, tok, chunk): item after item, the total padded to a multiple of the
 * token chunk, so the loop over all tokens of the batch has no remainder). The work is
 * proportional to the present blocks times the real tokens (plus at most chunk - 1 pad tokens):
 * pruning and raggedness save together.
 *
 * Schedule (the register tiles of a GEMM, over the present blocks):
 *     fused tokens -> chunks of `chunk_tokens` (parallel) x block rows x [row vectors] x
 *     token tiles of `tile_tokens`, then the row's present blocks (ko) x the block's columns (ki)
 *     inside, accumulating a tile_tokens x vector_rows register tile (cache_write).
 * A chunk's X rows stay in L2 while every block row streams past; one X element, broadcast, feeds
 * vector_rows outputs. Small blocks (block_cols <= 8) unroll the block's columns: a loop of 8
 * iterations around a 6 x 8 tile is mostly overhead otherwise (0.75x -> 1.51x dense at 50%,
 * 8x8 blocks, 768 x 3072 x 4000 tokens on a Zen 3; bench/block_sparse.sh). */
#pragma once

#include <cora/cora.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

namespace cora::apps {

struct BsrTiling {
    int64_t tile_tokens = 6;   ///< tokens per register tile
    int64_t vector_rows = 16;  ///< output rows per register tile (at most the block's rows)
    int64_t chunk_tokens = 24; ///< tokens per parallel chunk (a multiple of tile_tokens), also the bulk pad
    /** Unroll the loop over a block's columns: < 0 when block_cols <= 8, 0 no, > 0 yes. */
    int unroll_block_cols = -1;
    /** With a static pattern (BsrMatrix from BsrData): dismantle the block rows and each row's
     * present blocks, so the pattern is in the code (no column loads, constant offsets). The code
     * grows with tile_tokens per present block: keep 6-token tiles there (12-token ones doubled the
     * compile time of 461 8x8 blocks, 35 s -> 74 s, and ran slower, bench/block_sparse.sh). */
    bool dismantle = false;
    /** A GPU schedule (CUDA blocks and threads) instead of the CPU's: a block per (block row of W,
     * chunk of chunk_tokens tokens), a thread per (row of the block row, token), each summing over
     * its block row's present blocks (schedule_gpu). chunk_tokens is then at most 32. */
    bool gpu = false;

    /** The GPU tiling: chunks of 32 tokens (also the storage's bulk padding). */
    static BsrTiling for_gpu() {
        BsrTiling t;
        t.gpu = true;
        t.chunk_tokens = 32;
        return t;
    }

    /** The tiling for `W` on a CPU with `vector_bits`-bit registers, X being rows of W.cols()
     * floats (TokenDims::tokens): chunks of 24 tokens keep a chunk's X rows in L2 (K = 3072: 295
     * KB) while the present blocks stream from L2/L3; a weight too large for the last-level cache
     * (dense size over 16 MB, e.g. 4096 x 4096) streams from memory once per chunk instead, so
     * chunks grow to 192 tokens (4096^3 at 50%: 1.31x -> 1.67x dense on a Zen 3,
     * bench/block_sparse.sh). The register tile is cora::bsr_register_tile's (the default
     * schedule's too; cora/BsrRegisterTile.h has the rule and its measurements). */
    static BsrTiling for_matrix(const BsrMatrix &W, int vector_bits = host_vector_bits()) {
        BsrTiling t;
        if (W.rows() * W.cols() * 4 > (int64_t{16} << 20)) t.chunk_tokens = 192;
        const BsrRegisterTile tile = bsr_register_tile(W.block_rows(), W.cols() * 4, t.chunk_tokens, vector_bits);
        t.tile_tokens = tile.tokens;
        t.vector_rows = tile.vector_rows;
        return t;
    }
};

/** Dims of the token tensors, shared by every layer of a pipeline. */
struct TokenDims {
    Dim b{"b"}, s{"s"}, tok{"tok"}, c{"c"};
    Param B{"B", 1, 65536};
    LengthArray len;
    explicit TokenDims(int64_t max_len) : len("len", B, 0, max_len) {}
    /** Packed tokens of `width` features, bulk-padded to `pad` tokens. */
    Tensor tokens(const std::string &name, int64_t width, int64_t pad) const {
        Tensor t(name, {{b, B}, {s, len(b)}, {c, width}});
        t.fuse_storage(b, s, tok, pad);
        return t;
    }
};

/** Y = act(X W^T + bias) with W block-sparse; `X` is read through `read_x(b, s, k)` (an input or an
 * earlier layer's output), so layers chain. */
class BsrLinear {
    // Declared first: Y's initializer uses n_.
    Dim n_{"n"}, k_{"k"}, k2_{"k2"}, tc_{"tc"}, tt_{"tt"}, to_{"to"}, ti_{"ti"}, nb_{"nb"}, r_{"r"}, ro_{"ro"},
        ri_{"ri"}, ko_{"ko"}, ki_{"ki"};

public:
    /** With `elements` (SparTA's decomposition, decompose_blocks: the non-zeros outside W's blocks,
     * 1x1 blocks of the same matrix), Y = act(X W^T + X E^T + bias): W's product is its own Func
     * ("<name>_blocks", scheduled as above), and Y adds E's product to it token by token. */
    BsrLinear(const std::string &name, const TokenDims &D, const BsrMatrix &W,
              const std::function<Expr(Expr, Expr, Expr)> &read_x, const std::optional<Tensor> &bias, bool relu,
              const BsrTiling &tiling = {}, const BsrMatrix *elements = nullptr)
        : Y(name, {{D.b, D.B}, {D.s, D.len(D.b)}, {n_, W.rows()}}) {
        auto epilogue = [&](Expr v, Expr n) {
            if (bias) v = v + (*bias)(n);
            return relu ? max(v, 0.0f) : v;
        };
        if (!elements) {
            Y.compute([&](Expr b, Expr s, Expr n) {
                return epilogue(W.row_times(k_, n, [&](Expr kk) { return read_x(b, s, kk); }), n);
            });
            schedule(Y, D, W, tiling);
            return;
        }
        if (elements->rows() != W.rows() || elements->cols() != W.cols())
            throw CompileError("BsrLinear '" + name + "': the element part '" + elements->name() +
                               "' must have the block part's size " + std::to_string(W.rows()) + " x " +
                               std::to_string(W.cols()));
        blocks_.emplace(name + "_blocks", Shape{{D.b, D.B}, {D.s, D.len(D.b)}, {n_, W.rows()}});
        Func &blocks = *blocks_;
        blocks.compute(
            [&](Expr b, Expr s, Expr n) { return W.row_times(k_, n, [&](Expr kk) { return read_x(b, s, kk); }); });
        schedule(blocks, D, W, tiling);
        Y.compute([&](Expr b, Expr s, Expr n) {
            Expr e = elements->row_times(k2_, n, [&](Expr kk) { return read_x(b, s, kk); });
            return epilogue(e + blocks(b, s, n), n);
        });
        Y.fuse(D.b, D.s, D.tok).pad_loop(D.tok, tiling.chunk_tokens).fuse_storage(D.b, D.s, D.tok, tiling.chunk_tokens);
        if (tiling.gpu)
            Y.split(D.tok, tc_, tt_, tiling.chunk_tokens).gpu_blocks(tc_).gpu_threads(tt_);
        else
            Y.parallel(D.tok);
    }

    Func Y;

private:
    std::optional<Func> blocks_;

    /** GPU: a block per (block row nb, chunk of tokens); its threads (row r of the block row,
     * token) each sum over the block row's present blocks (the same count for the whole block)
     * and their columns: W's values read by consecutive threads at consecutive rows (coalesced in
     * column-major blocks), X's element broadcast to a token's threads. Block rows taller than 32
     * give each thread every 32nd row. */
    void schedule_gpu(Func &f, const TokenDims &D, const BsrMatrix &W, const BsrTiling &t) {
        if (t.chunk_tokens > 32)
            throw CompileError("BsrLinear GPU schedule: chunk_tokens must be at most 32, got " +
                               std::to_string(t.chunk_tokens));
        f.fuse(D.b, D.s, D.tok).pad_loop(D.tok, t.chunk_tokens).fuse_storage(D.b, D.s, D.tok, t.chunk_tokens);
        f.split(D.tok, tc_, tt_, t.chunk_tokens).split(n_, nb_, r_, W.block_rows()).split(k_, ko_, ki_, W.block_cols());
        if (W.block_rows() > 32) {
            f.split(r_, ro_, ri_, 32)
                .reorder({tc_, nb_, tt_, ri_, ro_, ko_, ki_})
                .gpu_blocks(nb_, tc_)
                .gpu_threads(ri_, tt_);
            return;
        }
        f.reorder({tc_, nb_, tt_, r_, ko_, ki_}).gpu_blocks(nb_, tc_).gpu_threads(r_, tt_);
    }

    void schedule(Func &f, const TokenDims &D, const BsrMatrix &W, const BsrTiling &t) {
        if (t.gpu) return schedule_gpu(f, D, W, t);
        if (t.tile_tokens < 1 || t.chunk_tokens % t.tile_tokens != 0)
            throw CompileError("BsrLinear schedule: chunk_tokens (" + std::to_string(t.chunk_tokens) +
                               ") must be a multiple of tile_tokens (" + std::to_string(t.tile_tokens) + ")");
        const int64_t rows = std::min(t.vector_rows, W.block_rows());
        const bool unroll = t.unroll_block_cols < 0 ? W.block_cols() <= 8 : t.unroll_block_cols > 0;
        f.fuse(D.b, D.s, D.tok).pad_loop(D.tok, t.chunk_tokens).fuse_storage(D.b, D.s, D.tok, t.chunk_tokens);
        f.split(D.tok, tc_, tt_, t.chunk_tokens)
            .split(tt_, to_, ti_, t.tile_tokens)
            .split(k_, ko_, ki_, W.block_cols());
        if (W.block_rows() == 1) { // element-sparse rows (CSR): one output per row, nothing to vectorize
            f.reorder({tc_, n_, to_, ko_, ki_, ti_}).cache_write(to_).unroll(ti_).parallel(tc_);
            if (t.dismantle) f.dismantle(n_).dismantle(ko_);
            return;
        }
        f.split(n_, nb_, r_, W.block_rows());
        if (rows < W.block_rows()) {
            f.split(r_, ro_, ri_, rows).reorder({tc_, nb_, ro_, to_, ko_, ki_, ti_, ri_});
            f.vectorize(ri_);
        } else {
            f.reorder({tc_, nb_, to_, ko_, ki_, ti_, r_});
            f.vectorize(r_);
        }
        f.cache_write(to_).unroll(ti_).parallel(tc_);
        if (unroll) f.unroll(ki_);
        if (t.dismantle) f.dismantle(nb_).dismantle(ko_);
    }
};

} // namespace cora::apps
