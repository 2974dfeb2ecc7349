/** \file The pruned feed-forward weights file (`pruned_ff --weights`), written from PyTorch by
 * export_bsr.py: the magic "CORABSR1", four little-endian int32 (hidden, ff, block, has_bias), then
 * W1 [ff, hidden] and W2 [hidden, ff] each as PyTorch's `weight.to_sparse_bsr((block, block))`
 * gives them — int32 nnzb, int32 crow_indices [rows / block + 1], int32 col_indices [nnzb], float32
 * values [nnzb, block, block] — then, with has_bias, float32 b1 [ff] and b2 [hidden]. Every size and
 * every BSR array is checked (BsrData::validate); a bad file is a UsageError naming it. */
#pragma once

#include <cora/cora.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/cli.h"

namespace cora::apps {

struct PrunedFFWeights {
    int64_t hidden = 0, ff = 0, block = 0;
    bool has_bias = false;
    BsrData w1, w2;
    std::vector<float> b1, b2;
};

inline PrunedFFWeights read_bsr_weights(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError("cannot open weights file '" + path + "'");
    auto fail = [&](const std::string &what) { throw UsageError("weights file '" + path + "' " + what); };
    char magic[8];
    if (!f.read(magic, 8) || std::memcmp(magic, "CORABSR1", 8) != 0)
        fail("does not start with CORABSR1 (write it with apps/sparse/export_bsr.py)");
    int32_t header[4];
    if (!f.read(reinterpret_cast<char *>(header), sizeof header)) fail("ends inside its header");
    PrunedFFWeights w;
    w.hidden = header[0], w.ff = header[1], w.block = header[2], w.has_bias = header[3] != 0;
    if (w.hidden < 1 || w.hidden > 8192 || w.ff < 1 || w.ff > 32768 || w.block < 1 || w.block > 256 ||
        w.hidden % w.block != 0 || w.ff % w.block != 0 || (header[3] != 0 && header[3] != 1))
        fail("has an unsupported header (hidden " + std::to_string(header[0]) + ", ff " + std::to_string(header[1]) +
             ", block " + std::to_string(header[2]) + ", has_bias " + std::to_string(header[3]) +
             "): sizes up to 8192 / 32768, a block dividing both, has_bias 0 or 1");
    auto read_ints = [&](std::vector<int32_t> &v, int64_t n, const std::string &what) {
        v.resize((size_t)n);
        if (!f.read(reinterpret_cast<char *>(v.data()), (std::streamsize)(n * 4))) fail("ends inside " + what);
    };
    auto read_floats = [&](std::vector<float> &v, int64_t n, const std::string &what) {
        v.resize((size_t)n);
        if (!f.read(reinterpret_cast<char *>(v.data()), (std::streamsize)(n * 4))) fail("ends inside " + what);
    };
    auto read_matrix = [&](BsrData &m, int64_t rows, int64_t cols, const std::string &name) {
        m.rows = rows, m.cols = cols, m.block_rows = m.block_cols = w.block;
        int32_t nnzb = 0;
        if (!f.read(reinterpret_cast<char *>(&nnzb), 4)) fail("ends before " + name + "'s block count");
        const int64_t all = rows / w.block * (cols / w.block);
        if (nnzb < 0 || nnzb > all)
            fail("says " + name + " has " + std::to_string(nnzb) + " blocks, outside [0, " + std::to_string(all) + "]");
        read_ints(m.crow, rows / w.block + 1, name + "'s crow_indices");
        read_ints(m.col, nnzb, name + "'s col_indices");
        read_floats(m.values, (int64_t)nnzb * w.block * w.block, name + "'s values");
        try {
            m.validate();
        } catch (const RuntimeError &e) {
            fail("holds an invalid " + name + ": " + e.what());
        }
    };
    read_matrix(w.w1, w.ff, w.hidden, "W1");
    read_matrix(w.w2, w.hidden, w.ff, "W2");
    if (w.has_bias) {
        read_floats(w.b1, w.ff, "b1");
        read_floats(w.b2, w.hidden, "b2");
    }
    if (f.peek() != std::char_traits<char>::eof()) fail("has bytes after its last array");
    return w;
}

} // namespace cora::apps
