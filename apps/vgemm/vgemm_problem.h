/** \file One vgemm batch and the ways to compute it, shared by the app and the benchmarks:
 * cora's AOT library (vgemm.h), cora's layout with one cblas_sgemm per 128-row tile, the
 * per-matrix cblas_sgemm loop, and padded batched sgemm. Operands are packed item after item,
 * each item row-major: the layout the library reports through vgemm_buffer_sizes. */
#pragma once

#include <cblas.h>

#include "common/data_files.h"
#include "vgemm.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace cora::apps {

/** The largest M, N or K the library accepts (its length arrays' declared range, vgemm_def.h). */
constexpr int32_t kMaxGemmDim = 8192;

/** `count` shapes of a dataset file (lines "M N K") from line `start` on. The datasets are
 * optional: when the file is absent, shapes are drawn from its distribution instead (multiples of
 * `step` in [lo, hi]; *from_file says which). A file that is present but malformed or too short
 * is a UsageError naming it and the line. */
inline std::vector<GemmShape> load_gemm_shapes(const std::string &path, int64_t count, int64_t start, int32_t step,
                                               int32_t lo, int32_t hi, bool *from_file) {
    *from_file = !path.empty() && std::filesystem::exists(path);
    if (*from_file) return read_gemm_shape_file(path, count, start, kMaxGemmDim);
    std::vector<GemmShape> v;
    std::mt19937 rng(42 + (uint32_t)start);
    std::uniform_int_distribution<int32_t> d(lo / step, hi / step);
    for (int64_t i = 0; i < count; i++)
        v.push_back({d(rng) * step, d(rng) * step, d(rng) * step});
    return v;
}

class VGemmProblem {
public:
    static constexpr int64_t kTileRows = 128; ///< rows per sgemm call in the tile strategy

    int64_t batch;
    std::vector<int32_t> ms, ns, ks;
    std::vector<int64_t> a_off{0}, w_off{0}, c_off{0}; ///< item offsets in the packed operands
    std::vector<float> a, w;                           ///< random operands
    int32_t max_m = 0, max_n = 0, max_k = 0;
    double flop = 0; ///< useful work

    explicit VGemmProblem(const std::vector<GemmShape> &shapes) : batch((int64_t)shapes.size()) {
        for (const GemmShape &s : shapes) {
            ms.push_back(s[0]), ns.push_back(s[1]), ks.push_back(s[2]);
            a_off.push_back(a_off.back() + (int64_t)s[0] * s[2]);
            w_off.push_back(w_off.back() + (int64_t)s[2] * s[1]);
            c_off.push_back(c_off.back() + (int64_t)s[0] * s[1]);
            max_m = std::max(max_m, s[0]), max_n = std::max(max_n, s[1]), max_k = std::max(max_k, s[2]);
            flop += 2.0 * s[0] * s[1] * s[2];
        }
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        a.resize((size_t)a_off.back()), w.resize((size_t)w_off.back());
        for (float &x : a)
            x = u(rng);
        for (float &x : w)
            x = u(rng);
        // Tiles of the sgemm strategy: longest items (cost M*N*K) first.
        std::vector<int64_t> order((size_t)batch);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return cost(x) > cost(y); });
        for (int64_t b : order)
            for (int64_t r = 0; r < ms[b]; r += kTileRows)
                tiles_.emplace_back(b, r);
    }

    int64_t c_size() const { return c_off.back(); }
    double padded_flop() const { return 2.0 * (double)batch * max_m * max_n * max_k; }

    /** The packed sizes the library computes must be these; empty string when they are. */
    std::string check_library_sizes() const {
        int64_t sizes[vgemm_tensor_count];
        char error[512];
        // Length arrays come in name order (K, M, N), as vgemm.h lists them.
        if (vgemm_buffer_sizes(batch, ks.data(), batch, ms.data(), batch, ns.data(), batch, sizes, error, sizeof error))
            return error;
        if (sizes[vgemm_size_A] != a_off.back() || sizes[vgemm_size_W] != w_off.back() ||
            sizes[vgemm_size_C] != c_off.back())
            return "the library's packed sizes differ from the per-item row-major sizes";
        return "";
    }

    /** cora's generated micro-kernel (AOT). std::runtime_error with the library's message. */
    void cora(float *c) const {
        char error[512];
        if (vgemm(batch, ks.data(), batch, ms.data(), batch, ns.data(), batch, a.data(), (int64_t)a.size(), w.data(),
                  (int64_t)w.size(), c, c_size(), error, sizeof error))
            throw std::runtime_error(error);
    }
    /** cora's layout and order, one single-threaded cblas_sgemm per tile, tiles across threads. */
    void sgemm_tiles(float *c) const {
        int threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < (int64_t)tiles_.size(); t++) {
            auto [b, r] = tiles_[(size_t)t];
            item_gemm(b, r, std::min<int64_t>(kTileRows, ms[b] - r), c);
        }
        openblas_set_num_threads(threads);
    }
    /** The hand-written baseline: cblas_sgemm per item at its exact size (OpenBLAS threads). */
    void per_matrix_loop(float *c) const {
        for (int64_t b = 0; b < batch; b++)
            item_gemm(b, 0, ms[b], c);
    }
    /** Every item padded to the batch maximum (zero operands: only the time matters). */
    void padded_batched() {
        ensure_padded();
        size_t pa = (size_t)max_m * max_k, pw = (size_t)max_k * max_n, pc = (size_t)max_m * max_n;
        for (int64_t b = 0; b < batch; b++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, max_m, max_n, max_k, 1.0f,
                        padded_a_.data() + (size_t)b * pa, max_k, padded_w_.data() + (size_t)b * pw, max_n, 0.0f,
                        padded_c_.data() + (size_t)b * pc, max_n);
    }
    /** The padded operands (batch x max_m x max_k, batch x max_k x max_n; zero) and result. */
    float *padded_a() { return ensure_padded(), padded_a_.data(); }
    float *padded_w() { return ensure_padded(), padded_w_.data(); }
    float *padded_c() { return ensure_padded(), padded_c_.data(); }

private:
    void ensure_padded() {
        if (!padded_a_.empty() || batch == 0) return;
        padded_a_.assign((size_t)batch * max_m * max_k, 0.0f);
        padded_w_.assign((size_t)batch * max_k * max_n, 0.0f);
        padded_c_.resize((size_t)batch * max_m * max_n);
    }
    double cost(int64_t b) const { return (double)ms[b] * ns[b] * ks[b]; }
    void item_gemm(int64_t b, int64_t row0, int64_t rows, float *c) const {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, ns[b], ks[b], 1.0f,
                    a.data() + a_off[b] + row0 * ks[b], ks[b], w.data() + w_off[b], ns[b], 0.0f,
                    c + c_off[b] + row0 * ns[b], ns[b]);
    }

    std::vector<std::pair<int64_t, int64_t>> tiles_; ///< (item, first row)
    std::vector<float> padded_a_, padded_w_, padded_c_;
};

} // namespace cora::apps
