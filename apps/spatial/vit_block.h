/** \file A ViT block over the kept tokens of a token-sparse batch (DynamicViT, A-ViT): a keep mask
 * [B, T] decided at run time (cora::kept_tokens) makes the batch ragged — image b keeps kept(b)
 * tokens — and every op of the block runs over the kept tokens only, attention included (keys
 * are the kept tokens of the same image). The block is pre-norm, as in ViT:
 *
 *     h = x + Wo attention(LN1(x)) + bo
 *     y = h + W2 GELU(W1 LN2(h) + b1) + b2
 *
 * with `heads` heads of D / heads dims. Inputs: the dense tokens X [B, T, D] and the kept
 * positions pos [b, kept(b)] (int32, the index tensor the kept tokens are read through: no
 * gathered copy is made); weights row-major [in, out]. Output: the kept tokens' results, packed
 * [b, kept(b), D] in the order of pos. Schedules are cora's defaults; tests compare with the
 * dense block whose attention is masked to the kept tokens (tests/spatial/token_sparsity.cpp). */
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "cora/cora.h"

namespace cora::spatial {

struct VitBlock {
    const int64_t D, heads, hidden, T; ///< T: tokens per image (fixed by the model, as in ViT)
    Param B{"B", 1, 1024};
    LengthArray kept;
    Dim b{"b"}, s{"s"}, t{"t"}, d{"d"}, j{"j"}, hh{"h"}, f{"f"};
    Dim e1{"e1"}, e2{"e2"}, e3{"e3"}, e4{"e4"}, e5{"e5"}, e6{"e6"}, e7{"e7"}, e8{"e8"}, kq{"kq"}, t1{"t1"}, t2{"t2"},
        t3{"t3"};
    Tensor X, pos, g1, be1, Wqkv, bqkv, Wo, bo, g2, be2, W1, b1, W2, b2;
    Func xk, mean1, var1, ln1, qkv, scores, mx, den, ctx, h1, mean2, var2, ln2, f1, out;

    VitBlock(int64_t model_dim, int64_t n_heads, int64_t mlp_hidden, int64_t tokens_per_image)
        : D(model_dim), heads(n_heads), hidden(mlp_hidden), T(tokens_per_image), kept("kept", B, 0, T),
          X("X", {{b, B}, {t, T}, {d, D}}), pos("pos", {{b, B}, {s, kept(b)}}, Int32), g1("g1", {{d, D}}),
          be1("be1", {{d, D}}), Wqkv("Wqkv", {{d, D}, {j, 3 * D}}), bqkv("bqkv", {{j, 3 * D}}),
          Wo("Wo", {{d, D}, {j, D}}), bo("bo", {{d, D}}), g2("g2", {{d, D}}), be2("be2", {{d, D}}),
          W1("W1", {{d, D}, {f, hidden}}), b1("b1", {{f, hidden}}), W2("W2", {{f, hidden}, {d, D}}), b2("b2", {{d, D}}),
          xk("xk", tokens(D)), mean1("mean1", rows()), var1("var1", rows()), ln1("ln1", tokens(D)),
          qkv("qkv", {{b, B}, {s, kept(b)}, {j, 3 * D}}),
          scores("scores", {{b, B}, {hh, heads}, {s, kept(b)}, {t, kept(b)}}), mx("mx", head_rows()),
          den("den", head_rows()), ctx("ctx", tokens(D)), h1("h1", tokens(D)), mean2("mean2", rows()),
          var2("var2", rows()), ln2("ln2", tokens(D)), f1("f1", {{b, B}, {s, kept(b)}, {f, hidden}}),
          out("out", tokens(D)) {
        if (D % heads != 0)
            throw CompileError("VitBlock: " + std::to_string(heads) + " heads do not divide D = " + std::to_string(D));
        const int64_t dh = D / heads;
        const float eps = 1e-5f, scale = 1.0f / std::sqrt((float)dh);
        pos.index_range(0, T - 1); // checked on every call: a position outside the image is an error
        // The kept tokens, read from the dense batch through their positions.
        xk.compute([&](Expr b_, Expr s_, Expr d_) { return X(b_, cast(Int64, pos(b_, s_)), d_); });
        layer_norm(xk, mean1, var1, ln1, g1, be1, e1, e2, eps);
        qkv.compute([&](Expr b_, Expr s_, Expr j_) { return sum(e3, D, ln1(b_, s_, e3) * Wqkv(e3, j_)) + bqkv(j_); });
        // Attention over the kept tokens of the same image.
        scores.compute([&](Expr b_, Expr h_, Expr i_, Expr t_) {
            return sum(kq, dh, qkv(b_, i_, h_ * dh + kq) * qkv(b_, t_, D + h_ * dh + kq)) * scale;
        });
        mx.compute([&](Expr b_, Expr h_, Expr i_) { return maximum(t1, kept(b_), scores(b_, h_, i_, t1)); });
        den.compute(
            [&](Expr b_, Expr h_, Expr i_) { return sum(t2, kept(b_), exp(scores(b_, h_, i_, t2) - mx(b_, h_, i_))); });
        ctx.compute([&](Expr b_, Expr i_, Expr d_) {
            Expr h_ = d_ / dh;
            return sum(t3, kept(b_), exp(scores(b_, h_, i_, t3) - mx(b_, h_, i_)) * qkv(b_, t3, 2 * D + d_)) /
                   den(b_, h_, i_);
        });
        h1.compute([&](Expr b_, Expr i_, Expr d_) {
            return xk(b_, i_, d_) + sum(e4, D, ctx(b_, i_, e4) * Wo(e4, d_)) + bo(d_);
        });
        layer_norm(h1, mean2, var2, ln2, g2, be2, e5, e6, eps);
        f1.compute([&](Expr b_, Expr i_, Expr f_) {
            Expr a = sum(e7, D, ln2(b_, i_, e7) * W1(e7, f_)) + b1(f_);
            return 0.5f * a * (1.0f + erf(a * 0.70710678118654752f));
        });
        out.compute([&](Expr b_, Expr i_, Expr d_) {
            return h1(b_, i_, d_) + sum(e8, hidden, f1(b_, i_, e8) * W2(e8, d_)) + b2(d_);
        });
    }

    /** Every weight tensor, in a fixed order (tests and apps fill them). */
    std::vector<Tensor> weights() const { return {g1, be1, Wqkv, bqkv, Wo, bo, g2, be2, W1, b1, W2, b2}; }

private:
    Shape tokens(int64_t width) { return {{b, B}, {s, kept(b)}, {d, width}}; }
    Shape rows() { return {{b, B}, {s, kept(b)}}; }
    Shape head_rows() { return {{b, B}, {hh, heads}, {s, kept(b)}}; }
    void layer_norm(const Func &x, Func &mean, Func &var, Func &y, const Tensor &g, const Tensor &be, const Dim &ea,
                    const Dim &eb, float eps) {
        const float inv = 1.0f / (float)D;
        mean.compute([&](Expr b_, Expr s_) { return sum(ea, D, x(b_, s_, ea)) * inv; });
        var.compute([&](Expr b_, Expr s_) {
            Expr c = x(b_, s_, eb) - mean(b_, s_);
            return sum(eb, D, c * c) * inv;
        });
        y.compute([&](Expr b_, Expr s_, Expr d_) {
            return (x(b_, s_, d_) - mean(b_, s_)) / sqrt(var(b_, s_) + eps) * g(d_) + be(d_);
        });
    }
};

} // namespace cora::spatial
