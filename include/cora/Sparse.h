/** \file Block-sparse matrices (BSR): the DSL symbols of one, and its data at run time.
 *
 * A block-sparse [rows, cols] matrix with blocks of br x bc stores only its present blocks, in the
 * BSR layout of cuSPARSE and PyTorch: `crow` (int32, rows/br + 1 entries: block row i's blocks are
 * entries crow[i] .. crow[i+1]-1), `col` (int32, one block column per present block, increasing
 * within a row) and `values` (nnzb blocks of br x bc, each row-major). In cora that is a ragged
 * tensor: block row `rb`, its j-th present block, the row and column inside the block —
 * values(rb, j, r, c) — packed through the prefix sums of the per-row block counts, which are
 * exactly `crow`; `col(rb, j)` is an index tensor (Tensor::index_range), so a product reads the
 * dense operand at `col(rb, j) * bc + c` and its work follows the present blocks:
 *
 *     BsrMatrix W("W", 3072, 768, 32, 32);             // a pruned FF2 weight [out, in]
 *     Dim t("t"), n("n"), k("k");
 *     Func Y("Y", {{t, T}, {n, 3072}});               // Y = X W^T over the present blocks
 *     Y.compute([&](Expr t_, Expr n_) { return W.row_times(k, n_, [&](Expr kk) { return X(t_, kk); }); });
 *
 * At run time a BsrData holds the three arrays (from PyTorch, or converted from a dense matrix);
 * bind() puts its block counts into the RaggedShape (so the prelude's prefix sums are `crow`),
 * and col_buffer() / values_buffer() hand its arrays to the kernel without copying. Every kernel
 * call checks the counts against the shape and each column index against its range.
 *
 * Block shapes must divide the matrix (a CompileError / RuntimeError otherwise): a weight whose
 * size is not a multiple of the block is padded with zero rows or columns by the caller. */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cora/Runtime.h"
#include "cora/Tensor.h"

namespace cora {

struct BsrData;

/** How the elements of one block are stored: row-major as in BSR (cuSPARSE, PyTorch), or
 * column-major (each block transposed), which makes a block's rows contiguous for products that
 * vectorize over the matrix's rows (Y = X W^T with a vector of outputs per column step). */
enum class BlockOrder { RowMajor, ColumnMajor };

/** The DSL symbols of a block-sparse matrix (see the file comment). */
class BsrMatrix {
public:
    /** CompileError when a size or block size is not positive or a block size does not divide its
     * dimension, naming them. `index_type`: the element type of `col`, Int32 (cuSPARSE) or Int64
     * (PyTorch's col_indices(), passed to kernels as it is, without a copy); CompileError for any
     * other. */
    BsrMatrix(const std::string &name, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
              BlockOrder order = BlockOrder::RowMajor, Type index_type = Int32);
    /** A matrix whose pattern is known when compiling (SparTA's static sparsity: pruned weights,
     * a fixed attention mask): `pattern`'s sizes, block shape, block counts and block columns (its
     * values are ignored; they come at run time). blocks_per_row is a LengthArray::constant and
     * col has index_values, so a kernel that dismantles the block-row loop and the loop over a
     * row's blocks (Func::dismantle) has the pattern in its code: no index loads, no code for
     * absent blocks. Binding other BSR data to it is a RuntimeError (BsrData::bind, and every
     * kernel call). CompileError when the pattern is not valid BSR, naming the inconsistency. */
    BsrMatrix(const std::string &name, const BsrData &pattern, BlockOrder order = BlockOrder::RowMajor,
              Type index_type = Int32);

    const std::string &name() const { return name_; }
    int64_t rows() const { return rows_; }
    int64_t cols() const { return cols_; }
    int64_t block_rows() const { return block_rows_; }
    int64_t block_cols() const { return block_cols_; }
    int64_t row_blocks() const { return rows_ / block_rows_; }
    int64_t col_blocks() const { return cols_ / block_cols_; }
    BlockOrder order() const { return order_; }
    /** Whether the pattern is known when compiling (the constructor from BsrData). */
    bool has_static_pattern() const { return blocks_per_row.static_values() != nullptr; }

    /** Dims of `values`: block row, present block in that row, row and column inside a block. */
    Dim block_row, block, row_in_block, col_in_block;
    /** Present blocks per block row ("<name>_blocks", row_blocks() entries in [0, col_blocks()]);
     * their offsets (RaggedShape::set_offsets) are BSR's crow. */
    LengthArray blocks_per_row;
    /** [block_row, block(block_row)] of the index type (Int32 unless the constructor was given
     * Int64): the block column of each present block, an index tensor in [0, col_blocks() - 1]
     * ("<name>_col"). */
    Tensor col;
    /** Float32 [block_row, block(block_row), row_in_block, col_in_block] ("<name>_values"); stored
     * with col_in_block outside row_in_block for BlockOrder::ColumnMajor. */
    Tensor values;

    /** The reduction sum over the present blocks of matrix row `row` (an index expression in
     * [0, rows)): sum over k of W(row, kk) * dense(kk), where kk = col(rb, k / bc) * bc + k % bc
     * runs over the columns of the row's present blocks. `k` names the reduction loop (extent
     * blocks_per_row(rb) * bc): split it by block_cols() to get a loop over present blocks and one
     * inside a block. */
    Expr row_times(const Dim &k, const Expr &row, const std::function<Expr(const Expr &)> &dense) const;

private:
    BsrMatrix(const std::string &name, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols,
              BlockOrder order, Type index_type, const BsrData *pattern);
    std::string name_;
    int64_t rows_, cols_, block_rows_, block_cols_;
    BlockOrder order_;
};

/** A block-sparse matrix's data at run time, in the BSR layout of cuSPARSE and PyTorch (values
 * row-major within each block, whatever order a BsrMatrix stores them in). */
struct BsrData {
    int64_t rows = 0, cols = 0, block_rows = 1, block_cols = 1;
    std::vector<int32_t> crow; ///< rows / block_rows + 1 entries, crow[0] = 0, non-decreasing
    std::vector<int32_t> col;  ///< nnzb entries, strictly increasing within each block row
    std::vector<float> values; ///< nnzb * block_rows * block_cols, each block row-major

    int64_t row_blocks() const { return block_rows > 0 ? rows / block_rows : 0; }
    int64_t col_blocks() const { return block_cols > 0 ? cols / block_cols : 0; }
    int64_t nnzb() const { return (int64_t)col.size(); }
    /** Present blocks / all blocks (0 for an empty matrix). */
    double density() const;

    /** The blocks of a dense row-major [rows, cols] matrix that hold an element with |x| > threshold.
     * RuntimeError when the sizes disagree or a block size does not divide its dimension. */
    static BsrData from_dense(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                              int64_t block_cols, float threshold = 0.0f);
    /** The blocks a row-major [rows / block_rows, cols / block_cols] mask marks non-zero, with their
     * elements taken from `dense` (blocks outside the mask are dropped whatever they hold). */
    static BsrData from_block_mask(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                                   int64_t block_cols, const std::vector<uint8_t> &mask);
    /** The dense row-major matrix, zeros where no block is present. Validates first. */
    std::vector<float> to_dense() const;
    /** RuntimeError naming the first inconsistency: sizes and block sizes, crow's length, first
     * entry, monotonicity and last entry (= nnzb), each col in range and increasing within its row,
     * the values' count. */
    void validate() const;
    /** validate() without the values: the sizes, block sizes, crow and col of a pattern. */
    void validate_pattern() const;

    /** Validate against `m` (same sizes and block shape) and bind its block counts to `shape` (the
     * shape's prefix sums are then crow). RuntimeError, with `shape` unchanged, otherwise. */
    void bind(RaggedShape &shape, const BsrMatrix &m) const;
    /** The column indices for `m.col` (a view: no copy; this object must outlive the kernel call), or
     * for a matrix with Int64 indices an owned int64 copy. */
    Buffer col_buffer(const BsrMatrix &m, const RaggedShape &shape) const;
    /** The values for `m.values`: a view for BlockOrder::RowMajor, a packed copy with each block
     * transposed for ColumnMajor. */
    Buffer values_buffer(const BsrMatrix &m, const RaggedShape &shape) const;
};

/** SparTA's decomposition of a weight whose non-zeros are not a pure block pattern: the blocks
 * worth computing whole, plus the remaining non-zeros one by one (CSR: a BsrData with 1x1 blocks,
 * whose crow and col are CSR's row pointers and column indices). blocks + elements = the matrix. */
struct BsrDecomposition {
    BsrData blocks;   ///< block_rows x block_cols blocks, kept whole (their zeros included)
    BsrData elements; ///< every other non-zero, 1x1 blocks
};

/** The cost rule's default threshold, from bench/block_sparse.sh (--only=decomposition) on the
 * development machine: a multiply-add inside a whole 32x32 block took 0.026 of the time of one
 * through 1x1 blocks (the element kernel gathers X per non-zero and cannot vectorize); 8x8 blocks
 * run at about half the 32x32 rate. 0.04 lies between: a block with at least 4% non-zeros is
 * cheaper computed whole. */
inline constexpr double kDecomposeMinFill = 0.04;

/** Split a dense row-major [rows, cols] matrix: a block with f non-zeros (|x| > 0) out of
 * block_rows x block_cols goes to `blocks` when f >= min_fill x block_rows x block_cols (a whole
 * block costs its size at the block kernel's rate, its non-zeros alone cost f at the element
 * kernel's; min_fill is their ratio), and its non-zeros to `elements` otherwise. RuntimeError for
 * the sizes from_dense rejects or min_fill outside [0, 1]. */
BsrDecomposition decompose_blocks(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                                  int64_t block_cols, double min_fill = kDecomposeMinFill);

} // namespace cora
