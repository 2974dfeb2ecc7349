/** \file Block-sparse (BSR) data at run time: conversions, validation, and binding to a BsrMatrix's
 * symbols (include/cora/Sparse.h). */
#include <algorithm>
#include <cmath>

#include "cora/Sparse.h"

#include "util/Error.h"

namespace cora {

namespace {

/** The block grid of a dense [rows, cols] matrix; RuntimeError naming what disagrees. */
void check_dense(const char *what, size_t dense_size, int64_t rows, int64_t cols, int64_t block_rows,
                 int64_t block_cols) {
    if (rows < 0 || cols < 0) throw_runtime_error("BsrData::", what, ": negative size ", rows, " x ", cols);
    if (block_rows <= 0 || block_cols <= 0)
        throw_runtime_error("BsrData::", what, ": block size ", block_rows, " x ", block_cols, " must be positive");
    if (rows % block_rows != 0 || cols % block_cols != 0)
        throw_runtime_error("BsrData::", what, ": block size ", block_rows, " x ", block_cols,
                            " does not divide the matrix ", rows, " x ", cols, "; pad it with zeros first");
    if ((int64_t)dense_size != rows * cols)
        throw_runtime_error("BsrData::", what, ": the dense matrix has ", dense_size, " elements, expected ", rows,
                            " x ", cols, " = ", rows * cols);
}

/** BSR of the blocks `keep(rb, cb)` selects. */
template <typename Keep>
BsrData blocks_of(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t br, int64_t bc, Keep keep) {
    BsrData d;
    d.rows = rows, d.cols = cols, d.block_rows = br, d.block_cols = bc;
    int64_t mb = rows / br, kb = cols / bc;
    d.crow.assign((size_t)mb + 1, 0);
    for (int64_t rb = 0; rb < mb; rb++) {
        for (int64_t cb = 0; cb < kb; cb++) {
            if (!keep(rb, cb)) continue;
            if (d.col.size() >= (size_t)INT32_MAX) throw_runtime_error("BsrData: more than 2^31 - 1 blocks");
            d.col.push_back((int32_t)cb);
            for (int64_t r = 0; r < br; r++)
                for (int64_t c = 0; c < bc; c++)
                    d.values.push_back(dense[(size_t)((rb * br + r) * cols + cb * bc + c)]);
        }
        d.crow[(size_t)rb + 1] = (int32_t)d.col.size();
    }
    return d;
}

} // namespace

double BsrData::density() const {
    int64_t all = row_blocks() * col_blocks();
    return all > 0 ? (double)nnzb() / (double)all : 0.0;
}

BsrData BsrData::from_dense(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                            int64_t block_cols, float threshold) {
    check_dense("from_dense", dense.size(), rows, cols, block_rows, block_cols);
    return blocks_of(dense, rows, cols, block_rows, block_cols, [&](int64_t rb, int64_t cb) {
        for (int64_t r = 0; r < block_rows; r++)
            for (int64_t c = 0; c < block_cols; c++)
                if (std::fabs(dense[(size_t)((rb * block_rows + r) * cols + cb * block_cols + c)]) > threshold)
                    return true;
        return false;
    });
}

BsrData BsrData::from_block_mask(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                                 int64_t block_cols, const std::vector<uint8_t> &mask) {
    check_dense("from_block_mask", dense.size(), rows, cols, block_rows, block_cols);
    int64_t kb = cols / block_cols, blocks = rows / block_rows * kb;
    if ((int64_t)mask.size() != blocks)
        throw_runtime_error("BsrData::from_block_mask: the mask has ", mask.size(), " entries, expected ",
                            rows / block_rows, " x ", kb, " = ", blocks, " (one per block)");
    return blocks_of(dense, rows, cols, block_rows, block_cols,
                     [&](int64_t rb, int64_t cb) { return mask[(size_t)(rb * kb + cb)] != 0; });
}

void BsrData::validate() const {
    validate_pattern();
    int64_t expected = nnzb() * block_rows * block_cols;
    if ((int64_t)values.size() != expected)
        throw_runtime_error("BSR data: values has ", values.size(), " elements, expected nnzb x block = ", nnzb(),
                            " x ", block_rows, " x ", block_cols, " = ", expected);
}

std::vector<float> BsrData::to_dense() const {
    validate();
    std::vector<float> dense((size_t)(rows * cols), 0.0f);
    int64_t block = block_rows * block_cols;
    for (int64_t rb = 0; rb < row_blocks(); rb++)
        for (int32_t p = crow[(size_t)rb]; p < crow[(size_t)rb + 1]; p++)
            for (int64_t r = 0; r < block_rows; r++)
                for (int64_t c = 0; c < block_cols; c++)
                    dense[(size_t)((rb * block_rows + r) * cols + col[(size_t)p] * block_cols + c)] =
                        values[(size_t)(p * block + r * block_cols + c)];
    return dense;
}

void BsrData::bind(RaggedShape &shape, const BsrMatrix &m) const {
    validate();
    if (rows != m.rows() || cols != m.cols() || block_rows != m.block_rows() || block_cols != m.block_cols())
        throw_runtime_error("BSR data for '", m.name(), "' is ", rows, " x ", cols, " in blocks of ", block_rows, " x ",
                            block_cols, ", but the matrix is declared ", m.rows(), " x ", m.cols(), " in blocks of ",
                            m.block_rows(), " x ", m.block_cols());
    if (const std::vector<int64_t> *counts = m.blocks_per_row.static_values()) {
        // A static pattern: the kernels were compiled for it (and check it again on every call).
        for (int64_t i = 0; i < row_blocks(); i++)
            if (crow[(size_t)i + 1] - crow[(size_t)i] != (*counts)[(size_t)i])
                throw_runtime_error("BSR data for '", m.name(), "': block row ", i, " has ",
                                    crow[(size_t)i + 1] - crow[(size_t)i],
                                    " blocks, but the matrix was declared with a "
                                    "static pattern of ",
                                    (*counts)[(size_t)i],
                                    " there; bind the pattern the kernels "
                                    "were compiled for");
        const std::vector<int64_t> &cols_known = *m.col.static_values();
        for (int64_t p = 0; p < nnzb(); p++)
            if (col[(size_t)p] != cols_known[(size_t)p])
                throw_runtime_error("BSR data for '", m.name(), "': present block ", p, " is in block column ",
                                    col[(size_t)p], ", but the matrix was declared with a static pattern that has ",
                                    cols_known[(size_t)p], " there; bind the pattern the kernels were compiled for");
    }
    shape.set_offsets(m.blocks_per_row, crow);
}

Buffer BsrData::col_buffer(const BsrMatrix &m, const RaggedShape &shape) const {
    if (m.col.type() == Int32) return Buffer::view(m.col, shape, col.data(), nnzb());
    if (shape.size_of(m.col) != nnzb())
        throw_runtime_error("BSR data for '", m.name(), "' has ", nnzb(), " block columns, but the shape's block ",
                            "counts need ", shape.size_of(m.col));
    Buffer out(Int64, nnzb()); // int64 indices: widened once (PyTorch's own arrays bind without this)
    std::copy(col.begin(), col.end(), out.data<int64_t>());
    return out;
}

Buffer BsrData::values_buffer(const BsrMatrix &m, const RaggedShape &shape) const {
    if (m.order() == BlockOrder::RowMajor) return Buffer::view(m.values, shape, values.data(), (int64_t)values.size());
    // Column-major blocks: the same blocks, each transposed (the layout m.values declares).
    if (shape.size_of(m.values) != (int64_t)values.size())
        throw_runtime_error("BSR data for '", m.name(), "' has ", values.size(),
                            " values, but the shape's block counts need ", shape.size_of(m.values));
    Buffer out(Float32, (int64_t)values.size());
    float *o = out.data<float>();
    int64_t br = block_rows, bc = block_cols;
    for (int64_t p = 0; p < nnzb(); p++)
        for (int64_t r = 0; r < br; r++)
            for (int64_t c = 0; c < bc; c++)
                o[p * br * bc + c * br + r] = values[(size_t)(p * br * bc + r * bc + c)];
    return out;
}

BsrDecomposition decompose_blocks(const std::vector<float> &dense, int64_t rows, int64_t cols, int64_t block_rows,
                                  int64_t block_cols, double min_fill) {
    check_dense("decompose", dense.size(), rows, cols, block_rows, block_cols);
    if (!(min_fill >= 0.0 && min_fill <= 1.0))
        throw_runtime_error("decompose_blocks: min_fill ", min_fill, " is outside [0, 1]");
    const int64_t kb = cols / block_cols, size = block_rows * block_cols;
    std::vector<uint8_t> whole((size_t)(rows / block_rows * kb), 0);
    std::vector<float> rest = dense;
    for (int64_t rb = 0; rb < rows / block_rows; rb++)
        for (int64_t cb = 0; cb < kb; cb++) {
            int64_t nonzeros = 0;
            for (int64_t r = 0; r < block_rows; r++)
                for (int64_t c = 0; c < block_cols; c++)
                    nonzeros += dense[(size_t)((rb * block_rows + r) * cols + cb * block_cols + c)] != 0.0f;
            if (nonzeros == 0 || (double)nonzeros < min_fill * (double)size) continue;
            whole[(size_t)(rb * kb + cb)] = 1;
            for (int64_t r = 0; r < block_rows; r++)
                for (int64_t c = 0; c < block_cols; c++)
                    rest[(size_t)((rb * block_rows + r) * cols + cb * block_cols + c)] = 0.0f;
        }
    BsrDecomposition d;
    d.blocks = BsrData::from_block_mask(dense, rows, cols, block_rows, block_cols, whole);
    d.elements = BsrData::from_dense(rest, rows, cols, 1, 1);
    return d;
}

} // namespace cora
