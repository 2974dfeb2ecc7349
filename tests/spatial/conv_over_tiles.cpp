// Convolutions over active-tile lists (apps/spatial/conv_layer.h) against the dense reference:
// 3x3 at stride 1 and 2, 1x1, depthwise 3x3, with bias, ReLU and a residual; each over random and
// edge-case masks, with the positions outside the active tiles kept or filled.
#include "common/cuda_on_cpu.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "common/spatial_testing.h"

#include "spatial/conv_layer.h"

using namespace cora;
using namespace cora::testing;
using cora::spatial::ConvLayer;
using cora::spatial::ConvShape;

namespace {

struct ConvProgram {
    Param N{"N", 1, 8}, H{"H", 1, 256}, W{"W", 1, 256};
    Dim n{"in_n"}, y{"in_y"}, x{"in_x"}, c{"in_c"}, tile{"tile"}, yi{"yi"}, xi{"xi"};
    ShapeTensor mask{"mask", {N, H, W}, 0, 1};
    ConvShape shape;
    Tensor in;
    ConvLayer conv;
    ActiveTiles tiles;
    ConvProgram(ConvShape s, int64_t th, int64_t tw, bool fill)
        : shape(s), in("in", {{n, N}, {y, H}, {x, W}, {c, s.cin}}, s.type), conv("conv", in, N, H, W, s),
          tiles(ActiveTiles::from_mask("tiles", mask, th, tw, s.stride)) {
        conv.out.over_active_tiles(tiles, conv.n, conv.y, conv.x, tile, yi, xi);
        if (fill) conv.out.fill_inactive_tiles(Expr(0.0f));
    }
};

std::string describe(const ConvShape &s) {
    std::ostringstream o;
    o << (s.depthwise ? "depthwise " : "") << s.kernel << "x" << s.kernel << " stride " << s.stride << ", " << s.cin
      << " -> " << s.cout << (s.relu ? ", relu" : "") << (s.type == Float16 ? ", float16" : "");
    return o.str();
}

/** The buffers of a sparse (`fast`) and a dense convolution of the same random input, weights
 * and bias; `of` starts as `fill` everywhere, so the test sees what the sparse kernel leaves. */
struct FastAndDense {
    Buffer in, w, b, of, od;
    FastAndDense(const ConvProgram &plain, const ConvLayer &fast, const ConvLayer &dense, const RaggedShape &shape,
                 uint32_t &seed, float fill)
        : in(Buffer::alloc(plain.in, shape)), w(Buffer::alloc(fast.weight, shape)), b(Buffer::alloc(fast.bias, shape)),
          of(Buffer::alloc(fast.out, shape)), od(Buffer::alloc(dense.out, shape)) {
        fill_random(in, seed++);
        fill_random(w, seed++);
        fill_random(b, seed++);
        for (int64_t e = 0; e < of.size(); e++)
            of.at(e) = fill;
    }
};

} // namespace

TEST_CASE("convolutions over active tiles match the dense convolution on the active tiles", "[spatial][conv]") {
    const std::vector<ConvShape> shapes{{3, 5, 3, 1, false, true},
                                        {3, 4, 3, 2, false, false},
                                        {4, 6, 1, 1, false, true},
                                        {5, 5, 3, 1, true, true},
                                        {4, 4, 3, 2, true, false}};
    uint32_t seed = 100;
    for (const ConvShape &s : case_share(shapes))
        for (auto [th, tw, fill] : std::vector<std::tuple<int64_t, int64_t, bool>>{{8, 8, false}, {4, 6, true}}) {
            ConvProgram p(s, th, tw, fill);
            Pipeline pipeline({p.conv.out}, "conv_tiles");
            Kernel k = pipeline.compile();
            std::vector<MaskCase> cases = mask_cases(seed);
            for (size_t i = 0; i < cases.size();
                 i += mask_case_step(fill ? 2 : 1)) { // the fill variant on every other mask
                const MaskCase &mc = cases[i];
                INFO(describe(s) << ", " << mc.describe() << ", tiles " << th << "x" << tw
                                 << (fill ? ", fill 0" : ", keep"));
                RaggedShape shape;
                shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
                Buffer in = Buffer::alloc(p.in, shape), w = Buffer::alloc(p.conv.weight, shape),
                       b = Buffer::alloc(p.conv.bias, shape), out = Buffer::alloc(p.conv.out, shape);
                fill_random(in, seed++);
                fill_random(w, seed++);
                fill_random(b, seed++);
                for (int64_t e = 0; e < out.size(); e++)
                    out.at(e) = -7.0f;
                k.run(shape, {{p.in, in}, {p.conv.weight, w}, {p.conv.bias, b}, {p.conv.out, out}});
                auto ref = reference_evaluate(pipeline, shape, {{p.in, &in}, {p.conv.weight, &w}, {p.conv.bias, &b}});
                std::vector<uint8_t> active = active_positions(mc, th, tw, s.stride);
                const int64_t cout = s.cout;
                REQUIRE((int64_t)ref[0].size() == (int64_t)active.size() * cout);
                std::vector<double> want = outside_replaced(ref[0], active, cout, fill ? 0.0 : -7.0);
                require_close(out, want, 1e-4);
            }
        }
}

TEST_CASE("the CPU schedule of a convolution over tiles (register tiles, vectorised channels) matches the dense one",
          "[spatial][conv][schedule]") {
    // The fast schedule against the default one, differentially, and both against the reference
    // on the active tiles; the dense schedule (no list) against the reference everywhere.
    const std::vector<std::tuple<ConvShape, int64_t, int64_t, int64_t>> cases{{{4, 16, 3, 1, false, true}, 8, 8, 16},
                                                                              {{3, 32, 3, 2, false, false}, 4, 8, 16},
                                                                              {{8, 16, 1, 1, false, true}, 8, 4, 8},
                                                                              {{16, 16, 3, 1, true, true}, 8, 8, 16},
                                                                              {{16, 16, 3, 2, true, false}, 8, 4, 16}};
    uint32_t seed = 500;
    // Deep layers (k-panels of 128 input channels, 8 or more channel blocks outside the tiles) on
    // small masks: the reference's work grows with the channels.
    for (auto [cin, cout, vec] : case_share(std::vector<std::array<int64_t, 3>>{{256, 16, 2}, {384, 16, 2}})) {
        ConvShape s{cin, cout, 3, 1, false, true};
        ConvProgram plain(s, 4, 4, false);
        ConvLayer fast("deep", plain.in, plain.N, plain.H, plain.W, s),
            dense("deep_dense", plain.in, plain.N, plain.H, plain.W, s);
        fast.schedule_cpu(&plain.tiles, 4, 4, vec);
        dense.schedule_cpu(nullptr, 4, 4, vec);
        Kernel kf = Pipeline({fast.out}, "deep_fast").compile(), kd = Pipeline({dense.out}, "deep_dense").compile();
        for (const char *kind : {"all-one", "corners", "blob"}) {
            MaskCase mc = make_mask(2, 7, 6, kind, 0.3, seed++);
            INFO(describe(s) << ", " << mc.describe());
            RaggedShape shape;
            shape.set(plain.N, mc.n).set(plain.H, mc.h).set(plain.W, mc.w).set(plain.mask, mc.mask);
            FastAndDense bufs(plain, fast, dense, shape, seed, 0.0f);
            Buffer &in = bufs.in, &w = bufs.w, &b = bufs.b, &of = bufs.of, &od = bufs.od;
            kf.run(shape, {{plain.in, in}, {fast.weight, w}, {fast.bias, b}, {fast.out, of}});
            kd.run(shape, {{plain.in, in}, {dense.weight, w}, {dense.bias, b}, {dense.out, od}});
            auto ref = reference_evaluate(Pipeline({dense.out}), shape,
                                          {{plain.in, &in}, {dense.weight, &w}, {dense.bias, &b}});
            require_close(od, ref[0], 1e-4);
            std::vector<uint8_t> active = active_positions(mc, 4, 4, 1);
            // Outside the active tiles the output keeps the zeros it started with.
            require_close(of, outside_replaced(ref[0], active, cout, 0.0), 1e-4);
        }
    }
    for (const auto &[s, th, tw, vec] : case_share(cases)) {
        ConvProgram plain(s, th, tw, false);
        Param &N = plain.N, &H = plain.H, &W = plain.W;
        ConvLayer fast("fast", plain.in, N, H, W, s), dense("dense", plain.in, N, H, W, s);
        fast.schedule_cpu(&plain.tiles, th, tw, vec);
        dense.schedule_cpu(nullptr, th, tw, vec);
        Kernel kf = Pipeline({fast.out}, "conv_fast").compile(), kd = Pipeline({dense.out}, "conv_dense").compile();
        Pipeline reference({dense.out}, "conv_reference");
        std::vector<MaskCase> cases = mask_cases(seed);
        for (size_t i = 0; i < cases.size(); i += mask_case_step(3)) {
            const MaskCase &mc = cases[i];
            INFO(describe(s) << ", " << mc.describe() << ", tiles " << th << "x" << tw << ", " << vec << " channels");
            RaggedShape shape;
            shape.set(N, mc.n).set(H, mc.h).set(W, mc.w).set(plain.mask, mc.mask);
            FastAndDense bufs(plain, fast, dense, shape, seed, -7.0f);
            Buffer &in = bufs.in, &w = bufs.w, &b = bufs.b, &of = bufs.of, &od = bufs.od;
            kf.run(shape, {{plain.in, in}, {fast.weight, w}, {fast.bias, b}, {fast.out, of}});
            kd.run(shape, {{plain.in, in}, {dense.weight, w}, {dense.bias, b}, {dense.out, od}});
            auto ref = reference_evaluate(reference, shape, {{plain.in, &in}, {dense.weight, &w}, {dense.bias, &b}});
            require_close(od, ref[0], 1e-4);
            std::vector<uint8_t> active = active_positions(mc, th, tw, s.stride);
            std::vector<double> want = outside_replaced(ref[0], active, s.cout, -7.0);
            require_close(of, want, 1e-4);
        }
    }
}

TEST_CASE("a GPU schedule of convolutions over tiles runs emulated and compiles for sm_80 and sm_90",
          "[spatial][conv][gpu]") {
    // Emulated (device kernels run block by block on the CPU) and as CUDA source on CPU threads,
    // against the reference on the active tiles; zero elsewhere (the fill op on GPU threads too).
    // The last two: float16 storage (inputs, weights, output), float32 arithmetic.
    const std::vector<std::tuple<ConvShape, int64_t, int64_t>> cases{{{4, 16, 3, 1, false, true}, 8, 8},
                                                                     {{3, 8, 3, 2, false, false}, 4, 4},
                                                                     {{16, 16, 3, 1, true, true}, 4, 8},
                                                                     {{8, 16, 3, 1, false, true, Float16}, 8, 8},
                                                                     {{16, 16, 3, 1, true, false, Float16}, 4, 8}};
    uint32_t seed = 900;
    for (const auto &[s, th, tw] : case_share(cases)) {
        ConvProgram p(s, th, tw, false);
        ConvLayer gpu("gpu", p.in, p.N, p.H, p.W, s);
        gpu.schedule_gpu(p.tiles, 8);
        Func fill = gpu.out.fill_inactive_tiles(Expr(0.0f));
        fill.gpu_blocks(gpu.tile).gpu_threads(gpu.c, gpu.xi);
        Pipeline pipeline({gpu.out}, "conv_gpu_tiles");
        Kernel emulated = pipeline.compile(testing::emulated()), threads = testing::cuda_on_cpu(pipeline);
        testing::require_cuda_compiles(pipeline);
        std::vector<MaskCase> cases = mask_cases(seed);
        for (size_t i = 0; i < cases.size(); i += mask_case_step(4)) {
            const MaskCase &mc = cases[i];
            INFO(describe(s) << ", " << mc.describe() << ", tiles " << th << "x" << tw);
            RaggedShape shape;
            shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
            Buffer in = Buffer::alloc(p.in, shape), w = Buffer::alloc(gpu.weight, shape),
                   b = Buffer::alloc(gpu.bias, shape);
            fill_random(in, seed++);
            fill_random(w, seed++);
            fill_random(b, seed++);
            auto ref = reference_evaluate(pipeline, shape, {{p.in, &in}, {gpu.weight, &w}, {gpu.bias, &b}});
            std::vector<uint8_t> active = active_positions(mc, th, tw, s.stride);
            std::vector<double> want = outside_replaced(ref[0], active, s.cout, 0.0);
            for (const Kernel *k : {&emulated, &threads}) {
                Buffer out = Buffer::alloc(gpu.out, shape);
                for (int64_t e = 0; e < out.size(); e++) // the fill must overwrite this
                    if (s.type == Float16)
                        out.data<uint16_t>()[e] = cora_float_to_half(-7.0f);
                    else
                        out.at(e) = -7.0f;
                k->run(shape, {{p.in, in}, {gpu.weight, w}, {gpu.bias, b}, {gpu.out, out}});
                require_close(out, want, 1e-4);
            }
        }
    }
}

TEST_CASE("the gather -> dense -> scatter schedule matches the dense convolution on the active tiles",
          "[spatial][conv][gather]") {
    // The gathered input holds each active tile with its halo (zeros past the edge); the
    // convolution reads it unchecked and writes the tile's positions. Both schedules of it, and
    // the 1x1 and depthwise cases (halo 0 and 1).
    const std::vector<std::tuple<ConvShape, int64_t, int64_t, int64_t>> cases{{{4, 16, 3, 1, false, true}, 8, 8, 16},
                                                                              {{16, 16, 3, 1, false, false}, 4, 8, 16},
                                                                              {{8, 16, 1, 1, false, true}, 8, 4, 8},
                                                                              {{16, 16, 3, 1, true, true}, 5, 8, 16}};
    uint32_t seed = 1300;
    for (const auto &[s, th, tw, vec] : case_share(cases))
        for (bool scheduled : {false, true}) {
            if (!scheduled && s.kernel != 3) continue; // the default schedule on the 3x3 cases
            ConvProgram p(s, th, tw, false);
            ConvLayer g("gathered", p.in, p.N, p.H, p.W, s, nullptr, &p.tiles);
            if (scheduled)
                g.schedule_cpu(&p.tiles, th, tw, vec);
            else
                g.out.over_active_tiles(p.tiles, g.n, g.y, g.x, g.tile, g.yi, g.xi);
            Pipeline pipeline({g.out}, "conv_gathered");
            Kernel k = pipeline.compile();
            std::vector<MaskCase> cases = mask_cases(seed);
            for (size_t i = 0; i < cases.size(); i += mask_case_step(3)) {
                const MaskCase &mc = cases[i];
                INFO(describe(s) << ", " << mc.describe() << ", tiles " << th << "x" << tw
                                 << (scheduled ? ", scheduled" : ", default schedule"));
                RaggedShape shape;
                shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
                Buffer in = Buffer::alloc(p.in, shape), w = Buffer::alloc(g.weight, shape),
                       b = Buffer::alloc(g.bias, shape), out = Buffer::alloc(g.out, shape);
                fill_random(in, seed++);
                fill_random(w, seed++);
                fill_random(b, seed++);
                for (int64_t e = 0; e < out.size(); e++)
                    out.at(e) = -7.0f;
                k.run(shape, {{p.in, in}, {g.weight, w}, {g.bias, b}, {g.out, out}});
                // The reference of the plain (select) definition: the same convolution.
                auto ref = reference_evaluate(Pipeline({p.conv.out}), shape,
                                              {{p.in, &in}, {p.conv.weight, &w}, {p.conv.bias, &b}});
                std::vector<uint8_t> active = active_positions(mc, th, tw, 1);
                std::vector<double> want = outside_replaced(ref[0], active, s.cout, -7.0);
                require_close(out, want, 1e-4);
            }
        }
}
