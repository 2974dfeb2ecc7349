// GPU benchmark: cora's GPU schedules against cuBLAS on the same device, in one process (ratios
// in one run). trmm M = N (cublasStrmm, padded cublasSgemm) and vgemm over the dataset's GEMM
// shapes in batches of 64 (a cublasSgemm per matrix, cublasSgemmGroupedBatched with a group per
// matrix, cublasSgemmStridedBatched padded to the batch's largest sizes), and on tensor cores (float16
// operands, float32 sums) vgemm over the shapes rounded up to whole tiles and one square GEMM
// against cublasGemmEx per matrix; block-sparse linear layers (apps/sparse/bsr_linear.h, BsrTiling::for_gpu)
// at BERT's FF shapes, 32x32 blocks at 50 / 25 / 10% density, against cublasSgemm on the dense
// weight over the same tokens. Each cora result is checked against cuBLAS's.
// Writes a table to --out. Without a GPU it says so and exits 77; `--emulate` runs the same schedules at small sizes on
// the CPU (Target::CudaEmulated) against the reference instead, which needs no GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "common/cli.h"
#include "common/data_files.h"
#include "common/error_check.h"
#include "cora/cora.h"
#include "sparse/bsr_linear.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

using namespace cora;

namespace {

void check_cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw RuntimeError(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_cublas(cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw RuntimeError(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

/** Median milliseconds of `reps` calls of `f` (each synchronised), after one warm-up. */
double time_ms(int reps, const std::function<void()> &f) {
    f();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct DeviceArray {
    float *p = nullptr;
    explicit DeviceArray(size_t n) { check_cuda(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)), "cudaMalloc"); }
    ~DeviceArray() { cudaFree(p); }
    DeviceArray(const DeviceArray &) = delete;
    DeviceArray &operator=(const DeviceArray &) = delete;
    void upload(const float *h, size_t n) {
        check_cuda(cudaMemcpy(p, h, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    void download(float *h, size_t n) const {
        check_cuda(cudaMemcpy(h, p, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
};

/** The largest relative error; infinity when a value is not finite where the reference is (or the
 * reverse), so that a NaN output never passes (apps/common/error_check.h). */
double max_rel_error(const float *got, const float *want, size_t n) {
    apps::ErrorCheck check;
    for (size_t i = 0; i < n; i++)
        check.add(got[i], want[i]);
    return check.mismatches() ? INFINITY : check.max_rel();
}

// The schedules the apps run with --device cuda (shared-memory k-panels, per-thread accumulators).
using Trmm = apps::TrmmGpu;
using Vgemm = apps::VgemmGpu;

using VgemmTc = apps::VgemmTensorCores;

/** Uniform in [-1, 1): float32, or float16 bits. */
void fill(Buffer &b, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t i = 0; i < b.size(); i++) {
        const float v = d(rng);
        if (b.type() == Float16)
            b.data<uint16_t>()[i] = cora_float_to_half(v);
        else
            b.data<float>()[i] = v;
    }
}

/** The largest relative error of float32 `c` against the reference's first output. */
double max_rel_error(const Buffer &c, const std::vector<double> &ref) {
    apps::ErrorCheck check;
    for (int64_t e = 0; e < c.size(); e++)
        check.add(c.data<float>()[e], ref[(size_t)e]);
    return check.mismatches() ? INFINITY : check.max_rel();
}

/** A batch's shapes in tensor-core tiles: M and N rounded up to 32, K to 16 (zero padding). */
std::vector<std::array<int32_t, 3>> in_tiles(const std::vector<apps::GemmShape> &shapes) {
    std::vector<std::array<int32_t, 3>> t;
    for (const apps::GemmShape &g : shapes)
        t.push_back({(g[0] + 31) / 32, (g[1] + 31) / 32, (g[2] + 15) / 16});
    return t;
}

/** --emulate: the schedules above, run on the CPU at small sizes against the reference. */
int emulate() {
    CompileOptions emu;
    emu.target = Target::CudaEmulated;
    double worst = 0;
    for (int64_t tile : {64, 128}) {
        Trmm t(tile);
        Kernel k = t.pipeline().compile(emu);
        for (int64_t size : {1, 63, 64, 130}) {
            RaggedShape s;
            s.set(t.M, size).set(t.N, size + 3);
            Buffer l = Buffer::alloc(t.L, s), x = Buffer::alloc(t.X, s), c = Buffer::alloc(t.C, s);
            fill(l, 1);
            fill(x, 2);
            k.run(s, {{t.L, l}, {t.X, x}, {t.C, c}});
            worst = std::max(worst, max_rel_error(c, reference_evaluate(t.pipeline(), s, {{t.L, &l}, {t.X, &x}})[0]));
        }
    }
    for (int64_t tile : {64, 128}) {
        Vgemm v(tile);
        Kernel k = v.pipeline().compile(emu);
        RaggedShape s;
        v.bind(s, {{70, 3, 17}, {0, 5, 5}, {64, 64, 64}, {1, 129, 2}});
        Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
        fill(x, 3);
        fill(y, 4);
        k.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
        worst = std::max(worst, max_rel_error(c, reference_evaluate(v.pipeline(), s, {{v.X, &x}, {v.Y, &y}})[0]));
    }
    for (int64_t tile : {32, 128}) {
        VgemmTc v(tile);
        Kernel k = v.pipeline().compile(emu);
        RaggedShape s;
        v.bind(s, in_tiles({{70, 3, 17}, {0, 5, 5}, {64, 64, 64}, {1, 65, 2}, {160, 130, 16}}));
        Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
        fill(x, 5);
        fill(y, 6);
        k.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
        worst = std::max(worst, max_rel_error(c, reference_evaluate(v.pipeline(), s, {{v.X, &x}, {v.Y, &y}})[0]));
    }
    std::printf("emulated GPU schedules (trmm, vgemm, vgemm on tensor cores) vs the reference: max relative error "
                "%.2e: %s\n",
                worst, worst < 1e-4 ? "PASS" : "FAIL");
    return worst < 1e-4 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    int64_t trmm_size = 4096, batch = 64, batches = 2, reps = 10;
    std::string shapes_file = std::string(CORA_SHARED_DIR) + "/datasets/vbatch_gemm_data.txt", out;
    bool emulate_only = false;
    apps::CommandLine cl("cora_gpu_bench", "cora's GPU schedules against cuBLAS (trmm, vgemm) on this machine's GPU");
    cl.integer("--trmm", &trmm_size, 64, 16384, "trmm size M = N")
        .integer("--batch", &batch, 1, 4096, "vgemm matrices per batch")
        .integer("--batches", &batches, 1, 100, "vgemm batches")
        .integer("--reps", &reps, 1, 1000, "timed repetitions (median)")
        .text("--shapes", &shapes_file, "FILE", "GEMM shapes, one 'M N K' per line")
        .text("--out", &out, "FILE", "also write the table (markdown) here")
        .toggle("--emulate", &emulate_only, "run the schedules emulated at small sizes against the reference");
    try {
        if (!cl.parse(argc, argv)) return 0;
    } catch (const apps::UsageError &e) {
        std::fprintf(stderr, "cora_gpu_bench: %s\n", e.what());
        return 2;
    }
    try {
        if (emulate_only) return emulate();
        std::string why;
        if (!cuda_device_available(&why)) {
            std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
            return 77;
        }
        std::vector<apps::GemmShape> shapes;
        try {
            shapes = apps::read_gemm_shape_file(shapes_file, batch * batches, 0, 4096);
        } catch (const apps::UsageError &e) {
            std::fprintf(stderr, "cora_gpu_bench: %s\n", e.what());
            return 2;
        }
        cudaDeviceProp prop{};
        check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
        cublasHandle_t h;
        check_cublas(cublasCreate(&h), "cublasCreate");
        check_cublas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"); // fp32, no TF32
        std::ostringstream table;
        table << "# GPU benchmark: cora vs cuBLAS (" << prop.name << ", fp32 without TF32, median of " << reps
              << ")\n\n| workload | cora ms | baseline | baseline ms | cora speed-up | max rel. error "
                 "|\n|---|---|---|---|---|---|\n";
        // Each row is printed as soon as it is measured: a run cut short still shows what it got.
        auto emit = [&table](const char *row) {
            table << row;
            std::fputs(row, stdout);
            std::fflush(stdout);
        };
        std::fputs(table.str().c_str(), stdout);
        const float one = 1, zero = 0;

        // trmm, at both tile sizes of the schedule (the cuBLAS baselines timed again beside each)
        for (int64_t tile : {64, 128}) {
            Trmm t(tile);
            Kernel k = t.pipeline().compile("cuda");
            RaggedShape s;
            s.set(t.M, trmm_size).set(t.N, trmm_size);
            Buffer l = Buffer::alloc(t.L, s), x = Buffer::alloc(t.X, s), c = Buffer::alloc(t.C, s);
            fill(l, 1);
            fill(x, 2);
            for (int64_t a = 0; a < trmm_size; a++) // cuBLAS reads only the triangle; zero the rest for sgemm
                for (int64_t b = a + 1; b < trmm_size; b++)
                    l.data<float>()[a * trmm_size + b] = 0;
            double cora_ms = k.time_ms(s, {{t.L, l}, {t.X, x}, {t.C, c}}, (int)reps);
            k.run(s, {{t.L, l}, {t.X, x}, {t.C, c}});
            size_t n = (size_t)(trmm_size * trmm_size);
            DeviceArray dl(n), dx(n), dc(n);
            dl.upload(l.data<float>(), n);
            dx.upload(x.data<float>(), n);
            int sz = (int)trmm_size;
            // Row-major C = L X is column-major C^T = X^T L^T, L^T upper-triangular, on the right.
            double strmm_ms = time_ms((int)reps, [&] {
                check_cublas(cublasStrmm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                         CUBLAS_DIAG_NON_UNIT, sz, sz, &one, dl.p, sz, dx.p, sz, dc.p, sz),
                             "cublasStrmm");
            });
            std::vector<float> ref(n);
            dc.download(ref.data(), n);
            double err = max_rel_error(c.data<float>(), ref.data(), n);
            double sgemm_ms = time_ms((int)reps, [&] {
                check_cublas(
                    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, sz, sz, sz, &one, dx.p, sz, dl.p, sz, &zero, dc.p, sz),
                    "cublasSgemm");
            });
            char row[512];
            std::snprintf(row, sizeof row, "| trmm %d, tile %d | %.3f | cublasStrmm | %.3f | %.2fx | %.1e |\n", sz,
                          (int)tile, cora_ms, strmm_ms, strmm_ms / cora_ms, err);
            emit(row);
            std::snprintf(row, sizeof row, "| trmm %d, tile %d | %.3f | padded cublasSgemm | %.3f | %.2fx | |\n", sz,
                          (int)tile, cora_ms, sgemm_ms, sgemm_ms / cora_ms);
            emit(row);
        }

        // vgemm, at both tile sizes
        for (int64_t tile : {64, 128}) {
            Vgemm v(tile);
            Kernel k = v.pipeline().compile("cuda");
            double cora_total = 0, loop_total = 0, grouped_total = 0, padded_total = 0, worst = 0;
            for (int64_t bi = 0; bi < batches; bi++) {
                std::vector<apps::GemmShape> part(shapes.begin() + bi * batch, shapes.begin() + (bi + 1) * batch);
                RaggedShape s;
                v.bind(s, part);
                Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
                fill(x, 3);
                fill(y, 4);
                cora_total += k.time_ms(s, {{v.X, x}, {v.Y, y}, {v.C, c}}, (int)reps);
                k.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
                DeviceArray dx((size_t)x.size()), dy((size_t)y.size()), dc((size_t)c.size());
                dx.upload(x.data<float>(), (size_t)x.size());
                dy.upload(y.data<float>(), (size_t)y.size());
                loop_total += time_ms((int)reps, [&] {
                    size_t ox = 0, oy = 0, oc = 0;
                    for (const apps::GemmShape &g : part) {
                        int gm = g[0], gn = g[1], gk = g[2];
                        if (gm > 0 && gn > 0)
                            check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, gn, gm, gk, &one, dy.p + oy, gn,
                                                     dx.p + ox, std::max(gk, 1), &zero, dc.p + oc, gn),
                                         "cublasSgemm");
                        ox += (size_t)gm * gk;
                        oy += (size_t)gk * gn;
                        oc += (size_t)gm * gn;
                    }
                });
                std::vector<float> ref((size_t)c.size());
                dc.download(ref.data(), ref.size());
                worst = std::max(worst, max_rel_error(c.data<float>(), ref.data(), ref.size()));
                // cublasSgemmGroupedBatched: one group per matrix (their sizes differ), the operand
                // pointer arrays in device memory, as cuBLAS requires; sizes and strides on the host.
                {
                    std::vector<int> gm_, gn_, gk_, lda, ldb, ldc, group_size;
                    std::vector<const float *> a_ptr, b_ptr;
                    std::vector<float *> c_ptr;
                    size_t ox = 0, oy = 0, oc = 0;
                    DeviceArray dc2((size_t)c.size());
                    check_cuda(cudaMemset(dc2.p, 0, (size_t)c.size() * sizeof(float)), "cudaMemset"); // k = 0: zeros
                    for (const apps::GemmShape &g : part) {
                        int gm = g[0], gn = g[1], gk = g[2];
                        if (gm > 0 && gn > 0) { // row-major C = X Y as column-major C^T = Y^T X^T
                            gm_.push_back(gn);
                            gn_.push_back(gm);
                            gk_.push_back(gk);
                            a_ptr.push_back(dy.p + oy);
                            lda.push_back(gn);
                            b_ptr.push_back(dx.p + ox);
                            ldb.push_back(std::max(gk, 1));
                            c_ptr.push_back(dc2.p + oc);
                            ldc.push_back(gn);
                            group_size.push_back(1);
                        }
                        ox += (size_t)gm * gk;
                        oy += (size_t)gk * gn;
                        oc += (size_t)gm * gn;
                    }
                    const size_t groups = group_size.size();
                    std::vector<cublasOperation_t> ops(groups, CUBLAS_OP_N);
                    std::vector<float> alphas(groups, 1.0f), betas(groups, 0.0f);
                    void *pointers = nullptr;
                    check_cuda(cudaMalloc(&pointers, std::max<size_t>(3 * groups, 1) * sizeof(void *)), "cudaMalloc");
                    auto *d_a = static_cast<const float **>(pointers);
                    const float **d_b = d_a + groups;
                    auto **d_c = reinterpret_cast<float **>(static_cast<void **>(pointers) + 2 * groups);
                    check_cuda(cudaMemcpy(d_a, a_ptr.data(), groups * sizeof(void *), cudaMemcpyHostToDevice),
                               "cudaMemcpy");
                    check_cuda(cudaMemcpy(d_b, b_ptr.data(), groups * sizeof(void *), cudaMemcpyHostToDevice),
                               "cudaMemcpy");
                    check_cuda(cudaMemcpy(d_c, c_ptr.data(), groups * sizeof(void *), cudaMemcpyHostToDevice),
                               "cudaMemcpy");
                    if (groups > 0) {
                        grouped_total += time_ms((int)reps, [&] {
                            check_cublas(cublasSgemmGroupedBatched(h, ops.data(), ops.data(), gm_.data(), gn_.data(),
                                                                   gk_.data(), alphas.data(), d_a, lda.data(), d_b,
                                                                   ldb.data(), betas.data(), d_c, ldc.data(),
                                                                   (int)groups, group_size.data()),
                                         "cublasSgemmGroupedBatched");
                        });
                        std::vector<float> grouped((size_t)c.size());
                        dc2.download(grouped.data(), grouped.size());
                        worst = std::max(worst, max_rel_error(c.data<float>(), grouped.data(), grouped.size()));
                    }
                    cudaFree(pointers);
                }
                int pm = 0, pn = 0, pk = 0;
                for (const apps::GemmShape &g : part) {
                    pm = std::max(pm, g[0]);
                    pn = std::max(pn, g[1]);
                    pk = std::max(pk, g[2]);
                }
                size_t cnt = part.size();
                DeviceArray px(cnt * pm * pk), py(cnt * pk * pn), pc(cnt * pm * pn);
                padded_total += time_ms((int)reps, [&] {
                    check_cublas(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, pn, pm, pk, &one, py.p, pn,
                                                           (long long)pk * pn, px.p, pk, (long long)pm * pk, &zero,
                                                           pc.p, pn, (long long)pm * pn, (int)cnt),
                                 "cublasSgemmStridedBatched");
                });
            }
            char row[512];
            std::snprintf(row, sizeof row,
                          "| vgemm %lld x %lld, tile %d | %.3f | cublasSgemm per matrix | %.3f | %.2fx | %.1e |\n",
                          (long long)batches, (long long)batch, (int)tile, cora_total / batches, loop_total / batches,
                          loop_total / cora_total, worst);
            emit(row);
            std::snprintf(row, sizeof row,
                          "| vgemm %lld x %lld, tile %d | %.3f | cublasSgemmGroupedBatched | %.3f | %.2fx | |\n",
                          (long long)batches, (long long)batch, (int)tile, cora_total / batches,
                          grouped_total / batches, grouped_total / cora_total);
            emit(row);
            std::snprintf(row, sizeof row,
                          "| vgemm %lld x %lld, tile %d | %.3f | padded StridedBatched | %.3f | %.2fx | |\n",
                          (long long)batches, (long long)batch, (int)tile, cora_total / batches, padded_total / batches,
                          padded_total / cora_total);
            emit(row);
        }
        // Tensor cores (float16 operands, float32 sums): vgemm over the same shapes rounded up to
        // whole tiles, and one square GEMM, against cublasGemmEx per matrix (default math mode:
        // cuBLAS picks its tensor-core kernels too).
        // Blocks of 32 x 32 outputs (2 warps) and of 128 x 128 (8 warps of 16 x 128).
        for (int64_t tc_tile : {32, 128}) {
            check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
            VgemmTc v(tc_tile);
            Kernel k = v.pipeline().compile("cuda");
            std::vector<std::pair<std::string, std::vector<std::array<int32_t, 3>>>> runs;
            for (int64_t bi = 0; bi < batches; bi++)
                runs.push_back(
                    {"vgemm (whole tiles)", in_tiles(std::vector<apps::GemmShape>(shapes.begin() + bi * batch,
                                                                                  shapes.begin() + (bi + 1) * batch))});
            runs.push_back({"gemm " + std::to_string(trmm_size),
                            {{(int32_t)((trmm_size + 31) / 32), (int32_t)((trmm_size + 31) / 32),
                              (int32_t)((trmm_size + 15) / 16)}}});
            std::map<std::string, std::array<double, 3>> totals; // cora ms, cuBLAS ms, worst error
            for (const auto &[name, tiles] : runs) {
                RaggedShape s;
                v.bind(s, tiles);
                Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
                fill(x, 7);
                fill(y, 8);
                std::array<double, 3> &tot = totals[name];
                tot[0] += k.time_ms(s, {{v.X, x}, {v.Y, y}, {v.C, c}}, (int)reps);
                k.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
                void *dx = nullptr, *dy = nullptr;
                DeviceArray dc((size_t)c.size());
                check_cuda(cudaMalloc(&dx, std::max<size_t>((size_t)x.size(), 1) * 2), "cudaMalloc");
                check_cuda(cudaMalloc(&dy, std::max<size_t>((size_t)y.size(), 1) * 2), "cudaMalloc");
                check_cuda(cudaMemcpy(dx, x.data<uint16_t>(), (size_t)x.size() * 2, cudaMemcpyHostToDevice),
                           "cudaMemcpy");
                check_cuda(cudaMemcpy(dy, y.data<uint16_t>(), (size_t)y.size() * 2, cudaMemcpyHostToDevice),
                           "cudaMemcpy");
                check_cuda(cudaMemset(dc.p, 0, (size_t)c.size() * sizeof(float)), "cudaMemset");
                tot[1] += time_ms((int)reps, [&] {
                    size_t ox = 0, oy = 0, oc = 0;
                    for (const auto &t : tiles) {
                        int gm = t[0] * 32, gn = t[1] * 32, gk = t[2] * 16;
                        if (gm > 0 && gn > 0 && gk > 0) // row-major C = X Y as column-major C^T = Y^T X^T
                            check_cublas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, gn, gm, gk, &one,
                                                      static_cast<uint16_t *>(dy) + oy, CUDA_R_16F, gn,
                                                      static_cast<uint16_t *>(dx) + ox, CUDA_R_16F, gk, &zero,
                                                      dc.p + oc, CUDA_R_32F, gn, CUBLAS_COMPUTE_32F,
                                                      CUBLAS_GEMM_DEFAULT),
                                         "cublasGemmEx");
                        ox += (size_t)gm * gk;
                        oy += (size_t)gk * gn;
                        oc += (size_t)gm * gn;
                    }
                });
                std::vector<float> ref((size_t)c.size());
                dc.download(ref.data(), ref.size());
                tot[2] = std::max(tot[2], max_rel_error(c.data<float>(), ref.data(), ref.size()));
                cudaFree(dx);
                cudaFree(dy);
            }
            for (const auto &[name, tot] : totals) {
                char row[512];
                std::snprintf(
                    row, sizeof row,
                    "| %s, tensor cores (fp16 in, fp32 sums), tile %d | %.3f | cublasGemmEx per matrix | %.3f | "
                    "%.2fx | %.1e |\n",
                    name.c_str(), (int)tc_tile, tot[0], tot[1], tot[1] / tot[0], tot[2]);
                emit(row);
            }
        }
        // Block-sparse linear layers, Y = X W^T over 4096 packed tokens (32 items of 128), W with
        // 32x32 blocks kept at random, against cublasSgemm on the dense W (zero blocks included).
        check_cublas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"); // fp32 again, no TF32
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3072, 768}, {768, 3072}}) {
            apps::TokenDims D(4096);
            apps::BsrTiling tiling = apps::BsrTiling::for_gpu();
            Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
            BsrMatrix W("W", rows, cols, 32, 32, BlockOrder::ColumnMajor);
            apps::BsrLinear lin(
                "Y", D, W, [&](Expr b, Expr sq, Expr k) { return X(b, sq, k); }, std::nullopt, false, tiling);
            Kernel k = Pipeline({lin.Y}, "bsr_linear_gpu").compile("cuda"); // one kernel for every density
            for (int density : {50, 25, 10}) {
                std::mt19937 rng((uint32_t)(rows + density));
                std::uniform_real_distribution<float> val(-1.0f, 1.0f), coin(0.0f, 100.0f);
                std::vector<float> dense((size_t)(rows * cols));
                for (float &v : dense)
                    v = val(rng);
                std::vector<uint8_t> mask((size_t)(rows / 32 * (cols / 32)));
                for (uint8_t &m : mask)
                    m = coin(rng) < (float)density;
                BsrData w = BsrData::from_block_mask(dense, rows, cols, 32, 32, mask);
                RaggedShape s;
                s.set(D.B, 32).set(D.len, std::vector<int32_t>(32, 128));
                w.bind(s, W);
                Buffer x = Buffer::alloc(X, s), y = Buffer::alloc(lin.Y, s);
                fill(x, 3);
                Buffer col = w.col_buffer(W, s), values = w.values_buffer(W, s);
                std::vector<Binding> bindings = {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}};
                double cora_ms = k.time_ms(s, bindings, (int)reps);
                k.run(s, bindings);
                const size_t tokens = 4096;
                std::vector<float> wd = w.to_dense();
                DeviceArray dw(wd.size()), dx(tokens * (size_t)cols), dy(tokens * (size_t)rows);
                dw.upload(wd.data(), wd.size());
                dx.upload(x.data<float>(), tokens * (size_t)cols);
                // Row-major Y = X W^T is column-major Y^T = W X^T (W row-major = W^T column-major).
                double dense_ms = time_ms((int)reps, [&] {
                    check_cublas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)tokens, (int)cols, &one, dw.p,
                                             (int)cols, dx.p, (int)cols, &zero, dy.p, (int)rows),
                                 "cublasSgemm");
                });
                std::vector<float> ref(tokens * (size_t)rows);
                dy.download(ref.data(), ref.size());
                double err = max_rel_error(y.data<float>(), ref.data(), ref.size());
                char row[512];
                std::snprintf(row, sizeof row,
                              "| block-sparse linear %lldx%lld, 32x32 blocks at %d%% (%.0f%% kept), 4096 tokens | "
                              "%.3f | dense cublasSgemm | %.3f | %.2fx | %.1e |\n",
                              (long long)rows, (long long)cols, density, w.density() * 100, cora_ms, dense_ms,
                              dense_ms / cora_ms, err);
                emit(row);
            }
        }
        cublasDestroy(h);
        if (!out.empty()) {
            std::ofstream f(out);
            if (!f) {
                std::fprintf(stderr, "cora_gpu_bench: cannot write '%s'\n", out.c_str());
                return 2;
            }
            f << table.str();
        }
        return 0;
    } catch (const Error &e) {
        std::fprintf(stderr, "cora_gpu_bench: %s\n", e.what());
        return 1;
    }
}
