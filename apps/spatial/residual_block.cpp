// spatial: a ResNet basic block (3x3 conv -> ReLU -> 3x3 conv + skip -> ReLU, NHWC, fp32) computed
// only where a run-time mask says the output matters, checked against the dense block and timed
// against cora's dense schedule of the same block, both modes of the positions outside:
//
//   fill  the block's output on the active tiles, zero elsewhere (e.g. a detector's region of
//         interest); checked against the dense output on the active tiles and zero elsewhere;
//   keep  incremental inference (SIGE): frame 0 was computed densely and its output cached; frame
//         1 changes the input inside the mask, and only the tiles within reach of a change (two
//         3x3 convolutions: 2 positions) are recomputed into the cached output, which must then
//         equal the dense output of frame 1 everywhere.
//
// The second convolution runs over the output's tiles; the first over the tiles within its halo
// (ActiveTiles::grown), so it computes only what the second reads. The masks come from a masks
// file (apps/spatial/masks.h; --write-masks writes the built-in ones as an example) or are
// generated: blob-shaped, at --density.
#include <cora/cora.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "common/cli.h"
#include "common/error_check.h"
#include "common/timing.h"
#include "spatial/conv_layer.h"
#include "spatial/masks.h"
#include "spatial/tile_table.h"

using namespace cora;
using cora::apps::CommandLine;
using cora::apps::UsageError;
using cora::spatial::ConvLayer;
using cora::spatial::ConvShape;

namespace {

/** What every variant of the block shares: the params, the mask and the input x. */
struct Inputs {
    Param N{"N", 1, 4096}, H{"H", 1, 16384}, W{"W", 1, 16384};
    Dim n{"n"}, y{"y"}, x{"x"}, c{"c"};
    ShapeTensor mask{"mask", {N, H, W}, 0, 1};
    Tensor in;
    explicit Inputs(int64_t channels) : in("x", {{n, N}, {y, H}, {x, W}, {c, channels}}) {}
};

/** One variant of the block: conv1 (with ReLU) and conv2 (+ x, ReLU), in one pipeline. */
struct Block {
    ConvLayer conv1, conv2;
    /** With `mid` and `out` (the tile lists each convolution runs over) and `gather`, each
     * convolution takes the gather -> dense -> scatter route over its list. */
    Block(const std::string &name, const Inputs &i, int64_t channels, const ActiveTiles *mid = nullptr,
          const ActiveTiles *out = nullptr, bool gather = false)
        : conv1(name + "1", i.in, i.N, i.H, i.W, ConvShape{channels, channels, 3, 1, false, true}, nullptr,
                gather ? mid : nullptr),
          conv2(name + "2", conv1.out, i.N, i.H, i.W, ConvShape{channels, channels, 3, 1, false, true}, &i.in,
                gather ? out : nullptr) {}
};

struct Options {
    std::string masks_file, write_masks, mode = "both", tile = "auto", tile_table, route = "direct";
    int64_t batch = 2, height = 64, width = 64, channels = 64, runs = 5, density_pct = 10;
};

double ms_best(int64_t runs, const std::function<void()> &f) {
    f();
    return cora::apps::best_seconds((int)runs, f) * 1e3;
}

int run(int argc, char **argv) {
    Options o;
    CommandLine cli("spatial", "A ResNet basic block (conv3x3 -> ReLU -> conv3x3 + skip -> ReLU) computed only on "
                               "the tiles a run-time mask marks, checked against the dense block and timed against "
                               "cora's dense schedule: 'fill' (zero outside) and 'keep' (incremental: recompute a "
                               "cached output where the input changed).");
    cli.text("--masks", &o.masks_file, "FILE", "masks file (format: apps/spatial/masks.h); default: generated blobs")
        .text("--write-masks", &o.write_masks, "FILE", "write the masks used to FILE in the masks file format")
        .text("--mode", &o.mode, "MODE", "fill, keep or both")
        .text("--route", &o.route, "ROUTE",
              "direct (each tile reads the dense input) or gather (each tile with its halo copied first)")
        .integer("--batch", &o.batch, 1, 64, "images (generated masks)")
        .integer("--height", &o.height, 1, 4096, "rows (generated masks)")
        .integer("--width", &o.width, 1, 4096, "columns (generated masks)")
        .integer("--density", &o.density_pct, 0, 100, "active positions in % (generated masks)")
        .integer("--channels", &o.channels, 8, 512, "channels in and out, a multiple of 8")
        .text("--tile", &o.tile, "N|auto", "tile rows and columns, or auto: chosen by the mask's density")
        .text("--tile-table", &o.tile_table, "FILE",
              "measured tile sizes for --tile auto (bench/results/spatial_tiles.txt); default: the built-in rule")
        .integer("--runs", &o.runs, 1, 1000, "timed runs (the best is reported)");
    if (!cli.parse(argc, argv)) return 0;
    if (o.mode != "fill" && o.mode != "keep" && o.mode != "both")
        throw UsageError("--mode must be fill, keep or both, got '" + o.mode + "'");
    if (o.route != "direct" && o.route != "gather")
        throw UsageError("--route must be direct or gather, got '" + o.route + "'");
    if (o.channels % 8 != 0) throw UsageError("--channels must be a multiple of 8, got " + std::to_string(o.channels));
    if (!o.masks_file.empty())
        for (const char *f : {"--batch", "--height", "--width", "--density"})
            if (cli.given(f)) throw UsageError(std::string(f) + " sets the generated masks; --masks gives them");
    cora::spatial::MaskSet masks;
    if (!o.masks_file.empty()) {
        try {
            masks = cora::spatial::read_masks(o.masks_file);
        } catch (const std::runtime_error &e) {
            throw UsageError(e.what());
        }
    } else {
        masks = cora::spatial::blob_mask(o.batch, o.height, o.width, (double)o.density_pct / 100.0, 7);
    }
    if (!o.write_masks.empty()) cora::spatial::write_masks(o.write_masks, masks);
    const int64_t C = o.channels, vec = C % 32 == 0 ? 32 : C % 16 == 0 ? 16 : 8;
    // The tile size: given, or chosen by the layer's shape and the mask's density from a measured
    // table (tile_table.h), else its rule.
    cora::spatial::TileSize tile;
    std::string tile_source = "given";
    if (o.tile == "auto") {
        cora::spatial::TileTable table;
        tile_source = "the built-in rule";
        if (!o.tile_table.empty()) {
            try {
                table = cora::spatial::TileTable::read(o.tile_table);
            } catch (const std::runtime_error &e) {
                throw UsageError(e.what());
            }
            const bool found = table.lookup(masks.h, masks.w, C, masks.density()).has_value();
            tile_source = found ? "the table " + o.tile_table : "the rule (no entry in " + o.tile_table + ")";
        }
        tile = table.choose(masks.h, masks.w, C, masks.density(), {{1, 8}, {2, 8}, {4, 8}, {8, 8}, {16, 8}, {4, 10}});
    } else {
        if (!o.tile_table.empty()) throw UsageError("--tile-table is for --tile auto");
        const int64_t t = CommandLine::parse_integer("--tile", o.tile, 1, 64);
        tile = {t, t};
    }
    std::printf("spatial: %lld image(s) of %lld x %lld, %lld channels, mask density %.3f, tiles %lld x %lld (%s)\n",
                (long long)masks.n, (long long)masks.h, (long long)masks.w, (long long)C, masks.density(),
                (long long)tile.h, (long long)tile.w, tile_source.c_str());

    // The sparse blocks: out over the tiles within 2 positions of a masked one (two 3x3
    // convolutions' reach: the positions whose value a change can alter), conv1 over those
    // within 1 of them. A 1x1-tile list is the mask itself.
    Inputs inputs(C);
    ActiveTiles changed = ActiveTiles::from_mask("changed", inputs.mask, 1, 1);
    ActiveTiles out_tiles = changed.grown("out_tiles", 2, tile.h, tile.w);
    ActiveTiles mid_tiles = out_tiles.grown("mid_tiles", 1, tile.h, tile.w);
    const bool gather = o.route == "gather";
    Block sparse_fill("fill", inputs, C, &mid_tiles, &out_tiles, gather),
        sparse_keep("keep", inputs, C, &mid_tiles, &out_tiles, gather), dense("dense", inputs, C);
    auto schedule = [&](Block &b, bool fill) {
        b.conv1.schedule_cpu(&mid_tiles, tile.h, tile.w, vec);
        b.conv2.schedule_cpu(&out_tiles, tile.h, tile.w, vec);
        if (fill) b.conv2.out.fill_inactive_tiles(Expr(0.0f)).vectorize(b.conv2.c);
        return out_tiles;
    };
    ActiveTiles fill_tiles = schedule(sparse_fill, true);
    schedule(sparse_keep, false);
    dense.conv1.schedule_cpu(nullptr, tile.h, tile.w, vec);
    dense.conv2.schedule_cpu(nullptr, tile.h, tile.w, vec);
    Kernel kfill = Pipeline({sparse_fill.conv2.out}, "block_fill").compile();
    Kernel kkeep = Pipeline({sparse_keep.conv2.out}, "block_keep").compile();
    Kernel kdense = Pipeline({dense.conv2.out}, "block_dense").compile();

    RaggedShape shape;
    shape.set(inputs.N, masks.n).set(inputs.H, masks.h).set(inputs.W, masks.w);
    shape.set(inputs.mask, masks.mask.data(), (int64_t)masks.mask.size());
    auto t0 = std::chrono::steady_clock::now();
    const size_t active = shape.active_tiles(fill_tiles).size();
    const double list_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int64_t all = shape.eval(fill_tiles.grid_tiles());

    Buffer x0 = Buffer::alloc(inputs.in, shape), w1 = Buffer::alloc(dense.conv1.weight, shape),
           b1 = Buffer::alloc(dense.conv1.bias, shape), w2 = Buffer::alloc(dense.conv2.weight, shape),
           b2 = Buffer::alloc(dense.conv2.bias, shape);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float scale = 1.0f / std::sqrt(9.0f * (float)C);
    for (int64_t i = 0; i < x0.size(); i++)
        x0.at(i) = u(rng);
    for (Buffer *w : {&w1, &w2})
        for (int64_t i = 0; i < w->size(); i++)
            w->at(i) = u(rng) * scale;
    for (Buffer *b : {&b1, &b2})
        for (int64_t i = 0; i < b->size(); i++)
            b->at(i) = 0.1f * u(rng);
    // Frame 1: frame 0 with new values where the mask is set.
    Buffer x1 = Buffer::alloc(inputs.in, shape);
    for (int64_t p = 0; p < masks.n * masks.h * masks.w; p++)
        for (int64_t ch = 0; ch < C; ch++)
            x1.at(p * C + ch) = masks.mask[(size_t)p] ? u(rng) : x0.at(p * C + ch);

    auto bind = [&](Block &b, Buffer &x, Buffer &out) {
        return std::vector<Binding>{{inputs.in, x},       {b.conv1.weight, w1}, {b.conv1.bias, b1},
                                    {b.conv2.weight, w2}, {b.conv2.bias, b2},   {b.conv2.out, out}};
    };
    Buffer dense0 = Buffer::alloc(dense.conv2.out, shape), dense1 = Buffer::alloc(dense.conv2.out, shape);
    kdense.run(shape, bind(dense, x0, dense0));
    const double dense_ms = ms_best(o.runs, [&] { kdense.run(shape, bind(dense, x1, dense1)); });
    std::printf("mask -> tile lists: %.3f ms; %zu of %lld output tiles active (%.0f%%)\n", list_ms, active,
                (long long)all, 100.0 * (double)active / (double)std::max<int64_t>(all, 1));
    std::printf("dense block (cora):   %9.3f ms\n", dense_ms);
    bool ok = true;
    auto report = [&](const char *what, double ms, const cora::apps::ErrorCheck &check) {
        const bool pass = check.abs_within(1e-4 * std::max(1.0, check.scale()));
        std::printf("%-21s %9.3f ms  %.2fx dense; max |diff| %.2g over %lld values: %s%s\n", what, ms, dense_ms / ms,
                    check.max_abs(), (long long)check.count(), pass ? "PASS" : "FAIL", check.non_finite_note().c_str());
        ok = ok && pass;
    };
    if (o.mode != "keep") {
        Buffer out = Buffer::alloc(sparse_fill.conv2.out, shape);
        const double ms = ms_best(o.runs, [&] { kfill.run(shape, bind(sparse_fill, x1, out)); });
        // Active tiles: the dense output; elsewhere zero.
        std::vector<uint8_t> on((size_t)(masks.n * masks.h * masks.w), 0);
        for (const auto &t : shape.active_tiles(fill_tiles))
            for (int64_t yy = t[1] * tile.h; yy < std::min<int64_t>(masks.h, (t[1] + 1) * tile.h); yy++)
                for (int64_t xx = t[2] * tile.w; xx < std::min<int64_t>(masks.w, (t[2] + 1) * tile.w); xx++)
                    on[(size_t)((t[0] * masks.h + yy) * masks.w + xx)] = 1;
        cora::apps::ErrorCheck check;
        for (int64_t p = 0; p < (int64_t)on.size(); p++)
            for (int64_t ch = 0; ch < C; ch++)
                check.add(out.at(p * C + ch), on[(size_t)p] ? dense1.at(p * C + ch) : 0.0);
        report("sparse block (fill):", ms, check);
    }
    if (o.mode != "fill") {
        // Incremental: start each run from frame 0's cached output.
        Buffer cache = Buffer::alloc(sparse_keep.conv2.out, shape);
        auto restore = [&] {
            std::copy(dense0.data<float>(), dense0.data<float>() + dense0.size(), cache.data<float>());
        };
        double ms = 1e30;
        for (int64_t r = 0; r <= o.runs; r++) {
            restore();
            auto s = std::chrono::steady_clock::now();
            kkeep.run(shape, bind(sparse_keep, x1, cache));
            if (r > 0)
                ms = std::min(ms,
                              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
        }
        cora::apps::ErrorCheck check;
        for (int64_t i = 0; i < cache.size(); i++)
            check.add(cache.at(i), dense1.at(i));
        report("sparse block (keep):", ms, check);
    }
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("spatial", [&] { return run(argc, argv); });
}
