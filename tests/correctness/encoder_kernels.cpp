// The transformer encoder's five kernels (apps/transformer/encoder_def.h), each JIT-compiled with
// its schedule and checked against the reference on the edge-case batches (lengths 0, 1, the
// token padding and one past, the maximum, a batch of one), causal and not, ReLU and GELU.
#include "common/cuda_on_cpu.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "driver/Compiler.h"

#include "transformer/encoder_def.h"

using namespace cora;
using cora::apps::EncoderKernel;
using cora::apps::EncoderOptions;
using testing::check_against_reference;

namespace {

const char *kernel_name(EncoderKernel k) {
    switch (k) {
    case EncoderKernel::Qkv: return "qkv";
    case EncoderKernel::Attention: return "attention";
    case EncoderKernel::OutNorm: return "out_norm";
    case EncoderKernel::FeedForward1: return "ff1";
    case EncoderKernel::FeedForward2Norm: return "ff2_norm";
    }
    return "?";
}

/** `backends`: where the kernel runs ("cpu", or with opt.gpu the backends that run GPU schedules),
 * each against one reference per batch. */
void check_kernel(EncoderKernel which, const EncoderOptions &opt, int64_t heads, int64_t ff_blocks, uint32_t seed,
                  int32_t max_len = 17, int32_t pad = 16, const std::vector<std::string> &backends = {"cpu"}) {
    auto def = cora::apps::make_encoder_kernel(which, opt);
    std::string name = std::string("encoder_") + kernel_name(which) + (opt.causal ? "_causal" : "") +
                       (opt.mask_full ? "_masked" : "") + (opt.gelu ? "_gelu" : "") + (opt.gpu ? "_gpu" : "") +
                       (opt.fp16 ? "_fp16" : "");
    Pipeline p({def->output()}, name);
    std::vector<Kernel> kernels;
    std::vector<const Kernel *> run;
    for (const std::string &backend : backends)
        kernels.push_back(p.compile(backend));
    for (const Kernel &k : kernels)
        run.push_back(&k);
    auto &D = def->dims;
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) {
        s.set(D.B, (int64_t)l.size()).set(D.len, l).set(D.NH, heads).set(D.FB, ff_blocks);
    };
    // By default lengths up to 17: 0, 1, the token padding 16 and one past it.
    check_against_reference(p, run, def->inputs, bind, max_len, pad, seed);
}

} // namespace

TEST_CASE("encoder kernels match the reference", "[encoder]") {
    for (EncoderKernel which : {EncoderKernel::Qkv, EncoderKernel::OutNorm, EncoderKernel::FeedForward1,
                                EncoderKernel::FeedForward2Norm, EncoderKernel::Attention}) {
        DYNAMIC_SECTION(kernel_name(which)) { check_kernel(which, {}, 2, 3, 300 + (uint32_t)which); }
    }
    SECTION("causal attention") { check_kernel(EncoderKernel::Attention, {true, false}, 2, 1, 310); }
    SECTION("causal attention as full attention with a mask") {
        check_kernel(EncoderKernel::Attention, {true, false, true}, 2, 1, 312);
    }
    SECTION("attention across its register tiles") {
        // Keys in tiles of two vectors (16 or 32) and query rows in tiles of 6 (scores) and 4
        // (AttnV; 6 with 512-bit vectors): lengths at a key tile, one past it, two tiles plus one,
        // and at 12 (every row tile) and around it; the remainders of the row tiles appear among them.
        const int32_t key_tile = (int32_t)(2 * cora::apps::float_lanes(cora::host_vector_bits()));
        check_kernel(EncoderKernel::Attention, {}, 2, 1, 313, 2 * key_tile + 1, key_tile);
        check_kernel(EncoderKernel::Attention, {}, 1, 1, 314, 25, 12);
        check_kernel(EncoderKernel::Attention, {true, false, true}, 1, 1, 315, 2 * key_tile + 1, key_tile);
        // The tiles of every ahead-of-time variant, whatever this CPU (x86-64-v4: 32-key tiles,
        // AttnV 6 rows x 64 features; x86-64-v3: 16-key tiles; 128-bit: 8), and the 6-row AttnV
        // tiles around 12 rows.
        for (int bits : {512, 256, 128})
            check_kernel(EncoderKernel::Attention, {false, false, false, bits}, 1, 1, 316, bits / 8 + 1, bits / 16);
        check_kernel(EncoderKernel::Attention, {false, false, false, 512}, 1, 1, 317, 25, 12);
    }
    SECTION("GELU feed-forward") { check_kernel(EncoderKernel::FeedForward1, {false, true}, 1, 2, 311); }
    SECTION("token GEMMs with every target's schedule") {
        // 512-bit: 4-token tiles, the loop padded to 16; 256-bit: 6-token tiles, padded to the
        // storage's 48 (kTokenPad). Lengths up to 49: the padding and one past it; weights in
        // column panels; k-panels starting and finishing the tiles (FF2: 2 panels of 256 at
        // FB = 5, the last one partial).
        // Under ASan and UBSan (slow instrumented compiles) only the 256-bit set; the 512-bit
        // one also runs natively in the sections above on AVX-512 machines.
        const std::vector<int> widths =
            cora::driver::sanitizer_flags().empty() ? std::vector<int>{512, 256} : std::vector<int>{256};
        for (int bits : widths)
            for (EncoderKernel which :
                 {EncoderKernel::Qkv, EncoderKernel::FeedForward1, EncoderKernel::FeedForward2Norm})
                DYNAMIC_SECTION(kernel_name(which) << ", " << bits << "-bit") {
                    check_kernel(which, {false, false, false, bits}, 1, 5, 320 + (uint32_t)bits / 128, 49,
                                 (int32_t)cora::apps::kTokenPad);
                }
    }
}

TEST_CASE("encoder kernels' GPU schedules match the reference, emulated and as CUDA on CPU threads", "[encoder][gpu]") {
    // Every kernel with EncoderOptions::gpu: token GEMMs in 48-token x 64-output blocks with
    // shared k-panels (FF2 at FB = 5: 20 panels of 16, in widths 64 and 320), LayerNorm with a warp per
    // token, attention a block per (head, query, item). Lengths up to 49: the storage padding (48)
    // and one past it, so a block's last tile runs into the padding.
    EncoderOptions gpu;
    gpu.gpu = true;
    // Under ASan and UBSan (slow instrumented compiles, this case was the stage's longest at 153 s)
    // the GEMMs, LayerNorms and float16 kernels run emulated only; attention, whose phases need
    // barriers, runs on CPU threads there too. The release and g++ stages run everything.
    const bool sanitized = !cora::driver::sanitizer_flags().empty();
    const std::vector<std::string> both = {"cuda-emulated", "cuda-cpu-threads"}, emulated = {"cuda-emulated"};
    for (EncoderKernel which : {EncoderKernel::Qkv, EncoderKernel::OutNorm, EncoderKernel::FeedForward1,
                                EncoderKernel::FeedForward2Norm, EncoderKernel::Attention})
        DYNAMIC_SECTION(kernel_name(which)) {
            check_kernel(which, gpu, 1, 5, 330 + (uint32_t)which, 49, (int32_t)cora::apps::kTokenPad,
                         !sanitized || which == EncoderKernel::Attention ? both : emulated);
        }
    // Attention's phases (scores, max, exponentials, sum, AttnV in one block) meet in global
    // memory: on CPU threads a missing barrier gives wrong values, so every variant runs there.
    SECTION("two heads, causal and masked attention") {
        EncoderOptions o = gpu;
        check_kernel(EncoderKernel::Attention, o, 2, 1, 340, 33, 32, both);
        o.causal = true;
        check_kernel(EncoderKernel::Attention, o, 2, 1, 341, 33, 32, both);
        o.mask_full = true;
        check_kernel(EncoderKernel::Attention, o, 2, 1, 342, 33, 32, both);
    }
    SECTION("two heads and GELU, emulated") {
        EncoderOptions o = gpu;
        o.gelu = true;
        check_kernel(EncoderKernel::FeedForward1, o, 2, 1, 343, 49, (int32_t)cora::apps::kTokenPad, emulated);
        check_kernel(EncoderKernel::OutNorm, gpu, 2, 1, 344, 49, (int32_t)cora::apps::kTokenPad, emulated);
    }
    SECTION("float16 storage, token GEMMs on tensor cores") {
        // Token tensors and weights in float16, float32 sums (mma.sync's layout emulated lane by
        // lane on CPU threads), intermediates in float32; the outputs rounded once (1e-3 relative).
        EncoderOptions half = gpu;
        half.fp16 = true;
        for (EncoderKernel which : {EncoderKernel::Qkv, EncoderKernel::OutNorm, EncoderKernel::FeedForward1,
                                    EncoderKernel::FeedForward2Norm, EncoderKernel::Attention})
            DYNAMIC_SECTION(kernel_name(which)) {
                check_kernel(which, half, 1, 5, 350 + (uint32_t)which, 49, (int32_t)cora::apps::kTokenPad,
                             sanitized ? emulated : both);
            }
        SECTION("the GEMMs' PTX has mma.sync") {
            for (EncoderKernel which : {EncoderKernel::Qkv, EncoderKernel::FeedForward2Norm}) {
                auto def = cora::apps::make_encoder_kernel(which, half);
                testing::require_cuda_compiles(Pipeline({def->output()}, "encoder_gpu_fp16_nvrtc"),
                                               "mma.sync.aligned.m16n8k16");
            }
        }
        SECTION("on the CPU it is a compile error") {
            EncoderOptions cpu_half;
            cpu_half.fp16 = true;
            REQUIRE_THROWS_WITH(
                cora::apps::make_encoder_kernel(EncoderKernel::Qkv, cpu_half),
                Catch::Matchers::Contains("float16 storage (EncoderOptions::fp16) has GPU schedules only"));
        }
    }
    SECTION("NVRTC compiles every kernel for sm_80 and sm_90") {
        // What runs on a GPU: the W panels in shared memory, the LayerNorm's and the softmax's
        // reductions as warp shuffles.
        for (EncoderKernel which : {EncoderKernel::Qkv, EncoderKernel::OutNorm, EncoderKernel::FeedForward1,
                                    EncoderKernel::FeedForward2Norm, EncoderKernel::Attention}) {
            auto def = cora::apps::make_encoder_kernel(which, gpu);
            CudaProgram cp = testing::require_cuda_compiles(Pipeline({def->output()}, "encoder_gpu_nvrtc"));
            // Barriers between the block's phases (codegen/CudaPhaseBarriers.h): attention's scores
            // before the row's max, its exponentials before their sum; none in the GEMMs, whose
            // phases meet only in shared panels between the copies' barriers, or in LayerNorm.
            const bool phase_barrier = cp.source.find("the phases before this one") != std::string::npos;
            REQUIRE(phase_barrier == (which == EncoderKernel::Attention));
            if (which == EncoderKernel::Attention) {
                REQUIRE_THAT(cp.source, Catch::Matchers::Contains("cora_warp_max("));
                REQUIRE_THAT(cp.source, Catch::Matchers::Contains("cora_warp_sum("));
            } else {
                REQUIRE_THAT(cp.source, Catch::Matchers::Contains("__shared__"));
            }
            if (which == EncoderKernel::OutNorm || which == EncoderKernel::FeedForward2Norm)
                REQUIRE_THAT(cp.source, Catch::Matchers::Contains("cora_warp_sum("));
        }
    }
}
