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
#include <omp.h>

#include "common/cli.h"
#include "common/device.h"
#include "common/error_check.h"
#include "common/timing.h"
#include "cora_runtime.h"
#include "vgemm/vgemm_gpu_def.h"
#include "vgemm_problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using cora::apps::best_seconds;
using cora::apps::GemmShape;
using cora::apps::load_gemm_shapes;
using cora::apps::VGemmProblem;

double gflops(double flop, double secs) { return flop * 1e-9 / secs; }

/** --device other than cpu: the GPU schedule (vgemm_gpu_def.h, JIT-compiled) on the same
 * operands, checked against the per-matrix cblas_sgemm loop. */
int run_gpu(const cora::Backend &device, const VGemmProblem &p, const std::vector<GemmShape> &shapes, int64_t runs) {
    using namespace cora;
    apps::VgemmGpu v(128); // 128 x 128 tiles: twice the 64 x 64 tiles' speed on an H200 (bench/gpu)
    RaggedShape shape;
    v.bind(shape, shapes);
    Buffer x = Buffer::alloc(v.X, shape), y = Buffer::alloc(v.Y, shape), c = Buffer::alloc(v.C, shape);
    if (x.size() != (int64_t)p.a.size() || y.size() != (int64_t)p.w.size() || c.size() != p.c_size())
        throw std::runtime_error("the GPU schedule's packed sizes differ from the per-item row-major sizes");
    std::copy(p.a.begin(), p.a.end(), x.data<float>());
    std::copy(p.w.begin(), p.w.end(), y.data<float>());
    std::string label;
    double ms = apps::run_gpu_schedule(device, v.pipeline(), shape, {{v.X, x}, {v.Y, y}, {v.C, c}}, (int)runs, &label);
    std::vector<float> c_ref((size_t)p.c_size());
    p.per_matrix_loop(c_ref.data());
    apps::ErrorCheck check;
    for (size_t i = 0; i < c_ref.size(); i++)
        check.add(c.data<float>()[i], c_ref[i]);
    bool ok = check.abs_within(1e-5 * std::max(1.0, check.scale()) * std::sqrt((double)std::max(p.max_k, 1)));
    std::printf("%s\ncheck vs per-matrix cblas_sgemm: %s (max abs error %.3g%s)\n", label.c_str(), ok ? "PASS" : "FAIL",
                check.max_abs(), check.non_finite_note().c_str());
    std::printf("cora %9.3f ms  %7.1f GFLOP/s (GPU baselines: cora_gpu_bench, against cuBLAS)\n", ms,
                gflops(p.flop, ms * 1e-3));
    return ok ? 0 : 1;
}

/** --tensor-cores: the tensor-core schedule (VgemmTensorCores, float16 operands, float32 sums) on
 * the operands rounded to float16 and padded with zeros to whole tiles (M, N to 32, K to 16),
 * checked against the per-matrix cblas_sgemm loop on the same rounded operands. */
int run_gpu_tensor_cores(const cora::Backend &device, const VGemmProblem &p, int64_t runs) {
    using namespace cora;
    apps::VgemmTensorCores v;
    std::vector<std::array<int32_t, 3>> tiles;
    double tile_flop = 0;
    for (int64_t b = 0; b < p.batch; b++) {
        tiles.push_back({(p.ms[b] + 31) / 32, (p.ns[b] + 31) / 32, (p.ks[b] + 15) / 16});
        tile_flop += 2.0 * 32 * tiles.back()[0] * 32 * tiles.back()[1] * 16 * tiles.back()[2];
    }
    RaggedShape shape;
    v.bind(shape, tiles);
    Buffer x = Buffer::alloc(v.X, shape), y = Buffer::alloc(v.Y, shape), c = Buffer::alloc(v.C, shape);
    VGemmProblem rounded = p; // the reference reads what the tensor cores read
    for (float &e : rounded.a)
        e = cora_half_to_float(cora_float_to_half(e));
    for (float &e : rounded.w)
        e = cora_half_to_float(cora_float_to_half(e));
    // Each matrix row-major in its whole tiles, zeros around it (x and y start zero: Buffer::alloc).
    int64_t ox = 0, oy = 0;
    for (int64_t b = 0; b < p.batch; b++) {
        const int64_t pm = 32 * tiles[b][0], pn = 32 * tiles[b][1], pk = 16 * tiles[b][2];
        for (int64_t i = 0; i < p.ms[b]; i++)
            for (int64_t k = 0; k < p.ks[b]; k++)
                x.data<uint16_t>()[ox + i * pk + k] = cora_float_to_half(p.a[p.a_off[b] + i * p.ks[b] + k]);
        for (int64_t k = 0; k < p.ks[b]; k++)
            for (int64_t j = 0; j < p.ns[b]; j++)
                y.data<uint16_t>()[oy + k * pn + j] = cora_float_to_half(p.w[p.w_off[b] + k * p.ns[b] + j]);
        ox += pm * pk;
        oy += pk * pn;
    }
    std::string label;
    double ms = apps::run_gpu_schedule(device, v.pipeline(), shape, {{v.X, x}, {v.Y, y}, {v.C, c}}, (int)runs, &label);
    std::vector<float> c_ref((size_t)p.c_size());
    rounded.per_matrix_loop(c_ref.data());
    apps::ErrorCheck check;
    int64_t oc = 0;
    for (int64_t b = 0; b < p.batch; b++) {
        const int64_t pn = 32 * tiles[b][1];
        for (int64_t i = 0; i < p.ms[b]; i++)
            for (int64_t j = 0; j < p.ns[b]; j++) {
                const float want = c_ref[(size_t)(p.c_off[b] + i * p.ns[b] + j)];
                check.add(c.data<float>()[oc + i * pn + j], want);
            }
        oc += 32 * tiles[b][0] * pn;
    }
    bool ok = check.abs_within(1e-5 * std::max(1.0, check.scale()) * std::sqrt((double)std::max(p.max_k, 1)));
    std::printf("%s, tensor cores (float16 operands, float32 sums; whole tiles do %.2fx the useful work)\n",
                label.c_str(), tile_flop / std::max(p.flop, 1.0));
    std::printf("check vs per-matrix cblas_sgemm on the float16-rounded operands: %s (max abs error %.3g%s)\n",
                ok ? "PASS" : "FAIL", check.max_abs(), check.non_finite_note().c_str());
    std::printf("cora %9.3f ms  %7.1f GFLOP/s useful (GPU baselines: cora_gpu_bench, against cublasGemmEx)\n", ms,
                gflops(p.flop, ms * 1e-3));
    return ok ? 0 : 1;
}

int run(int argc, char **argv) {
    int64_t batch = 16, start = 0, runs = 3;
    std::string data = "large", device_name = "cpu";
    bool tensor_cores = false;
    cora::apps::CommandLine cli("vgemm", "A batch of GEMMs with per-item M, N, K: cora's AOT library against the "
                                         "per-matrix cblas_sgemm loop and padded batched sgemm, checked and timed.");
    cli.integer("--batch", &batch, 1, 4096, "GEMMs in the batch")
        .text("--data", &data, "large|small|odd|FILE",
              "shapes: the dataset's large or small file (generated from its distribution when absent), "
              "every size 0..67 (odd), or a file of \"M N K\" lines")
        .integer("--start", &start, 0, INT32_MAX, "first line of the data file to use")
        .integer("--runs", &runs, 1, 1000, "timed runs (the best is reported)")
        .text("--device", &device_name, "cpu|cuda|cuda-emulated|cuda-cpu-threads",
              "where cora runs: the CPU (AOT library), a CUDA GPU, the GPU schedule emulated on the CPU, or its CUDA "
              "source on CPU threads")
        .toggle("--tensor-cores", &tensor_cores,
                "with a GPU --device: the tensor-core schedule (float16 operands, float32 sums, whole tiles)");
    if (!cli.parse(argc, argv)) return 0;
    const cora::Backend &device = cora::apps::parse_device(device_name);
    if (tensor_cores && !device.runs_gpu_schedules())
        throw cora::apps::UsageError("--tensor-cores needs a GPU --device (cuda, cuda-emulated or cuda-cpu-threads)");
    const std::string shared = std::getenv("CORA_SHARED_DIR") ? std::getenv("CORA_SHARED_DIR") : CORA_SHARED_DIR;
    bool from_file = false;
    std::vector<GemmShape> shapes;
    if (data == "large") {
        shapes = load_gemm_shapes(shared + "/datasets/vbatch_gemm_data.txt", batch, start, 128, 512, 1408, &from_file);
    } else if (data == "small") {
        shapes =
            load_gemm_shapes(shared + "/datasets/vbatch_gemm_data_small.txt", batch, start, 64, 64, 384, &from_file);
    } else if (data == "odd") { // every tail: sizes 0..67, not multiples of the tile
        shapes = load_gemm_shapes("", batch, start, 1, 0, 67, &from_file);
    } else {
        shapes = cora::apps::read_gemm_shape_file(data, batch, start, cora::apps::kMaxGemmDim);
        from_file = true;
    }
    VGemmProblem p(shapes);
    std::printf("vgemm: batch %lld, %s shapes (%s), %d threads; useful %.3f GFLOP, padded/useful %.2f\n",
                (long long)batch, data.c_str(), from_file ? "dataset" : "generated, dataset absent",
                omp_get_max_threads(), p.flop * 1e-9, cora::apps::work_ratio(p.padded_flop(), p.flop));
    if (tensor_cores) return run_gpu_tensor_cores(device, p, runs);
    if (device.runs_gpu_schedules()) return run_gpu(device, p, shapes, runs);
    if (std::string e = p.check_library_sizes(); !e.empty()) {
        std::fprintf(stderr, "vgemm: %s\n", e.c_str());
        return 1;
    }
    std::vector<float> c((size_t)p.c_size()), c_ref((size_t)p.c_size()), c_tiles((size_t)p.c_size());
    auto run_cora = [&] {
        try {
            p.cora(c.data());
        } catch (const std::exception &e) {
            std::fprintf(stderr, "vgemm: error: %s\n", e.what());
            std::exit(1);
        }
    };
    auto run_tiles = [&] { p.sgemm_tiles(c_tiles.data()); };
    auto run_loop = [&] { p.per_matrix_loop(c_ref.data()); };
    auto run_padded = [&] { p.padded_batched(); };

    run_cora();
    run_loop();
    run_tiles();
    cora::apps::ErrorCheck check, check_tiles;
    for (size_t i = 0; i < c.size(); i++) {
        check.add(c[i], c_ref[i]);
        check_tiles.add(c_tiles[i], c_ref[i]);
    }
    double tol = 1e-5 * std::max(1.0, check.scale()) * std::sqrt((double)std::max(p.max_k, 1));
    bool ok = check.abs_within(tol) && check_tiles.abs_within(tol);
    std::printf("check vs per-matrix cblas_sgemm: %s (max abs error %.3g micro-kernel%s, %.3g sgemm tiles%s)\n",
                ok ? "PASS" : "FAIL", check.max_abs(), check.non_finite_note().c_str(), check_tiles.max_abs(),
                check_tiles.non_finite_note().c_str());

    double cora_s = best_seconds(runs, run_cora), tiles_s = best_seconds(runs, run_tiles);
    double loop_s = best_seconds(runs, run_loop), padded_s = best_seconds(runs, run_padded);
    bool micro_wins = cora_s <= tiles_s;
    double best_s = std::min(cora_s, tiles_s);
    std::printf("cora micro-kernel   %9.2f ms  %7.1f GFLOP/s\n", cora_s * 1e3, gflops(p.flop, cora_s));
    std::printf("cora + sgemm tiles  %9.2f ms  %7.1f GFLOP/s\n", tiles_s * 1e3, gflops(p.flop, tiles_s));
    std::printf("per-matrix loop     %9.2f ms  %7.1f GFLOP/s\n", loop_s * 1e3, gflops(p.flop, loop_s));
    std::printf("padded batched      %9.2f ms  %7.1f GFLOP/s (useful work)\n", padded_s * 1e3,
                gflops(p.flop, padded_s));
    std::printf("kept: %s;  cora / per-matrix loop: %.2fx,  cora / padded batched: %.2fx\n",
                micro_wins ? "micro-kernel" : "sgemm tiles", loop_s / best_s, padded_s / best_s);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("vgemm", [&] { return run(argc, argv); });
}
