// Token sparsity (DynamicViT, A-ViT): a keep mask [B, T] makes the batch ragged (cora::kept_tokens),
// and a ViT block (apps/spatial/vit_block.h) runs over the kept tokens only. Checked against the
// dense block written here in double precision, over all T tokens of each image with attention
// masked to the kept ones, at the kept positions; on masks that keep everything, nothing, one
// token, and random subsets, in batches of one and more.
#include "common/ragged_testing.h"

#include "spatial/vit_block.h"

using namespace cora;
using namespace cora::testing;

namespace {

/** The dense block with the mask applied: every token's output, attention over kept keys only. */
std::vector<double> dense_block(const spatial::VitBlock &v, int64_t batch, const std::vector<uint8_t> &keep,
                                const std::vector<float> &x, const std::vector<std::vector<float>> &w) {
    const int64_t D = v.D, T = v.T, H = v.heads, dh = D / H, F = v.hidden;
    const auto &g1 = w[0], &be1 = w[1], &Wqkv = w[2], &bqkv = w[3], &Wo = w[4], &bo = w[5], &g2 = w[6], &be2 = w[7],
               &W1 = w[8], &b1 = w[9], &W2 = w[10], &b2 = w[11];
    auto layer_norm = [&](const std::vector<double> &in, const std::vector<float> &g, const std::vector<float> &be) {
        std::vector<double> out(in.size());
        for (int64_t r = 0; r < (int64_t)in.size() / D; r++) {
            double mean = 0, var = 0;
            for (int64_t d = 0; d < D; d++)
                mean += in[(size_t)(r * D + d)] / (double)D;
            for (int64_t d = 0; d < D; d++)
                var += (in[(size_t)(r * D + d)] - mean) * (in[(size_t)(r * D + d)] - mean) / (double)D;
            for (int64_t d = 0; d < D; d++)
                out[(size_t)(r * D + d)] =
                    (in[(size_t)(r * D + d)] - mean) / std::sqrt(var + 1e-5) * g[(size_t)d] + be[(size_t)d];
        }
        return out;
    };
    std::vector<double> result((size_t)(batch * T * D));
    for (int64_t b = 0; b < batch; b++) {
        std::vector<double> xb((size_t)(T * D));
        for (int64_t i = 0; i < T * D; i++)
            xb[(size_t)i] = x[(size_t)(b * T * D + i)];
        std::vector<double> l1 = layer_norm(xb, g1, be1), q((size_t)(T * 3 * D));
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < 3 * D; j++) {
                double a = bqkv[(size_t)j];
                for (int64_t e = 0; e < D; e++)
                    a += l1[(size_t)(t * D + e)] * Wqkv[(size_t)(e * 3 * D + j)];
                q[(size_t)(t * 3 * D + j)] = a;
            }
        std::vector<double> h1((size_t)(T * D));
        for (int64_t i = 0; i < T; i++) {
            std::vector<double> ctx((size_t)D, 0.0);
            for (int64_t h = 0; h < H; h++) {
                std::vector<double> s((size_t)T, -INFINITY);
                double mx = -INFINITY, den = 0;
                for (int64_t t = 0; t < T; t++) {
                    if (!keep[(size_t)(b * T + t)]) continue; // the mask applied to the keys
                    double a = 0;
                    for (int64_t k = 0; k < dh; k++)
                        a += q[(size_t)(i * 3 * D + h * dh + k)] * q[(size_t)(t * 3 * D + D + h * dh + k)];
                    s[(size_t)t] = a / std::sqrt((double)dh);
                    mx = std::max(mx, s[(size_t)t]);
                }
                for (int64_t t = 0; t < T; t++)
                    if (keep[(size_t)(b * T + t)]) den += std::exp(s[(size_t)t] - mx);
                for (int64_t t = 0; t < T; t++)
                    if (keep[(size_t)(b * T + t)])
                        for (int64_t k = 0; k < dh; k++)
                            ctx[(size_t)(h * dh + k)] +=
                                std::exp(s[(size_t)t] - mx) / den * q[(size_t)(t * 3 * D + 2 * D + h * dh + k)];
            }
            for (int64_t d = 0; d < D; d++) {
                double a = xb[(size_t)(i * D + d)] + bo[(size_t)d];
                for (int64_t e = 0; e < D; e++)
                    a += ctx[(size_t)e] * Wo[(size_t)(e * D + d)];
                h1[(size_t)(i * D + d)] = a;
            }
        }
        std::vector<double> l2 = layer_norm(h1, g2, be2);
        for (int64_t i = 0; i < T; i++) {
            std::vector<double> f((size_t)F);
            for (int64_t k = 0; k < F; k++) {
                double a = b1[(size_t)k];
                for (int64_t e = 0; e < D; e++)
                    a += l2[(size_t)(i * D + e)] * W1[(size_t)(e * F + k)];
                f[(size_t)k] = 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
            }
            for (int64_t d = 0; d < D; d++) {
                double a = h1[(size_t)(i * D + d)] + b2[(size_t)d];
                for (int64_t k = 0; k < F; k++)
                    a += f[(size_t)k] * W2[(size_t)(k * D + d)];
                result[(size_t)((b * T + i) * D + d)] = a;
            }
        }
    }
    return result;
}

} // namespace

TEST_CASE("a ViT block over the kept tokens of a token-sparse batch matches the dense block with the mask applied",
          "[spatial][tokens]") {
    spatial::VitBlock v(16, 2, 32, 13);
    Pipeline pipeline({v.out}, "vit_kept_tokens");
    Kernel kernel = pipeline.compile();
    std::mt19937 rng(5);
    std::vector<std::pair<int64_t, std::string>> cases{{1, "all"},    {1, "none"},   {1, "one"},
                                                       {3, "random"}, {4, "random"}, {2, "mixed"}};
    for (auto [batch, kind] : cases) {
        INFO(kind << " tokens kept, batch " << batch);
        std::vector<uint8_t> keep((size_t)(batch * v.T), 0);
        std::bernoulli_distribution half(0.5);
        for (int64_t b = 0; b < batch; b++)
            for (int64_t t = 0; t < v.T; t++) {
                uint8_t &k = keep[(size_t)(b * v.T + t)];
                k = kind == "all"     ? 1
                    : kind == "none"  ? 0
                    : kind == "one"   ? t == 6
                    : kind == "mixed" ? (b == 0 ? 0 : 1) // an image with nothing kept next to a full one
                                      : half(rng);
            }
        KeptTokens kt = kept_tokens(keep.data(), batch, v.T);
        RaggedShape shape;
        shape.set(v.B, batch).set(v.kept, kt.lengths);
        Buffer pos = Buffer::view(v.pos, shape, kt.positions.data(), (int64_t)kt.positions.size());
        Buffer x = Buffer::alloc(v.X, shape), out = Buffer::alloc(v.out, shape);
        fill_random(x, (uint32_t)rng());
        std::vector<Binding> bindings{{v.X, x}, {v.pos, pos}, {v.out, out}};
        std::vector<Buffer> weights;
        std::vector<std::vector<float>> host;
        for (const Tensor &t : v.weights()) {
            weights.push_back(Buffer::alloc(t, shape));
            fill_random(weights.back(), (uint32_t)rng(), -0.5f, 0.5f);
            host.emplace_back(weights.back().data<float>(), weights.back().data<float>() + weights.back().size());
        }
        for (size_t k = 0; k < weights.size(); k++)
            bindings.push_back({v.weights()[k], weights[k]});
        kernel.run(shape, bindings);
        std::vector<float> xs(x.data<float>(), x.data<float>() + x.size());
        std::vector<double> dense = dense_block(v, batch, keep, xs, host);
        // The kept tokens' outputs, packed in the order of their positions.
        std::vector<double> want;
        for (int64_t b = 0, at = 0; b < batch; b++)
            for (int32_t s = 0; s < kt.lengths[(size_t)b]; s++, at++)
                for (int64_t d = 0; d < v.D; d++)
                    want.push_back(dense[(size_t)((b * v.T + kt.positions[(size_t)at]) * v.D + d)]);
        require_close(out, want, 2e-4);
    }
}

TEST_CASE("a bad keep mask or kept position is an error naming it, and nothing is written",
          "[spatial][tokens][errors]") {
    const uint8_t bad[4] = {1, 0, 2, 1};
    REQUIRE_THROWS_WITH(kept_tokens(bad, 2, 2), "kept_tokens: mask element (1, 0) is 2, expected 0 or 1");
    REQUIRE_THROWS_WITH(kept_tokens(nullptr, 1, 2), "kept_tokens: null mask");
    REQUIRE_THROWS_WITH(kept_tokens(bad, -1, 2), "kept_tokens: negative size -1 x 2");
    spatial::VitBlock v(8, 2, 16, 5);
    Kernel kernel = Pipeline({v.out}, "vit_bad_positions").compile();
    RaggedShape shape;
    shape.set(v.B, 1).set(v.kept, std::vector<int32_t>{2});
    std::vector<int32_t> positions{1, 5}; // 5 is past the image's 5 tokens
    Buffer pos = Buffer::view(v.pos, shape, positions.data(), 2);
    Buffer x = Buffer::alloc(v.X, shape), out = Buffer::alloc(v.out, shape);
    for (int64_t i = 0; i < out.size(); i++)
        out.at(i) = 3.0f;
    std::vector<Binding> bindings{{v.X, x}, {v.pos, pos}, {v.out, out}};
    std::vector<Buffer> weights;
    for (const Tensor &t : v.weights())
        weights.push_back(Buffer::alloc(t, shape));
    for (size_t k = 0; k < weights.size(); k++)
        bindings.push_back({v.weights()[k], weights[k]});
    REQUIRE_THROWS_WITH(kernel.run(shape, bindings), Catch::Matchers::Contains("pos"));
    for (int64_t i = 0; i < out.size(); i++)
        REQUIRE(out.at(i) == 3.0f);
}
