/** \file A BSR pattern's consistency (BsrData::validate_pattern), checked when a BsrMatrix
 * declared with a static pattern checks it when it is declared (include/cora/Sparse.h). */
#include "cora/Sparse.h"
#include "util/Error.h"

namespace cora {

void BsrData::validate_pattern() const {
    if (rows < 0 || cols < 0) throw_runtime_error("BSR data: negative size ", rows, " x ", cols);
    if (block_rows <= 0 || block_cols <= 0)
        throw_runtime_error("BSR data: block size ", block_rows, " x ", block_cols, " must be positive");
    if (rows % block_rows != 0 || cols % block_cols != 0)
        throw_runtime_error("BSR data: block size ", block_rows, " x ", block_cols, " does not divide the matrix ",
                            rows, " x ", cols);
    int64_t mb = row_blocks(), kb = col_blocks();
    if ((int64_t)crow.size() != mb + 1)
        throw_runtime_error("BSR data: crow has ", crow.size(), " entries, expected row blocks + 1 = ", mb + 1);
    if (crow[0] != 0) throw_runtime_error("BSR data: crow[0] is ", crow[0], ", expected 0");
    for (int64_t i = 0; i < mb; i++) {
        if (crow[(size_t)i + 1] < crow[(size_t)i])
            throw_runtime_error("BSR data: crow is not non-decreasing: crow[", i + 1, "] = ", crow[(size_t)i + 1],
                                " < crow[", i, "] = ", crow[(size_t)i]);
        if (crow[(size_t)i + 1] - crow[(size_t)i] > kb)
            throw_runtime_error("BSR data: block row ", i, " has ", crow[(size_t)i + 1] - crow[(size_t)i],
                                " blocks, more than the ", kb, " block columns");
    }
    if (crow[(size_t)mb] != nnzb())
        throw_runtime_error("BSR data: crow[", mb, "] = ", crow[(size_t)mb], " but col has ", nnzb(),
                            " entries (the block counts disagree)");
    for (int64_t i = 0; i < mb; i++) {
        for (int32_t p = crow[(size_t)i]; p < crow[(size_t)i + 1]; p++) {
            int32_t c = col[(size_t)p];
            if (c < 0 || c >= kb)
                throw_runtime_error("BSR data: col[", p, "] = ", c, " (block row ", i, ") is outside [0, ", kb - 1,
                                    "]");
            if (p > crow[(size_t)i] && c <= col[(size_t)p - 1])
                throw_runtime_error("BSR data: col[", p, "] = ", c, " does not increase after col[", p - 1,
                                    "] = ", col[(size_t)p - 1], " within block row ", i,
                                    " (a block listed twice or unsorted)");
        }
    }
}

} // namespace cora
