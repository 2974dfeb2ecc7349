// Kernels over active-tile lists (cora/Spatial.h) against dense references: which positions are
// computed (exactly those of the active tiles, with the halo or stride the list was made with),
// what the others hold (kept, or the fill value), on random and edge-case masks.
#include "common/ragged_testing.h"
#include "common/spatial_testing.h"

#include "spatial/conv_layer.h"

using namespace cora;
using namespace cora::testing;

namespace {

struct ScaleProgram {
    Dim n{"n"}, y{"y"}, x{"x"}, c{"c"}, tile{"tile"}, yi{"yi"}, xi{"xi"};
    Param N{"N", 1, 8}, H{"H", 1, 256}, W{"W", 1, 256};
    ShapeTensor mask{"mask", {N, H, W}, 0, 1};
    Tensor X{"X", {{n, N}, {y, H}, {x, W}, {c, 3}}};
    Func out{"out", {{n, N}, {y, H}, {x, W}, {c, 3}}};
    ScaleProgram(int64_t th, int64_t tw, bool fill) {
        out.compute([&](Expr n_, Expr y_, Expr x_, Expr c_) { return X(n_, y_, x_, c_) * 2.0f + 1.0f; });
        ActiveTiles tiles = ActiveTiles::from_mask("tiles", mask, th, tw);
        out.over_active_tiles(tiles, n, y, x, tile, yi, xi);
        if (fill) out.fill_inactive_tiles(Expr(0.0f));
    }
};

} // namespace

TEST_CASE("an elementwise Func over active tiles writes exactly the active tiles", "[spatial]") {
    uint32_t seed = 1;
    for (auto [th, tw] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {4, 16}, {1, 1}, {5, 3}})
        for (bool fill : {false, true}) {
            ScaleProgram p(th, tw, fill);
            Pipeline pipeline({p.out}, "scale_tiles");
            Kernel k = pipeline.compile();
            for (MaskCase mc : mask_cases(seed++)) {
                INFO(mc.describe() << ", tiles " << th << "x" << tw << (fill ? ", fill 0" : ", keep"));
                RaggedShape shape;
                shape.set(p.N, mc.n).set(p.H, mc.h).set(p.W, mc.w).set(p.mask, mc.mask);
                Buffer x = Buffer::alloc(p.X, shape), out = Buffer::alloc(p.out, shape);
                fill_random(x, seed++);
                for (int64_t i = 0; i < out.size(); i++)
                    out.at(i) = -7.0f;
                k.run(shape, {{p.X, x}, {p.out, out}});
                std::vector<uint8_t> active = active_positions(mc, th, tw, 1);
                int64_t bad = -1;
                for (int64_t pos = 0; pos < mc.n * mc.h * mc.w && bad < 0; pos++)
                    for (int64_t c = 0; c < 3; c++) {
                        float want = active[(size_t)pos] ? x.at(pos * 3 + c) * 2.0f + 1.0f : (fill ? 0.0f : -7.0f);
                        if (out.at(pos * 3 + c) != want) bad = pos;
                    }
                INFO("first wrong position " << bad);
                REQUIRE(bad < 0);
            }
        }
}
