/** \file The transformer encoder layer as cora pipelines, shared by the generator (ahead of time)
 * and the tests (JIT). Post-LN, as nn.TransformerEncoderLayer(norm_first=False):
 *     X1 = LayerNorm(X + SelfAttention(X)),  X2 = LayerNorm(X1 + FF2(act(FF1(X1))))
 * One layer is five kernels (the CoRA paper's Fig. 3 with QK^T, softmax and AttnV in one):
 *   qkv        QKV[t, n]  = X[t, :] . Wqkv[:, n] + bqkv[n]                     (n < 3 * hidden)
 *   attention  A[b, i, h, d] = softmax_j(Q_h[i] . K_h[j] / 8) . V_h[j]         (j < len(b), or i + 1)
 *   out_norm   X1 = LayerNorm(A . Wo + bo + X)
 *   ff1        F  = act(X1 . W1 + b1)                                          (ReLU or GELU)
 *   ff2_norm   X2 = LayerNorm(F . W2 + b2 + X1)
 * Tokens t = (b, s) are packed: every token tensor is stored with fuse_storage(b, s, tok, 48),
 * item after item with the total padded to a multiple of 48 tokens (bulk padding), so the GEMMs
 * run over all tokens of the batch as one loop (in blocks of whole register tiles of 4 or 6
 * tokens) with no per-item remainder.
 * The attention kernel reads QKV in that layout and keeps its scores per item (len(b) x len(b)
 * per head, or the lower triangle when causal): consumers read producers stored with different
 * padding, and no kernel adds or removes padding.
 * Weights W(r, n) are [in, out] (the transpose of PyTorch's Linear.weight), stored in column
 * panels of 16: [out / 16][in][16] (EncoderDims::weight; the program packs them once per
 * model, encoder_model.h: weight_panels). The model sizes are
 * run-time params: heads NH (hidden = 64 NH) and FB (feed-forward = 64 FB), so one library serves
 * every configuration whose head dim is 64 (the CoRA paper's 512/8/2048 and BERT-base
 * 768/12/3072). */
#pragma once

#include <cora/Generator.h>
#include <cora/cora.h>

#include <memory>
#include <optional>

#include "encoder_limits.h"

namespace cora::apps {

enum class EncoderKernel { Qkv, Attention, OutNorm, FeedForward1, FeedForward2Norm };

struct EncoderOptions {
    bool causal = false; ///< attention over j <= i only
    bool gelu = false;   ///< the feed-forward activation: GELU (erf form) instead of ReLU
    /** With causal: compute the full len x len scores and mask j > i (what padded frameworks do),
     * instead of iterating only the triangle; the baseline the triangle is measured against. */
    bool mask_full = false;
    int vector_bits = 0; ///< the target's vector width (Generator::vector_bits); 0: this CPU's
    /** GPU schedules (CUDA blocks and threads; run by the backends "cuda", "cuda-emulated" and
     * "cuda-cpu-threads") instead of the CPU's; vector_bits is then unused. */
    bool gpu = false;
    /** With gpu: the token tensors and weight matrices in float16 (biases, LayerNorm's scale and
     * shift, and every intermediate in float32), the token GEMMs on tensor cores (mma.sync, float32
     * sums, one rounding per output). */
    bool fp16 = false;
};

/** Floats per vector register of a `vector_bits` target (at least 4). */
inline int64_t float_lanes(int vector_bits) { return vector_bits >= 128 ? vector_bits / 32 : 4; }

/** The dims and params every kernel of the layer shares (by name: each kernel is its own pipeline). */
struct EncoderDims {
    Dim b{"b"}, s{"s"}, tok{"tok"}, c{"c"}, n{"n"}, r{"r"}, h{"h"}, i{"i"}, j{"j"}, d{"d"}, to{"to"}, ti{"ti"},
        tio{"tio"}, tii{"tii"}, no{"no"}, ni{"ni"}, co{"co"}, ci{"ci"}, ko{"ko"}, ki{"ki"}, tb{"tb"}, tt{"tt"},
        jo{"jo"}, ji{"ji"}, io{"io"}, ii{"ii"}, dout{"dout"}, din{"din"}, wo{"wo"}, wi{"wi"}, tw{"tw"}, tm{"tm"},
        th{"th"}, tg{"tg"}, nj{"nj"}, nm{"nm"}, nt{"nt"}, nl{"nl"};
    /** The element type of token tensors and weight matrices (EncoderOptions::fp16). */
    Type storage = Float32;
    Param B{"B", 1, 4096};
    LengthArray len{"len", B, 0, kMaxLen};
    Param NH{"NH", 1, 32};  ///< attention heads
    Param FB{"FB", 1, 256}; ///< feed-forward width / 64
    Expr hidden() const { return NH * kHeadDim; }
    Expr ff() const { return FB * kHeadDim; }

    /** A tensor of packed tokens, `width` features each. */
    Tensor tokens(const std::string &name, const Expr &width) const {
        Tensor t(name, {{b, B}, {s, len(b)}, {c, width}}, storage);
        t.fuse_storage(b, s, tok, kTokenPad);
        return t;
    }
    /** A token GEMM's weight W(r, n), `in` x `out`, stored in column panels of kWeightPanel:
     * [out / kWeightPanel][in][kWeightPanel], so that a panel's k-rows are contiguous (read as
     * [in][out], a panel's rows were each a cache line on its own page, out * 4 bytes apart). */
    Tensor weight(const Expr &in, const Expr &out) const {
        Tensor w("W", {{r, in}, {n, out}}, storage);
        w.split_storage(n, wo, wi, kWeightPanel).reorder_storage({wo, r, wi});
        return w;
    }
    /** The output of a token GEMM (n < width), of type `type` (default: the token storage's);
     * schedule_token_gemm schedules it. */
    Func token_gemm(const std::string &name, const Expr &width, std::optional<Type> type = {}) const {
        return Func(name, {{b, B}, {s, len(b)}, {n, width}}, type.value_or(storage));
    }
    /** Blocks of packed tokens (256 on AVX-512, 240 on AVX2: a block of X, about 512 KB at
     * hidden 512, stays in L2 while every column panel passes over it; with the panels outermost,
     * large batches streamed X from memory once per panel: 0.40x sgemm at 9k tokens); per block, a
     * parallel loop over column panels of 16 x vector-width floats (the threads share a block's
     * panels: a small batch has few blocks, CoLA batch 32: 125 -> 93 ms), 256-deep k-panels and
     * register tiles (cache_write) that start from zero at the first k-panel and apply the
     * epilogue at the last one's write-back. AVX-512: tiles of 4 tokens x 4 vectors (16 of 32
     * registers accumulate), the loop padded to 16 tokens, W's 64-column panels copied per
     * k-panel (cache_read). AVX2: tiles of 6 tokens x 2 vectors (12 of 16 registers; 4 x 2 left
     * the two FMA pipes short of independent chains: FF1 0.88-0.92x sgemm, 6 x 2 0.91-0.93x),
     * the loop padded to 48 (kTokenPad, the storage's padding) so that no tile is partial, W's
     * stored 16-column panels read in place.
     * `deep`: the reduction is long (FF2's 2048 or 3072), so on AVX2 the k-panels run outside
     * the column panels: a block's X is 1.9 MB at K = 2048, past a Zen 3's 512 KB L2, and each
     * column panel streamed it again; with the k-panel outside, its 240 KB slice of X stays in L2
     * for every column panel (ff2_norm over RACE's first 128 sequences: 594 -> 573 ms). */
    void schedule_token_gemm(Func &f, const Tensor &W, int vector_bits, bool deep = false) const {
        const bool wide = vector_bits >= 512;
        const int64_t cols = wide ? 64 : (vector_bits >= 256 ? 16 : 8);
        const int64_t rows = wide ? 4 : 6;
        static_assert(kTokenPad % 48 == 0, "both targets' padded token loops must fit the storage padding");
        f.fuse(b, s, tok).pad_loop(tok, wide ? 16 : 48).fuse_storage(b, s, tok, kTokenPad);
        f.split(tok, tb, tt, wide ? 256 : 240)
            .split(tt, to, ti, rows)
            .split(n, no, ni, cols)
            .split(r, ko, ki, 256)
            .reorder(deep && !wide ? std::vector<Dim>{tb, ko, no, to, ki, ti, ni}
                                   : std::vector<Dim>{tb, no, ko, to, ki, ti, ni})
            .parallel(no)
            .unroll(ti)
            .vectorize(ni)
            .cache_write(to);
        if (wide) f.cache_read(W, ko);
    }
    /** The token GEMM's GPU schedule: a block per 48 packed tokens (the storage's padding, so no
     * tile is partial) x 64 outputs; 12 x 16 threads, each a 4 x 4 register tile (cache_write);
     * per k-panel of 16, the block's 16 x 64 tile of W in shared memory, copied by all its
     * threads; the epilogue at the register tiles' write-back. The tokens' panel is read from
     * global memory (the 16 threads of a row read the same address): a cache_read of the packed
     * tokens at `ko` is refused, since its region in the item dim depends on the thread loop. */
    void schedule_token_gemm_gpu(Func &f, const Tensor &W) const {
        static_assert(kTokenPad % 48 == 0, "the GPU tiles of 48 tokens must fit the storage padding");
        f.fuse(b, s, tok).pad_loop(tok, 48).fuse_storage(b, s, tok, kTokenPad);
        if (storage == Float16) {
            // Tensor cores (docs/gpu.md, "Tensor cores"): blocks of 48 tokens x 32 outputs, three
            // warps along the tokens, each 16 tokens x 4 tiles of 8 outputs in mma.sync.m16n8k16's
            // layout (thread (nt, tg) holds tokens tg + 8 th, outputs 2 nt + nl); per k-panel of
            // 16, W's 16 x 32 panel in shared memory; the tokens' fragments read from global
            // memory; float32 sums across the panels, the epilogue at their write-back.
            f.split(tok, to, ti, 48)
                .split(ti, tw, tm, 16)
                .split(tm, th, tg, 8)
                .split(n, no, ni, 32)
                .split(ni, nj, nm, 8)
                .split(nm, nt, nl, 2)
                .split(r, ko, ki, 16)
                .reorder({to, no, ko, tw, tg, nt, nj, ki, th, nl})
                .gpu_blocks(no, to)
                .gpu_threads(nt, tg, tw)
                .cache_read(W, ko)
                .cache_write(no)
                .gpu_mma(ki);
            return;
        }
        f.split(tok, to, ti, 48)
            .split(ti, tio, tii, 4)
            .split(n, no, ni, 64)
            .split(ni, co, ci, 4)
            .split(r, ko, ki, 16)
            .reorder({to, no, ko, tio, co, ki, tii, ci})
            .gpu_blocks(no, to)
            .gpu_threads(co, tio)
            .cache_read(W, ko)
            .unroll(tii)
            .unroll(ci)
            .cache_write(no);
    }
};

/** One kernel of the layer: its inputs (in argument order), output and the Funcs it keeps alive. */
struct EncoderKernelDef {
    EncoderDims dims;
    std::vector<Tensor> inputs;
    std::vector<Func> funcs; ///< funcs.back() is the output
    Func output() const { return funcs.back(); }
};

namespace detail {

/** LayerNorm over the features of Y (packed tokens, `width` features): per token, mean, then 1 / std, then
 * the normalised, scaled and shifted output stored as packed tokens. */
inline void layer_norm(EncoderKernelDef &k, const Func &Y, const Tensor &gamma, const Tensor &beta, bool gpu) {
    EncoderDims &D = k.dims;
    Expr width = D.hidden();
    Expr inv_width = 1.0f / cast(Float32, width);
    Func Mean("Mean", {{D.b, D.B}, {D.s, D.len(D.b)}});
    Func Rstd("Rstd", {{D.b, D.B}, {D.s, D.len(D.b)}});
    Func Out("Out", {{D.b, D.B}, {D.s, D.len(D.b)}, {D.c, width}}, D.storage);
    Mean.compute([&](Expr b, Expr s) { return sum(D.r, width, Y(b, s, D.r)) * inv_width; });
    Rstd.compute([&](Expr b, Expr s) {
        Expr centered = Y(b, s, D.r) - Mean(b, s);
        return 1.0f / sqrt(sum(D.r, width, centered * centered) * inv_width + kLayerNormEps);
    });
    Out.compute([&](Expr b, Expr s, Expr c) { return (Y(b, s, c) - Mean(b, s)) * Rstd(b, s) * gamma(c) + beta(c); });
    Out.fuse_storage(D.b, D.s, D.tok, kTokenPad);
    if (gpu) {
        // GPU, one launch: a block per token (launched over items x their longest length; blocks
        // past an item's length do nothing); the mean, then the variance, reduced across the
        // block's first warp (each lane sums every 32nd feature), computed at the block's loop
        // (compute_at), then 64 threads write the token's features, 64 at a time.
        for (Func *f : {&Mean, &Rstd})
            f->split(D.r, D.ko, D.ki, 32).reorder({D.b, D.s, D.ki, D.ko}).gpu_threads(D.ki).compute_at(Out, D.s);
        Out.split(D.c, D.co, D.ci, kHeadDim).reorder({D.b, D.s, D.ci, D.co}).gpu_blocks(D.s, D.b).gpu_threads(D.ci);
    } else {
        // Mean and 1 / std computed at each token of the output, so the three passes over a token's
        // row read it from L1 and Y streams from memory once, not three times: out_norm over RACE's
        // first 128 sequences (46k tokens) 158 -> 148 ms on a 2-core Zen 3. The loop over items is
        // parallel (dynamic: items differ in length) rather than over packed tokens, because
        // compute_at names a declared dim; a batch of one runs its LayerNorm on one thread.
        for (Func *f : {&Mean, &Rstd})
            f->compute_at(Out, D.s);
        Out.parallel(D.b).split(D.c, D.co, D.ci, 16).vectorize(D.ci);
    }
    k.funcs.insert(k.funcs.end(), {Mean, Rstd, Out});
}

/** Y = In . W + bias + Residual (a token GEMM with its epilogue), then LayerNorm. */
inline void projection_norm(EncoderKernelDef &k, const Expr &in_width, int vector_bits, bool deep, bool gpu) {
    EncoderDims &D = k.dims;
    Tensor In = D.tokens("In", in_width), Residual = D.tokens("Residual", D.hidden());
    Tensor W = D.weight(in_width, D.hidden()), bias("bias", {{D.n, D.hidden()}});
    Tensor gamma("gamma", {{D.c, D.hidden()}}), beta("beta", {{D.c, D.hidden()}});
    Func Y = D.token_gemm("Y", D.hidden(), Float32); // LayerNorm's input: not rounded to the storage type
    Y.compute([&](Expr b, Expr s, Expr n) {
        return sum(D.r, in_width, In(b, s, D.r) * W(D.r, n)) + bias(n) + Residual(b, s, n);
    });
    if (gpu)
        D.schedule_token_gemm_gpu(Y, W);
    else
        D.schedule_token_gemm(Y, W, vector_bits, deep);
    k.inputs = {In, Residual, W, bias, gamma, beta};
    k.funcs = {Y};
    layer_norm(k, Y, gamma, beta, gpu);
}

} // namespace detail

/** The definition and schedule of one kernel of the layer. */
inline std::unique_ptr<EncoderKernelDef> make_encoder_kernel(EncoderKernel which, const EncoderOptions &opt) {
    auto k = std::make_unique<EncoderKernelDef>();
    EncoderDims &D = k->dims;
    const int vector_bits = opt.vector_bits > 0 ? opt.vector_bits : host_vector_bits();
    if (opt.fp16 && !opt.gpu)
        throw CompileError("encoder kernels: float16 storage (EncoderOptions::fp16) has GPU schedules only");
    D.storage = opt.fp16 ? Float16 : Float32;
    switch (which) {
    case EncoderKernel::Qkv: {
        Tensor X = D.tokens("X", D.hidden());
        Tensor W = D.weight(D.hidden(), 3 * D.hidden()), bias("bias", {{D.n, 3 * D.hidden()}});
        Func QKV = D.token_gemm("QKV", 3 * D.hidden());
        QKV.compute([&](Expr b, Expr s, Expr n) { return sum(D.r, D.hidden(), X(b, s, D.r) * W(D.r, n)) + bias(n); });
        if (opt.gpu)
            D.schedule_token_gemm_gpu(QKV, W);
        else
            D.schedule_token_gemm(QKV, W, vector_bits);
        k->inputs = {X, W, bias};
        k->funcs = {QKV};
        break;
    }
    case EncoderKernel::Attention: {
        Tensor QKV = D.tokens("QKV", 3 * D.hidden());
        Expr H = D.hidden();
        const bool triangle = opt.causal && !opt.mask_full;
        auto keys = [&](const Expr &i) { return triangle ? i + 1 : D.len(D.b); };
        const float scale = 1.0f / 8.0f; // 1 / sqrt(head dim 64)
        // K transposed per item and head (a copy of a third of QKV), so that the scores' inner
        // loop runs over contiguous keys; its rows padded to 16 keys for the vector tiles.
        Func KT("KT", {{D.b, D.B}, {D.h, D.NH}, {D.d, kHeadDim}, {D.j, D.len(D.b)}});
        Func S("S", {{D.b, D.B}, {D.h, D.NH}, {D.i, D.len(D.b)}, {D.j, keys(D.i)}});
        Func Mx("Mx", {{D.b, D.B}, {D.h, D.NH}, {D.i, D.len(D.b)}});
        Func E("E", {{D.b, D.B}, {D.h, D.NH}, {D.i, D.len(D.b)}, {D.j, keys(D.i)}});
        Func Sum("Sum", {{D.b, D.B}, {D.h, D.NH}, {D.i, D.len(D.b)}});
        // Full attention: A's loops over the item and head come first, so that everything before
        // it is computed per (item, head) inside them (below); stored as packed tokens either way.
        Func A = triangle ? Func("A", {{D.b, D.B}, {D.i, D.len(D.b)}, {D.h, D.NH}, {D.d, kHeadDim}}, D.storage)
                          : Func("A", {{D.b, D.B}, {D.h, D.NH}, {D.i, D.len(D.b)}, {D.d, kHeadDim}}, D.storage);
        KT.compute([&](Expr b, Expr h, Expr d, Expr j) { return QKV(b, j, H + h * kHeadDim + d); });
        S.compute([&](Expr b, Expr h, Expr i, Expr j) {
            Expr score = sum(D.r, kHeadDim, QKV(b, i, h * kHeadDim + D.r) * KT(b, h, D.r, j)) * scale;
            // A masked key scores -1e30: exp(-1e30 - max) is 0, as PyTorch's -inf mask gives.
            return opt.causal && opt.mask_full ? select(j > i, -1e30f, score) : score;
        });
        if (!opt.gpu) {
            // Key tiles of two vectors; the triangle keeps 16-key tiles (its rows differ in length,
            // so each query row is its own tile; see below).
            const int64_t key_tile = triangle ? kKeyTile : 2 * float_lanes(vector_bits);
            KT.pad_storage(D.j, key_tile);
            S.pad_storage(D.j, key_tile);
            auto key_tiles = [&](Func &f) { f.pad_loop(D.j, key_tile).split(D.j, D.jo, D.ji, key_tile); };
            if (triangle) {
                // QK^T over the triangle: per query row, tiles of 16 keys (the last padded: only this
                // row's own keys, up to the next multiple of 16) accumulate over the 64 features.
                key_tiles(S);
                S.reorder({D.b, D.h, D.i, D.jo, D.r, D.ji}).vectorize(D.ji).cache_write(D.jo);
            } else {
                // QK^T: register tiles of kScoreRows query rows x two vectors of keys (12 accumulators)
                // accumulate over the 64 features: each K^T vector loaded feeds kScoreRows FMAs
                // (one row per tile ran at 0.6x this speed: a load per FMA). The rows past the last
                // whole tile are their own op, one row per tile, so no tile checks its rows.
                Func rows_left = S.split_op(D.i, floor_mult(D.len(D.b), kScoreRows));
                key_tiles(S);
                key_tiles(rows_left);
                S.split(D.i, D.io, D.ii, kScoreRows)
                    .reorder({D.b, D.h, D.io, D.jo, D.r, D.ii, D.ji})
                    .vectorize(D.ji)
                    .unroll(D.ii)
                    .cache_write(D.jo);
                rows_left.reorder({D.b, D.h, D.i, D.jo, D.r, D.ji}).vectorize(D.ji).cache_write(D.jo);
                k->funcs.push_back(rows_left);
            }
        }
        Mx.compute([&](Expr b, Expr h, Expr i) { return maximum(D.r, triangle ? i + 1 : D.len(b), S(b, h, i, D.r)); });
        E.compute([&](Expr b, Expr h, Expr i, Expr j) { return exp(S(b, h, i, j) - Mx(b, h, i)); });
        Sum.compute([&](Expr b, Expr h, Expr i) { return sum(D.r, triangle ? i + 1 : D.len(b), E(b, h, i, D.r)); });
        auto attend = [&](Expr b, Expr i, Expr h, Expr d) {
            Expr extent = triangle ? i + 1 : D.len(b);
            return sum(D.r, extent, E(b, h, i, D.r) * QKV(b, D.r, 2 * H + h * kHeadDim + d)) / Sum(b, h, i);
        };
        if (triangle) {
            A.compute(attend);
        } else {
            A.compute([&](Expr b, Expr h, Expr i, Expr d) { return attend(b, i, h, d); });
            A.reorder_storage({D.b, D.i, D.h, D.d});
        }
        A.fuse_storage(D.b, D.i, D.tok, kTokenPad);
        if (opt.gpu) {
            // GPU, one launch: a block per (head, query, item) computes the query's row: its
            // scores and exponentials a thread per key (K^T read in place: inlined), the row's
            // max and sum reduced across the block's first warp (each lane over every 32nd key),
            // then AttnV a thread per head feature summing over the keys (a V row read by the 64
            // threads together). The row's producers are computed at AttnV's block loop i
            // (compute_at); they communicate through global memory, so CUDA gets a barrier
            // between the phases (codegen/CudaPhaseBarriers.h). The triangle too: A's loops are
            // reordered to (item, head, query) like its producers'. Blocks past an item's length
            // do nothing. (The scores are still written to global memory: an online softmax over
            // key tiles is the next step.)
            KT.compute_inline();
            for (Func *f : {&S, &E})
                f->gpu_threads(D.j);
            for (Func *f : {&Mx, &Sum})
                f->split(D.r, D.ko, D.ki, 32).reorder({D.b, D.h, D.i, D.ki, D.ko}).gpu_threads(D.ki);
            A.reorder({D.b, D.h, D.i, D.d}).gpu_blocks(D.h, D.i, D.b).gpu_threads(D.d);
            for (Func *f : {&S, &Mx, &E, &Sum})
                f->compute_at(A, D.i);
        } else if (triangle) {
            // AttnV over the triangle: one parallel loop over the batch's tokens; per (token,
            // head) a register tile of the 64 head features accumulates over the token's keys
            // (the division by Sum at its write-back).
            A.fuse(D.b, D.i, D.tok).parallel(D.tok).reorder({D.tok, D.h, D.r, D.d}).vectorize(D.d).cache_write(D.h);
        } else {
            // AttnV: per item and head, register tiles of query rows x head features accumulate
            // over the keys: each V vector loaded feeds one FMA per row (one token per tile: 0.55x
            // this speed). AVX2: 4 rows x two vectors (8 of 16 registers). AVX-512: 6 rows x all 64
            // features (24 of 32 registers: 4 V loads and 6 broadcasts per 24 FMAs, where 4 x 32
            // took 2 and 4 per 8): the attention kernel 5-12% faster on the first batches of 32 of
            // RACE, SQuAD and MNLI (2-core Zen 5, one layer, --profile, alternated with the 4 x 32
            // library; 4 x 64 had measured no gain on a Zen 4).
            const bool wide = vector_bits >= 512;
            const int64_t value_rows = wide ? kValueRowsWide : kValueRows;
            const int64_t feature_tile = (wide ? 4 : 2) * float_lanes(vector_bits);
            Func rows_left = A.split_op(D.i, floor_mult(D.len(D.b), value_rows));
            A.split(D.i, D.io, D.ii, value_rows)
                .split(D.d, D.dout, D.din, feature_tile)
                .reorder({D.b, D.h, D.io, D.dout, D.r, D.ii, D.din})
                .vectorize(D.din)
                .unroll(D.ii)
                .cache_write(D.dout)
                .parallel(D.b);
            rows_left.reorder({D.b, D.h, D.i, D.r, D.d}).vectorize(D.d).cache_write(D.i).parallel(D.b);
            k->funcs.push_back(rows_left);
            // Fused attention: K^T, the scores (both row parts), the softmax's max, exponentials
            // and sums of one (item, head) are computed inside A's loop over heads, right before
            // its AttnV tiles (and its rows' tail) read them, and each is stored one (item, head)
            // at a time (compute_at slices, per thread): the scores of a 512-token item are 1 MB
            // per head, not the whole batch's 4-byte scores per key (130 MB for RACE's first 32
            // items, written and streamed three times).
            for (Func *f : {&KT, &S, &Mx, &E, &Sum})
                f->compute_at(A, D.h);
        }
        k->inputs = {QKV};
        k->funcs.insert(k->funcs.end(), {KT, S, Mx, E, Sum, A});
        break;
    }
    case EncoderKernel::OutNorm: detail::projection_norm(*k, D.hidden(), vector_bits, false, opt.gpu); break;
    case EncoderKernel::FeedForward1: {
        Tensor X = D.tokens("X", D.hidden());
        Tensor W = D.weight(D.hidden(), D.ff()), bias("bias", {{D.n, D.ff()}});
        Func F = D.token_gemm("F", D.ff());
        F.compute([&](Expr b, Expr s, Expr n) {
            Expr x = sum(D.r, D.hidden(), X(b, s, D.r) * W(D.r, n)) + bias(n);
            return opt.gelu ? 0.5f * x * (1.0f + erf(x * 0.70710678118654752f)) : max(x, 0.0f);
        });
        if (opt.gpu)
            D.schedule_token_gemm_gpu(F, W);
        else
            D.schedule_token_gemm(F, W, vector_bits);
        k->inputs = {X, W, bias};
        k->funcs = {F};
        break;
    }
    case EncoderKernel::FeedForward2Norm: detail::projection_norm(*k, D.ff(), vector_bits, true, opt.gpu); break;
    }
    return k;
}

} // namespace cora::apps
