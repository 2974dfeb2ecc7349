// vgemm: a batch of GEMMs with per-item M, N, K (CoRA's second application). The cora kernel is
// an ahead-of-time library (vgemm.h, built by cora_add_library for x86-64-v4 and x86-64-v3 and
// chosen at run time by the CPU's features). Two inner-tile strategies are measured in this
// process, with the baselines beside them:
//   cora micro-kernel  generated register tiles (vgemm_def.h)
//   cora + sgemm tiles the same packed layout, longest-first items across threads, one
//                      single-threaded cblas_sgemm per 128-row tile (CoRA called MKL per tile)
//   per-matrix loop    cblas_sgemm per item, exact sizes, OpenBLAS threads (hand-written vgemm)
//   padded batched     cblas_sgemm per item, every item padded to the batch maximum
// The faster strategy is kept and reported; the cora result is checked against the loop.
#include <cblas.h>
#include <omp.h>

#include "common/timing.h"
#include "vgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace {

using cora::apps::best_seconds;

struct Shape {
    int32_t m, n, k;
};

/** `count` shapes from a dataset file (lines "M N K") starting at line `start`, or, when the file
 * is absent, drawn from its distribution: multiples of `step` in [lo, hi]. */
std::vector<Shape> load_shapes(const std::string &path, int64_t count, int64_t start, int32_t step, int32_t lo,
                               int32_t hi, bool *from_file) {
    std::vector<Shape> v;
    std::ifstream f(path);
    Shape s;
    for (int64_t line = 0; f >> s.m >> s.n >> s.k && (int64_t)v.size() < count; line++)
        if (line >= start) v.push_back(s);
    *from_file = (int64_t)v.size() == count;
    if (*from_file) return v;
    v.clear();
    std::mt19937 rng(42 + (uint32_t)start);
    std::uniform_int_distribution<int32_t> d(lo / step, hi / step);
    for (int64_t i = 0; i < count; i++)
        v.push_back({d(rng) * step, d(rng) * step, d(rng) * step});
    return v;
}

double gflops(double flop, double secs) { return flop * 1e-9 / secs; }

} // namespace

int main(int argc, char **argv) {
    int64_t batch = 16, start = 0;
    int runs = 3;
    std::string data = "large";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--batch") batch = std::atoll(argv[i + 1]);
        else if (a == "--data") data = argv[i + 1];
        else if (a == "--start") start = std::atoll(argv[i + 1]);
        else if (a == "--runs") runs = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: vgemm [--batch N] [--data large|small|odd|FILE] [--start LINE] [--runs R]\n");
            return 2;
        }
    }
    const std::string shared = std::getenv("CORA_SHARED_DIR") ? std::getenv("CORA_SHARED_DIR") : CORA_SHARED_DIR;
    bool from_file = false;
    std::vector<Shape> shapes;
    if (data == "large")
        shapes = load_shapes(shared + "/datasets/vbatch_gemm_data.txt", batch, start, 128, 512, 1408, &from_file);
    else if (data == "small")
        shapes = load_shapes(shared + "/datasets/vbatch_gemm_data_small.txt", batch, start, 64, 64, 384, &from_file);
    else if (data == "odd") // every tail: sizes 0..67, not multiples of the tile
        shapes = load_shapes("", batch, start, 1, 0, 67, &from_file);
    else
        shapes = load_shapes(data, batch, start, 1, 1, 1, &from_file);
    if ((int64_t)shapes.size() != batch) {
        std::fprintf(stderr, "vgemm: '%s' has fewer than %lld shapes after line %lld\n", data.c_str(),
                     (long long)batch, (long long)start);
        return 2;
    }

    std::vector<int32_t> ms, ns, ks;
    std::vector<int64_t> a_off{0}, w_off{0}, c_off{0};
    double flop = 0, padded_flop;
    int32_t max_m = 0, max_n = 0, max_k = 0;
    for (const Shape &s : shapes) {
        ms.push_back(s.m), ns.push_back(s.n), ks.push_back(s.k);
        a_off.push_back(a_off.back() + (int64_t)s.m * s.k);
        w_off.push_back(w_off.back() + (int64_t)s.k * s.n);
        c_off.push_back(c_off.back() + (int64_t)s.m * s.n);
        flop += 2.0 * s.m * s.n * s.k;
        max_m = std::max(max_m, s.m), max_n = std::max(max_n, s.n), max_k = std::max(max_k, s.k);
    }
    padded_flop = 2.0 * (double)batch * max_m * max_n * max_k;
    std::printf("vgemm: batch %lld, %s shapes (%s), %d threads; useful %.3f GFLOP, padded/useful %.2f\n",
                (long long)batch, data.c_str(), from_file ? "dataset" : "generated, dataset absent",
                omp_get_max_threads(), flop * 1e-9, padded_flop / flop);

    // The library reports its packed sizes; they must be the per-item row-major sizes. Length
    // arrays come in name order (K, M, N), as vgemm.h lists them.
    int64_t sizes[vgemm_tensor_count];
    char error[512];
    if (vgemm_buffer_sizes(batch, ks.data(), batch, ms.data(), batch, ns.data(), batch, sizes, error, sizeof error)) {
        std::fprintf(stderr, "vgemm: %s\n", error);
        return 1;
    }
    if (sizes[vgemm_size_A] != a_off.back() || sizes[vgemm_size_W] != w_off.back() ||
        sizes[vgemm_size_C] != c_off.back()) {
        std::fprintf(stderr, "vgemm: unexpected packed sizes %lld %lld %lld, expected %lld %lld %lld\n",
                     (long long)sizes[vgemm_size_A], (long long)sizes[vgemm_size_W], (long long)sizes[vgemm_size_C],
                     (long long)a_off.back(), (long long)w_off.back(), (long long)c_off.back());
        return 1;
    }
    std::vector<float> a((size_t)a_off.back()), w((size_t)w_off.back()), c((size_t)c_off.back()),
        c_ref((size_t)c_off.back()), c_tiles((size_t)c_off.back());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float &x : a)
        x = u(rng);
    for (float &x : w)
        x = u(rng);

    auto run_cora = [&] {
        if (vgemm(batch, ks.data(), batch, ms.data(), batch, ns.data(), batch, a.data(), (int64_t)a.size(), w.data(),
                  (int64_t)w.size(), c.data(), (int64_t)c.size(), error, sizeof error)) {
            std::fprintf(stderr, "vgemm: %s\n", error);
            std::exit(1);
        }
    };
    auto item_gemm = [&](int64_t b, int64_t row0, int64_t rows, float *out) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, ns[b], ks[b], 1.0f,
                    a.data() + a_off[b] + row0 * ks[b], ks[b], w.data() + w_off[b], ns[b], 0.0f,
                    out + c_off[b] + row0 * ns[b], ns[b]);
    };
    auto run_loop = [&] {
        for (int64_t b = 0; b < batch; b++)
            item_gemm(b, 0, ms[b], c_ref.data());
    };
    // Tiles of 128 rows of one item, longest items first, one tile per thread at a time.
    const int64_t tile_rows = 128;
    std::vector<std::pair<int64_t, int64_t>> tiles; // (item, first row)
    std::vector<int64_t> order(batch);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return (double)ms[x] * ns[x] * ks[x] > (double)ms[y] * ns[y] * ks[y];
    });
    for (int64_t b : order)
        for (int64_t r = 0; r < ms[b]; r += tile_rows)
            tiles.emplace_back(b, r);
    int blas_threads = openblas_get_num_threads();
    auto run_tiles = [&] {
        openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < (int64_t)tiles.size(); t++) {
            auto [b, r] = tiles[(size_t)t];
            item_gemm(b, r, std::min<int64_t>(tile_rows, ms[b] - r), c_tiles.data());
        }
        openblas_set_num_threads(blas_threads);
    };
    // Padded: every item padded to the batch maximum (zero padding, so the item's block of the
    // padded result is its product; the padding costs only time).
    std::vector<float> pa((size_t)max_m * max_k), pw((size_t)max_k * max_n), pc((size_t)max_m * max_n);
    auto run_padded = [&] {
        for (int64_t b = 0; b < batch; b++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, max_m, max_n, max_k, 1.0f, pa.data(), max_k,
                        pw.data(), max_n, 0.0f, pc.data(), max_n);
    };

    run_cora();
    run_loop();
    run_tiles();
    double err = 0, err_tiles = 0, scale = 0;
    for (size_t i = 0; i < c.size(); i++) {
        err = std::max(err, (double)std::fabs(c[i] - c_ref[i]));
        err_tiles = std::max(err_tiles, (double)std::fabs(c_tiles[i] - c_ref[i]));
        scale = std::max(scale, (double)std::fabs(c_ref[i]));
    }
    double tol = 1e-5 * std::max(1.0, scale) * std::sqrt((double)std::max(max_k, 1));
    bool ok = err <= tol && err_tiles <= tol;
    std::printf("check vs per-matrix cblas_sgemm: %s (max abs error %.3g micro-kernel, %.3g sgemm tiles)\n",
                ok ? "PASS" : "FAIL", err, err_tiles);

    double cora_s = best_seconds(runs, run_cora), tiles_s = best_seconds(runs, run_tiles);
    double loop_s = best_seconds(runs, run_loop), padded_s = best_seconds(runs, run_padded);
    bool micro_wins = cora_s <= tiles_s;
    double best_s = std::min(cora_s, tiles_s);
    std::printf("cora micro-kernel   %9.2f ms  %7.1f GFLOP/s\n", cora_s * 1e3, gflops(flop, cora_s));
    std::printf("cora + sgemm tiles  %9.2f ms  %7.1f GFLOP/s\n", tiles_s * 1e3, gflops(flop, tiles_s));
    std::printf("per-matrix loop     %9.2f ms  %7.1f GFLOP/s\n", loop_s * 1e3, gflops(flop, loop_s));
    std::printf("padded batched      %9.2f ms  %7.1f GFLOP/s (useful work)\n", padded_s * 1e3,
                gflops(flop, padded_s));
    std::printf("kept: %s;  cora / per-matrix loop: %.2fx,  cora / padded batched: %.2fx\n",
                micro_wins ? "micro-kernel" : "sgemm tiles", loop_s / best_s, padded_s / best_s);
    return ok ? 0 : 1;
}
