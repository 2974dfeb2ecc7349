// Mistakes in spatial-sparsity programs are CompileErrors naming the list, the Func and the loop:
// ActiveTiles' arguments, over_active_tiles and fill_inactive_tiles in the wrong place, and a Func
// tiled over a list made for other positions.
#include <catch2/catch.hpp>

#include "cora/cora.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

struct Program {
    Param N{"N", 1, 8}, H{"H", 1, 256}, W{"W", 1, 256}, W2{"W2", 1, 256}, K{"K", 0, 100};
    Dim n{"n"}, y{"y"}, x{"x"}, c{"c"}, k{"k"}, tile{"tile"}, yi{"yi"}, xi{"xi"};
    ShapeTensor mask{"mask", {N, H, W}, 0, 1};
    Tensor X{"X", {{n, N}, {y, H}, {x, W}, {c, 4}}};
    ActiveTiles tiles = ActiveTiles::from_mask("tiles", mask, 8, 8);
};

} // namespace

TEST_CASE("bad ActiveTiles arguments are CompileErrors naming them", "[spatial][errors]") {
    Program p;
    ShapeTensor flat("flat", {p.H, p.W}, 0, 1), signed_mask("signed", {p.N, p.H, p.W}, -1, 1);
    ShapeTensor pairs("pairs", {p.K, 2}, 0, 255);
    REQUIRE_THROWS_AS(ActiveTiles::from_mask("t", flat, 8, 8), CompileError);
    REQUIRE_THROWS_WITH(ActiveTiles::from_mask("t", flat, 8, 8),
                        "ActiveTiles 't': mask 'flat' must have dims [N, H, W], got 2 dims");
    REQUIRE_THROWS_WITH(ActiveTiles::from_mask("t", signed_mask, 8, 8),
                        "ActiveTiles 't': mask 'signed' allows negative values (range [-1, 1]); declare it [0, 1]");
    REQUIRE_THROWS_WITH(ActiveTiles::from_mask("t", p.mask, 0, 8),
                        "ActiveTiles 't': the tile size 0 x 8 must be positive");
    REQUIRE_THROWS_WITH(ActiveTiles::from_mask("t", p.mask, 8, 8, 0), "ActiveTiles 't': the stride 0 must be positive");
    REQUIRE_THROWS_WITH(ActiveTiles::from_mask("", p.mask, 8, 8), "ActiveTiles needs a non-empty name");
    REQUIRE_THROWS_WITH(ActiveTiles::from_coordinates("t", pairs, p.N, p.H, p.W, 8, 8),
                        "ActiveTiles 't': coordinates 'pairs' must have dims [K, 3] (batch index, y, x per row), got 2 "
                        "dims with 2 fields");
    REQUIRE_THROWS_WITH(ActiveTiles::from_tile_origins("t", p.mask, p.N, p.H, p.W, 8, 8),
                        "ActiveTiles 't': tile origins 'mask' must have dims [K, 3] (batch index, y, x per row), got 3 "
                        "dims");
    REQUIRE_THROWS_WITH(p.tiles.grown("g", -1, 8, 8), "ActiveTiles 'g': the halo -1 must not be negative");
    REQUIRE_THROWS_WITH(p.tiles.gathered("g", 2000), "ActiveTiles 'g': the halo 2000 must be in [0, 1024]");
}

TEST_CASE("over_active_tiles and fill_inactive_tiles in the wrong place are CompileErrors", "[spatial][errors]") {
    Program p;
    Func f("f", {{p.n, p.N}, {p.y, p.H}, {p.x, p.W}, {p.c, 4}});
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.xi),
                        "over_active_tiles of 'tiles' in Func 'f': define it (compute()) before scheduling it over "
                        "tiles");
    f.compute([&](Expr a, Expr b, Expr d, Expr e) { return p.X(a, b, d, e) * 2.0f; });
    REQUIRE_THROWS_WITH(f.fill_inactive_tiles(Expr(0.0f)),
                        "fill_inactive_tiles of Func 'f': schedule it with over_active_tiles() first");
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.y, p.tile, p.yi, p.xi),
                        "over_active_tiles of 'tiles' in Func 'f': 'y' is named twice");
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.k, p.tile, p.yi, p.xi),
                        Contains("over_active_tiles of 'tiles' in Func 'f': 'k' is not a loop of this Func"));
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.c, p.xi),
                        "over_active_tiles of 'tiles' in Func 'f': dim 'c' already names a loop of this Func");
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.yi),
                        "over_active_tiles of 'tiles' in Func 'f': 'yi' is named twice");
    f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.xi);
    REQUIRE_THROWS_WITH(f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.xi),
                        "over_active_tiles of 'tiles' in Func 'f': it already runs over a tile list");
    // The tiled loops are gone; the error says where they went.
    Dim yo("yo"), yj("yj");
    REQUIRE_THROWS_WITH(f.split(p.y, yo, yj, 2),
                        "split of 'y' in Func 'f': not a loop of this Func: 'y' runs over the tiles of 'tiles': its "
                        "loop is now 'yi'");
    REQUIRE_THROWS_WITH(f.fill_inactive_tiles(cast(Float32, p.k) + 1.0f),
                        "fill_inactive_tiles of Func 'f': the value (float32(k) + 1f) uses 'k', which is not a dim of "
                        "this Func");
    f.fill_inactive_tiles(Expr(0.0f));
    REQUIRE_THROWS_WITH(f.fill_inactive_tiles(Expr(1.0f)),
                        "fill_inactive_tiles of Func 'f': the inactive tiles already get a value");

    // A reduction loop cannot run over tiles.
    Func s("s", {{p.n, p.N}, {p.y, p.H}, {p.x, p.W}});
    s.compute([&](Expr a, Expr b, Expr d) { return sum(p.k, 4, p.X(a, b, d, p.k)); });
    REQUIRE_THROWS_WITH(s.over_active_tiles(p.tiles, p.n, p.y, p.k, p.tile, p.yi, p.xi),
                        Contains("over_active_tiles of 'k' in Func 's': it is a reduction loop"));
}

TEST_CASE("a Func tiled over a list made for other positions is a CompileError naming the extents",
          "[spatial][errors]") {
    Program p;
    Func f("f", {{p.n, p.N}, {p.y, p.H}, {p.x, p.W2}});
    f.compute([&](Expr a, Expr b, Expr d) { return cast(Float32, a + b + d); });
    f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.xi);
    REQUIRE_THROWS_AS(Pipeline({f}).compile(), CompileError);
    REQUIRE_THROWS_WITH(Pipeline({f}).compile(),
                        Contains("over_active_tiles of 'tiles' in Func 'f': loop 'x' has extent W2, but the tiles' "
                                 "grid has W cols; tile a Func over the positions the list was made for"));
}

TEST_CASE("a tile list passed through the raw entry is checked against the mask, and nothing is written on a mismatch",
          "[spatial][errors]") {
    // The kernel indexes memory with the order's entries: a caller's corrupted list (an entry out of
    // the grid, a tile that is not active, a wrong count) is found by rebuilding it from the mask.
    Program p;
    Func f("f", {{p.n, p.N}, {p.y, p.H}, {p.x, p.W}, {p.c, 4}});
    f.compute([&](Expr a, Expr b, Expr d, Expr e) { return p.X(a, b, d, e) + 1.0f; });
    f.over_active_tiles(p.tiles, p.n, p.y, p.x, p.tile, p.yi, p.xi);
    Kernel k = Pipeline({f}, "checked_lists").compile();
    RaggedShape shape;
    std::vector<int32_t> mask(2 * 20 * 17, 0);
    mask[5] = mask[20 * 17 + 200] = 1;
    shape.set(p.N, 2).set(p.H, 20).set(p.W, 17).set(p.mask, mask);
    Buffer x = Buffer::alloc(p.X, shape), out = Buffer::alloc(f, shape);
    for (int64_t i = 0; i < out.size(); i++)
        out.at(i) = 9.0f;
    for (const char *name : {"tiles_order", "tiles_count"})
        for (int64_t delta : {1, 100, -1}) {
            INFO(name << " entry changed by " << delta);
            std::vector<cora_arg_t> args = k.make_args(shape, {{p.X, x}, {f, out}});
            std::vector<int64_t> tampered;
            for (cora_arg_t &a : args)
                if (std::string(a.name) == name) {
                    tampered.assign((int64_t *)a.data, (int64_t *)a.data + a.count);
                    tampered[0] += delta;
                    a.data = tampered.data();
                }
            REQUIRE(!tampered.empty());
            std::string error;
            REQUIRE(k.run_raw(args, &error) != CORA_OK);
            REQUIRE_THAT(error, Catch::Matchers::StartsWith(std::string("aux array '") + name + "': entry 0 is " +
                                                            std::to_string(tampered[0]) + ", expected " +
                                                            std::to_string(tampered[0] - delta)));
            for (int64_t i = 0; i < out.size(); i++)
                REQUIRE(out.at(i) == 9.0f);
        }
}
