/** \file The DSL symbols of a block-sparse (BSR) matrix: a ragged values tensor whose packed
 * offsets are BSR's crow, and an index tensor of block columns (include/cora/Sparse.h). */
#include "cora/Sparse.h"

#include "util/Error.h"

namespace cora {

namespace {

int64_t checked_blocks(const std::string &name, const char *what, int64_t size, int64_t block) {
    if (size <= 0 || block <= 0)
        throw_compile_error("BsrMatrix '", name, "': ", what, " ", size, " and its block size ", block,
                            " must be positive");
    if (size % block != 0)
        throw_compile_error("BsrMatrix '", name, "': block size ", block, " does not divide ", what, " ", size,
                            "; pad the matrix with zero ", what, " up to ", (size + block - 1) / block * block);
    if (size / block > INT32_MAX) throw_compile_error("BsrMatrix '", name, "': more than 2^31 blocks along ", what);
    return size / block;
}

Type checked_index_type(const std::string &name, Type t) {
    if (t != Int32 && t != Int64)
        throw_compile_error("BsrMatrix '", name, "': index type ", t.str(), "; block columns are int32 or int64");
    return t;
}

/** The block counts: run-time ones, or the pattern's (validated first) as constants. */
LengthArray blocks_array(const std::string &name, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
                         const BsrData *pattern) {
    const int64_t row_blocks = checked_blocks(name, "rows", rows, block_rows);
    const int64_t col_blocks = checked_blocks(name, "cols", cols, block_cols);
    if (!pattern) return LengthArray(name + "_blocks", row_blocks, 0, col_blocks);
    try {
        pattern->validate_pattern();
    } catch (const RuntimeError &e) {
        throw_compile_error("BsrMatrix '", name, "': its static pattern is not valid BSR: ", e.what());
    }
    std::vector<int32_t> counts((size_t)row_blocks);
    for (size_t i = 0; i < counts.size(); i++)
        counts[i] = pattern->crow[i + 1] - pattern->crow[i];
    return LengthArray::constant(name + "_blocks", counts, 0, col_blocks);
}

} // namespace

BsrMatrix::BsrMatrix(const std::string &name, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
                     BlockOrder order, Type index_type)
    : BsrMatrix(name, rows, cols, block_rows, block_cols, order, index_type, nullptr) {}

BsrMatrix::BsrMatrix(const std::string &name, const BsrData &pattern, BlockOrder order, Type index_type)
    : BsrMatrix(name, pattern.rows, pattern.cols, pattern.block_rows, pattern.block_cols, order, index_type, &pattern) {
}

BsrMatrix::BsrMatrix(const std::string &name, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
                     BlockOrder order, Type index_type, const BsrData *pattern)
    : block_row(name + "_rb"), block(name + "_j"), row_in_block(name + "_r"), col_in_block(name + "_c"),
      blocks_per_row(blocks_array(name, rows, cols, block_rows, block_cols, pattern)),
      col(name + "_col", {{block_row, Expr(rows / block_rows)}, {block, blocks_per_row(block_row)}},
          checked_index_type(name, index_type)),
      values(name + "_values",
             {{block_row, Expr(rows / block_rows)},
              {block, blocks_per_row(block_row)},
              {row_in_block, Expr(block_rows)},
              {col_in_block, Expr(block_cols)}},
             Float32),
      name_(name), rows_(rows), cols_(cols), block_rows_(block_rows), block_cols_(block_cols), order_(order) {
    col.index_range(0, cols / block_cols - 1);
    if (pattern) col.index_values(pattern->col);
    if (order == BlockOrder::ColumnMajor) values.reorder_storage({block_row, block, col_in_block, row_in_block});
}

Expr BsrMatrix::row_times(const Dim &k, const Expr &row, const std::function<Expr(const Expr &)> &dense) const {
    if (!row.defined() || !row.type().is_int())
        throw_compile_error("BsrMatrix '", name_, "': row_times needs an integer row index");
    Expr rb = row / Expr(block_rows_), r = row % Expr(block_rows_);
    Expr j = k.var() / Expr(block_cols_), c = k.var() % Expr(block_cols_);
    Expr column = cast(Int64, col(rb, j)) * Expr(block_cols_) + c;
    Expr term = dense(column);
    if (!term.defined()) throw_compile_error("BsrMatrix '", name_, "': row_times' dense operand returned no value");
    if (!term.type().is_float())
        throw_compile_error("BsrMatrix '", name_, "': row_times' dense operand is ", term.type().str(),
                            "; it must be a float expression");
    return sum(k, blocks_per_row(rb) * Expr(block_cols_), term * values(rb, j, r, c));
}

} // namespace cora
