/** \file The encoder's model: configuration, weights (deterministic random or from a file, the
 * format export_weights.py writes) and a straightforward reference forward pass over packed
 * tokens, in double precision, for checking. */
#pragma once

#include "common/cli.h"
#include "encoder_limits.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace cora::apps {

struct EncoderConfig {
    int64_t layers = 6, hidden = 512, heads = 8, ff = 2048;
    bool gelu = false, causal = false;
};

/** One layer's weights; matrices row-major [in, out] (PyTorch's Linear.weight transposed). */
struct LayerWeights {
    std::vector<float> wqkv, bqkv, wo, bo, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, ln2_beta;
    /** The arrays in file order, with their element counts. */
    std::vector<std::pair<std::vector<float> *, int64_t>> arrays(const EncoderConfig &c) {
        const int64_t h = c.hidden, f = c.ff;
        return {{&wqkv, h * 3 * h}, {&bqkv, 3 * h}, {&wo, h * h}, {&bo, h}, {&ln1_gamma, h}, {&ln1_beta, h},
                {&w1, h * f},       {&b1, f},       {&w2, f * h}, {&b2, h}, {&ln2_gamma, h}, {&ln2_beta, h}};
    }
};

/** Uniform in +-1/sqrt(fan_in) like PyTorch's Linear; LayerNorm's scale near 1 and shift near 0
 * (not exactly 1 and 0, so that the check sees them applied). */
inline std::vector<LayerWeights> random_weights(const EncoderConfig &c, uint32_t seed) {
    std::mt19937 rng(seed);
    auto fill = [&](std::vector<float> &v, int64_t n, float lo, float hi) {
        std::uniform_real_distribution<float> u(lo, hi);
        v.resize((size_t)n);
        for (float &x : v)
            x = u(rng);
    };
    std::vector<LayerWeights> layers((size_t)c.layers);
    const float sh = 1.0f / std::sqrt((float)c.hidden), sf = 1.0f / std::sqrt((float)c.ff);
    for (LayerWeights &l : layers) {
        const int64_t h = c.hidden, f = c.ff;
        fill(l.wqkv, h * 3 * h, -sh, sh);
        fill(l.bqkv, 3 * h, -sh, sh);
        fill(l.wo, h * h, -sh, sh);
        fill(l.bo, h, -sh, sh);
        fill(l.ln1_gamma, h, 0.9f, 1.1f);
        fill(l.ln1_beta, h, -0.1f, 0.1f);
        fill(l.w1, h * f, -sh, sh);
        fill(l.b1, f, -sh, sh);
        fill(l.w2, f * h, -sf, sf);
        fill(l.b2, h, -sf, sf);
        fill(l.ln2_gamma, h, 0.9f, 1.1f);
        fill(l.ln2_beta, h, -0.1f, 0.1f);
    }
    return layers;
}

/** A weight matrix `w`, row-major [in, out], in the layout the kernels read (encoder_def.h,
 * EncoderDims::weight): column panels of kWeightPanel, [out / kWeightPanel][in][kWeightPanel]
 * (`out` is a multiple of 64). */
inline std::vector<float> weight_panels(const std::vector<float> &w, int64_t in, int64_t out) {
    std::vector<float> p(w.size());
    for (int64_t r = 0; r < in; r++)
        for (int64_t n = 0; n < out; n++)
            p[(size_t)(((n / kWeightPanel) * in + r) * kWeightPanel + n % kWeightPanel)] = w[(size_t)(r * out + n)];
    return p;
}

/** The weights as the kernels take them: matrices in column panels (weight_panels), vectors as
 * they are. Done once per model; the reference reads the row-major originals. */
inline std::vector<LayerWeights> kernel_weights(const EncoderConfig &c, std::vector<LayerWeights> layers) {
    const int64_t h = c.hidden, f = c.ff;
    for (LayerWeights &l : layers) {
        l.wqkv = weight_panels(l.wqkv, h, 3 * h);
        l.wo = weight_panels(l.wo, h, h);
        l.w1 = weight_panels(l.w1, h, f);
        l.w2 = weight_panels(l.w2, f, h);
    }
    return layers;
}

constexpr char kWeightsMagic[8] = {'C', 'O', 'R', 'A', 'E', 'N', 'C', '1'};

/** Reads a weights file: the magic "CORAENC1", five little-endian int32 (layers, hidden, heads,
 * ff, activation: 0 ReLU, 1 GELU), then per layer the float32 arrays of LayerWeights::arrays in
 * order. The file's sizes become the config's; UsageError on any mismatch. */
inline std::vector<LayerWeights> read_weights(const std::string &path, EncoderConfig &c) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError("cannot open weights file '" + path + "'");
    char magic[8];
    int32_t header[5];
    if (!f.read(magic, 8) || std::memcmp(magic, kWeightsMagic, 8) != 0)
        throw UsageError("weights file '" + path + "' does not start with CORAENC1 (write it with export_weights.py)");
    if (!f.read(reinterpret_cast<char *>(header), sizeof header))
        throw UsageError("weights file '" + path + "' ends inside its header");
    const int32_t layers = header[0], hidden = header[1], heads = header[2], ff = header[3], act = header[4];
    if (layers < 1 || layers > 64 || heads < 1 || heads > 32 || hidden != heads * 64 || ff < 64 || ff % 64 != 0 ||
        ff > 16384 || (act != 0 && act != 1))
        throw UsageError("weights file '" + path + "': unsupported model (layers " + std::to_string(layers) +
                         ", hidden " + std::to_string(hidden) + ", heads " + std::to_string(heads) + ", ff " +
                         std::to_string(ff) + ", activation " + std::to_string(act) +
                         "); cora's encoder needs head dim 64, ff a multiple of 64, ReLU (0) or GELU (1)");
    c.layers = layers;
    c.hidden = hidden;
    c.heads = heads;
    c.ff = ff;
    c.gelu = act == 1;
    std::vector<LayerWeights> out((size_t)layers);
    for (size_t l = 0; l < out.size(); l++)
        for (auto &[v, n] : out[l].arrays(c)) {
            v->resize((size_t)n);
            if (!f.read(reinterpret_cast<char *>(v->data()), (std::streamsize)(n * 4)))
                throw UsageError("weights file '" + path + "' ends inside layer " + std::to_string(l) + " (expected " +
                                 std::to_string(n) + " more floats)");
        }
    if (f.peek() != std::char_traits<char>::eof())
        throw UsageError("weights file '" + path + "' has bytes after the last layer");
    return out;
}

/** The reference forward pass of one item (its `n` tokens, row-major [n, hidden]) through every
 * layer, in double precision: attention over j < n (or j <= i when causal), post-LN. */
inline std::vector<double> reference_item(const EncoderConfig &c, const std::vector<LayerWeights> &w,
                                          const float *tokens, int64_t n) {
    const int64_t H = c.hidden, NH = c.heads, F = c.ff, D = 64;
    std::vector<double> x((size_t)(n * H));
    for (int64_t i = 0; i < n * H; i++)
        x[(size_t)i] = tokens[i];
    auto linear = [&](const std::vector<double> &in, int64_t k, const std::vector<float> &W,
                      const std::vector<float> &b, int64_t m) {
        std::vector<double> out((size_t)(n * m));
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = 0; o < m; o++) {
                double acc = b[(size_t)o];
                for (int64_t r = 0; r < k; r++)
                    acc += in[(size_t)(t * k + r)] * W[(size_t)(r * m + o)];
                out[(size_t)(t * m + o)] = acc;
            }
        return out;
    };
    auto norm = [&](std::vector<double> &y, const std::vector<float> &g, const std::vector<float> &be) {
        for (int64_t t = 0; t < n; t++) {
            double mean = 0, var = 0;
            for (int64_t o = 0; o < H; o++)
                mean += y[(size_t)(t * H + o)];
            mean /= (double)H;
            for (int64_t o = 0; o < H; o++)
                var += (y[(size_t)(t * H + o)] - mean) * (y[(size_t)(t * H + o)] - mean);
            double rstd = 1.0 / std::sqrt(var / (double)H + 1e-5);
            for (int64_t o = 0; o < H; o++)
                y[(size_t)(t * H + o)] = (y[(size_t)(t * H + o)] - mean) * rstd * g[(size_t)o] + be[(size_t)o];
        }
    };
    for (const LayerWeights &l : w) {
        std::vector<double> qkv = linear(x, H, l.wqkv, l.bqkv, 3 * H), att((size_t)(n * H), 0.0), p((size_t)n);
        for (int64_t h = 0; h < NH; h++)
            for (int64_t i = 0; i < n; i++) {
                int64_t keys = c.causal ? i + 1 : n;
                double mx = -INFINITY, total = 0;
                for (int64_t j = 0; j < keys; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += qkv[(size_t)(i * 3 * H + h * D + d)] * qkv[(size_t)(j * 3 * H + H + h * D + d)];
                    p[(size_t)j] = s / 8.0;
                    mx = std::max(mx, p[(size_t)j]);
                }
                for (int64_t j = 0; j < keys; j++)
                    total += (p[(size_t)j] = std::exp(p[(size_t)j] - mx));
                for (int64_t j = 0; j < keys; j++)
                    for (int64_t d = 0; d < D; d++)
                        att[(size_t)(i * H + h * D + d)] +=
                            p[(size_t)j] / total * qkv[(size_t)(j * 3 * H + 2 * H + h * D + d)];
            }
        std::vector<double> y = linear(att, H, l.wo, l.bo, H);
        for (size_t k = 0; k < y.size(); k++)
            y[k] += x[k];
        norm(y, l.ln1_gamma, l.ln1_beta);
        std::vector<double> f = linear(y, H, l.w1, l.b1, F);
        for (double &v : f)
            v = c.gelu ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))) : std::max(v, 0.0);
        std::vector<double> z = linear(f, F, l.w2, l.b2, H);
        for (size_t k = 0; k < z.size(); k++)
            z[k] += y[k];
        norm(z, l.ln2_gamma, l.ln2_beta);
        x = std::move(z);
    }
    return x;
}

} // namespace cora::apps
