// Active-tile lists (cora/Spatial.h, src/formats/spatial/): each list built by the prelude's native
// builders equals the IR builders' (the definitions AOT kernels compile) and a definition written
// here, from masks, coordinates, tile origins and grown lists; bad coordinates and origins are
// RuntimeErrors naming the row (the same message on both paths), and nothing is written; kernels
// that build the lists themselves (build_aux_in_kernel, as AOT libraries do) agree.
#include "common/ragged_testing.h"
#include "common/spatial_testing.h"

#include "analysis/AuxKind.h"
#include "ir/Schedule.h"
#include "runtime/RaggedShapeImpl.h"

using namespace cora;
using namespace cora::ir;
using namespace cora::testing;

namespace {

/** The array of `fn` built by its kind's IR builder in the interpreter (its inputs from `shape`). */
std::vector<int64_t> build_by_ir(const RaggedShape &shape, const std::shared_ptr<const UFNode> &fn) {
    const auto &impl = shape_impl(shape);
    impl->validate_counts();
    AuxTable table;
    Interpreter in = impl->interpreter();
    std::vector<int64_t> out((size_t)in.eval_int(flatten_layout(table, fn->aux->layout).size), -99);
    VarPtr buffer = make_var(fn->name, VarRole::Buffer, Int64);
    in.int_buffers[buffer.get()] = &out;
    in.exec(aux_kind(*fn->aux).build(AuxArray{fn, fn->name, buffer}, table));
    return out;
}

/** The list's three arrays agree between the native and IR builds, and with `bitmap`. */
void require_list(const RaggedShape &shape, const ActiveTiles &tiles, const std::vector<uint8_t> &bitmap) {
    const TileList &l = *tiles.node();
    const auto &impl = shape_impl(shape);
    for (const auto &fn : {l.bitmap, l.order, l.count}) {
        INFO("array " << fn->name);
        REQUIRE(impl->aux_array(fn.get()) == build_by_ir(shape, fn));
    }
    std::vector<int64_t> want_bitmap(bitmap.begin(), bitmap.end());
    REQUIRE(impl->aux_array(l.bitmap.get()) == want_bitmap);
    // The order: the active tiles row-major, then the others; the count.
    const int64_t tr = shape.eval(Expr((l.rows + (l.tile_h - 1)) / l.tile_h)),
                  tc = shape.eval(Expr((l.cols + (l.tile_w - 1)) / l.tile_w));
    std::vector<int64_t> order;
    int64_t count = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (size_t g = 0; g < bitmap.size(); g++)
            if ((bitmap[g] != 0) == (pass == 1)) {
                order.insert(order.end(), {(int64_t)g / (tr * tc), (int64_t)g / tc % tr, (int64_t)g % tc});
                count += pass;
            }
    REQUIRE(impl->aux_array(l.order.get()) == order);
    REQUIRE(impl->aux_array(l.count.get()) == std::vector<int64_t>{count});
    REQUIRE(shape.active_tiles(tiles).size() == (size_t)count);
}

struct ListProgram {
    Param N{"N", 1, 8}, H{"H", 1, 256}, W{"W", 1, 256}, K{"K", 0, 100000};
    ShapeTensor mask{"mask", {N, H, W}, 0, 1};
    ShapeTensor coords{"coords", {K, 3}, INT32_MIN, INT32_MAX};
    ShapeTensor origins{"origins", {K, 3}, INT32_MIN, INT32_MAX};
};

} // namespace

TEST_CASE("tile lists from masks, coordinates, origins and halos: native and IR builds agree with the definition",
          "[spatial][tiles]") {
    ListProgram p;
    uint32_t seed = 7;
    for (const MaskCase &mc : mask_cases(seed))
        for (auto [th, tw, stride] : std::vector<std::array<int64_t, 3>>{{8, 8, 1}, {3, 5, 1}, {4, 4, 2}, {1, 1, 1}}) {
            INFO(mc.describe() << ", tiles " << th << "x" << tw << ", stride " << stride);
            const int64_t oh = (mc.h + stride - 1) / stride, ow = (mc.w + stride - 1) / stride;
            RaggedShape shape;
            shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
            ActiveTiles from_mask = ActiveTiles::from_mask("m", p.mask, th, tw, stride);
            std::vector<uint8_t> bitmap = tile_bitmap(mc, th, tw, stride);
            require_list(shape, from_mask, bitmap);
            // Grown by halos 1 and 5 into tiles of another size.
            for (auto [halo, gh, gw] : std::vector<std::array<int64_t, 3>>{{1, th, tw}, {5, 4, 8}}) {
                INFO("grown by " << halo << " into " << gh << "x" << gw);
                ActiveTiles grown = from_mask.grown("g", halo, gh, gw);
                std::vector<uint8_t> positions = positions_of(bitmap, mc.n, oh, ow, th, tw);
                require_list(shape, grown, grown_bitmap(positions, mc.n, oh, ow, halo, gh, gw));
            }
            if (stride != 1) continue;
            // The same positions as coordinates (batch, y, x), and the mask's tiles as origins.
            std::vector<int32_t> coords, origins;
            for (int64_t b = 0; b < mc.n; b++)
                for (int64_t y = 0; y < mc.h; y++)
                    for (int64_t x = 0; x < mc.w; x++)
                        if (mc.mask[(size_t)((b * mc.h + y) * mc.w + x)])
                            coords.insert(coords.end(), {(int32_t)b, (int32_t)y, (int32_t)x});
            const int64_t tr = (mc.h + th - 1) / th, tc = (mc.w + tw - 1) / tw;
            for (size_t g = 0; g < bitmap.size(); g++)
                if (bitmap[g])
                    origins.insert(origins.end(),
                                   {(int32_t)(g / (tr * tc)), (int32_t)(g / tc % tr * th), (int32_t)(g % tc * tw)});
            RaggedShape cs, os;
            cs.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.K, (int64_t)coords.size() / 3).set(p.coords, coords);
            os.set(p.N, mc.n)
                .set(p.H, mc.h)
                .set(p.W, mc.w)
                .set(p.K, (int64_t)origins.size() / 3)
                .set(p.origins, origins);
            require_list(cs, ActiveTiles::from_coordinates("c", p.coords, p.N, p.H, p.W, th, tw), bitmap);
            require_list(os, ActiveTiles::from_tile_origins("o", p.origins, p.N, p.H, p.W, th, tw), bitmap);
        }
}

TEST_CASE("bad coordinates and tile origins are errors naming the row, the same on both paths", "[spatial][errors]") {
    ListProgram p;
    ActiveTiles by_coords = ActiveTiles::from_coordinates("c", p.coords, p.N, p.H, p.W, 4, 4);
    ActiveTiles by_origins = ActiveTiles::from_tile_origins("o", p.origins, p.N, p.H, p.W, 4, 4);
    auto expect = [&](const ShapeTensor &t, const ActiveTiles &tiles, std::vector<int32_t> rows,
                      const std::string &message) {
        INFO(message);
        RaggedShape shape;
        shape.set(p.N, 2).set(p.H, 10).set(p.W, 9).set(p.K, (int64_t)rows.size() / 3).set(t, rows);
        REQUIRE_THROWS_WITH(build_by_ir(shape, tiles.node()->bitmap), message);
        REQUIRE_THROWS_WITH(shape.active_tiles(tiles), Catch::Matchers::StartsWith(message));
    };
    expect(p.coords, by_coords, {0, 1, 1, 2, 0, 0}, "coordinates 'coords': row 1 has batch index 2, outside [0, 2)");
    expect(p.coords, by_coords, {1, -1, 0}, "coordinates 'coords': row 0 has y -1, outside [0, 10)");
    expect(p.coords, by_coords, {1, 3, 9}, "coordinates 'coords': row 0 has x 9, outside [0, 9)");
    expect(p.coords, by_coords, {1, 3, 4, 0, 0, 0, 1, 3, 4},
           "coordinates 'coords': row 2 repeats the position (1, 3, 4)");
    expect(p.origins, by_origins, {0, 4, 5},
           "tile origins 'origins': row 0 has x0 5, not on the tile grid (a multiple of 4)");
    expect(p.origins, by_origins, {0, 2, 4},
           "tile origins 'origins': row 0 has y0 2, not on the tile grid (a multiple of 4)");
    expect(p.origins, by_origins, {0, 8, 8, 0, 8, 8}, "tile origins 'origins': row 1 repeats the tile at (0, 8, 8)");
    expect(p.origins, by_origins, {0, 12, 0}, "tile origins 'origins': row 0 has y 12, outside [0, 10)");

    // Nothing written: a kernel over the tiles of bad coordinates stops before its first store.
    Dim n("n"), y("y"), x("x"), tile("tile"), yi("yi"), xi("xi");
    Tensor X("X", {{n, p.N}, {y, p.H}, {x, p.W}});
    Func out("out", {{n, p.N}, {y, p.H}, {x, p.W}});
    out.compute([&](Expr a, Expr b, Expr c) { return X(a, b, c) + 1.0f; });
    out.over_active_tiles(by_coords, n, y, x, tile, yi, xi);
    out.fill_inactive_tiles(Expr(0.0f));
    for (bool in_kernel : {false, true}) {
        CompileOptions opts;
        opts.build_aux_in_kernel = in_kernel;
        Kernel k = Pipeline({out}, "over_coordinates").compile(opts);
        RaggedShape shape;
        shape.set(p.N, 2).set(p.H, 10).set(p.W, 9).set(p.K, 2).set(p.coords, std::vector<int32_t>{1, 3, 4, 1, 3, 4});
        Buffer bx = Buffer::alloc(X, shape), bo = Buffer::alloc(out, shape);
        for (int64_t i = 0; i < bo.size(); i++)
            bo.at(i) = 5.0f;
        REQUIRE_THROWS_WITH(k.run(shape, {{X, bx}, {out, bo}}),
                            Catch::Matchers::Contains("coordinates 'coords': row 1 repeats the position (1, 3, 4)"));
        for (int64_t i = 0; i < bo.size(); i++)
            REQUIRE(bo.at(i) == 5.0f);
    }
}

TEST_CASE("kernels that build their tile lists themselves agree with the prelude's", "[spatial][aot]") {
    ListProgram p;
    Dim n("n"), y("y"), x("x"), c("c"), tile("tile"), yi("yi"), xi("xi");
    Tensor X("X", {{n, p.N}, {y, p.H}, {x, p.W}, {c, 2}});
    uint32_t seed = 70;
    for (int source = 0; source < 3; source++) {
        Func out("out", {{n, p.N}, {y, p.H}, {x, p.W}, {c, 2}});
        out.compute([&](Expr a, Expr b, Expr d, Expr e) { return X(a, b, d, e) * 3.0f; });
        ActiveTiles base = source == 0   ? ActiveTiles::from_mask("m", p.mask, 4, 8)
                           : source == 1 ? ActiveTiles::from_coordinates("c", p.coords, p.N, p.H, p.W, 4, 8)
                                         : ActiveTiles::from_mask("m", p.mask, 1, 1).grown("g", 2, 4, 8);
        out.over_active_tiles(base, n, y, x, tile, yi, xi);
        out.fill_inactive_tiles(Expr(-1.0f));
        CompileOptions in_kernel;
        in_kernel.build_aux_in_kernel = true;
        Pipeline pipeline({out}, "tiles_in_kernel");
        Kernel prelude_built = pipeline.compile(), kernel_built = pipeline.compile(in_kernel);
        for (const MaskCase &mc : mask_cases(seed++)) {
            INFO("source " << source << ", " << mc.describe());
            RaggedShape shape;
            shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
            std::vector<int32_t> coords;
            for (int64_t i = 0; i < (int64_t)mc.mask.size(); i++)
                if (mc.mask[(size_t)i])
                    coords.insert(coords.end(),
                                  {(int32_t)(i / (mc.h * mc.w)), (int32_t)(i / mc.w % mc.h), (int32_t)(i % mc.w)});
            shape.set(p.K, (int64_t)coords.size() / 3).set(p.coords, coords);
            Buffer bx = Buffer::alloc(X, shape);
            fill_random(bx, seed);
            Buffer a = Buffer::alloc(out, shape), b = Buffer::alloc(out, shape);
            prelude_built.run(shape, {{X, bx}, {out, a}});
            kernel_built.run(shape, {{X, bx}, {out, b}});
            for (int64_t i = 0; i < a.size(); i++)
                REQUIRE(a.at(i) == b.at(i));
        }
    }
}
