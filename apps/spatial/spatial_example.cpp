// The user guide's spatial-sparsity example (docs/user-guide.md, 4f), verbatim: a residual block
// (3x3 conv -> ReLU -> 3x3 conv + skip) computed only on the tiles a run-time mask marks.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cora/cora.h"

using namespace cora;

// out(n, y, x, o) = bias(o) + sum over the 3x3 taps and input channels, zero past the edges.
Expr conv3x3(const Tensor &in, const Tensor &w, const Tensor &bias, const Dim &r, int64_t C, const Expr &H,
             const Expr &W, Expr n, Expr y, Expr x, Expr o) {
    auto tap = [&](Expr rr) {
        Expr t = rr / C, iy = y + t / 3 - 1, ix = x + t % 3 - 1;
        Expr inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
        return select(inside, in(n, min(max(iy, 0), H - 1), min(max(ix, 0), W - 1), rr % C), 0.0f);
    };
    return sum(r, 9 * C, tap(r) * w(r, o)) + bias(o);
}

int main(int argc, char **) {
    if (argc > 1) {
        std::fprintf(stderr, "spatial_example: it takes no arguments\n");
        return 2;
    }
    const int64_t C = 16;
    Param N("N", 1, 64), H("H", 1, 4096), W("W", 1, 4096);
    ShapeTensor mask("mask", {N, H, W}, 0, 1); // which output positions matter, per image
    Dim n("n"), y("y"), x("x"), c("c"), r1("r1"), r2("r2");
    Tensor in("in", {{n, N}, {y, H}, {x, W}, {c, C}});
    Tensor w1("w1", {{r1, 9 * C}, {c, C}}), b1("b1", {{c, C}}), w2("w2", {{r2, 9 * C}, {c, C}}), b2("b2", {{c, C}});
    Func mid("mid", {{n, N}, {y, H}, {x, W}, {c, C}}), out("out", {{n, N}, {y, H}, {x, W}, {c, C}});
    mid.compute([&](Expr n_, Expr y_, Expr x_, Expr c_) {
        return max(conv3x3(in, w1, b1, r1, C, H, W, n_, y_, x_, c_), 0.0f);
    });
    out.compute([&](Expr n_, Expr y_, Expr x_, Expr c_) {
        return conv3x3(mid, w2, b2, r2, C, H, W, n_, y_, x_, c_) + in(n_, y_, x_, c_);
    });

    // The schedule: `out` on the 8x8 tiles holding an active position; `mid` on the tiles within
    // one position of those (the halo out's 3x3 convolution reads). Outside: zero.
    ActiveTiles out_tiles = ActiveTiles::from_mask("out_tiles", mask, 8, 8);
    ActiveTiles mid_tiles = out_tiles.grown("mid_tiles", 1, 8, 8);
    Dim tile("tile"), yi("yi"), xi("xi");
    mid.over_active_tiles(mid_tiles, n, y, x, tile, yi, xi);
    out.over_active_tiles(out_tiles, n, y, x, tile, yi, xi);
    out.fill_inactive_tiles(Expr(0.0f));
    Pipeline block({out}, "residual_block");
    Kernel kernel = block.compile();

    // One image of 40 x 30 with a disc of active positions.
    RaggedShape shape;
    shape.set(N, 1).set(H, 40).set(W, 30);
    std::vector<uint8_t> m(40 * 30, 0);
    for (int yy = 0; yy < 40; yy++)
        for (int xx = 0; xx < 30; xx++)
            m[(size_t)(yy * 30 + xx)] = (yy - 12) * (yy - 12) + (xx - 20) * (xx - 20) <= 25;
    shape.set(mask, m.data(), (int64_t)m.size());

    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Buffer bin = Buffer::alloc(in, shape), bw1 = Buffer::alloc(w1, shape), bb1 = Buffer::alloc(b1, shape),
           bw2 = Buffer::alloc(w2, shape), bb2 = Buffer::alloc(b2, shape), bout = Buffer::alloc(out, shape);
    for (Buffer *b : {&bin, &bw1, &bb1, &bw2, &bb2})
        for (int64_t i = 0; i < b->size(); i++)
            b->at(i) = u(rng);
    kernel.run(shape, {{in, bin}, {w1, bw1}, {b1, bb1}, {w2, bw2}, {b2, bb2}, {out, bout}});

    // Check: on the active tiles, the dense block's value (the reference evaluates the definition
    // everywhere); elsewhere zero.
    std::vector<double> dense =
        reference_evaluate(block, shape, {{in, &bin}, {w1, &bw1}, {b1, &bb1}, {w2, &bw2}, {b2, &bb2}})[0];
    std::vector<uint8_t> active(40 * 30, 0);
    for (const auto &t : shape.active_tiles(out_tiles))
        for (int yy = t[1] * 8; yy < std::min(40, t[1] * 8 + 8); yy++)
            for (int xx = t[2] * 8; xx < std::min(30, t[2] * 8 + 8); xx++)
                active[(size_t)(yy * 30 + xx)] = 1;
    double err = 0;
    for (int64_t i = 0; i < bout.size(); i++) {
        double want = active[(size_t)(i / C)] ? dense[(size_t)i] : 0.0;
        double e = std::fabs(bout.at(i) - want);
        err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    std::printf("%zu of %lld tiles active; max |error| %.2g: %s\n", shape.active_tiles(out_tiles).size(),
                (long long)shape.eval(out_tiles.grid_tiles()), err, err < 1e-3 ? "PASS" : "FAIL");
    return err < 1e-3 ? 0 : 1;
}
