/** \file Convolution layers in cora's DSL, NHWC, for spatially sparse inference (cora/Spatial.h):
 * the dense definition of a k x k convolution (k = 1 or 3; stride 1 or 2; zero padding k / 2;
 * dense or depthwise) with a bias, an optional residual added and an optional ReLU, and the
 * schedules that run it over an active-tile list. The definition is the dense one: a schedule
 * only chooses which tiles run, so the reference evaluator checks every schedule against it.
 *
 * Layouts (row-major): input [N, H, W, Cin]; weights [k * k * Cin, Cout] (HWIO flattened:
 * row (ky * k + kx) * Cin + ci), depthwise [k * k, C]; bias [Cout]; output [N, Ho, Wo, Cout] with
 * Ho = ceil(H / stride). Reads past the input's edge are zeros (the select below): the prover
 * checks the clamped read, the select gives the padding's zero. */
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cora/cora.h"

namespace cora::spatial {

struct ConvShape {
    int64_t cin = 0, cout = 0;
    int64_t kernel = 3; ///< 1 or 3
    int64_t stride = 1; ///< 1 or 2
    bool depthwise = false;
    bool relu = false;
    Type type = Float32; ///< of the weights, bias and output (Float16: storage only, fp32 arithmetic)
};

/** One layer's tensors and its Func, defined densely. */
struct ConvLayer {
    ConvShape shape;
    Dim n, y, x, c, r, gy, gx, gc;
    Tensor weight, bias;
    Func out;
    /** The gather -> dense -> scatter alternative (SIGE, SBNet), when made with `gather_from`:
     * `gathered` holds each tile of that list with its halo (zeros past the image's edge), side
     * by side (ActiveTiles::gathered), and `out` is the dense convolution of each gathered tile,
     * read with no bounds checks and written at the tile's positions. Stride 1 only. */
    std::optional<Func> gathered;
    std::optional<ActiveTiles> gathered_tiles, gathered_from;

    /** `in` is [N, H, W, cin]; `residual`, when given, is added before the ReLU (same extents as
     * the output). */
    ConvLayer(const std::string &name, const Tensor &in, const Expr &N, const Expr &H, const Expr &W, ConvShape s,
              const Tensor *residual = nullptr, const ActiveTiles *gather_from = nullptr)
        : shape(s), n(name + "_n"), y(name + "_y"), x(name + "_x"), c(name + "_c"), r(name + "_r"), gy(name + "_gy"),
          gx(name + "_gx"), gc(name + "_gc"),
          weight(name + "_w", {{r, s.kernel * s.kernel * (s.depthwise ? 1 : s.cin)}, {c, s.cout}}, s.type),
          bias(name + "_b", {{c, s.cout}}, s.type),
          out(name, {{n, N}, {y, out_extent(H, s.stride)}, {x, out_extent(W, s.stride)}, {c, s.cout}}, s.type) {
        const int64_t k = s.kernel, pad = k / 2, cin = s.cin;
        if (gather_from) {
            if (s.stride != 1) throw CompileError("conv '" + name + "': a gathered input needs stride 1");
            gathered_from = *gather_from;
            gathered_tiles = gather_from->gathered(name + "_gathered_tiles", pad);
            const int64_t th = gather_from->tile_h(), tw = gather_from->tile_w();
            const int64_t gh = gathered_tiles->tile_h(), gw = gathered_tiles->tile_w();
            gathered.emplace(name + "_gathered",
                             Shape{{n, N}, {gy, gathered_tiles->rows()}, {gx, gathered_tiles->cols()}, {gc, cin}},
                             s.type);
            gathered->compute([&](Expr n_, Expr gy_, Expr gx_, Expr c_) {
                // Position (gy, gx) of the side-by-side padded tiles is input position
                // (tile row * th + row in the padded tile - pad, likewise for x).
                Expr iy = (gy_ / gh) * th + gy_ % gh - pad, ix = (gx_ / gw) * tw + gx_ % gw - pad;
                Expr inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                return select(inside, in(n_, min(max(iy, 0), H - 1), min(max(ix, 0), W - 1), c_), 0.0f);
            });
        }
        out.compute([&, residual](Expr n_, Expr y_, Expr x_, Expr c_) {
            auto tap = [&](Expr rr, Expr ci) {
                // The tap first, then its row and column: once r is split by cin, r / cin folds
                // to the tap loop (and ky, kx to constants when it is unrolled).
                Expr t = s.depthwise ? rr : rr / cin, ky = t / k, kx = t % k;
                if (gathered) {
                    const int64_t th = gather_from->tile_h(), tw = gather_from->tile_w();
                    Expr gy_ = (y_ / th) * gathered_tiles->tile_h() + y_ % th + ky;
                    Expr gx_ = (x_ / tw) * gathered_tiles->tile_w() + x_ % tw + kx;
                    return (*gathered)(n_, gy_, gx_, ci);
                }
                Expr iy = y_ * s.stride + ky - pad, ix = x_ * s.stride + kx - pad;
                Expr inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
                Expr read = in(n_, min(max(iy, 0), H - 1), min(max(ix, 0), W - 1), ci);
                return select(inside, read, 0.0f);
            };
            Expr acc = s.depthwise ? sum(r, k * k, tap(r, c_) * weight(r, c_))
                                   : sum(r, k * k * cin, tap(r, r % cin) * weight(r, c_));
            Expr v = acc + bias(c_);
            if (residual) v = v + (*residual)(n_, y_, x_, c_);
            return s.relu ? max(v, 0.0f) : v;
        });
    }

    static Expr out_extent(const Expr &e, int64_t stride) { return stride == 1 ? e : ceil_div(e, stride); }

    /** The CPU schedule, over the active tiles of `tiles` or, without a list, over the whole grid
     * cut into tiles of the same shape (cora's dense baseline: the same inner code). Per tile row,
     * a register tile of `tile_w` pixels x `vector_channels` output channels (cache_write) sums
     * the taps and input channels with the channels vectorised and the pixels unrolled; tiles (or
     * image rows) run in parallel, or the channel blocks when there are 8 or more of them. More
     * than 128 input channels (a multiple of 128) are summed in k-panels of 128 outside the tile's
     * rows. `vector_channels` must divide cout (CompileError otherwise). */
    void schedule_cpu(const ActiveTiles *tiles, int64_t tile_h, int64_t tile_w, int64_t vector_channels = 32) {
        if (shape.cout % vector_channels != 0)
            throw CompileError("conv '" + out.name() + "': vector_channels " + std::to_string(vector_channels) +
                               " must divide the " + std::to_string(shape.cout) + " output channels");
        std::vector<Dim> order;
        if (gathered) {
            if (!tiles || tiles->node() != gathered_from->node())
                throw CompileError("conv '" + out.name() + "': a gathered layer runs over the tiles it gathers");
            // The gather: each active tile's padded region, its channels vectorised.
            gathered->over_active_tiles(*gathered_tiles, n, gy, gx, gtile, gyi, gxi);
            if (shape.cin % 16 == 0) gathered->split(gc, gco, gcv, 16).vectorize(gcv);
        }
        // The loops over tiles: the active ones, or every tile of the grid (cora's dense
        // baseline, not fused with n: the reads' indices stay provably in bounds, with no division,
        // so the tile's update needs no guard for a partial last tile).
        std::vector<Dim> tiles_loops;
        if (tiles) {
            out.over_active_tiles(*tiles, n, y, x, tile, yi, xi);
            tiles_loops = {tile};
        } else {
            out.split(y, ty, yi, tile_h).split(x, tx, xi, tile_w);
            tiles_loops = {n, ty, tx};
        }
        // Many channel blocks (a deep, small layer: 20 x 20 x 512 has 9 tiles of 8 x 8 but 16
        // blocks of 32 channels): the channel blocks are the parallel loop, outside the tiles.
        const bool channels_outside = shape.cout / vector_channels >= 8;
        if (channels_outside) order.push_back(co);
        order.insert(order.end(), tiles_loops.begin(), tiles_loops.end());
        if (!channels_outside) order.push_back(co);
        // Deep inputs: k-panels of 128 input channels outside the tile's rows, so a panel's
        // weights (9 x 128 x 32 floats, 147 KB) stay in L2 while every row of the tile uses them;
        // the register tile's partial sums wait in the output between panels.
        const bool k_panels = !shape.depthwise && shape.cin > 128 && shape.cin % 128 == 0;
        if (k_panels) {
            out.split(r, tap, ci, shape.cin).split(ci, cio, cii, 128);
            order.insert(order.end(), {cio, yi, tap, cii, xi});
        } else {
            order.push_back(yi);
        }
        out.split(c, co, cv, vector_channels);
        if (shape.depthwise) {
            // One tap at a time per channel vector: the register tile is pixels x channels.
            order.insert(order.end(), {r, xi, cv});
            out.reorder(order).unroll(r);
        } else if (k_panels) {
            order.push_back(cv);
            out.reorder(order).unroll(tap);
        } else {
            out.split(r, tap, ci, shape.cin);
            order.insert(order.end(), {tap, ci, xi, cv});
            out.reorder(order).unroll(tap);
        }
        out.vectorize(cv).unroll(xi).cache_write(yi);
        // Reads away from the image's edge go without the zero-padding select and the clamps (a
        // gathered tile has none either), decided per tap and row of a tile: in a tile on the
        // edge, the taps that stay inside run clean too (on a 20 x 20 image, every tile touches
        // an edge; deciding per tile, it ran 1.4x longer). Depthwise sums are 9 taps of a few
        // vectors each: decided per tile.
        if (!gathered) out.specialize_interior(shape.depthwise ? (tiles ? tile : tx) : k_panels ? cii : ci);
        if (!tiles) out.parallel(channels_outside ? co : ty);
    }
    /** A GPU schedule over the active tiles (the CUDA backend; its emulators check it on any
     * machine): a block per (tile, block of `vector_channels` output channels), a thread per
     * (channel, pixel column), each summing its taps and input channels for every row of the
     * tile. A correct baseline for the GPU work (issue 36 makes GPU tiles fast), not tuned. */
    void schedule_gpu(const ActiveTiles &tiles, int64_t vector_channels = 32) {
        if (shape.cout % vector_channels != 0)
            throw CompileError("conv '" + out.name() + "': vector_channels " + std::to_string(vector_channels) +
                               " must divide the " + std::to_string(shape.cout) + " output channels");
        out.over_active_tiles(tiles, n, y, x, tile, yi, xi).split(c, co, cv, vector_channels);
        out.reorder({tile, co, yi, xi, cv}).gpu_blocks(co, tile).gpu_threads(cv, xi);
    }

    Dim tile{"tile"}, yi{"yi"}, xi{"xi"}, ty{"ty"}, tx{"tx"}, co{"co"}, cv{"cv"}, tap{"tap"}, ci{"ci"}, gtile{"gtile"},
        gyi{"gyi"}, gxi{"gxi"}, gco{"gco"}, gcv{"gcv"}, cio{"cio"}, cii{"cii"};
};

} // namespace cora::spatial
