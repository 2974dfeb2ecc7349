// C = L * B with L lower-triangular (M x M) and B dense (M x N), fp32, scheduled in cora with
// register tiles, longest-first load balancing and an operation split (check-free full row tiles
// + a tail). Checks the result against cblas_strmm and prints GFLOP/s of cora, cblas_strmm and a
// padded (full square) cblas_sgemm, all timed in this process.
#include <cblas.h>
#include <cora/cora.h>

#include "common/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cora;
using cora::apps::best_seconds;

namespace {

constexpr int64_t kTileRows = 4, kTileCols = 32;

/** The trmm pipeline. The reduction runs over r < min(floor_mult(i, 4) + 4, M), over the
 * block-padded lower triangle Lb: per 4-row tile the reduction is rectangular, so r can run
 * outside the tile's rows and the 4 x 32 tile stays in registers (cache_write). */
struct Trmm {
    Dim m{"m"}, n{"n"}, r{"r"}, mo{"mo"}, mi{"mi"}, no{"no"}, ni{"ni"}, rank{"rank"};
    Param M{"M", 1, 16384}, N{"N", 1, 16384};
    Tensor L{"L", {{m, M}, {r, M}}}, B{"B", {{r, M}, {n, N}}};
    /** Row i of L up to the end of its 4-row block, upper triangle zeroed: a ragged tensor of
     * about M^2 / 2 elements, so the tile reads plain loads (no select in the vector loop). */
    Func Lb{"Lb", {{m, M}, {r, min(floor_mult(m.var(), kTileRows) + kTileRows, M)}}};
    Func C{"C", {{m, M}, {n, N}}};

    Trmm() {
        Lb.compute([&](Expr i, Expr k) { return select(k <= i, L(i, k), 0.0f); });
        C.compute(
            [&](Expr i, Expr j) { return sum(r, min(floor_mult(i, kTileRows) + kTileRows, M), Lb(i, r) * B(r, j)); });
        // Operation splits: a head of full 4 x 32 tiles (no guard at all), the last rows (fewer
        // than 4) and the last columns of the head rows (fewer than 32).
        Func rows_tail = C.split_op(m, floor_mult(M, kTileRows));
        Func cols_tail = C.split_op(n, floor_mult(N, kTileCols));
        // Tile rows have cost ~ their index: the longest start first, in parallel. The 4 x 32
        // tile accumulates in registers while r runs over the rows of B.
        C.split(m, mo, mi, kTileRows)
            .remap_longest_first(mo, rank, mo.var())
            .split(n, no, ni, kTileCols)
            .reorder({rank, no, r, mi, ni})
            .parallel(rank)
            .unroll(mi)
            .vectorize(ni)
            .cache_write(no);
        rows_tail.split(n, no, ni, kTileCols).reorder({m, no, r, ni}).vectorize(ni).cache_write(no);
        cols_tail.split(m, mo, mi, kTileRows).reorder({mo, n, r, mi}).unroll(mi).cache_write(n);
    }
};

double gflops(double flop, double secs) { return flop * 1e-9 / secs; }

} // namespace

int main(int argc, char **argv) {
    int64_t size_m = 1024, size_n = -1;
    int runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--m") size_m = std::atoll(argv[i + 1]);
        if (a == "--n") size_n = std::atoll(argv[i + 1]);
        if (a == "--runs") runs = std::atoi(argv[i + 1]);
    }
    if (size_n < 0) size_n = size_m;
    Trmm t;
    Pipeline p({t.C}, "trmm");
    Kernel k = p.compile();
    std::printf("trmm M = %lld, N = %lld (%s)\n", (long long)size_m, (long long)size_n, k.prover_stats().c_str());

    RaggedShape shape;
    shape.set(t.M, size_m).set(t.N, size_n);
    Buffer l = Buffer::alloc(t.L, shape), b = Buffer::alloc(t.B, shape), c = Buffer::alloc(t.C, shape);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < l.size(); i++)
        l.at(i) = u(rng);
    for (int64_t i = 0; i < b.size(); i++)
        b.at(i) = u(rng);

    // cora, then the check against cblas_strmm (in place on a copy of B).
    double cora_s = best_seconds(runs, [&] { k.run(shape, {{t.L, l}, {t.B, b}, {t.C, c}}); });
    std::vector<float> blas_c(b.data<float>(), b.data<float>() + b.size());
    cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)size_m, (int)size_n, 1.0f,
                l.data<float>(), (int)size_m, blas_c.data(), (int)size_n);
    double err = 0, scale = 0;
    for (int64_t i = 0; i < c.size(); i++) {
        err = std::max(err, (double)std::fabs(c.at(i) - blas_c[(size_t)i]));
        scale = std::max(scale, (double)std::fabs(blas_c[(size_t)i]));
    }
    bool ok = err <= 1e-5 * std::max(1.0, scale) * std::sqrt((double)size_m);
    std::printf("check vs cblas_strmm: %s (max abs error %.3g, max |C| %.3g)\n", ok ? "PASS" : "FAIL", err, scale);

    // cblas_strmm (in place: each run on a fresh copy, the copy not timed).
    double strmm_s = 1e30;
    for (int r = 0; r < runs; r++) {
        std::memcpy(blas_c.data(), b.data<float>(), sizeof(float) * (size_t)b.size());
        strmm_s =
            std::min(strmm_s, best_seconds(1, [&] {
                         cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)size_m,
                                     (int)size_n, 1.0f, l.data<float>(), (int)size_m, blas_c.data(), (int)size_n);
                     }));
    }
    // Padded: the full square product, ignoring the triangle.
    double sgemm_s = best_seconds(runs, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)size_m, (int)size_n, (int)size_m, 1.0f,
                    l.data<float>(), (int)size_m, b.data<float>(), (int)size_n, 0.0f, blas_c.data(), (int)size_n);
    });
    // Useful work: row i has i + 1 terms.
    double flop = (double)size_m * (double)(size_m + 1) * (double)size_n;
    std::printf("cora        %8.2f ms  %7.1f GFLOP/s\n", cora_s * 1e3, gflops(flop, cora_s));
    std::printf("cblas_strmm %8.2f ms  %7.1f GFLOP/s   cora / strmm: %.2fx\n", strmm_s * 1e3, gflops(flop, strmm_s),
                strmm_s / cora_s);
    std::printf("cblas_sgemm %8.2f ms  %7.1f GFLOP/s   cora / padded sgemm: %.2fx (padded)\n", sgemm_s * 1e3,
                gflops(flop, sgemm_s), sgemm_s / cora_s);
    return ok ? 0 : 1;
}
