// Definitions shared by the test generators (compiled ahead of time) and the AOT tests (which
// evaluate the same definitions with the reference evaluator).
#pragma once

#include <cora/cora.h>

namespace cora_aot_test {

using namespace cora;

constexpr int64_t kProjK = 12, kProjO = 24;

/** Out[b, s, o] = sum_k X[b, s, k] * W[k, o] over packed tokens: fused storage padded to 16,
 * the fused token loop bulk-padded to `pad` and tiled by `tile` (prefix sums and both fusion
 * maps, with a pad segment). */
struct PackedProjection {
    Dim batch{"batch"}, seq{"seq"}, k{"k"}, o{"o"}, tok{"tok"}, to{"to"}, ti{"ti"}, r{"r"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 100};
    Tensor X{"X", {{batch, B}, {seq, len(batch)}, {k, kProjK}}};
    Tensor W{"W", {{k, kProjK}, {o, kProjO}}};
    Func Out{"Out", {{batch, B}, {seq, len(batch)}, {o, kProjO}}};

    PackedProjection(int64_t pad, int64_t tile) {
        X.fuse_storage(batch, seq, tok, 16);
        Out.compute([&](Expr b, Expr s, Expr oo) { return sum(r, kProjK, X(b, s, r) * W(r, oo)); });
        Out.fuse_storage(batch, seq, tok, 16);
        Out.fuse(batch, seq, tok).pad_loop(tok, pad).split(tok, to, ti, tile).reorder({to, ti, o}).vectorize(o);
    }
};

/** S[b, i, j] = scale * sum_d Q[b, i, d] * K[b, j, d] for i, j < len(b): nested raggedness (a
 * 2-D prefix sum per item), items taken longest first when `longest_first`. */
struct RaggedScores {
    static constexpr int64_t D = 8;
    Dim batch{"batch"}, i{"i"}, j{"j"}, d{"d"}, rank{"rank"}, r{"r"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 64};
    Tensor Q{"Q", {{batch, B}, {i, len(batch)}, {d, D}}};
    Tensor K{"K", {{batch, B}, {j, len(batch)}, {d, D}}};
    Func S{"S", {{batch, B}, {i, len(batch)}, {j, len(batch)}}};

    RaggedScores(bool longest_first, float scale) {
        S.compute([&, scale](Expr b, Expr ii, Expr jj) { return scale * sum(r, D, Q(b, ii, r) * K(b, jj, r)); });
        if (longest_first) S.remap_longest_first(batch, rank, len(batch) * len(batch)).parallel(rank);
    }
};

/** Y[t, n] = sum over the present blocks of W (32 x 48, 8 x 16 blocks, column-major within a
 * block) of X[t, k] W[n, k]: BSR metadata as a length array (block counts, whose prefix sums the
 * library builds) and an index tensor (column indices, checked on every call), register tiles. */
/** The block mask ([4 block rows, 3 block columns]) of aot_bsr_static's pattern: rows with 1, 1, 0
 * and 2 blocks. */
inline const std::vector<uint8_t> kBsrStaticMask = {0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1};

/** The static pattern itself (the values are zeros: only the pattern matters when compiling). */
inline BsrData bsr_static_pattern() {
    return BsrData::from_block_mask(std::vector<float>(32 * 48, 0.0f), 32, 48, 8, 16, kBsrStaticMask);
}

struct BsrProduct {
    Dim t{"t"}, kx{"kx"}, n{"n"}, k{"k"}, to{"to"}, ti{"ti"}, nb{"nb"}, r{"r"}, ko{"ko"}, ki{"ki"};
    Param T{"T", 0, 4096};
    BsrMatrix W;
    Tensor X{"X", {{t, T}, {kx, 48}}};
    Func Y{"Y", {{t, T}, {n, 32}}};

    /** `static_pattern`: W is declared with bsr_static_pattern() and the block rows and their
     * blocks are dismantled: the library carries the pattern and checks the one it is given. */
    explicit BsrProduct(bool static_pattern = false)
        : W(static_pattern ? BsrMatrix("W", bsr_static_pattern(), BlockOrder::ColumnMajor)
                           : BsrMatrix("W", 32, 48, 8, 16, BlockOrder::ColumnMajor)) {
        Y.compute([&](Expr tt, Expr nn) { return W.row_times(k, nn, [&](Expr kk) { return X(tt, kk); }); });
        Y.split(t, to, ti, 4).split(n, nb, r, 8).split(k, ko, ki, 16).reorder({to, nb, ko, ki, ti, r});
        Y.cache_write(nb).vectorize(r).parallel(to);
        if (static_pattern) Y.dismantle(nb).dismantle(ko);
    }
};

/** Y[b, s, n] = sum_k X[b, s, k] W[k, n] over ragged token counts, with no schedule: the default
 * register tiles, or the ones a generator's --tune measured (aot_tuned_gemm). */
struct TokenGemm {
    static constexpr int64_t K = 96, N = 64;
    Dim batch{"batch"}, seq{"seq"}, k{"k"}, n{"n"}, r{"r"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 128};
    Tensor X{"X", {{batch, B}, {seq, len(batch)}, {k, K}}};
    Tensor W{"W", {{k, K}, {n, N}}};
    Func Y{"Y", {{batch, B}, {seq, len(batch)}, {n, N}}};

    TokenGemm() {
        Y.compute([&](Expr b, Expr s, Expr nn) { return sum(r, K, X(b, s, r) * W(r, nn)); });
    }
};

/** PackedProjection scheduled for CUDA: a block per 8 packed tokens (the fused loop bulk-padded to
 * 16, so every block is full), a thread per (output, token); its prefix sums and fusion maps are
 * built by the library's host entry and staged on the device. Its tensors hold `type` (float32,
 * or float16: binary16 storage, float32 sums). */
struct PackedProjectionGpu {
    Type type;
    Dim batch{"batch"}, seq{"seq"}, k{"k"}, o{"o"}, tok{"tok"}, to{"to"}, ti{"ti"}, r{"r"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 100};
    Tensor X{"X", {{batch, B}, {seq, len(batch)}, {k, kProjK}}, type};
    Tensor W{"W", {{k, kProjK}, {o, kProjO}}, type};
    Func Out{"Out", {{batch, B}, {seq, len(batch)}, {o, kProjO}}, type};

    explicit PackedProjectionGpu(Type t = Float32) : type(t) {
        X.fuse_storage(batch, seq, tok, 16);
        Out.compute([&](Expr b, Expr s, Expr oo) { return sum(r, kProjK, X(b, s, r) * W(r, oo)); });
        Out.fuse_storage(batch, seq, tok, 16);
        Out.fuse(batch, seq, tok).pad_loop(tok, 16).split(tok, to, ti, 8).reorder({to, ti, o});
        Out.gpu_blocks(to).gpu_threads(o, ti);
    }
};

} // namespace cora_aot_test
