// C = L * B with L lower-triangular (M x M) and B dense (M x N), fp32, scheduled in cora with
// register tiles, longest-first load balancing and an operation split (check-free full row tiles
// + a tail). Checks the result against cblas_strmm and prints GFLOP/s of cora, cblas_strmm and a
// padded (full square) cblas_sgemm, all timed in this process.
#include <cblas.h>
#include <cora/cora.h>

#include "common/cli.h"
#include "common/device.h"
#include "common/error_check.h"
#include "common/timing.h"
#include "trmm/trmm_def.h"
#include "trmm/trmm_gpu_def.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace cora;
using cora::apps::best_seconds;
using cora::apps::Trmm;

namespace {

double gflops(double flop, double secs) { return flop * 1e-9 / secs; }

/** Max |got - cblas_strmm| within the tolerance of a sum of m products; prints the check line. */
bool check_against_strmm(const Buffer &l, const Buffer &b, const float *got, int64_t m, int64_t n) {
    std::vector<float> want(b.data<float>(), b.data<float>() + b.size());
    cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, (int)n, 1.0f, l.data<float>(),
                (int)m, want.data(), (int)n);
    apps::ErrorCheck check;
    for (size_t i = 0; i < want.size(); i++)
        check.add(got[i], want[i]);
    bool ok = check.abs_within(1e-5 * std::max(1.0, check.scale()) * std::sqrt((double)m));
    std::printf("check vs cblas_strmm: %s (max abs error %.3g, max |C| %.3g%s)\n", ok ? "PASS" : "FAIL",
                check.max_abs(), check.scale(), check.non_finite_note().c_str());
    return ok;
}

/** --device other than cpu: the GPU schedule (trmm_gpu_def.h), checked and timed. */
int run_gpu(const Backend &device, int64_t size_m, int64_t size_n, int64_t runs) {
    apps::TrmmGpu t;
    RaggedShape shape;
    shape.set(t.M, size_m).set(t.N, size_n);
    Buffer l = Buffer::alloc(t.L, shape), x = Buffer::alloc(t.X, shape), c = Buffer::alloc(t.C, shape);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < l.size(); i++)
        l.at(i) = u(rng);
    for (int64_t i = 0; i < x.size(); i++)
        x.at(i) = u(rng);
    std::string label;
    double ms = apps::run_gpu_schedule(device, t.pipeline(), shape, {{t.L, l}, {t.X, x}, {t.C, c}}, (int)runs, &label);
    std::printf("trmm M = %lld, N = %lld on %s\n", (long long)size_m, (long long)size_n, label.c_str());
    bool ok = check_against_strmm(l, x, c.data<float>(), size_m, size_n);
    double flop = (double)size_m * (double)(size_m + 1) * (double)size_n;
    std::printf("cora        %8.3f ms  %7.1f GFLOP/s (GPU baselines: cora_gpu_bench, against cuBLAS)\n", ms,
                gflops(flop, ms * 1e-3));
    return ok ? 0 : 1;
}

int run(int argc, char **argv) {
    Trmm t(apps::trmm_blocking_for(host_vector_bits()));
    int64_t size_m = 1024, size_n = 0, runs = 5;
    std::string device_name = "cpu";
    apps::CommandLine cli("trmm", "C = L * B with L lower-triangular (M x M), B dense (M x N): cora against "
                                  "cblas_strmm and padded cblas_sgemm, checked and timed.");
    cli.integer("--m", &size_m, 1, t.M.max_value(), "rows of L and B")
        .integer("--n", &size_n, 0, t.N.max_value(), "columns of B (0: the same as --m)")
        .integer("--runs", &runs, 1, 1000, "timed runs (the best is reported)")
        .text("--device", &device_name, "cpu|cuda|cuda-emulated|cuda-cpu-threads",
              "where cora runs: the CPU, a CUDA GPU, the GPU schedule emulated on the CPU, or its CUDA source on CPU "
              "threads");
    if (!cli.parse(argc, argv)) return 0;
    if (size_n == 0) size_n = size_m;
    const Backend &device = apps::parse_device(device_name);
    if (device.runs_gpu_schedules()) return run_gpu(device, size_m, size_n, runs);
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
    bool ok = check_against_strmm(l, b, c.data<float>(), size_m, size_n);
    std::vector<float> blas_c(b.data<float>(), b.data<float>() + b.size());

    apps::let_thread_pools_sleep(); // cora's OpenMP threads, before OpenBLAS's are timed
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

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("trmm", [&] { return run(argc, argv); });
}
