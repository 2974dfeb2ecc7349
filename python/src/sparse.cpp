/** \file BsrMatrix (cora/Sparse.h): a block-sparse matrix's symbols. From PyTorch, its BSR arrays
 * bind as they are: crow_indices() through RaggedShape.set_offsets(W.blocks_per_row, ...), and
 * col_indices() (int64: declare index_type=cora.int64) and values() as the kernel's arrays. */
#include "bindings.h"

namespace cora::python {

void bind_sparse(py::module_ &m) {
    py::enum_<BlockOrder>(m, "BlockOrder", "How the elements of one block are stored.")
        .value("RowMajor", BlockOrder::RowMajor)
        .value("ColumnMajor", BlockOrder::ColumnMajor);
    py::class_<BsrMatrix>(m, "BsrMatrix",
                          "The DSL symbols of a block-sparse [rows, cols] matrix with blocks of block_rows x "
                          "block_cols, in BSR layout (cuSPARSE, PyTorch).")
        .def(py::init([](const std::string &name, int64_t rows, int64_t cols, int64_t br, int64_t bc, BlockOrder order,
                         py::handle index_type) {
                 return BsrMatrix(name, rows, cols, br, bc, order, py::cast<Type>(index_type));
             }),
             py::arg("name"), py::arg("rows"), py::arg("cols"), py::arg("block_rows"), py::arg("block_cols"),
             py::arg("order") = BlockOrder::RowMajor, py::arg("index_type") = Int32)
        .def_property_readonly("name", &BsrMatrix::name)
        .def_property_readonly("rows", &BsrMatrix::rows)
        .def_property_readonly("cols", &BsrMatrix::cols)
        .def_property_readonly("block_rows", &BsrMatrix::block_rows)
        .def_property_readonly("block_cols", &BsrMatrix::block_cols)
        .def_property_readonly("row_blocks", &BsrMatrix::row_blocks)
        .def_property_readonly("col_blocks", &BsrMatrix::col_blocks)
        .def_property_readonly("order", &BsrMatrix::order)
        .def_readonly("block_row", &BsrMatrix::block_row)
        .def_readonly("block", &BsrMatrix::block)
        .def_readonly("row_in_block", &BsrMatrix::row_in_block)
        .def_readonly("col_in_block", &BsrMatrix::col_in_block)
        .def_readonly("blocks_per_row", &BsrMatrix::blocks_per_row)
        .def_readonly("col", &BsrMatrix::col)
        .def_readonly("values", &BsrMatrix::values)
        .def(
            "row_times",
            [](const BsrMatrix &w, const Dim &k, py::handle row, py::function dense) {
                return w.row_times(k, to_expr(row, "row"), [&](const Expr &column) {
                    return to_expr(dense(column), "row_times' dense operand");
                });
            },
            py::arg("k"), py::arg("row"), py::arg("dense"),
            "The sum over the present blocks of matrix row `row` of W(row, kk) * dense(kk); `k` names the "
            "reduction loop (split it by block_cols for a loop over present blocks).")
        .def("__repr__", [](const BsrMatrix &w) { return "<cora.BsrMatrix " + w.name() + ">"; });
}

} // namespace cora::python
