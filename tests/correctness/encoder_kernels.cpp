// The transformer encoder's five kernels (apps/transformer/encoder_def.h), each JIT-compiled with
// its schedule and checked against the reference on the edge-case batches (lengths 0, 1, the
// token padding and one past, the maximum, a batch of one), causal and not, ReLU and GELU.
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

void check_kernel(EncoderKernel which, const EncoderOptions &opt, int64_t heads, int64_t ff_blocks, uint32_t seed,
                  int32_t max_len = 17, int32_t pad = 16) {
    auto def = cora::apps::make_encoder_kernel(which, opt);
    std::string name = std::string("encoder_") + kernel_name(which) + (opt.causal ? "_causal" : "") +
                       (opt.mask_full ? "_masked" : "") + (opt.gelu ? "_gelu" : "");
    Pipeline p({def->output()}, name);
    Kernel k = p.compile();
    auto &D = def->dims;
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) {
        s.set(D.B, (int64_t)l.size()).set(D.len, l).set(D.NH, heads).set(D.FB, ff_blocks);
    };
    // By default lengths up to 17: 0, 1, the token padding 16 and one past it.
    check_against_reference(p, k, def->inputs, bind, max_len, pad, seed);
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
        // (AttnV): lengths at a key tile, one past it, two tiles plus one, and at 12 (both row
        // tiles) and around it; the remainders of both row tiles appear among them.
        const int32_t key_tile = (int32_t)(2 * cora::apps::float_lanes(cora::host_vector_bits()));
        check_kernel(EncoderKernel::Attention, {}, 2, 1, 313, 2 * key_tile + 1, key_tile);
        check_kernel(EncoderKernel::Attention, {}, 1, 1, 314, 25, 12);
        check_kernel(EncoderKernel::Attention, {true, false, true}, 1, 1, 315, 2 * key_tile + 1, key_tile);
        // The tiles of the other ahead-of-time variants (x86-64-v3: 16-key tiles; 128-bit: 8).
        for (int bits : {256, 128})
            check_kernel(EncoderKernel::Attention, {false, false, false, bits}, 1, 1, 316, bits / 8 + 1, bits / 16);
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
