// Runs GPU schedules on a CUDA device (ctest label `gpu`): random schedules of ragged ops, a GEMM
// with shared-memory panels, the apps' schedules, a cross-thread reduction and device buffers, each
// against the reference. Without a device the program prints why and exits 77, which ctest
// reports as skipped. With --cuda-backend cpu-threads (or CORA_TEST_CUDA_BACKEND=cpu-threads) it
// runs the same cases on the CPU-threads backend instead (ctest: gpu_tests_on_cpu_threads:<case>),
// so the tests themselves are checked on every machine.
#define CATCH_CONFIG_RUNNER
#include "common/chained_gpu_pipelines.h"
#include "common/gemm_schedules.h"
#include "common/ragged_testing.h"
#include "common/random_gpu_schedule.h"
#include "common/spatial_testing.h"
#include "common/trial_count.h"
#include "spatial/conv_layer.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

#include <cstdlib>
#include <iostream>

using namespace cora;

namespace {

/** --cuda-backend (ctest's per-case registration passes it), else CORA_TEST_CUDA_BACKEND. */
std::string backend_option;

/** The backend's name: "cuda-cpu-threads" for cpu-threads, else "cuda". */
std::string backend() {
    const char *b = std::getenv("CORA_TEST_CUDA_BACKEND");
    const std::string name = !backend_option.empty() ? backend_option : b ? b : "";
    return name == "cpu-threads" ? "cuda-cpu-threads" : "cuda";
}

Kernel compile(const Pipeline &p) { return p.compile(backend()); }

} // namespace

TEST_CASE("random GPU schedules of ragged ops match the reference on the device", "[gpu]") {
    std::mt19937 rng(20261124); // the emulated differential test's schedules, run for real
    for (int trial = 0; trial < testing::scaled_trials(40); trial++) {
        testing::RandomGpuCase c = testing::random_gpu_case(rng, "gpu_device_" + std::to_string(trial));
        INFO("trial " << trial << ": " << c.description);
        Kernel k = compile(c.pipeline);
        testing::check_against_reference(c.pipeline, k, c.inputs, c.bind, 40, 8, 100 + trial);
    }
}

TEST_CASE("convolutions over active tiles (fp32 and float16 storage) match the reference on the device", "[gpu]") {
    // The GPU schedule of apps/spatial/conv_layer.h, the inactive tiles filled on the device too.
    for (Type t : {Float32, Float16}) {
        Param N("N", 1, 8), H("H", 1, 256), W("W", 1, 256);
        Dim n("n"), y("y"), x("x"), c("c");
        ShapeTensor mask("mask", {N, H, W}, 0, 1);
        spatial::ConvShape s{8, 16, 3, 1, false, true, t};
        Tensor in("in", {{n, N}, {y, H}, {x, W}, {c, 8}}, t);
        spatial::ConvLayer conv("conv", in, N, H, W, s);
        ActiveTiles tiles = ActiveTiles::from_mask("tiles", mask, 8, 8);
        conv.schedule_gpu(tiles, 16);
        conv.out.fill_inactive_tiles(Expr(0.0f)).gpu_blocks(conv.tile).gpu_threads(conv.c, conv.xi);
        Pipeline p({conv.out}, "gpu_device_spatial_conv");
        Kernel k = compile(p);
        uint32_t seed = 40;
        const std::vector<testing::MaskCase> cases = testing::mask_cases(seed);
        for (size_t i = 0; i < cases.size(); i += testing::mask_case_step(3)) {
            const testing::MaskCase &mc = cases[i];
            INFO(mc.describe() << (t == Float16 ? ", float16" : ""));
            RaggedShape shape;
            shape.set(N, mc.n).set(H, mc.h).set(W, mc.w).set(mask, mc.mask);
            Buffer bi = Buffer::alloc(in, shape), bw = Buffer::alloc(conv.weight, shape),
                   bb = Buffer::alloc(conv.bias, shape), bo = Buffer::alloc(conv.out, shape);
            testing::fill_random(bi, seed++);
            testing::fill_random(bw, seed++);
            testing::fill_random(bb, seed++);
            k.run(shape, {{in, bi}, {conv.weight, bw}, {conv.bias, bb}, {conv.out, bo}});
            auto ref = reference_evaluate(p, shape, {{in, &bi}, {conv.weight, &bw}, {conv.bias, &bb}});
            std::vector<uint8_t> active = testing::active_positions(mc, 8, 8, 1);
            std::vector<double> want = testing::outside_replaced(ref[0], active, 16, 0.0);
            testing::require_close(bo, want, 1e-4);
        }
    }
}

TEST_CASE("a GEMM with shared-memory panels matches the reference on the device", "[gpu]") {
    Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), jo("jo"), ji("ji"), ko("ko"), ki("ki");
    Param M("M", 0, 300), N("N", 0, 300), K("K", 0, 300);
    Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
    Func C("C", {{i, M}, {j, N}});
    C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
    C.split(i, io, ii, 32).split(j, jo, ji, 32).split(k, ko, ki, 16);
    C.reorder({io, jo, ko, ii, ji, ki}).gpu_blocks(jo, io).gpu_threads(ji, ii).cache_write(ji);
    C.cache_read(A, ko).cache_read(Bm, ko);
    Pipeline p({C}, "gpu_device_gemm");
    Kernel kern = compile(p);
    testing::check_dense_gemm(p, kern, M, N, K, A, Bm, C,
                              {{0, 5, 3}, {1, 1, 1}, {32, 32, 16}, {33, 65, 17}, {300, 257, 300}, {64, 1, 48}});
}

TEST_CASE("a float16 GEMM (float32 accumulators, cvt conversions) matches the reference on the device", "[gpu]") {
    Dim i("i"), j("j"), k("k");
    Param M("M", 0, 300), N("N", 0, 300), K("K", 0, 300);
    Tensor A("A", {{i, M}, {k, K}}, Float16), Bm("Bm", {{k, K}, {j, N}}, Float16);
    Func C("C", {{i, M}, {j, N}}, Float16);
    C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
    testing::schedule_sliced_gemm(C, A, Bm, i, j, k);
    Pipeline p({C}, "gpu_device_gemm_f16");
    Kernel kern = compile(p);
    testing::check_dense_gemm(p, kern, M, N, K, A, Bm, C,
                              {{0, 5, 3}, {1, 1, 1}, {32, 32, 8}, {33, 65, 17}, {300, 257, 300}, {64, 1, 48}});
}

TEST_CASE("a tensor-core GEMM (mma.sync, float16 operands, float32 sums) matches the reference on the device",
          "[gpu]") {
    // The schedule tests/correctness/gpu_tensor_cores.cpp checks emulated; here the fragments
    // meet the real instruction. Up to 512 x 512 x 512 (16 x 16 blocks of two warps).
    testing::TileGemm gemm(Float16, Float32, 16);
    gemm.schedule();
    Pipeline p({gemm.C}, "gpu_device_mma_gemm");
    Kernel kern = compile(p);
    // On CPU threads (two barriers per emulated instruction) the largest size would take minutes.
    const bool device = backend() == "cuda";
    testing::check_dense_gemm(p, kern, gemm.Mb, gemm.Nb, gemm.Kb, gemm.A, gemm.B, gemm.C,
                              {{0, 1, 1},
                               {1, 1, 1},
                               {2, 3, 2},
                               {device ? 16 : 4, device ? 16 : 3, device ? 32 : 4},
                               {device ? 5 : 1, device ? 16 : 4, 1},
                               {3, 2, 0}});
}

TEST_CASE("vgemm on tensor cores matches the reference on the device", "[gpu]") {
    const int64_t tile = GENERATE(32, 128); // blocks of 32 x 32 (2 warps) or 128 x 128 (8 warps)
    INFO("tile " << tile);
    apps::VgemmTensorCores v(tile);
    Pipeline p = v.pipeline();
    Kernel kern = compile(p);
    const bool device = backend() == "cuda";
    const std::vector<std::vector<std::array<int32_t, 3>>> batches = {
        {{1, 1, 1}},
        {{2, 1, 3}, {0, 2, 1}, {1, 3, 0}, {3, 2, 2}},
        device ? std::vector<std::array<int32_t, 3>>{{16, 8, 32}, {1, 16, 4}, {7, 3, 64}}
               : std::vector<std::array<int32_t, 3>>{{2, 2, 2}}};
    for (const auto &tiles : batches) {
        RaggedShape s;
        v.bind(s, tiles);
        INFO("matrices " << tiles.size() << ", first " << tiles[0][0] << " x " << tiles[0][1] << " x " << tiles[0][2]
                         << " tiles");
        Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
        testing::fill_random(x, 11);
        testing::fill_random(y, 12);
        kern.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
        testing::require_close(c, reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0]);
    }
}

TEST_CASE("the apps' GPU schedules, cross-thread reductions and device buffers on the device", "[gpu]") {
    auto check = [](const Pipeline &p, const Kernel &k, const RaggedShape &s, const std::vector<Tensor> &inputs) {
        std::vector<Buffer> in;
        std::vector<std::pair<Tensor, const Buffer *>> ref_in;
        for (size_t i = 0; i < inputs.size(); i++)
            in.push_back(Buffer::alloc(inputs[i], s));
        std::vector<DeviceBuffer> dev;
        std::vector<DeviceBinding> bindings;
        for (size_t i = 0; i < inputs.size(); i++) {
            testing::fill_random(in[i], 7 + (uint32_t)i);
            ref_in.emplace_back(inputs[i], &in[i]);
            dev.push_back(k.alloc(inputs[i], s));
            dev.back().upload(in[i]);
        }
        DeviceBuffer out_dev = k.alloc(p.outputs()[0], s);
        for (size_t i = 0; i < inputs.size(); i++)
            bindings.emplace_back(inputs[i], dev[i]);
        bindings.emplace_back(p.outputs()[0], out_dev);
        const int64_t transfers = k.shape_transfers();
        k.run(s, bindings);
        k.run(s, bindings); // the shape's arrays (if the kernels read any) stay on the device
        REQUIRE(k.shape_transfers() - transfers <= 1);
        Buffer out = Buffer::alloc(p.outputs()[0], s);
        out_dev.download(out);
        testing::require_close(out, reference_evaluate(p, s, ref_in)[0]);
    };
    // Smaller on CPU threads (every CUDA thread a fiber on one core): the same tails, less work.
    const bool on_gpu = backend() == "cuda";
    for (int64_t tile : {64, 128}) {
        INFO("tile " << tile);
        apps::TrmmGpu t(tile);
        Kernel trmm = compile(t.pipeline());
        for (int64_t size : on_gpu ? std::vector<int64_t>{1, 63, 64, 300} : std::vector<int64_t>{1, 63, 130}) {
            RaggedShape s;
            s.set(t.M, size).set(t.N, size + 5);
            check(t.pipeline(), trmm, s, {t.L, t.X});
        }
        apps::VgemmGpu v(tile);
        Kernel vgemm = compile(v.pipeline());
        RaggedShape s;
        v.bind(s, {{70, 3, 17}, {0, 5, 5}, {64, 64, 64}, {1, 129, 2}, {on_gpu ? 200 : 20, 100, 150}});
        check(v.pipeline(), vgemm, s, {v.X, v.Y});
    }
    // A row reduction over 32 threads per row.
    Dim b("b"), kk("k"), ko("ko"), ki("ki");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 600);
    Tensor A("A", {{b, B}, {kk, len(b)}});
    Func Sum("Sum", {{b, B}});
    Sum.compute([&](Expr x) { return sum(kk, len(x), A(x, kk)) * 0.5f; });
    Sum.split(kk, ko, ki, 32).reorder({b, ki, ko}).gpu_blocks(b).gpu_threads(ki);
    Pipeline sum_p({Sum}, "gpu_device_row_sum");
    Kernel row_sum = compile(sum_p);
    RaggedShape rs;
    rs.set(B, 5).set(len, std::vector<int32_t>{0, 1, 31, 33, 600});
    check(sum_p, row_sum, rs, {A});
}

TEST_CASE("kernels sharing a device chain on device memory and upload a shape's arrays once", "[gpu]") {
    testing::ChainedGpuPipelines t(64, 300, "gpu_device_shared");
    Kernel k1 = compile(t.gemm), k2 = compile(t.scale);
    k2.share_device_with(k1);
    RaggedShape s = t.shape({3, 0, 200, 64}, {5, 2, 130, 1}, {4, 7, 1, 300});
    Buffer x = Buffer::alloc(t.X, s), y = Buffer::alloc(t.Y, s), d = Buffer::alloc(t.D, s);
    testing::fill_random(x, 21);
    testing::fill_random(y, 22);
    DeviceBuffer dx = k1.alloc(t.X, s), dy = k1.alloc(t.Y, s), dc = k1.alloc(t.C, s), dd = k2.alloc(t.D, s);
    dx.upload(x);
    dy.upload(y);
    for (int rep = 0; rep < 2; rep++) {
        k1.run(s, {{t.X, dx}, {t.Y, dy}, {t.C, dc}});
        k2.run(s, {{t.Cin, dc}, {t.D, dd}});
    }
    dd.download(d);
    REQUIRE(k1.shape_transfers() == 1);
    testing::require_close(d, t.reference(s, x, y));
}

int main(int argc, char **argv) {
    setenv("OMP_WAIT_POLICY", "passive", 0); // as tests/common/main.cpp: idle OpenMP workers sleep
    Catch::Session session;
    session.cli(session.cli() | Catch::clara::Opt(backend_option, "gpu|cpu-threads")["--cuda-backend"](
                                    "where the CUDA kernels run (default: CORA_TEST_CUDA_BACKEND, else gpu)"));
    if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
    if (!backend_option.empty() && backend_option != "gpu" && backend_option != "cpu-threads") {
        std::cerr << "gpu_tests: --cuda-backend must be gpu or cpu-threads, got '" << backend_option << "'\n";
        return 2;
    }
    // Listing the cases (ctest's discovery at build time) needs no device.
    const bool listing = session.configData().listTests || session.configData().listTestNamesOnly ||
                         session.configData().listTags || session.configData().listReporters;
    std::string why;
    if (!listing && backend() == "cuda" && !cuda_device_available(&why)) {
        std::cout << "SKIPPED: no CUDA device: " << why << "\n";
        return 77;
    }
    return session.run();
}
