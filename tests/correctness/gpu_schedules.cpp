// GPU schedules (gpu_blocks / gpu_threads) on ragged ops. Without a GPU, each schedule is checked
// three ways: the lowered host/device split (launch sizes, kernel parameters, bound checks), the
// device kernels run on the CPU (Target::CudaEmulated: every block and thread in turn) against
// the reference on the edge-case batches, and the CUDA source compiled by NVRTC for sm_80 and
// sm_90 (when a CUDA toolkit is installed). A differential test runs random GPU schedules.
#include "common/chained_gpu_pipelines.h"
#include "common/cuda_on_cpu.h"
#include "common/gemm_schedules.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "common/random_gpu_schedule.h"
#include "common/recording_device.h"
#include "common/trial_count.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <unistd.h>

#include "driver/JIT.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;
using testing::emulated;
using testing::RecordingDevice;
using testing::require_cuda_compiles;

namespace {

/** `emulated_kernel` (`p` compiled emulated) and p's CUDA source on CPU threads against the
 * reference, evaluated once per batch for both (check_against_reference). */
void check_emulated_and_on_cpu_threads(const Pipeline &p, const Kernel &emulated_kernel,
                                       const std::vector<Tensor> &inputs,
                                       const std::function<void(RaggedShape &, const std::vector<int32_t> &)> &bind,
                                       int32_t max_len, int32_t pad, uint32_t seed) {
    const Kernel on_threads = testing::cuda_on_cpu(p);
    check_against_reference(p, std::vector<const Kernel *>{&emulated_kernel, &on_threads}, inputs, bind, max_len, pad,
                            seed);
}

struct Ragged {
    Dim batch{"batch"}, seq{"seq"}, tok{"tok"}, to{"to"}, ti{"ti"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 40};
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> bind =
        [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
};

} // namespace

TEST_CASE("a ragged elementwise op on GPU blocks and threads matches the reference", "[gpu]") {
    // 0: a block per sentence, a thread per token (the launch takes the longest sentence)
    // 1: all tokens fused, 32 per block, the last block guarded
    // 2: as 1 with bulk padding (Out's storage padded too): every block full
    // 3: as 1 with a y axis: the fused tokens in blocks.x x blocks.y of 4 x 8 threads
    for (int variant = 0; variant < 4; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Ragged r;
            Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
            Func Out("Out", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
            Out.compute([&](Expr b, Expr s) { return 2.0f * A(b, s) + exp(A(b, s)); });
            if (variant == 0) {
                Out.gpu_blocks(r.batch).gpu_threads(r.seq);
            } else {
                Out.fuse(r.batch, r.seq, r.tok);
                if (variant == 2) Out.pad_loop(r.tok, 32).fuse_storage(r.batch, r.seq, r.tok, 32);
                if (variant == 3) {
                    Dim tyo("tyo"), tyi("tyi"), txo("txo"), txi("txi");
                    Out.split(r.tok, r.to, r.ti, 32).split(r.to, tyo, tyi, 8).split(r.ti, txo, txi, 4);
                    Out.reorder({tyo, txo, tyi, txi}).gpu_blocks(txo, tyo).gpu_threads(txi, tyi);
                } else {
                    Out.split(r.tok, r.to, r.ti, 32).gpu_blocks(r.to).gpu_threads(r.ti);
                }
            }
            Pipeline p({Out}, "gpu_scale_" + std::to_string(variant));
            Kernel k = p.compile(emulated());
            const std::string ir = k.lowered();
            INFO(ir);
            REQUIRE(count_occurrences(ir, "launch cora_gpu_scale_" + std::to_string(variant) + "_k0<<<") == 1);
            if (variant == 0) {
                // The threads of the launch: the longest sentence, found by a host loop over the blocks.
                REQUIRE_THAT(ir, Contains("_threads_x = max("));
                REQUIRE_THAT(ir, Contains("<<<(B, 1, 1), (cora_gpu_scale_0_k0_threads_x, 1, 1)>>>"));
            }
            if (variant == 1 || variant == 2) REQUIRE_THAT(ir, Contains(", (32, 1, 1)>>>"));
            if (variant == 3) REQUIRE_THAT(ir, Contains(", (4, 8, 1)>>>"));
            check_emulated_and_on_cpu_threads(p, k, {A}, r.bind, 40, 32, 7 + variant);
            CudaProgram cp = require_cuda_compiles(p);
            INFO(cp.source);
            REQUIRE_THAT(cp.source, Contains("__global__ void cora_gpu_scale_" + std::to_string(variant) + "_k0("));
            REQUIRE_THAT(cp.source, Contains("blockIdx.x"));
            REQUIRE_THAT(cp.source, Contains("expf("));
            if (variant == 0) {
                // Blocks cover the batch exactly; threads past a sentence's end skip it.
                const size_t kernels = cp.kernels.size(); // with a 32-bit twin, if any
                REQUIRE(count_occurrences(cp.source, "int64_t)blockIdx.x <") == 0);
                REQUIRE(count_occurrences(cp.source, "int32_t)blockIdx.x <") == 0);
                REQUIRE(count_occurrences(cp.source, "if ((int64_t)threadIdx.x <") +
                            count_occurrences(cp.source, "if ((int32_t)threadIdx.x <") ==
                        kernels);
            }
            if (variant >= 1) {
                // Each axis has one loop whose extent is the launch's: no bound checks (the
                // guard of the padded iterations' reads of A, which is not padded, stays).
                REQUIRE(count_occurrences(cp.source, "if ((int64_t)") == 0);
                REQUIRE(count_occurrences(cp.source, "if ((int32_t)") == 0);
                if (variant <= 2) REQUIRE(count_occurrences(cp.source, "if (") == cp.kernels.size());
            }
        }
    }
}

TEST_CASE("a projection over packed tokens with per-thread register tiles matches the reference", "[gpu]") {
    // Y[b, s, o] = sum_k X[b, s, k] W[o, k] + bias[o]: 8 tokens per block, a thread per
    // (token, 4 outputs), each thread's 4 accumulators a cache_write tile; the bias epilogue is
    // applied at the tile's write-back.
    Ragged r;
    Dim o("o"), k("k"), oo("oo"), oi("oi");
    const int K = 20, O = 24;
    Tensor X("X", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {k, K}}), W("W", {{o, O}, {k, K}}), bias("bias", {{o, O}});
    for (int variant = 0; variant < 2; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func Y("Y", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {o, O}});
            Y.compute([&](Expr b, Expr s, Expr j) { return sum(k, K, X(b, s, k) * W(j, k)) + bias(j); });
            Y.fuse(r.batch, r.seq, r.tok).split(r.tok, r.to, r.ti, 8).split(o, oo, oi, 4);
            Y.reorder({r.to, r.ti, oo, k, oi}).gpu_blocks(r.to).gpu_threads(oo, r.ti).unroll(oi);
            if (variant == 1) Y.cache_write(oo);
            Pipeline p({Y}, "gpu_proj_" + std::to_string(variant));
            Kernel kern = p.compile(emulated());
            INFO(kern.lowered());
            REQUIRE_THAT(kern.lowered(), Contains(", (6, 8, 1)>>>"));
            check_emulated_and_on_cpu_threads(p, kern, {X, W, bias}, r.bind, 40, 8, 21 + variant);
            CudaProgram cp = require_cuda_compiles(p);
            INFO(cp.source);
            if (variant == 1) REQUIRE_THAT(cp.source, Contains("float Y_tile_[int64_t(4)];"));
            REQUIRE_THAT(cp.source, Contains("#pragma unroll"));
        }
    }
}

TEST_CASE("vgemm with a block per matrix and ragged thread extents matches the reference", "[gpu]") {
    // A block per matrix of the batch; threads over its 4 x 8 tiles in x and y (the launch takes
    // the largest matrix, found on the host); a 4 x 8 register tile per thread.
    testing::VgemmInputs v;
    const Dim &batch = v.batch, &m = v.m, &n = v.n, &rr = v.r;
    Dim mo("mo"), mi("mi"), no("no"), ni("ni");
    const Tensor &X = v.X, &Y = v.Y;
    auto bind = v.bind();
    Func C = v.product("C");
    C.split(m, mo, mi, 4).split(n, no, ni, 8).reorder({batch, mo, no, rr, mi, ni});
    C.gpu_blocks(batch).gpu_threads(no, mo).unroll(mi).vectorize(ni).cache_write(no);
    Pipeline p({C}, "gpu_vgemm");
    Kernel k = p.compile(emulated());
    const std::string ir = k.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("_threads_x = max("));
    REQUIRE_THAT(ir, Contains("_threads_y = max("));
    check_emulated_and_on_cpu_threads(p, k, {X, Y}, bind, 23, 8, 5);
    CudaProgram cp = require_cuda_compiles(p);
    REQUIRE(testing::launched_kernels(cp).size() == 1);
    REQUIRE_THAT(cp.kernel_ir[0], Contains("gpu_blocks.x for batch"));
    REQUIRE_THAT(cp.kernel_ir[0], Contains("gpu_threads.x for no"));
    REQUIRE_THAT(cp.kernel_ir[0], Contains("gpu_threads.y for mo"));
}

TEST_CASE("vgemm with a block per 8 x 8 tile of each matrix: ragged grid axes", "[gpu]") {
    // Blocks over (no, mo, batch) in x, y, z: the tile counts differ per matrix, so the grid takes
    // the largest (a host loop over the matrices) and the blocks past a matrix's tiles do nothing;
    // 8 x 8 threads per block, one element each.
    testing::VgemmInputs v;
    const Dim &batch = v.batch, &m = v.m, &n = v.n, &rr = v.r;
    Dim mo("mo"), mi("mi"), no("no"), ni("ni");
    const Tensor &X = v.X, &Y = v.Y;
    auto bind = v.bind();
    Func C = v.product("C");
    C.split(m, mo, mi, 8).split(n, no, ni, 8).reorder({batch, mo, no, mi, ni, rr});
    C.gpu_blocks(no, mo, batch).gpu_threads(ni, mi);
    Pipeline p({C}, "gpu_vgemm_tiles");
    Kernel k = p.compile(emulated());
    const std::string ir = k.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("_blocks_x = max("));
    REQUIRE_THAT(ir, Contains("_blocks_y = max("));
    REQUIRE_THAT(ir,
                 Contains("<<<(cora_gpu_vgemm_tiles_k0_blocks_x, cora_gpu_vgemm_tiles_k0_blocks_y, B), (8, 8, 1)>>>"));
    check_emulated_and_on_cpu_threads(p, k, {X, Y}, bind, 23, 8, 9);
    CudaProgram cp = require_cuda_compiles(p);
    INFO(cp.source);
    REQUIRE_THAT(cp.source, Contains("blockIdx.z"));
}

TEST_CASE("horizontally fused ops share one launch; producers and consumers launch in order", "[gpu]") {
    Ragged r;
    Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    Func P("P", {{r.batch, r.B}, {r.seq, r.len(r.batch)}}), Q("Q", {{r.batch, r.B}, {r.seq, r.len(r.batch)}}),
        S("S", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    P.compute([&](Expr b, Expr s) { return A(b, s) + 1.0f; });
    Q.compute([&](Expr b, Expr s) { return A(b, s) * 3.0f; });
    S.compute([&](Expr b, Expr s) { return P(b, s) * Q(b, s); });
    P.gpu_blocks(r.batch).gpu_threads(r.seq);
    Q.gpu_blocks(r.batch).gpu_threads(r.seq);
    P.hfuse({Q});
    S.fuse(r.batch, r.seq, r.tok).split(r.tok, r.to, r.ti, 16).gpu_blocks(r.to).gpu_threads(r.ti);
    Pipeline p({S}, "gpu_hfuse");
    Kernel k = p.compile(emulated());
    const std::string ir = k.lowered();
    INFO(ir);
    // One launch for P and Q (2 x B blocks), then one for S.
    REQUIRE(count_occurrences(ir, "launch ") == 2);
    REQUIRE(ir.find("launch cora_gpu_hfuse_k0") < ir.find("launch cora_gpu_hfuse_k1"));
    check_emulated_and_on_cpu_threads(p, k, {A}, r.bind, 40, 16, 3);
    require_cuda_compiles(p);
}

TEST_CASE("a ragged row softmax: a block per row, a thread per key, row reductions per thread", "[gpu]") {
    // The attention app's GPU schedule (apps/attention, --device): E and P a block per (row,
    // sentence) with a thread per key, the row max and sum a block per sentence with a thread per
    // row. Every grid and thread axis is ragged (launched at the longest sentence).
    Ragged r;
    Dim kv("kv"), red("red");
    Tensor S("S", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {kv, r.len(r.batch)}});
    testing::RowSoftmax sm(S, r.batch, r.seq, kv, red, r.B, r.len);
    for (Func *f : {&sm.E, &sm.P})
        f->gpu_blocks(r.seq, r.batch).gpu_threads(kv);
    for (Func *f : {&sm.Mx, &sm.Sum})
        f->gpu_blocks(r.batch).gpu_threads(r.seq);
    Pipeline p({sm.P}, "gpu_softmax");
    CudaProgram cp = require_cuda_compiles(p);
    REQUIRE(testing::launched_kernels(cp).size() == 4);
    Kernel kern = p.compile(emulated());
    check_emulated_and_on_cpu_threads(p, kern, {S}, r.bind, 40, 8, 77);
}

TEST_CASE("cross-thread reductions: a block per row, the row's threads combine their parts", "[gpu]") {
    // Softmax with its row max and row sum reduced by 32, 8 or 128 threads each: every thread reduces
    // a strided part in a register, one thread combines the parts in shared memory between two
    // barriers (lower/ThreadReductions.cpp). Rows of 0, 1, 31, 32, 33 and 40 keys; an epilogue
    // after the reduction (Sum + 0) and several rows per block (a serial row loop).
    Ragged r;
    Dim kv("kv"), red("red"), ro("ro"), ri("ri");
    Tensor S("S", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {kv, r.len(r.batch)}});
    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            testing::RowSoftmax sm(S, r.batch, r.seq, kv, red, r.B, r.len);
            const int64_t threads = variant == 0 ? 32 : variant == 1 ? 8 : 128;
            for (Func *f : {&sm.E, &sm.P})
                f->gpu_blocks(r.seq, r.batch).gpu_threads(kv);
            sm.Mx.split(red, ro, ri, threads).reorder({r.batch, r.seq, ri, ro});
            sm.Sum.split(red, ro, ri, threads).reorder({r.batch, r.seq, ri, ro});
            if (variant != 1) {
                sm.Mx.gpu_blocks(r.seq, r.batch).gpu_threads(ri);
                sm.Sum.gpu_blocks(r.seq, r.batch).gpu_threads(ri);
            } else { // a block per sentence, its rows one after another
                sm.Mx.gpu_blocks(r.batch).gpu_threads(ri);
                sm.Sum.gpu_blocks(r.batch).gpu_threads(ri);
            }
            Pipeline p({sm.P}, "gpu_softmax_threads_" + std::to_string(variant));
            CudaProgram cp = require_cuda_compiles(p);
            INFO(cp.kernel_ir[0]);
            Kernel kern = p.compile(emulated());
            // The emulation combines in shared memory; CUDA too, unless the block is whole warps
            // (32 or 128 threads on x, exactly) or one partial warp (8): then lanes exchange parts
            // with shuffles, and several warps fold one part per warp in shared memory.
            REQUIRE_THAT(kern.lowered(),
                         Contains("allocate in shared memory Mx_part[float32 * " + std::to_string(threads) + "]"));
            REQUIRE_THAT(kern.lowered(), Contains("gpu_lanes for lane in [0, 0 + 1):"));
            if (variant == 0) {
                REQUIRE_THAT(cp.kernel_ir[0], Contains("Mx_acc[0] = cora_warp_max(Mx_acc[0])"));
                REQUIRE_THAT(cp.kernel_ir[0], !Contains("Mx_part"));
                REQUIRE_THAT(cp.source, Contains("__shfl_xor_sync"));
            } else if (variant == 1) { // one partial warp of 8 lanes: shuffles over those
                REQUIRE_THAT(cp.kernel_ir[0], Contains("Mx_acc[0] = cora_warp_max_w8(Mx_acc[0])"));
                REQUIRE_THAT(cp.kernel_ir[0], !Contains("Mx_part"));
                REQUIRE_THAT(cp.source, Contains("cora_warp_max<8>(Mx_acc_["));
            } else { // 4 warps: shuffles in each, then one part per warp folded in shared memory
                REQUIRE_THAT(cp.kernel_ir[0], Contains("Mx_acc[0] = cora_warp_max(Mx_acc[0])"));
                REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory Mx_part[float32 * 4]"));
                REQUIRE_THAT(cp.source, Contains("__syncthreads"));
            }
            check_emulated_and_on_cpu_threads(p, kern, {S}, r.bind, 40, 8, 91 + variant);
        }
    }
    SECTION("an epilogue after the reduction; sum, maximum and minimum") {
        Dim k("k"), ko("ko"), ki("ki");
        Tensor A("A", {{r.batch, r.B}, {k, r.len(r.batch)}});
        Func Sum("Sum", {{r.batch, r.B}}), Max("Max", {{r.batch, r.B}}), Min("Min", {{r.batch, r.B}});
        Sum.compute([&](Expr b) { return sum(k, r.len(b), A(b, k)) * 0.5f + 1.0f; });
        Max.compute([&](Expr b) { return maximum(k, r.len(b), A(b, k) * 2.0f); });
        Min.compute([&](Expr b) { return minimum(k, r.len(b), A(b, k)) + Sum(b) + Max(b); });
        for (Func *f : {&Sum, &Max, &Min}) // Sum over one warp: shuffles, then its epilogue
            f->split(k, ko, ki, f == &Sum ? 32 : 16).reorder({r.batch, ki, ko}).gpu_blocks(r.batch).gpu_threads(ki);
        Pipeline p({Min}, "gpu_combiners");
        CudaProgram cp = require_cuda_compiles(p);
        const std::string all_ir = cp.kernel_ir[0] + cp.kernel_ir[1] + cp.kernel_ir[2];
        INFO(all_ir);
        REQUIRE_THAT(all_ir, Contains("Sum_acc[0] = cora_warp_sum(Sum_acc[0])"));
        REQUIRE_THAT(all_ir, Contains("Max_acc[0] = cora_warp_max_w16(Max_acc[0])")); // 16 lanes
        REQUIRE_THAT(all_ir, Contains("Min_acc[0] = cora_warp_min_w16(Min_acc[0])"));
        REQUIRE_THAT(all_ir, Contains("Sum[batch] = ((Sum[batch] * 0.5f) + 1f)"));
        Kernel kern = p.compile(emulated());
        check_emulated_and_on_cpu_threads(p, kern, {A}, r.bind, 40, 16, 5);
    }
}

TEST_CASE("device buffers: data stays on the device, a shape's arrays go there once", "[gpu][runtime]") {
    // The CUDA runtime with the CPU-threads backend: everything but the driver API. A vgemm over
    // device buffers, run three times on one shape and once on another; errors for buffers of the
    // wrong size, of another kernel, and tensors the kernel does not take.
    Dim batch("batch"), m("m"), n("n"), k("k");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 40), Ns("Ns", B, 0, 40), Ks("Ks", B, 0, 40);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {k, Ks(batch)}}), Y("Y", {{batch, B}, {k, Ks(batch)}, {n, Ns(batch)}});
    Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
    C.compute([&](Expr b, Expr i, Expr j) { return sum(k, Ks(b), X(b, i, k) * Y(b, k, j)); });
    C.gpu_blocks(m, batch).gpu_threads(n);
    Pipeline p({C}, "gpu_device_buffers");
    Kernel kern = testing::cuda_on_cpu(p);
    REQUIRE(kern.backend() == "cuda-cpu-threads");
    auto shape_of = [&](const std::vector<int32_t> &ms, const std::vector<int32_t> &ns,
                        const std::vector<int32_t> &ks) {
        RaggedShape s;
        s.set(B, (int64_t)ms.size()).set(Ms, ms).set(Ns, ns).set(Ks, ks);
        return s;
    };
    RaggedShape s1 = shape_of({3, 0, 17}, {5, 2, 9}, {4, 7, 1}), s2 = shape_of({8}, {8}, {8});
    for (const RaggedShape *s : {&s1, &s1, &s1, &s2}) {
        Buffer x = Buffer::alloc(X, *s), y = Buffer::alloc(Y, *s), c = Buffer::alloc(C, *s);
        testing::fill_random(x, 3);
        testing::fill_random(y, 4);
        DeviceBuffer dx = kern.alloc(X, *s), dy = kern.alloc(Y, *s), dc = kern.alloc(C, *s);
        REQUIRE(dc.size() == c.size());
        dx.upload(x);
        dy.upload(y);
        kern.run(*s, {{X, dx}, {Y, dy}, {C, dc}});
        kern.synchronize();
        dc.download(c);
        testing::require_close(c, reference_evaluate(p, *s, {{X, &x}, {Y, &y}})[0]);
    }
    REQUIRE(kern.shape_transfers() == 2); // s1 once for three runs, then s2
    Buffer small(Float32, 3);
    DeviceBuffer dc = kern.alloc(C, s1);
    REQUIRE_THROWS_WITH(dc.upload(small), Contains("DeviceBuffer::upload: the host buffer holds 3 float32 elements"));
    REQUIRE_THROWS_WITH(dc.download(small), Contains("DeviceBuffer::download: the host buffer holds 3"));
    Tensor Z("Z", {{batch, B}});
    REQUIRE_THROWS_WITH(kern.alloc(Z, s1), Contains("tensor 'Z' is not an argument of kernel 'gpu_device_buffers'"));
    Kernel other = testing::cuda_on_cpu(p);
    DeviceBuffer foreign = other.alloc(X, s1), dy = kern.alloc(Y, s1);
    REQUIRE_THROWS_WITH(kern.run(s1, {{X, foreign}, {Y, dy}, {C, dc}}),
                        Contains("the device buffer bound for tensor 'X' belongs to another kernel's device; allocate "
                                 "it with this kernel's alloc(), or share the kernels' device "
                                 "(Kernel::share_device_with)"));
    DeviceBuffer dx = kern.alloc(X, s1);
    REQUIRE_THROWS_WITH(kern.run(s2, {{X, dx}, {Y, dy}, {C, dc}}), Contains("'X'")); // sized for s1, run on s2
    // Host buffers of the wrong size: named as a CPU kernel names them, nothing run or written.
    Buffer x1 = Buffer::alloc(X, s1), y1 = Buffer::alloc(Y, s1), c2 = Buffer::alloc(C, s2);
    REQUIRE_THROWS_WITH(kern.run(s1, {{X, x1}, {Y, y1}, {C, c2}}),
                        Contains("kernel 'gpu_device_buffers': buffer for tensor 'C' has 64 elements, expected " +
                                 std::to_string(Buffer::alloc(C, s1).size())));
    REQUIRE(c2.data<float>()[0] == 0.0f);

    // Views of the caller's device memory (on CPU threads, host memory): the kernel reads and
    // writes it in place, and nothing is freed when the views go.
    {
        std::vector<float> xs((size_t)s1.size_of(X)), ys((size_t)s1.size_of(Y)), cs((size_t)s1.size_of(C), -1.0f);
        Buffer x = Buffer::view(X, s1, xs.data(), (int64_t)xs.size()),
               y = Buffer::view(Y, s1, ys.data(), (int64_t)ys.size());
        testing::fill_random(x, 7);
        testing::fill_random(y, 8);
        {
            DeviceBuffer vx = kern.view(X, s1, xs.data(), (int64_t)xs.size()),
                         vy = kern.view(Y, s1, ys.data(), (int64_t)ys.size()),
                         vc = kern.view(C, s1, cs.data(), (int64_t)cs.size());
            REQUIRE(vc.device_pointer() == cs.data());
            REQUIRE(vc.size() == (int64_t)cs.size());
            REQUIRE(vc.type() == Float32);
            kern.run(s1, {{X, vx}, {Y, vy}, {C, vc}});
            kern.synchronize();
        }
        Buffer c = Buffer::view(C, s1, cs.data(), (int64_t)cs.size());
        testing::require_close(c, reference_evaluate(p, s1, {{X, &x}, {Y, &y}})[0]);
        // A view that is not the tensor's size, a null or misaligned pointer, a foreign tensor.
        auto refused = [&](const Tensor &t, void *ptr, int64_t count, const std::string &message) {
            INFO(message);
            REQUIRE_THROWS_AS(kern.view(t, s1, ptr, count), RuntimeError);
            REQUIRE_THROWS_WITH(kern.view(t, s1, ptr, count), Contains(message));
        };
        refused(C, cs.data(), (int64_t)cs.size() - 1,
                "Kernel::view of tensor 'C' (kernel 'gpu_device_buffers'): " + std::to_string(cs.size() - 1) +
                    " elements given, the tensor has " + std::to_string(cs.size()));
        refused(C, nullptr, (int64_t)cs.size(), "null device pointer for " + std::to_string(cs.size()) + " elements");
        refused(C, reinterpret_cast<char *>(cs.data()) + 2, (int64_t)cs.size(),
                "is not aligned to its 4-byte elements");
        refused(Z, cs.data(), 1, "tensor 'Z' is not an argument of kernel 'gpu_device_buffers'");
        // A view belongs to the kernel's device: another kernel takes it only when they share it.
        Kernel stranger = testing::cuda_on_cpu(p);
        DeviceBuffer foreign_view = stranger.view(X, s1, xs.data(), (int64_t)xs.size()),
                     vy = kern.view(Y, s1, ys.data(), (int64_t)ys.size()),
                     vc = kern.view(C, s1, cs.data(), (int64_t)cs.size());
        REQUIRE_THROWS_WITH(kern.run(s1, {{X, foreign_view}, {Y, vy}, {C, vc}}),
                            Contains("the device buffer bound for tensor 'X' belongs to another kernel's device"));
        // An empty tensor: a null pointer is fine with no elements.
        RaggedShape empty = shape_of({0}, {0}, {0});
        REQUIRE(kern.view(C, empty, nullptr, 0).size() == 0);
    }
}

TEST_CASE("kernels that share a device take each other's buffers and upload a shape's arrays once", "[gpu][runtime]") {
    // Two pipelines over one ragged shape, chained on device memory (C = X Y, then D = 2 C + 1 from
    // C's device buffer), on the CPU-threads backend; the second kernel reads a subset of the
    // first one's shape arrays, so the pair uploads them once per shape.
    testing::ChainedGpuPipelines t(16, 40, "gpu_shared");
    Kernel k1 = testing::cuda_on_cpu(t.gemm), k2 = testing::cuda_on_cpu(t.scale);
    k2.share_device_with(k1);
    k2.share_device_with(k1); // again: nothing changes
    RaggedShape s1 = t.shape({3, 0, 17}, {5, 2, 9}, {4, 7, 1}), s2 = t.shape({8}, {1}, {0});
    int64_t expected_transfers = 0;
    for (const RaggedShape *s : {&s1, &s1, &s2}) {
        expected_transfers += s == &s1 && expected_transfers == 1 ? 0 : 1;
        Buffer x = Buffer::alloc(t.X, *s), y = Buffer::alloc(t.Y, *s), d = Buffer::alloc(t.D, *s);
        testing::fill_random(x, 5);
        testing::fill_random(y, 6);
        DeviceBuffer dx = k1.alloc(t.X, *s), dy = k1.alloc(t.Y, *s), dc = k1.alloc(t.C, *s), dd = k2.alloc(t.D, *s);
        dx.upload(x);
        dy.upload(y);
        k1.run(*s, {{t.X, dx}, {t.Y, dy}, {t.C, dc}});
        k2.run(*s, {{t.Cin, dc}, {t.D, dd}}); // the first kernel's buffer, and its shape arrays
        dd.download(d);
        testing::require_close(d, t.reference(*s, x, y));
        REQUIRE(k1.shape_transfers() == expected_transfers);
        REQUIRE(k2.shape_transfers() == expected_transfers);
    }
    REQUIRE(expected_transfers == 2);
    // A kernel that shares nothing keeps its own arrays and rejects the others' buffers.
    Kernel alone = testing::cuda_on_cpu(t.scale);
    DeviceBuffer dc = k1.alloc(t.C, s1), dd = alone.alloc(t.D, s1);
    REQUIRE_THROWS_WITH(alone.run(s1, {{t.Cin, dc}, {t.D, dd}}),
                        Contains("the device buffer bound for tensor 'C' belongs to another kernel's device"));
    REQUIRE(alone.shape_transfers() == 0);
}

TEST_CASE("GPU schedules that cannot run are compile errors naming the loop", "[gpu][errors]") {
    Ragged r;
    Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    auto fresh = [&](const std::string &name) {
        Func F(name, {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) + 1.0f; });
        return F;
    };
    SECTION("GPU bindings compiled for the host") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch).gpu_threads(r.seq);
        REQUIRE_THROWS_MATCHES(
            Pipeline({F}).compile(), CompileError,
            Catch::Matchers::Message("Func 'F': loop 'batch' is bound to gpu_blocks.x, but the target is the host CPU; "
                                     "compile with CompileOptions::target = Target::Cuda (or Target::CudaEmulated, "
                                     "which runs the device code on the CPU)"));
    }
    SECTION("an op left on the host of a GPU pipeline") {
        Func F = fresh("F");
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(emulated()),
                            Contains("Func 'F' has no loop bound to gpu_blocks: on a cuda-emulated target every op "
                                     "runs on the device"));
    }
    SECTION("a producer computed at a thread loop, read there by other threads") {
        // P[b, s, k] by a thread per k, computed at C's thread loop s; C[b, s, j] reads P at
        // 3 - j: inside s's guard no barrier can order the two thread loops over x. Emulated it
        // runs (phases in order); the CUDA printer refuses it rather than print a race.
        Dim k("k"), j("j");
        Func P("P", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {k, 4}}),
            C("C", {{r.batch, r.B}, {r.seq, r.len(r.batch)}, {j, 4}});
        P.compute([&](Expr b, Expr sq, Expr kk) { return A(b, sq) * cast(Float32, kk); });
        C.compute([&](Expr b, Expr sq, Expr jj) { return P(b, sq, 3 - jj); });
        C.gpu_blocks(r.batch).gpu_threads(j, r.seq);
        P.gpu_threads(k).compute_at(C, r.seq);
        Pipeline p({C}, "thread_loop_producer");
        check_against_reference(p, p.compile(emulated()), {A}, r.bind, 20, 8, 3);
        REQUIRE_THROWS_AS(compile_cuda(p, {}), CompileError);
        REQUIRE_THROWS_WITH(compile_cuda(p, {}), Contains("CUDA kernel: thread loop '") &&
                                                     Contains("a barrier would order them, but none can stand there, "
                                                              "since some threads skip the enclosing loop's body"));
    }
    SECTION("a parallel loop in a kernel") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch).parallel(r.seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(emulated()),
                            Contains("loop 'seq' is marked parallel, but on a cuda-emulated target"));
    }
    SECTION("a block loop inside a thread loop") {
        Func F = fresh("F");
        F.gpu_threads(r.batch).gpu_blocks(r.seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(emulated()),
                            Contains("the block loop 'seq' (gpu_blocks.x) is inside loop 'batch' (gpu_threads.x); "
                                     "block loops must be the outermost loops"));
    }
    SECTION("one axis bound twice") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch);
        REQUIRE_THROWS_WITH(F.gpu_blocks(r.seq), Contains("loop 'batch' is already bound to gpu_blocks.x"));
    }
    SECTION("a reduction loop bound to blocks") {
        Dim k("k");
        Func G("G", {{r.batch, r.B}});
        G.compute([&](Expr b) { return sum(k, r.len(b), A(b, k)); });
        REQUIRE_THROWS_WITH(G.gpu_blocks(k), Contains("its iterations update the same elements"));
    }
    SECTION("a reduction over threads: not its outermost loop, ragged thread count, inside a thread loop") {
        Dim k("k"), ko("ko"), ki("ki"), h("h");
        Param H("H", 1, 8);
        Tensor A2("A2", {{r.batch, r.B}, {h, H}, {k, r.len(r.batch)}});
        Func G("G", {{r.batch, r.B}});
        G.compute([&](Expr b) { return sum(k, r.len(b), A(b, k)); });
        G.split(k, ko, ki, 32).reorder({r.batch, ko, ki}).gpu_blocks(r.batch).gpu_threads(ki);
        REQUIRE_THROWS_WITH(Pipeline({G}, "inner").compile(emulated()),
                            Contains("the reduction into 'G' has loop 'ki' bound to threads, but it is not the "
                                     "reduction's outermost loop"));
        Func G2("G2", {{r.batch, r.B}});
        G2.compute([&](Expr b) { return sum(k, r.len(b), A(b, k)); });
        G2.gpu_blocks(r.batch).gpu_threads(k);
        REQUIRE_THROWS_WITH(Pipeline({G2}, "ragged").compile(emulated()),
                            Contains("the reduction into 'G2' over threads (loop 'k'): the loop's extent") &&
                                Contains("is not a constant"));
        Func G3("G3", {{r.batch, r.B}, {h, H}});
        G3.compute([&](Expr b, Expr hh) { return sum(k, r.len(b), A2(b, hh, k)); });
        G3.split(k, ko, ki, 32).reorder({r.batch, h, ki, ko}).gpu_blocks(r.batch).gpu_threads(ki, h);
        REQUIRE_THROWS_WITH(Pipeline({G3}, "nested").compile(emulated()),
                            Contains("the reduction into 'G3' has loop 'ki' bound to threads inside thread loop 'h'"));
    }
    SECTION("more threads than a block has") {
        Dim i("i"), io("io"), ii("ii");
        Func F("F", {{i, 1 << 20}});
        F.compute([&](Expr x) { return cast(Float32, x); });
        F.split(i, io, ii, 2048).gpu_blocks(io).gpu_threads(ii);
        REQUIRE_THROWS_WITH(Pipeline({F}, "big").compile(emulated()),
                            Contains("2048 threads per block, more than the 1024 the device allows"));
    }
    SECTION("a thread extent that depends on a serial loop") {
        Dim x("x"), i("i"), j("j");
        Func T("T", {{x, 4}, {i, 8}, {j, i + 1}});
        T.compute([&](Expr a, Expr b, Expr c) { return cast(Float32, a + b + c); });
        T.gpu_blocks(x).gpu_threads(j);
        REQUIRE_THROWS_WITH(Pipeline({T}, "tri").compile(emulated()),
                            Contains("the loop 'j' (gpu_threads.x) has extent (i + 1), which depends on 'i', "
                                     "not a block index"));
    }
    SECTION("a store every thread would run") {
        Func P = fresh("P"), Q = fresh("Q");
        P.gpu_blocks(r.batch).gpu_threads(r.seq);
        Q.gpu_blocks(r.batch);
        P.hfuse({Q});
        REQUIRE_THROWS_WITH(Pipeline({P, Q}, "store").compile(emulated()),
                            Contains("the store to 'Q' is outside the kernel's thread loops, so every thread of a "
                                     "block would run it"));
    }
    SECTION("a backend that does not exist, or that lacks what is asked of it") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch).gpu_threads(r.seq);
        REQUIRE_THROWS_AS(Pipeline({F}, "dev").compile("gpu"), RuntimeError);
        REQUIRE_THROWS_WITH(Pipeline({F}, "dev").compile("gpu"),
                            "pipeline 'dev': no backend called 'gpu' (there are 'cpu', 'cuda', 'cuda-emulated', "
                            "'cuda-cpu-threads')");
        Kernel k = Pipeline({F}, "dev").compile(emulated());
        REQUIRE(k.backend() == "cuda-emulated");
        RaggedShape shape;
        shape.set(r.B, 1).set(r.len, {2});
        REQUIRE_THROWS_AS(k.alloc(F, shape), RuntimeError);
        REQUIRE_THROWS_WITH(k.alloc(F, shape), Contains("kernel 'dev' runs on backend 'cuda-emulated', which has no "
                                                        "device memory"));
        REQUIRE_THROWS_WITH(k.program(), Contains("which has no CUDA program"));
    }
    SECTION("aux arrays built in the kernel (the CUDA runtime copies the shape's)") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch).gpu_threads(r.seq);
        CompileOptions o;
        o.build_aux_in_kernel = true;
        REQUIRE_THROWS_WITH(compile_cuda(Pipeline({F}, "aux"), {}, o),
                            Contains("build_aux_in_kernel is not supported on CUDA"));
    }
    SECTION("an architecture NVRTC does not know") {
        Func F = fresh("F");
        F.gpu_blocks(r.batch).gpu_threads(r.seq);
        std::string why;
        if (cuda_compiler_available(&why))
            REQUIRE_THROWS_WITH(compile_cuda(Pipeline({F}, "arch"), {7}),
                                Contains("CUDA architecture sm_7 is not one NVRTC knows"));
    }
}

TEST_CASE("NVRTC's output is cached by content: source, architecture and NVRTC version", "[gpu][cache]") {
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: NVRTC cache: " << why);
        return;
    }
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("cora-nvrtc-cache-" + std::to_string(getpid()));
    fs::remove_all(dir);
    CompileOptions o;
    o.cache_dir = dir.string();
    Ragged r;
    Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    auto pipeline = [&](float factor) {
        Func F("F", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) * factor; });
        F.gpu_blocks(r.batch).gpu_threads(r.seq);
        return Pipeline({F}, "cached");
    };
    auto entries = [&] {
        int n = 0;
        for (const auto &e : fs::directory_iterator(dir))
            n += e.path().extension() == ".bin";
        return n;
    };
    CudaProgram first = compile_cuda(pipeline(2.f), {80, 90}, o);
    REQUIRE(!first.binaries[0].from_cache);
    REQUIRE(!first.binaries[1].from_cache);
    REQUIRE(entries() == 2);
    CudaProgram again = compile_cuda(pipeline(2.f), {90, 80}, o);
    REQUIRE(again.binaries[0].from_cache);
    REQUIRE(again.binaries[1].from_cache);
    REQUIRE(again.binaries[0].cubin == first.binaries[1].cubin);
    REQUIRE(again.binaries[1].ptx == first.binaries[0].ptx);

    SECTION("other code is another entry") {
        CudaProgram other = compile_cuda(pipeline(3.f), {90}, o);
        REQUIRE(!other.binaries[0].from_cache);
        REQUIRE(other.binaries[0].cubin != first.binaries[1].cubin);
        REQUIRE(entries() == 3);
    }
    SECTION("a damaged entry is compiled again and replaced") {
        for (const auto &e : fs::directory_iterator(dir))
            if (e.path().extension() == ".bin") {
                std::ofstream f(e.path(), std::ios::binary | std::ios::trunc);
                f << "cora-nvrtc-record 1\n12\nshort";
            }
        CudaProgram rebuilt = compile_cuda(pipeline(2.f), {80}, o);
        REQUIRE(!rebuilt.binaries[0].from_cache);
        REQUIRE(rebuilt.binaries[0].cubin == first.binaries[0].cubin);
        REQUIRE(compile_cuda(pipeline(2.f), {80}, o).binaries[0].from_cache);
    }
    fs::remove_all(dir);
}

namespace {

/** Counts of what the random GPU schedules exercised. */
struct RandomGpuCounts {
    int compiled = 0, nvrtc = 0, shared = 0, tiles = 0, on_threads = 0, sliced = 0, reductions = 0;
    bool full = true; ///< every trial ran (not a share: CORA_TEST_RANDOM_SCHEDULES)
};

/** Checks `c` (trial number `trial`), compiled emulated as `kern`: against the reference on the
 * edge-case batches; every fourth, and each with a block-level tile or a reduction over threads,
 * also as CUDA source on CPU threads; every tenth is compiled by NVRTC too. */
void check_random_gpu_case(const testing::RandomGpuCase &c, const Kernel &kern, int trial, bool have_nvrtc,
                           RandomGpuCounts &n) {
    INFO("trial " << trial << ": " << c.description);
    // The CUDA source on CPU threads: every block-level tile, and every fourth schedule; checked
    // with the emulation against one reference per batch.
    const bool over_threads = c.description.find("reduce over") != std::string::npos;
    const bool block_tile = c.description.find("cache_write(block)") != std::string::npos;
    std::optional<Kernel> on_cpu;
    if (trial % 4 == 0 || over_threads || block_tile) on_cpu = testing::cuda_on_cpu(c.pipeline);
    std::vector<const Kernel *> kernels = {&kern};
    if (on_cpu) kernels.push_back(&*on_cpu);
    check_against_reference(c.pipeline, kernels, c.inputs, c.bind, 40, 8, 100 + trial);
    n.compiled++;
    n.shared += kern.lowered().find("allocate in shared memory") != std::string::npos;
    n.tiles += kern.lowered().find("allocate on stack") != std::string::npos;
    if (have_nvrtc && trial % 10 == 0) {
        require_cuda_compiles(c.pipeline);
        n.nvrtc++;
    }
    n.reductions += over_threads;
    if (on_cpu) {
        n.on_threads++;
        // A block-level tile: the block's in the emulation, one thread's in CUDA.
        auto tile_size = [](const std::string &ir) {
            size_t at = ir.find("F_tile[float32 * ");
            return at == std::string::npos ? 0L : std::stol(ir.substr(at + 17));
        };
        const int64_t whole = tile_size(kern.lowered()), slice = tile_size(testing::kernel_ir(*on_cpu));
        if (block_tile) {
            REQUIRE(slice > 0);
            REQUIRE(slice <= whole); // equal: one thread per block, or threads over no tile dim
            n.sliced += slice < whole;
        }
    }
}

/** `trials` random GPU schedules (common/random_gpu_schedule.h) from `seed`, compiled emulated in
 * batches of ten (KernelBatch: one compiler run each) and checked by check_random_gpu_case. */
RandomGpuCounts run_random_gpu_schedules(uint32_t seed, int full_trials, const std::string &prefix) {
    const int trials = testing::scaled_trials(full_trials); // CORA_TEST_RANDOM_SCHEDULES
    std::mt19937 rng(seed);
    RandomGpuCounts n;
    std::string why;
    const bool have_nvrtc = cuda_compiler_available(&why);
    constexpr int kBatch = 10;
    for (int first = 0; first < trials; first += kBatch) {
        std::vector<testing::RandomGpuCase> cases;
        KernelBatch batch(emulated());
        for (int trial = first; trial < std::min(trials, first + kBatch); trial++) {
            cases.push_back(testing::random_gpu_case(rng, prefix + std::to_string(trial)));
            INFO("trial " << trial << ": " << cases.back().description);
            try {
                batch.add(cases.back().pipeline);
            } catch (const CompileError &e) {
                FAIL(e.what()); // every generated schedule is legal
            }
        }
        std::vector<Kernel> kernels = batch.compile();
        REQUIRE(kernels.size() == cases.size());
        for (size_t i = 0; i < cases.size(); i++)
            check_random_gpu_case(cases[i], kernels[i], first + (int)i, have_nvrtc, n);
    }
    std::cerr << "random GPU schedules (seed " << seed << "): " << n.compiled << " run emulated (" << n.shared
              << " with shared memory, " << n.tiles << " with per-thread tiles), " << n.on_threads
              << " run as CUDA on CPU threads (" << n.sliced << " block tiles sliced per thread), " << n.reductions
              << " reductions over threads, " << n.nvrtc << " compiled by NVRTC"
              << (have_nvrtc ? "" : " (SKIPPED: " + why + ")") << "\n";
    REQUIRE(n.compiled == trials);
    n.full = trials == full_trials;
    return n;
}

} // namespace

// Two test cases of 40 schedules each, so that ctest runs them side by side. The first seed's
// schedules are the ones tests/gpu/gpu_run.cpp runs on a device.
TEST_CASE("random GPU schedules of ragged ops match the reference when emulated", "[gpu][differential]") {
    RandomGpuCounts n = run_random_gpu_schedules(20261124, 40, "gpu_random_");
    if (n.full) { // the generator's coverage, checked on the full run (a share may miss a kind)
        REQUIRE(n.sliced > 0);
        REQUIRE(n.reductions > 0);
    }
}

TEST_CASE("more random GPU schedules of ragged ops match the reference when emulated", "[gpu][differential]") {
    RandomGpuCounts n = run_random_gpu_schedules(20261126, 40, "gpu_random_more_");
    if (n.full) REQUIRE(n.sliced + n.reductions > 0);
}

TEST_CASE("a GEMM with shared-memory panels copied by the whole block matches the reference", "[gpu]") {
    // C = A B in 16 x 16 blocks of 16 x 16 threads; per k-panel of 8, the block copies A's 16 x 8
    // and B's 8 x 16 panel into shared memory (the copies spread over its threads between two
    // barriers) and each thread reads them. Sizes that are not multiples of the tiles leave
    // partial tiles (zero-filled panels, guarded stores).
    Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), jo("jo"), ji("ji"), ko("ko"), ki("ki");
    Param M("M", 0, 100), N("N", 0, 100), K("K", 0, 100);
    Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
    for (int variant = 0; variant < 2; variant++) {
        DYNAMIC_SECTION("variant " << variant << (variant ? " (accumulators in registers)" : "")) {
            Func C("C", {{i, M}, {j, N}});
            C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
            C.split(i, io, ii, 16).split(j, jo, ji, 16).split(k, ko, ki, 8);
            C.reorder({io, jo, ko, ii, ji, ki}).gpu_blocks(jo, io).gpu_threads(ji, ii);
            C.cache_read(A, ko).cache_read(Bm, ko);
            if (variant == 1) C.cache_write(ji);
            Pipeline p({C}, "gpu_gemm_" + std::to_string(variant));
            Kernel kern = p.compile(emulated());
            CudaProgram cp = require_cuda_compiles(p);
            INFO(cp.kernel_ir[0]);
            // Two stages of 16 x 8 and 8 x 16 (gpu_pipelined_copies.cpp): the copies of panel ko + 1
            // are issued before panel ko's multiply-adds; a barrier per k-panel and one after them.
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory A_cache[float32 * 256]"));
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory Bm_cache[float32 * 256]"));
            REQUIRE_THAT(cp.kernel_ir[0], Contains("pipelined(2 stages) for ko in"));
            REQUIRE(count_occurrences(cp.kernel_ir[0], "gpu_lanes for lane") == 2);
            INFO(cp.source);
            REQUIRE(count_occurrences(cp.source, "__shared__ __attribute__((aligned(16))) float") == 2);
            REQUIRE(count_occurrences(cp.source, "__syncthreads();") == 2);
            REQUIRE_THAT(kern.lowered(), Contains(", (16, 16, 1)>>>"));
            const std::vector<std::tuple<int, int, int>> sizes = {{0, 5, 3},   {1, 1, 1},      {16, 16, 8}, {17, 33, 9},
                                                                  {15, 16, 0}, {100, 37, 100}, {32, 1, 24}};
            testing::check_dense_gemm_kernels(p, M, N, K, A, Bm, C, sizes, kern, testing::cuda_on_cpu(p));
        }
    }
    SECTION("panels larger than a block's shared memory") {
        Func C("C", {{i, M}, {j, N}});
        C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
        C.split(i, io, ii, 128).split(j, jo, ji, 16).split(k, ko, ki, 128);
        C.reorder({io, jo, ko, ii, ji, ki}).gpu_blocks(jo, io).gpu_threads(ji);
        C.cache_read(A, ko);
        REQUIRE_THROWS_WITH(Pipeline({C}, "big_tiles").compile(emulated()),
                            Contains("its shared-memory tiles ('A_cache') take 65536 bytes, more than the 49152 a "
                                     "block may use"));
    }
}

TEST_CASE("float16 operands in shared memory, float32 accumulators, one rounding per output", "[gpu][float16]") {
    // The sliced shared-memory GEMM below with float16 A, B (and C): the panels stay float16 in
    // shared memory (half the bytes), each thread's 4 x 4 accumulators are float32 registers
    // across the k-panels, and C is rounded once, at the write-back.
    Dim i("i"), j("j"), k("k");
    Param M("M", 0, 200), N("N", 0, 200), K("K", 0, 200);
    Tensor A("A", {{i, M}, {k, K}}, Float16), Bm("Bm", {{k, K}, {j, N}}, Float16);
    for (Type out : {Float16, Float32}) {
        DYNAMIC_SECTION("output " << out.str()) {
            Func C("C", {{i, M}, {j, N}}, out);
            C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
            testing::schedule_sliced_gemm(C, A, Bm, i, j, k);
            Pipeline p({C}, "gpu_gemm_f16_" + out.str());
            CudaProgram cp = require_cuda_compiles(p);
            INFO(cp.kernel_ir[0]);
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory A_cache[float16 * 512]")); // 2 stages
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate in shared memory Bm_cache[float16 * 512]"));
            REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate on stack C_tile[float32 * 16]"));
            INFO(cp.source);
            REQUIRE(count_occurrences(cp.source, "__shared__ __attribute__((aligned(16))) uint16_t") == 2);
            REQUIRE_THAT(cp.source, Contains("float C_tile_[int64_t(16)];") || Contains("float C_tile_[int32_t(16)];"));
            REQUIRE((out == Float16) == (cp.source.find("= cora_float_to_half(C_tile_[") != std::string::npos));
            // The panels' copies move the bits; only a float16 C is rounded.
            for (const CudaBinary &b : cp.binaries) {
                REQUIRE_THAT(b.ptx, Contains("cvt.f32.f16"));
                REQUIRE((out == Float16) == (b.ptx.find("cvt.rn.f16.f32") != std::string::npos));
            }
            const std::vector<std::tuple<int, int, int>> sizes = {{0, 5, 3},   {1, 1, 1},   {32, 32, 8},
                                                                  {33, 65, 9}, {31, 32, 0}, {100, 37, 200}};
            Kernel emulated_kernel = p.compile(emulated());
            testing::check_dense_gemm_kernels(p, M, N, K, A, Bm, C, sizes, emulated_kernel, testing::cuda_on_cpu(p));
        }
    }
}

TEST_CASE("accumulators across shared-memory k-panels: a block-level tile sliced per thread", "[gpu]") {
    // C's tile is cached at the block loop jo, outside the k-panel loop ko: the accumulators of the
    // block's 64 x 64 outputs live across the panels. In CUDA each of the 16 x 16 threads keeps only
    // its 4 x 4 slice (slice_thread_tiles); the emulation keeps the block's tile. Both run here, the
    // CUDA source on CPU threads (common/cuda_on_cpu.h), against the reference.
    Dim i("i"), j("j"), k("k");
    Param M("M", 0, 200), N("N", 0, 200), K("K", 0, 200);
    Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
    Func C("C", {{i, M}, {j, N}});
    C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
    testing::schedule_sliced_gemm(C, A, Bm, i, j, k);
    Pipeline p({C}, "gemm_sliced");
    CudaProgram cp = require_cuda_compiles(p);
    INFO(cp.kernel_ir[0]);
    REQUIRE_THAT(cp.kernel_ir[0], Contains("allocate on stack C_tile[float32 * 16]"));
    REQUIRE_THAT(cp.kernel_ir[0], Contains("C_tile[((ir * 4) + jr)] = 0f"));
    REQUIRE_THAT(cp.source, Contains("float C_tile_[int64_t(16)];") || Contains("float C_tile_[int32_t(16)];"));
    // Every thread loop runs to the launch size: no bound checks on the thread indices.
    REQUIRE(count_occurrences(cp.source, "threadIdx.x < ") == 0);
    const std::vector<std::tuple<int, int, int>> sizes = {{0, 5, 3},   {1, 1, 1},   {32, 32, 8},
                                                          {33, 65, 9}, {31, 32, 0}, {100, 37, 200}};
    Kernel emulated_kernel = p.compile(emulated());
    REQUIRE_THAT(emulated_kernel.lowered(), Contains("C_tile[float32 * 1024]"));
    testing::check_dense_gemm_kernels(p, M, N, K, A, Bm, C, sizes, emulated_kernel, testing::cuda_on_cpu(p));
}

TEST_CASE("the apps' GPU schedules (trmm, vgemm) match the reference, emulated and as CUDA on CPU threads", "[gpu]") {
    // apps/trmm/trmm_gpu_def.h and apps/vgemm/vgemm_gpu_def.h: what `--device cuda` and the GPU
    // benchmark run. Sizes with partial tiles and panels, a triangle of one row, an empty matrix.
    // Both kernels (emulated, and the CUDA source on CPU threads) against one reference per shape.
    auto check = [](const Pipeline &p, const Kernel &emulated_kernel, const Kernel &on_cpu, const RaggedShape &s,
                    const std::vector<Tensor> &inputs) {
        std::vector<Buffer> in;
        std::vector<Binding> bindings;
        std::vector<std::pair<Tensor, const Buffer *>> ref_in;
        for (size_t i = 0; i < inputs.size(); i++) {
            in.push_back(Buffer::alloc(inputs[i], s));
            testing::fill_random(in.back(), 40 + (uint32_t)i);
        }
        for (size_t i = 0; i < inputs.size(); i++) {
            bindings.emplace_back(inputs[i], in[i]);
            ref_in.emplace_back(inputs[i], &in[i]);
        }
        Buffer out_emulated = Buffer::alloc(p.outputs()[0], s), out_on_cpu = Buffer::alloc(p.outputs()[0], s);
        std::vector<Binding> emulated_bindings = bindings;
        emulated_bindings.emplace_back(p.outputs()[0], out_emulated);
        bindings.emplace_back(p.outputs()[0], out_on_cpu);
        emulated_kernel.run(s, emulated_bindings);
        on_cpu.run(s, bindings);
        const auto want = reference_evaluate(p, s, ref_in)[0];
        {
            INFO("emulated");
            testing::require_close(out_emulated, want);
        }
        INFO("CUDA on CPU threads");
        testing::require_close(out_on_cpu, want);
    };
    SECTION("trmm") {
        const int64_t tile = GENERATE(64, 128);
        apps::TrmmGpu t(tile);
        Pipeline p = t.pipeline();
        CudaProgram cp = require_cuda_compiles(p);
        REQUIRE_THAT(cp.kernel_ir[0],
                     Contains("allocate on stack C_tile[float32 * " + std::to_string(tile * tile / 256) + "]"));
        Kernel emulated_kernel = p.compile(emulated());
        Kernel on_cpu = testing::cuda_on_cpu(p);
        for (int64_t size : {1, 17, 64, 130}) {
            INFO("M " << size << " N " << size + 3);
            RaggedShape s;
            s.set(t.M, size).set(t.N, size + 3);
            check(p, emulated_kernel, on_cpu, s, {t.L, t.X});
        }
    }
    SECTION("vgemm") {
        const int64_t tile = GENERATE(64, 128);
        apps::VgemmGpu v(tile);
        Pipeline p = v.pipeline();
        CudaProgram cp = require_cuda_compiles(p);
        REQUIRE_THAT(cp.kernel_ir[0],
                     Contains("allocate on stack C_tile[float32 * " + std::to_string(tile * tile / 256) + "]"));
        Kernel emulated_kernel = p.compile(emulated());
        Kernel on_cpu = testing::cuda_on_cpu(p);
        for (const auto &shapes : std::vector<std::vector<std::array<int32_t, 3>>>{
                 {{70, 3, 17}, {0, 5, 5}, {64, 64, 64}, {1, 129, 2}}, {{33, 33, 0}}, {{5, 80, 31}, {16, 16, 16}}}) {
            RaggedShape s;
            v.bind(s, shapes);
            INFO("first shape " << shapes[0][0] << " x " << shapes[0][1] << " x " << shapes[0][2]);
            check(p, emulated_kernel, on_cpu, s, {v.X, v.Y});
        }
    }
}

TEST_CASE("the CUDA host entry checks its arguments, sizes its launches and calls the device runtime", "[gpu]") {
    // The host side of Target::Cuda, JIT-compiled and called with a recording device: the launch
    // sizes for a given shape, device memory for intermediates (released on every path), device
    // copies staged for the length and aux arrays, bad arguments stopping before any launch.
    Ragged r;
    Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    Func P("P", {{r.batch, r.B}, {r.seq, r.len(r.batch)}}), S("S", {{r.batch, r.B}, {r.seq, r.len(r.batch)}});
    P.compute([&](Expr b, Expr s) { return A(b, s) + 1.0f; });
    S.compute([&](Expr b, Expr s) { return P(b, s) * 2.0f; });
    P.gpu_blocks(r.batch).gpu_threads(r.seq);
    S.fuse(r.batch, r.seq, r.tok).split(r.tok, r.to, r.ti, 16).gpu_blocks(r.to).gpu_threads(r.ti);
    Pipeline p({S}, "gpu_host");
    CompileOptions wide; // one kernel per launch (tests/correctness/gpu_narrow_indices.cpp: the twins)
    wide.narrow_gpu_indices = 0;
    CudaProgram cp = compile_cuda(p, {}, wide);
    INFO(cp.host_source);
    REQUIRE_THAT(cp.host_source, Contains("cora_device->launch(cora_device->context, 0,"));
    REQUIRE_THAT(cp.host_source, Contains("cora_device->launch(cora_device->context, 1,"));
    REQUIRE_THAT(cp.host_source, Contains("cora_device->alloc("));
    driver::JitResult jit = driver::jit_compile(cp.host_source, cp.entry_symbol, driver::JitOptions{});
    auto entry = reinterpret_cast<cora_device_entry_fn>(jit.entry);
    // The arguments, as the emulated kernel of the same pipeline takes them (the same ABI).
    Kernel emu = p.compile(emulated());
    RaggedShape shape;
    shape.set(r.B, 3).set(r.len, std::vector<int32_t>{5, 0, 40});
    Buffer a = Buffer::alloc(A, shape), s = Buffer::alloc(S, shape);
    std::vector<cora_arg_t> args = emu.make_args(shape, {{A, a}, {S, s}});
    char error[256] = {0};
    SECTION("a good call") {
        RecordingDevice dev;
        REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_OK);
        REQUIRE(dev.launches.size() == 2);
        REQUIRE(dev.launches[0].kernel == 0);
        REQUIRE(dev.launches[0].grid == std::array<int64_t, 3>{3, 1, 1});
        REQUIRE(dev.launches[0].threads == std::array<int64_t, 3>{40, 1, 1}); // the longest sentence
        REQUIRE(dev.launches[1].grid == std::array<int64_t, 3>{3, 1, 1});     // 45 tokens in blocks of 16
        REQUIRE(dev.launches[1].threads == std::array<int64_t, 3>{16, 1, 1});
        REQUIRE(dev.allocs == 1); // P lives on the device
        REQUIRE(dev.releases == 1);
        // Both launches staged the same arrays: the length array and the aux arrays the kernels read,
        // each with its whole size in bytes.
        REQUIRE(dev.stage_calls == 2);
        REQUIRE(!dev.staged.empty());
        for (const auto &[host, bytes] : dev.staged) {
            bool is_array = false;
            for (const KernelArgInfo &info : emu.arguments()) {
                size_t i = &info - emu.arguments().data();
                if ((info.kind == KernelArgInfo::Kind::LengthArray || info.kind == KernelArgInfo::Kind::AuxArray) &&
                    args[i].data == host) {
                    is_array = true;
                    REQUIRE(bytes == args[i].count * (args[i].type_code == CORA_TYPE_INT32 ? 4 : 8));
                }
            }
            REQUIRE(is_array);
        }
    }
    SECTION("a failing stage_shape releases the device memory and reports the error") {
        RecordingDevice dev;
        dev.fail_stage = true;
        REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "no room for the shape");
        REQUIRE(dev.launches.empty());
        REQUIRE(dev.allocs == dev.releases);
    }
    SECTION("a failing launch releases the device memory and reports the error") {
        RecordingDevice dev;
        dev.fail_launch = true;
        REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "launch refused");
        REQUIRE(dev.allocs == dev.releases);
    }
    SECTION("bad arguments stop before any launch") {
        RecordingDevice dev;
        args[1].count = 2; // the length array of a batch of 3
        REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_ERROR_ARGUMENT);
        REQUIRE_THAT(std::string(error), Contains("length array 'len' has 2 elements, expected 3"));
        REQUIRE(dev.launches.empty());
        REQUIRE(dev.allocs == 0);
    }
    SECTION("without a GPU, the backend \"cuda\" says why") {
        std::string why;
        if (!cuda_device_available(&why))
            REQUIRE_THROWS_WITH(p.compile("cuda"), Contains("pipeline 'gpu_host': no CUDA device to run on: " + why));
    }
    SECTION("a device that does not exist is a RuntimeError naming it") {
        CompileOptions o;
        o.device = 1;
        REQUIRE_THROWS_AS(p.compile("cuda-cpu-threads", o), RuntimeError);
        REQUIRE_THROWS_WITH(
            p.compile("cuda-cpu-threads", o),
            Contains("pipeline 'gpu_host': backend 'cuda-cpu-threads' has device 0 only, got device 1"));
        REQUIRE(testing::cuda_on_cpu(p).device() == 0);
        o.device = 4096; // more GPUs than any machine has
        REQUIRE_THROWS_AS(p.compile("cuda", o), RuntimeError);
        REQUIRE_THROWS_WITH(p.compile("cuda", o), Contains("pipeline 'gpu_host': no CUDA device to run on: "));
        std::string why;
        if (cuda_device_available(&why))
            REQUIRE_THROWS_WITH(p.compile("cuda", o), Contains("there is no CUDA device 4096 (this machine has"));
    }
}
