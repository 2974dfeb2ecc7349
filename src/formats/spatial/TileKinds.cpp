/** \file The active-tile kinds (TileKinds.h). The IR builds are the definitions; the native host
 * builds do the same work in the same order with the same messages (tests/unit/spatial_tiles.cpp
 * runs both on the same inputs). Costs: a mask build reads each mask element once (the native
 * one tests each tile's span of a mask row as one block, so a row costs about W / 8 word
 * operations when the mask is mostly zero or mostly one); the others are linear in the tiles or in
 * the listed entries. */
#include "formats/spatial/TileKinds.h"

#include <algorithm>
#include <cstring>

#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

Expr I(int64_t v) { return IntImm::make(v); }
Expr V(const VarPtr &v) { return var_expr(v); }
Stmt loop(const VarPtr &v, const Expr &extent, Stmt body) {
    return For::make(v, I(0), extent, ForKind::Serial, std::move(body));
}
Stmt loop_from(const VarPtr &v, const Expr &first, const Expr &last, Stmt body) {
    return For::make(v, first, Add::make(Sub::make(last, first), I(1)), ForKind::Serial, std::move(body));
}
VarPtr index_var(const char *name) { return make_var(name, VarRole::Index); }

/** The flat index of tile (n, ty, tx) of `g`. */
Expr tile_index(const TileGrid &g, const Expr &n, const Expr &ty, const Expr &tx) {
    return Add::make(Mul::make(Add::make(Mul::make(n, g.tile_rows()), ty), g.tile_cols()), tx);
}

/** Loops over every tile (n, ty, tx) of `g`, row-major. */
Stmt for_each_tile(const TileGrid &g, const std::function<Stmt(Expr, Expr, Expr)> &body) {
    VarPtr n = index_var("tile_n"), ty = index_var("tile_y"), tx = index_var("tile_x");
    return loop(n, g.batch, loop(ty, g.tile_rows(), loop(tx, g.tile_cols(), body(V(n), V(ty), V(tx)))));
}

/** Grid sizes evaluated on the host. */
struct HostGrid {
    int64_t batch, rows, cols, th, tw, tr, tc;
    HostGrid(const TileGrid &g, const HostAuxInputs &in)
        : batch(in.eval(g.batch)), rows(in.eval(g.rows)), cols(in.eval(g.cols)), th(g.tile_h), tw(g.tile_w),
          tr((rows + th - 1) / th), tc((cols + tw - 1) / tw) {}
    int64_t index(int64_t n, int64_t ty, int64_t tx) const { return (n * tr + ty) * tc + tx; }
    int64_t tiles() const { return batch * tr * tc; }
};

/** What every tile kind shares: its grid, its flat size, the check by rebuilding. */
class TileKind : public AuxKind {
public:
    explicit TileKind(TileGrid grid) : grid_(std::move(grid)) {}

    /** A passed array is built again into scratch memory and compared entry by entry. */
    Stmt check(const AuxArray &a, AuxTable &table) const override {
        VarPtr scratch = make_var(a.name + "_expected", VarRole::Buffer, Int64);
        VarPtr s = index_var("s");
        Expr got = Load::make(a.buffer, V(s)), want = Load::make(scratch, V(s));
        Stmt compare =
            loop(s, size(),
                 Assert::make(EQ::make(got, want), {"aux array '" + a.name + "': entry ", " is ", ", expected ", ""},
                              {V(s), got, want}));
        return Allocate::make(scratch, size(), Block::make({build(AuxArray{a.fn, a.name, scratch}, table), compare}));
    }

protected:
    virtual Expr size() const = 0;
    AuxInputs grid_inputs() const { return AuxInputs{{grid_.batch, grid_.rows, grid_.cols}, {}, {}}; }
    TileGrid grid_;
};

/** What the bitmap kinds share: one 0/1 entry per tile of the grid. */
class BitmapKind : public TileKind {
public:
    using TileKind::TileKind;
    std::vector<Expr> facts(const UFCall &, const Expr &value) const override {
        return {GE::make(value, I(0)), LE::make(value, I(1))};
    }

protected:
    Expr size() const override { return grid_.tiles(); }
};

/** Zeroes the bitmap `b`. */
Stmt clear(const TileGrid &g, const VarPtr &b) {
    VarPtr t = index_var("t");
    return loop(t, g.tiles(), Store::make(b, V(t), I(0)));
}

class BitmapFromMask : public BitmapKind {
public:
    BitmapFromMask(std::shared_ptr<const UFNode> mask, TileGrid grid, int64_t stride)
        : BitmapKind(std::move(grid)), mask_(std::move(mask)), stride_(stride) {}
    const char *name() const override { return "active-tile bitmap (from a mask)"; }
    AuxInputs inputs() const override { return AuxInputs{{mask_->dims}, {}, {mask_}}; }
    Stmt build(const AuxArray &a, AuxTable &) const override {
        VarPtr n = index_var("mask_n"), y = index_var("mask_y"), x = index_var("mask_x");
        Expr active = NE::make(UFCall::make(mask_, {V(n), V(y), V(x)}), I(0));
        Expr tile = tile_index(grid_, V(n), Div::make(V(y), I(stride_ * grid_.tile_h)),
                               Div::make(V(x), I(stride_ * grid_.tile_w)));
        Stmt scan = loop(n, mask_->dims[0],
                         loop(y, mask_->dims[1],
                              loop(x, mask_->dims[2], IfThenElse::make(active, Store::make(a.buffer, tile, I(1))))));
        return Block::make({clear(grid_, a.buffer), scan});
    }

    bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const override {
        HostGrid g(grid_, in);
        const std::vector<int32_t> &m = in.shape_tensor(mask_.get());
        const int64_t mh = in.eval(mask_->dims[1]), mw = in.eval(mask_->dims[2]);
        CORA_CHECK((int64_t)m.size() == g.batch * mh * mw && (int64_t)out.size() == g.tiles(), "tile bitmap sizes");
        std::fill(out.begin(), out.end(), 0);
        const int64_t span_y = stride_ * g.th, span_x = stride_ * g.tw;
        // Per row of tiles: the OR of its mask rows, element by element (a loop the compiler
        // vectorises over the whole width), then the OR of each tile's span of that row. A
        // 160 x 160 mask in 2 x 8 tiles took twice as long as a loop over each row's spans.
        std::vector<int32_t> rows_or((size_t)mw);
        for (int64_t n = 0; n < g.batch; n++)
            for (int64_t y0 = 0; y0 < mh; y0 += span_y) {
                const int32_t *first = m.data() + (n * mh + y0) * mw;
                std::copy(first, first + mw, rows_or.begin());
                for (int64_t y = y0 + 1; y < std::min(mh, y0 + span_y); y++) {
                    const int32_t *row = m.data() + (n * mh + y) * mw;
                    for (int64_t x = 0; x < mw; x++)
                        rows_or[(size_t)x] |= row[x];
                }
                int64_t *tiles = out.data() + g.index(n, y0 / span_y, 0);
                for (int64_t tx = 0, x0 = 0; x0 < mw; tx++, x0 += span_x) {
                    const int64_t x1 = std::min(mw, x0 + span_x);
                    int32_t any = 0;
                    for (int64_t x = x0; x < x1; x++)
                        any |= rows_or[(size_t)x];
                    tiles[tx] = any != 0;
                }
            }
        return true;
    }

private:
    std::shared_ptr<const UFNode> mask_;
    int64_t stride_;
};

/** Coordinates and origins: K rows (batch, y, x), checked row by row. */
class BitmapFromList : public BitmapKind {
public:
    BitmapFromList(std::shared_ptr<const UFNode> list, TileGrid grid, bool origins)
        : BitmapKind(std::move(grid)), list_(std::move(list)), origins_(origins) {}
    const char *name() const override {
        return origins_ ? "active-tile bitmap (from tile origins)" : "active-tile bitmap (from coordinates)";
    }
    AuxInputs inputs() const override {
        AuxInputs in = grid_inputs();
        in.exprs.push_back(list_->dims[0]);
        in.tensors.push_back(list_);
        return in;
    }
    Stmt build(const AuxArray &a, AuxTable &) const override {
        const std::string what = std::string(origins_ ? "tile origins '" : "coordinates '") + list_->name + "': row ";
        VarPtr k = index_var("row");
        VarPtr b = make_var("entry_b", VarRole::Local), y = make_var("entry_y", VarRole::Local),
               x = make_var("entry_x", VarRole::Local);
        auto in_range = [&](const VarPtr &v, const Expr &extent, const char *field) {
            return Assert::make(And::make(GE::make(V(v), I(0)), LT::make(V(v), extent)),
                                {what, std::string(" has ") + field + " ", ", outside [0, ", ")"},
                                {V(k), V(v), extent});
        };
        std::vector<Stmt> body{in_range(b, grid_.batch, "batch index"), in_range(y, grid_.rows, "y"),
                               in_range(x, grid_.cols, "x")};
        Expr tile = tile_index(grid_, V(b), Div::make(V(y), I(grid_.tile_h)), Div::make(V(x), I(grid_.tile_w)));
        Stmt scan;
        if (origins_) {
            auto on_grid = [&](const VarPtr &v, int64_t t, const char *field) {
                return Assert::make(EQ::make(Mod::make(V(v), I(t)), I(0)),
                                    {what, std::string(" has ") + field + " ",
                                     ", not on the tile grid (a multiple of " + std::to_string(t) + ")"},
                                    {V(k), V(v)});
            };
            body.push_back(on_grid(y, grid_.tile_h, "y0"));
            body.push_back(on_grid(x, grid_.tile_w, "x0"));
            body.push_back(Assert::make(EQ::make(Load::make(a.buffer, tile), I(0)),
                                        {what, " repeats the tile at (", ", ", ", ", ")"}, {V(k), V(b), V(y), V(x)}));
            body.push_back(Store::make(a.buffer, tile, I(1)));
            scan = loop(k, list_->dims[0], lets(k, b, y, x, Block::make(body)));
            return Block::make({clear(grid_, a.buffer), scan});
        }
        // Coordinates: a repeat is found through a scratch map of the grid's positions.
        VarPtr seen = make_var(a.name + "_seen", VarRole::Buffer, Int64), p = index_var("p");
        Expr positions = Mul::make(grid_.batch, Mul::make(grid_.rows, grid_.cols));
        Expr at = Add::make(Mul::make(Add::make(Mul::make(V(b), grid_.rows), V(y)), grid_.cols), V(x));
        body.push_back(Assert::make(EQ::make(Load::make(seen, at), I(0)),
                                    {what, " repeats the position (", ", ", ", ", ")"}, {V(k), V(b), V(y), V(x)}));
        body.push_back(Store::make(seen, at, I(1)));
        body.push_back(Store::make(a.buffer, tile, I(1)));
        scan = loop(k, list_->dims[0], lets(k, b, y, x, Block::make(body)));
        return Block::make(
            {clear(grid_, a.buffer),
             Allocate::make(seen, positions, Block::make({loop(p, positions, Store::make(seen, V(p), I(0))), scan}))});
    }

    bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const override {
        HostGrid g(grid_, in);
        const std::vector<int32_t> &list = in.shape_tensor(list_.get());
        const int64_t rows = in.eval(list_->dims[0]);
        CORA_CHECK((int64_t)list.size() == rows * 3 && (int64_t)out.size() == g.tiles(), "tile list sizes");
        const std::string what = std::string(origins_ ? "tile origins '" : "coordinates '") + list_->name + "': row ";
        std::fill(out.begin(), out.end(), 0);
        std::vector<uint8_t> seen(origins_ ? 0 : (size_t)(g.batch * g.rows * g.cols), 0);
        for (int64_t k = 0; k < rows; k++) {
            const int64_t b = list[(size_t)(3 * k)], y = list[(size_t)(3 * k + 1)], x = list[(size_t)(3 * k + 2)];
            auto in_range = [&](int64_t v, int64_t extent, const char *field) {
                if (v < 0 || v >= extent)
                    throw_runtime_error(what, k, " has ", field, " ", v, ", outside [0, ", extent, ")");
            };
            in_range(b, g.batch, "batch index");
            in_range(y, g.rows, "y");
            in_range(x, g.cols, "x");
            int64_t &tile = out[(size_t)g.index(b, y / g.th, x / g.tw)];
            if (origins_) {
                if (y % g.th != 0)
                    throw_runtime_error(what, k, " has y0 ", y, ", not on the tile grid (a multiple of ", g.th, ")");
                if (x % g.tw != 0)
                    throw_runtime_error(what, k, " has x0 ", x, ", not on the tile grid (a multiple of ", g.tw, ")");
                if (tile) throw_runtime_error(what, k, " repeats the tile at (", b, ", ", y, ", ", x, ")");
            } else {
                uint8_t &s = seen[(size_t)((b * g.rows + y) * g.cols + x)];
                if (s) throw_runtime_error(what, k, " repeats the position (", b, ", ", y, ", ", x, ")");
                s = 1;
            }
            tile = 1;
        }
        return true;
    }

private:
    /** The row's three fields as locals over `body`. */
    Stmt lets(const VarPtr &k, const VarPtr &b, const VarPtr &y, const VarPtr &x, Stmt body) const {
        return LetStmt::make(b, UFCall::make(list_, {V(k), I(0)}),
                             LetStmt::make(y, UFCall::make(list_, {V(k), I(1)}),
                                           LetStmt::make(x, UFCall::make(list_, {V(k), I(2)}), std::move(body))));
    }
    std::shared_ptr<const UFNode> list_;
    bool origins_;
};

class BitmapGrown : public BitmapKind {
public:
    BitmapGrown(std::shared_ptr<const UFNode> consumer, TileGrid consumer_grid, int64_t halo, TileGrid grid)
        : BitmapKind(std::move(grid)), consumer_(std::move(consumer)), cgrid_(std::move(consumer_grid)), halo_(halo) {}
    const char *name() const override { return "active-tile bitmap (grown by a halo)"; }
    AuxInputs inputs() const override {
        AuxInputs in = grid_inputs();
        in.arrays.push_back(consumer_);
        return in;
    }
    /** Tile (n, ty, tx) covers rows [ty * th - halo, ty * th + th + halo) clipped to the grid,
     * which meet the consumer's tile rows y0 / cth .. y1 / cth (likewise columns); it is active
     * when one of those consumer tiles is. */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        VarPtr cy = index_var("consumer_y"), cx = index_var("consumer_x");
        return for_each_tile(grid_, [&](Expr n, Expr ty, Expr tx) {
            auto span = [&](const Expr &t, int64_t size, const Expr &extent, int64_t csize) {
                Expr first = Max::make(Sub::make(Mul::make(t, I(size)), I(halo_)), I(0));
                Expr last = Sub::make(Min::make(Add::make(Mul::make(t, I(size)), I(size + halo_)), extent), I(1));
                return std::pair{Div::make(first, I(csize)), Div::make(last, I(csize))};
            };
            auto [y0, y1] = span(ty, grid_.tile_h, grid_.rows, cgrid_.tile_h);
            auto [x0, x1] = span(tx, grid_.tile_w, grid_.cols, cgrid_.tile_w);
            Expr here = tile_index(grid_, n, ty, tx);
            Expr there = UFCall::make(consumer_, {n, V(cy), V(cx)});
            Stmt mark = IfThenElse::make(NE::make(there, I(0)), Store::make(a.buffer, here, I(1)));
            return Block::make({Store::make(a.buffer, here, I(0)), loop_from(cy, y0, y1, loop_from(cx, x0, x1, mark))});
        });
    }

    bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const override {
        HostGrid g(grid_, in), c(cgrid_, in);
        const std::vector<int64_t> &consumer = in.aux_array(consumer_.get());
        CORA_CHECK((int64_t)consumer.size() == c.tiles() && (int64_t)out.size() == g.tiles(), "grown bitmap sizes");
        for (int64_t n = 0; n < g.batch; n++)
            for (int64_t ty = 0; ty < g.tr; ty++) {
                const int64_t y0 = std::max<int64_t>(ty * g.th - halo_, 0) / c.th;
                const int64_t y1 = (std::min(ty * g.th + g.th + halo_, g.rows) - 1) / c.th;
                for (int64_t tx = 0; tx < g.tc; tx++) {
                    const int64_t x0 = std::max<int64_t>(tx * g.tw - halo_, 0) / c.tw;
                    const int64_t x1 = (std::min(tx * g.tw + g.tw + halo_, g.cols) - 1) / c.tw;
                    int64_t any = 0;
                    for (int64_t y = y0; y <= y1; y++)
                        for (int64_t x = x0; x <= x1; x++)
                            any |= consumer[(size_t)c.index(n, y, x)];
                    out[(size_t)g.index(n, ty, tx)] = any != 0;
                }
            }
        return true;
    }

private:
    std::shared_ptr<const UFNode> consumer_;
    TileGrid cgrid_;
    int64_t halo_;
};

class TileOrder : public TileKind {
public:
    TileOrder(std::shared_ptr<const UFNode> bitmap, TileGrid grid)
        : TileKind(std::move(grid)), bitmap_(std::move(bitmap)) {}
    const char *name() const override { return "active-tile order"; }
    AuxInputs inputs() const override {
        AuxInputs in = grid_inputs();
        in.arrays.push_back(bitmap_);
        return in;
    }
    /** Entry (r, f) is a tile's batch index (f = 0), tile row (1) or tile column (2). */
    std::vector<Expr> facts(const UFCall &call, const Expr &value) const override {
        const Expr bounds[3] = {grid_.batch, grid_.tile_rows(), grid_.tile_cols()};
        std::vector<Expr> out{GE::make(value, I(0))};
        if (call.args.size() != 2) return out;
        if (const int64_t *f = as_const_int(call.args[1]); f && *f >= 0 && *f < 3) {
            out.push_back(LT::make(value, bounds[*f]));
            return out;
        }
        for (int f = 0; f < 3; f++)
            out.push_back(Or::make(NE::make(call.args[1], I(f)), LT::make(value, bounds[f])));
        return out;
    }

    Stmt build(const AuxArray &a, AuxTable &) const override {
        VarPtr k = make_var(a.name + "_next", VarRole::Local);
        auto pass = [&](bool active) {
            return for_each_tile(grid_, [&](Expr n, Expr ty, Expr tx) {
                Expr on = NE::make(UFCall::make(bitmap_, {n, ty, tx}), I(0));
                Expr at = Mul::make(V(k), I(3));
                Stmt put = Block::make({Store::make(a.buffer, at, n), Store::make(a.buffer, Add::make(at, I(1)), ty),
                                        Store::make(a.buffer, Add::make(at, I(2)), tx),
                                        Assign::make(k, Add::make(V(k), I(1)))});
                return IfThenElse::make(active ? on : Not::make(on), put);
            });
        };
        return LocalVar::make(k, I(0), Block::make({pass(true), pass(false)}));
    }

    bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const override {
        HostGrid g(grid_, in);
        const std::vector<int64_t> &bitmap = in.aux_array(bitmap_.get());
        CORA_CHECK((int64_t)bitmap.size() == g.tiles() && (int64_t)out.size() == 3 * g.tiles(), "tile order sizes");
        size_t k = 0;
        for (int pass = 1; pass >= 0; pass--)
            for (int64_t n = 0; n < g.batch; n++)
                for (int64_t ty = 0; ty < g.tr; ty++)
                    for (int64_t tx = 0; tx < g.tc; tx++)
                        if ((bitmap[(size_t)g.index(n, ty, tx)] != 0) == (pass == 1)) {
                            out[k++] = n;
                            out[k++] = ty;
                            out[k++] = tx;
                        }
        return true;
    }

protected:
    Expr size() const override { return Mul::make(grid_.tiles(), I(3)); }

private:
    std::shared_ptr<const UFNode> bitmap_;
};

class TileCount : public TileKind {
public:
    TileCount(std::shared_ptr<const UFNode> bitmap, TileGrid grid)
        : TileKind(std::move(grid)), bitmap_(std::move(bitmap)) {}
    const char *name() const override { return "active-tile count"; }
    AuxInputs inputs() const override {
        AuxInputs in = grid_inputs();
        in.arrays.push_back(bitmap_);
        return in;
    }
    std::vector<Expr> facts(const UFCall &, const Expr &value) const override {
        return {GE::make(value, I(0)), LE::make(value, grid_.tiles())};
    }

    /** A local sum stored once: a loop reading and writing the array's own element would have
     * its load hoisted out of the loop in a compiled build (hoist_loads takes aux arrays as
     * read-only inside kernels). */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        VarPtr sum = make_var(a.name + "_sum", VarRole::Local);
        Stmt add = for_each_tile(grid_, [&](Expr n, Expr ty, Expr tx) {
            return Assign::make(sum, Add::make(V(sum), UFCall::make(bitmap_, {n, ty, tx})));
        });
        return LocalVar::make(sum, I(0), Block::make({add, Store::make(a.buffer, I(0), V(sum))}));
    }

    bool host_build(const HostAuxInputs &in, std::vector<int64_t> &out) const override {
        const std::vector<int64_t> &bitmap = in.aux_array(bitmap_.get());
        CORA_CHECK(out.size() == 1, "tile count size");
        out[0] = 0;
        for (int64_t v : bitmap)
            out[0] += v;
        return true;
    }

protected:
    Expr size() const override { return I(1); }

private:
    std::shared_ptr<const UFNode> bitmap_;
};

} // namespace

Expr TileGrid::tile_rows() const { return simplify(Div::make(Add::make(rows, I(tile_h - 1)), I(tile_h))); }
Expr TileGrid::tile_cols() const { return simplify(Div::make(Add::make(cols, I(tile_w - 1)), I(tile_w))); }
Expr TileGrid::tiles() const { return simplify(Mul::make(batch, Mul::make(tile_rows(), tile_cols()))); }

std::shared_ptr<const AuxKind> tile_bitmap_from_mask(std::shared_ptr<const UFNode> mask, TileGrid grid,
                                                     int64_t stride) {
    return std::make_shared<const BitmapFromMask>(std::move(mask), std::move(grid), stride);
}
std::shared_ptr<const AuxKind> tile_bitmap_from_coordinates(std::shared_ptr<const UFNode> coords, TileGrid grid) {
    return std::make_shared<const BitmapFromList>(std::move(coords), std::move(grid), false);
}
std::shared_ptr<const AuxKind> tile_bitmap_from_origins(std::shared_ptr<const UFNode> origins, TileGrid grid) {
    return std::make_shared<const BitmapFromList>(std::move(origins), std::move(grid), true);
}
std::shared_ptr<const AuxKind> tile_bitmap_grown(std::shared_ptr<const UFNode> consumer, TileGrid consumer_grid,
                                                 int64_t halo, TileGrid grid) {
    return std::make_shared<const BitmapGrown>(std::move(consumer), std::move(consumer_grid), halo, std::move(grid));
}
std::shared_ptr<const AuxKind> tile_order_kind(std::shared_ptr<const UFNode> bitmap, TileGrid grid) {
    return std::make_shared<const TileOrder>(std::move(bitmap), std::move(grid));
}
std::shared_ptr<const AuxKind> tile_count_kind(std::shared_ptr<const UFNode> bitmap, TileGrid grid) {
    return std::make_shared<const TileCount>(std::move(bitmap), std::move(grid));
}

} // namespace cora::ir
