// Block-sparse test helpers shared by correctness/block_sparse.cpp and static_patterns.cpp: the
// block patterns of the edge cases, random dense weights, the dense product in double, and a
// linear layer's kernel run on every length case against the reference and the dense product.
#pragma once

#include <cora/cora.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

#include "common/ragged_testing.h"
#include "sparse/bsr_linear.h"

namespace cora::testing {

enum class Pattern { None, All, OnePerRow, EmptyRows, Random };

inline const char *pattern_name(Pattern p) {
    switch (p) {
    case Pattern::None: return "no block";
    case Pattern::All: return "all blocks";
    case Pattern::OnePerRow: return "one block per row";
    case Pattern::EmptyRows: return "empty rows";
    case Pattern::Random: return "random";
    }
    return "?";
}

/** A [mb, kb] block mask of the pattern. */
inline std::vector<uint8_t> block_mask(Pattern p, int64_t mb, int64_t kb, std::mt19937 &rng) {
    std::vector<uint8_t> m((size_t)(mb * kb), 0);
    for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < kb; j++) {
            uint8_t &x = m[(size_t)(i * kb + j)];
            switch (p) {
            case Pattern::None: break;
            case Pattern::All: x = 1; break;
            case Pattern::OnePerRow: x = j == (i * 7 + 3) % kb; break;
            case Pattern::EmptyRows: x = i % 2 == 1 ? 0 : (uint8_t)(rng() % 2); break;
            case Pattern::Random: x = (uint8_t)(rng() % 3 == 0); break;
            }
        }
    return m;
}

inline std::vector<float> random_dense(int64_t rows, int64_t cols, std::mt19937 &rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> d((size_t)(rows * cols));
    for (float &x : d)
        x = u(rng);
    return d;
}

/** Y[t, n] = act(sum_k X[t, k] W[n, k] + bias[n]) in double over the dense matrix. */
inline std::vector<double> dense_linear(const std::vector<double> &x, int64_t tokens, const std::vector<float> &w,
                                        int64_t rows, int64_t cols, const std::vector<float> *bias, bool relu) {
    std::vector<double> y((size_t)(tokens * rows));
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t n = 0; n < rows; n++) {
            double acc = bias ? (*bias)[(size_t)n] : 0.0;
            for (int64_t k = 0; k < cols; k++)
                acc += x[(size_t)(t * cols + k)] * (double)w[(size_t)(n * cols + k)];
            y[(size_t)(t * rows + n)] = relu ? std::max(acc, 0.0) : acc;
        }
    return y;
}

struct BlockShape {
    int64_t rows, cols;
};

/** Runs each of `kernels` (all compiled from `pipe`, whose output `Y` = act(X W^T + bias) of
 * apps::BsrLinear, act ReLU when `relu`) with the BSR data `w` on every length case up to `max_len`
 * (pad 12), against the reference evaluator (once per case for all of them) and the dense product
 * with w's zero blocks materialised. */
inline void check_bsr_linear(const std::vector<const Kernel *> &kernels, const Pipeline &pipe, const apps::TokenDims &D,
                             const Tensor &X, const BsrMatrix &W, const Func &Y, const BsrData &w,
                             const std::optional<Tensor> &bias, bool relu, int32_t max_len, std::mt19937 &rng) {
    const int64_t rows = W.rows(), cols = W.cols();
    std::vector<float> wd = w.to_dense(), bias_values((size_t)rows);
    for (float &x : bias_values)
        x = (float)(rng() % 100) / 100.0f - 0.5f;
    for (const auto &lengths : length_cases(max_len, 12, (uint32_t)rng(), 1)) {
        INFO(describe(lengths));
        RaggedShape shape;
        shape.set(D.B, (int64_t)lengths.size()).set(D.len, lengths);
        w.bind(shape, W);
        Buffer x = Buffer::alloc(X, shape);
        fill_random(x, (uint32_t)rng());
        Buffer col = w.col_buffer(W, shape), values = w.values_buffer(W, shape);
        std::vector<std::pair<Tensor, const Buffer *>> inputs = {{X, &x}, {W.col, &col}, {W.values, &values}};
        std::optional<Buffer> bias_buffer;
        if (bias) {
            bias_buffer = Buffer::view(*bias, shape, bias_values.data(), rows);
            inputs.push_back({*bias, &*bias_buffer});
        }
        const std::vector<double> reference = reference_evaluate(pipe, shape, inputs)[0];
        std::vector<double> xv = logical_values(x, X, shape);
        const std::vector<double> dense =
            dense_linear(xv, (int64_t)xv.size() / cols, wd, rows, cols, bias ? &bias_values : nullptr, relu);
        for (size_t k = 0; k < kernels.size(); k++) {
            INFO("kernel " << k << " of " << kernels.size());
            Buffer y = Buffer::alloc(Y, shape);
            std::vector<Binding> bindings = {{X, x}, {W.col, col}, {W.values, values}, {Y, y}};
            if (bias) bindings.push_back({*bias, *bias_buffer});
            kernels[k]->run(shape, bindings);
            require_close(y, Y, shape, reference);
            require_close(y, Y, shape, dense);
        }
    }
}

/** check_bsr_linear of one kernel. */
inline void check_bsr_linear(const Kernel &kernel, const Pipeline &pipe, const apps::TokenDims &D, const Tensor &X,
                             const BsrMatrix &W, const Func &Y, const BsrData &w, const std::optional<Tensor> &bias,
                             bool relu, int32_t max_len, std::mt19937 &rng) {
    check_bsr_linear(std::vector<const Kernel *>{&kernel}, pipe, D, X, W, Y, w, bias, relu, max_len, rng);
}

/** The metadata checks' layer: Y = X W^T over 32 features, W 16 x 32 in 8 x 8 blocks (4 of 8
 * present), a batch of lengths {5, 9}, X random and Y filled with 42 (so a test sees whether a
 * failed call wrote anything), compiled for `backend` with `tiling`. */
struct SmallBsrLayer {
    apps::TokenDims D{16};
    apps::BsrTiling tiling;
    Tensor X;
    BsrMatrix W{"W", 16, 32, 8, 8};
    apps::BsrLinear lin;
    Kernel kernel;
    BsrData w;
    RaggedShape shape;
    Buffer x, y;
    SmallBsrLayer(const apps::BsrTiling &t, const std::string &name, const std::string &backend, std::mt19937 &rng)
        : tiling(t), X(D.tokens("X", 32, t.chunk_tokens)),
          lin(
              "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, t),
          kernel(Pipeline({lin.Y}, name).compile(backend)),
          w(BsrData::from_block_mask(random_dense(16, 32, rng), 16, 32, 8, 8, {1, 0, 1, 1, 0, 1, 0, 0})) {
        shape.set(D.B, 2).set(D.len, {5, 9});
        w.bind(shape, W);
        x = Buffer::alloc(X, shape);
        y = Buffer::alloc(lin.Y, shape);
        fill_random(x, 1);
        for (int64_t i = 0; i < y.size(); i++)
            y.at(i) = 42.0f;
    }
};

} // namespace cora::testing
