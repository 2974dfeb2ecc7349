/** \file ActiveTiles (cora/Spatial.h): a run-time mask or list as the tiles a Func computes. */
#include "bindings.h"

namespace cora::python {

void bind_spatial(py::module_ &m) {
    py::class_<ActiveTiles>(m, "ActiveTiles", "The active tiles of a grid, built per batch from a mask or a list.")
        .def_static("from_mask", &ActiveTiles::from_mask, py::arg("name"), py::arg("mask"), py::arg("tile_h"),
                    py::arg("tile_w"), py::arg("stride") = 1)
        .def_static(
            "from_coordinates",
            [](const std::string &name, const ShapeTensor &c, py::handle batch, py::handle rows, py::handle cols,
               int64_t th, int64_t tw) {
                return ActiveTiles::from_coordinates(name, c, to_expr(batch), to_expr(rows), to_expr(cols), th, tw);
            },
            py::arg("name"), py::arg("coordinates"), py::arg("batch"), py::arg("rows"), py::arg("cols"),
            py::arg("tile_h"), py::arg("tile_w"))
        .def_static(
            "from_tile_origins",
            [](const std::string &name, const ShapeTensor &o, py::handle batch, py::handle rows, py::handle cols,
               int64_t th, int64_t tw) {
                return ActiveTiles::from_tile_origins(name, o, to_expr(batch), to_expr(rows), to_expr(cols), th, tw);
            },
            py::arg("name"), py::arg("origins"), py::arg("batch"), py::arg("rows"), py::arg("cols"), py::arg("tile_h"),
            py::arg("tile_w"))
        .def("grown", &ActiveTiles::grown, py::arg("name"), py::arg("halo"), py::arg("tile_h"), py::arg("tile_w"))
        .def("gathered", &ActiveTiles::gathered, py::arg("name"), py::arg("halo"))
        .def_property_readonly("name", &ActiveTiles::name)
        .def_property_readonly("tile_h", &ActiveTiles::tile_h)
        .def_property_readonly("tile_w", &ActiveTiles::tile_w)
        .def_property_readonly("count", &ActiveTiles::count)
        .def("__repr__", [](const ActiveTiles &t) { return "<cora.ActiveTiles " + t.name() + ">"; });
}

} // namespace cora::python
