/** \file Masks for spatially sparse inference: blob-shaped random masks ("globally sparse, locally
 * dense": changed regions of a frame, edited regions of an image) for the benchmark and the app's
 * built-in data, and the app's masks file.
 *
 * The masks file (text, so a mask can be drawn in an editor and diffed):
 *
 *     cora-masks 1            the format and its version
 *     N H W                   images, rows, columns (positive)
 *     then N images of H lines of W characters each: '1' or '#' active, '0' or '.' inactive;
 *     blank lines and lines starting with '%' between images are ignored.
 *
 * A file that does not follow this is refused with its line and what was expected. */
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cora::spatial {

struct MaskSet {
    int64_t n = 0, h = 0, w = 0;
    std::vector<uint8_t> mask; ///< [n, h, w], 0/1
    double density() const {
        int64_t on = 0;
        for (uint8_t v : mask)
            on += v != 0;
        return mask.empty() ? 0.0 : (double)on / (double)mask.size();
    }
};

/** Discs of random centres and radii (up to min(h, w) / 6) added to one image `img` (h x w,
 * row-major, 0/1 of any integer type) until about `density` of its positions are active (1: all).
 * The benchmark's and app's masks and the tests' blob-shaped cases. */
template <typename T> inline void add_blob_discs(T *img, int64_t h, int64_t w, double density, std::mt19937 &rng) {
    if (density >= 1.0) {
        std::fill(img, img + h * w, T(1));
        return;
    }
    std::uniform_int_distribution<int64_t> py(0, h - 1), px(0, w - 1);
    std::uniform_int_distribution<int64_t> pr(1, std::max<int64_t>(1, std::min(h, w) / 6));
    int64_t on = 0;
    for (int64_t k = 0; k < h * w; k++)
        on += img[k] != 0;
    for (int guard = 0; (double)on < density * (double)(h * w) && guard < 100000; guard++) {
        const int64_t cy = py(rng), cx = px(rng), r = pr(rng);
        for (int64_t y = std::max<int64_t>(0, cy - r); y <= std::min(h - 1, cy + r); y++)
            for (int64_t x = std::max<int64_t>(0, cx - r); x <= std::min(w - 1, cx + r); x++)
                if ((y - cy) * (y - cy) + (x - cx) * (x - cx) <= r * r && !img[y * w + x]) {
                    img[y * w + x] = T(1);
                    on++;
                }
    }
}

/** `n` images of blob-shaped masks (add_blob_discs), about `density` active each. */
inline MaskSet blob_mask(int64_t n, int64_t h, int64_t w, double density, uint32_t seed) {
    MaskSet m{n, h, w, std::vector<uint8_t>((size_t)(n * h * w), 0)};
    std::mt19937 rng(seed);
    for (int64_t b = 0; b < n; b++)
        add_blob_discs(m.mask.data() + b * h * w, h, w, density, rng);
    return m;
}

/** Reads a masks file (see the file comment); std::runtime_error "path:line: what" otherwise. */
inline MaskSet read_masks(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open the masks file");
    int line_no = 0;
    std::string line;
    auto fail = [&](const std::string &what) {
        throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + what);
    };
    auto next = [&](bool skip_blank) {
        while (std::getline(in, line)) {
            line_no++;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (skip_blank && (line.empty() || line[0] == '%')) continue;
            return true;
        }
        return false;
    };
    if (!next(true) || line != "cora-masks 1")
        fail("expected the header 'cora-masks 1', got '" + line.substr(0, 40) + "'");
    if (!next(true)) fail("expected 'N H W' after the header, got the end of the file");
    MaskSet m;
    {
        std::istringstream dims(line);
        std::string rest;
        if (!(dims >> m.n >> m.h >> m.w) || (dims >> rest) || m.n <= 0 || m.h <= 0 || m.w <= 0)
            fail("expected three positive integers 'N H W', got '" + line.substr(0, 40) + "'");
        if (m.n > 4096 || m.h > 16384 || m.w > 16384 || m.n * m.h * m.w > (int64_t)1 << 31)
            fail("the masks are too large (" + line + "; at most 4096 images of 16384 x 16384 and 2^31 positions)");
    }
    m.mask.assign((size_t)(m.n * m.h * m.w), 0);
    for (int64_t b = 0; b < m.n; b++)
        for (int64_t y = 0; y < m.h; y++) {
            if (!next(y == 0))
                fail("expected row " + std::to_string(y) + " of image " + std::to_string(b) +
                     ", got the end of the file");
            if ((int64_t)line.size() != m.w)
                fail("row " + std::to_string(y) + " of image " + std::to_string(b) + " has " +
                     std::to_string(line.size()) + " characters, expected W = " + std::to_string(m.w));
            for (int64_t x = 0; x < m.w; x++) {
                const char c = line[(size_t)x];
                if (c != '0' && c != '1' && c != '.' && c != '#')
                    fail("character " + std::to_string(x + 1) + " of row " + std::to_string(y) + " is '" +
                         std::string(1, c) + "'; use 1 or # (active), 0 or . (inactive)");
                m.mask[(size_t)((b * m.h + y) * m.w + x)] = c == '1' || c == '#';
            }
        }
    while (next(true))
        fail("unexpected text after the last image: '" + line.substr(0, 40) + "'");
    return m;
}

/** Writes `m` in the masks file format ('#' and '.'). */
inline void write_masks(const std::string &path, const MaskSet &m) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(path + ": cannot write the masks file");
    out << "cora-masks 1\n" << m.n << " " << m.h << " " << m.w << "\n";
    for (int64_t b = 0; b < m.n; b++) {
        out << "% image " << b << "\n";
        for (int64_t y = 0; y < m.h; y++) {
            for (int64_t x = 0; x < m.w; x++)
                out << (m.mask[(size_t)((b * m.h + y) * m.w + x)] ? '#' : '.');
            out << "\n";
        }
    }
    if (!out) throw std::runtime_error(path + ": writing the masks file failed");
}

} // namespace cora::spatial
