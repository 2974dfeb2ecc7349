/** \file ActiveTiles (cora/Spatial.h): the symbols of an active-tile list — a bitmap built from
 * the user's mask (or coordinates, tile origins, or another list grown by a halo), and from it
 * the order and the count that kernels read — each an aux array whose kind (TileKinds.h) builds,
 * checks and bounds it. Equal sources give equal keys, so the prelude builds each array once
 * per RaggedShape, whatever number of lists and kernels use it. */
#include "cora/Spatial.h"

#include "formats/spatial/TileKinds.h"
#include "ir/IRPrinter.h"
#include "ir/Schedule.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

namespace {

DimPtr layout_dim(const std::string &name) { return Dim(name).node(); }

std::shared_ptr<const UFNode> aux_symbol(const std::string &name, std::shared_ptr<const AuxKind> kind, Layout layout,
                                         std::string key, int64_t max_value) {
    auto spec = std::make_shared<AuxSpec>();
    spec->kind = std::move(kind);
    spec->layout = std::move(layout);
    spec->key = std::move(key);
    auto u = std::make_shared<UFNode>();
    u->name = name;
    u->id = new_symbol_id();
    u->kind = UFKind::Aux;
    u->arity = (int)spec->layout.size();
    u->min_value = 0;
    u->max_value = max_value;
    u->aux = std::move(spec);
    return u;
}

void check_tile(const std::string &name, int64_t tile_h, int64_t tile_w) {
    if (name.empty()) throw_compile_error("ActiveTiles needs a non-empty name");
    if (tile_h <= 0 || tile_w <= 0)
        throw_compile_error("ActiveTiles '", name, "': the tile size ", tile_h, " x ", tile_w, " must be positive");
    if (tile_h > (1 << 20) || tile_w > (1 << 20))
        throw_compile_error("ActiveTiles '", name, "': the tile size ", tile_h, " x ", tile_w,
                            " is larger than 2^20 positions a side");
}

void check_list(const std::string &name, const ShapeTensor &list, const char *what) {
    const auto &dims = list.dims();
    const int64_t *fields = dims.size() == 2 ? as_const_int(dims[1]) : nullptr;
    if (!fields || *fields != 3)
        throw_compile_error("ActiveTiles '", name, "': ", what, " '", list.name(),
                            "' must have dims [K, 3] (batch index, y, x per row), got ", dims.size(), " dims",
                            dims.size() == 2 ? " with " + print(dims[1]) + " fields" : std::string());
}

void check_extent(const std::string &name, const char *what, const Expr &e) {
    if (!e.defined() || !e.type().is_int())
        throw_compile_error("ActiveTiles '", name, "': the grid's ", what, " must be an integer expression");
}

} // namespace

/** Makes the list's order and count over `bitmap`. */
static std::shared_ptr<const TileList> make_list(const std::string &name, const TileGrid &grid,
                                                 std::shared_ptr<const UFNode> bitmap) {
    auto list = std::make_shared<TileList>();
    list->name = name;
    list->batch = grid.batch;
    list->rows = grid.rows;
    list->cols = grid.cols;
    list->tile_h = grid.tile_h;
    list->tile_w = grid.tile_w;
    const std::string &key = bitmap->aux->key;
    list->order = aux_symbol(
        name + "_order", tile_order_kind(bitmap, grid),
        {LayoutDim{layout_dim(name + "_slot"), grid.tiles()}, LayoutDim{layout_dim(name + "_field"), IntImm::make(3)}},
        "tile-order of (" + key + ")", INT32_MAX);
    list->count =
        aux_symbol(name + "_count", tile_count_kind(bitmap, grid),
                   {LayoutDim{layout_dim(name + "_one"), IntImm::make(1)}}, "tile-count of (" + key + ")", INT32_MAX);
    list->bitmap = std::move(bitmap);
    return list;
}

static Layout bitmap_layout(const std::string &name, const TileGrid &grid) {
    return {LayoutDim{layout_dim(name + "_n"), grid.batch}, LayoutDim{layout_dim(name + "_ty"), grid.tile_rows()},
            LayoutDim{layout_dim(name + "_tx"), grid.tile_cols()}};
}

static std::string grid_key(const TileGrid &g) {
    std::string key = "[";
    for (const Expr *e : {&g.batch, &g.rows, &g.cols})
        key += structural_key(*e) + (e == &g.cols ? "] / " : ", ");
    return key + std::to_string(g.tile_h) + "x" + std::to_string(g.tile_w);
}

ActiveTiles ActiveTiles::from_mask(const std::string &name, const ShapeTensor &mask, int64_t tile_h, int64_t tile_w,
                                   int64_t stride) {
    check_tile(name, tile_h, tile_w);
    if (mask.dims().size() != 3)
        throw_compile_error("ActiveTiles '", name, "': mask '", mask.name(), "' must have dims [N, H, W], got ",
                            mask.dims().size(), " dims");
    if (mask.min_value() < 0)
        throw_compile_error("ActiveTiles '", name, "': mask '", mask.name(), "' allows negative values (range [",
                            mask.min_value(), ", ", mask.max_value(), "]); declare it [0, 1]");
    if (stride <= 0) throw_compile_error("ActiveTiles '", name, "': the stride ", stride, " must be positive");
    TileGrid grid;
    grid.batch = mask.dims()[0];
    auto out_extent = [&](const Expr &e) { return stride == 1 ? e : ceil_div(e, stride); };
    grid.rows = out_extent(mask.dims()[1]);
    grid.cols = out_extent(mask.dims()[2]);
    grid.tile_h = tile_h;
    grid.tile_w = tile_w;
    std::string key = "tile-bitmap of mask#" + std::to_string(mask.node()->id) + " stride " + std::to_string(stride) +
                      " " + grid_key(grid);
    auto bitmap = aux_symbol(name + "_bitmap", tile_bitmap_from_mask(mask.node(), grid, stride),
                             bitmap_layout(name, grid), key, 1);
    return ActiveTiles(make_list(name, grid, bitmap));
}

static ActiveTiles from_list(const std::string &name, const ShapeTensor &list, const Expr &batch, const Expr &rows,
                             const Expr &cols, int64_t tile_h, int64_t tile_w, bool origins) {
    check_tile(name, tile_h, tile_w);
    check_list(name, list, origins ? "tile origins" : "coordinates");
    check_extent(name, "batch", batch);
    check_extent(name, "rows", rows);
    check_extent(name, "cols", cols);
    TileGrid grid{batch, rows, cols, tile_h, tile_w};
    std::string key = std::string(origins ? "tile-bitmap of origins#" : "tile-bitmap of coordinates#") +
                      std::to_string(list.node()->id) + " " + grid_key(grid);
    auto kind = origins ? tile_bitmap_from_origins(list.node(), grid) : tile_bitmap_from_coordinates(list.node(), grid);
    return ActiveTiles(make_list(name, grid, aux_symbol(name + "_bitmap", kind, bitmap_layout(name, grid), key, 1)));
}

ActiveTiles ActiveTiles::from_coordinates(const std::string &name, const ShapeTensor &coordinates, const Expr &batch,
                                          const Expr &rows, const Expr &cols, int64_t tile_h, int64_t tile_w) {
    return from_list(name, coordinates, batch, rows, cols, tile_h, tile_w, false);
}

ActiveTiles ActiveTiles::from_tile_origins(const std::string &name, const ShapeTensor &origins, const Expr &batch,
                                           const Expr &rows, const Expr &cols, int64_t tile_h, int64_t tile_w) {
    return from_list(name, origins, batch, rows, cols, tile_h, tile_w, true);
}

ActiveTiles ActiveTiles::grown(const std::string &name, int64_t halo, int64_t tile_h, int64_t tile_w) const {
    check_tile(name, tile_h, tile_w);
    if (halo < 0) throw_compile_error("ActiveTiles '", name, "': the halo ", halo, " must not be negative");
    if (halo > (1 << 20)) throw_compile_error("ActiveTiles '", name, "': the halo ", halo, " is larger than 2^20");
    const TileList &c = *node_;
    TileGrid consumer{c.batch, c.rows, c.cols, c.tile_h, c.tile_w};
    TileGrid grid{c.batch, c.rows, c.cols, tile_h, tile_w};
    std::string key =
        "tile-bitmap grown by " + std::to_string(halo) + " " + grid_key(grid) + " of (" + c.bitmap->aux->key + ")";
    auto bitmap = aux_symbol(name + "_bitmap", tile_bitmap_grown(c.bitmap, consumer, halo, grid),
                             bitmap_layout(name, grid), key, 1);
    return ActiveTiles(make_list(name, grid, bitmap));
}

ActiveTiles ActiveTiles::gathered(const std::string &name, int64_t halo) const {
    check_tile(name, node_->tile_h + 2 * halo, node_->tile_w + 2 * halo);
    if (halo < 0 || halo > (1 << 10))
        throw_compile_error("ActiveTiles '", name, "': the halo ", halo, " must be in [0, 1024]");
    auto list = std::make_shared<TileList>(*node_);
    list->name = name;
    list->tile_h = node_->tile_h + 2 * halo;
    list->tile_w = node_->tile_w + 2 * halo;
    list->rows = Mul::make(node_->tile_rows(), IntImm::make(list->tile_h));
    list->cols = Mul::make(node_->tile_cols(), IntImm::make(list->tile_w));
    return ActiveTiles(std::move(list));
}

const std::string &ActiveTiles::name() const { return node_->name; }
int64_t ActiveTiles::tile_h() const { return node_->tile_h; }
int64_t ActiveTiles::tile_w() const { return node_->tile_w; }
Expr ActiveTiles::batch() const { return node_->batch; }
Expr ActiveTiles::rows() const { return node_->rows; }
Expr ActiveTiles::cols() const { return node_->cols; }
Expr ActiveTiles::count() const { return UFCall::make(node_->count, {IntImm::make(0)}); }
Expr ActiveTiles::grid_tiles() const { return node_->grid_tiles(); }

} // namespace cora
