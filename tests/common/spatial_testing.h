// Masks for spatial-sparsity tests, and the tiles they make, defined independently of the library
// (the blob discs are the apps' generator, spatial/masks.h):
// the edge cases (none, all, one pixel in each corner, every border) and random masks at
// densities from 0.02 to 0.9, i.i.d. and blob-shaped ("globally sparse, locally dense"), with
// a different mask per image of a batch.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/trial_count.h"
#include "spatial/masks.h"

namespace cora::testing {

struct MaskCase {
    int64_t n, h, w;
    std::vector<int32_t> mask; ///< [n, h, w], 0/1
    std::string kind;
    std::string describe() const {
        std::ostringstream s;
        s << kind << " mask " << n << "x" << h << "x" << w;
        return s.str();
    }
};

/** A blob-shaped mask of about `density` in image `image`: random discs (spatial/masks.h). */
inline void add_blobs(MaskCase &m, int64_t image, double density, std::mt19937 &rng) {
    cora::spatial::add_blob_discs(m.mask.data() + image * m.h * m.w, m.h, m.w, density, rng);
}

inline MaskCase make_mask(int64_t n, int64_t h, int64_t w, const std::string &kind, double density, uint32_t seed) {
    MaskCase m{n, h, w, std::vector<int32_t>((size_t)(n * h * w), 0), kind};
    std::mt19937 rng(seed);
    auto at = [&](int64_t b, int64_t y, int64_t x) -> int32_t & { return m.mask[(size_t)((b * h + y) * w + x)]; };
    for (int64_t b = 0; b < n; b++) {
        if (kind == "all-one") {
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++)
                    at(b, y, x) = 1;
        } else if (kind == "corners") {
            at(b, 0, 0) = at(b, 0, w - 1) = at(b, h - 1, 0) = at(b, h - 1, w - 1) = 1;
        } else if (kind == "borders") {
            for (int64_t y = 0; y < h; y++)
                at(b, y, 0) = at(b, y, w - 1) = 1;
            for (int64_t x = 0; x < w; x++)
                at(b, 0, x) = at(b, h - 1, x) = 1;
        } else if (kind == "iid") {
            std::bernoulli_distribution on(density * (0.5 + (double)b / (double)std::max<int64_t>(1, n)));
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++)
                    at(b, y, x) = on(rng) ? 1 : 0;
        } else if (kind == "blob") {
            add_blobs(m, b, density * (0.5 + (double)b / (double)std::max<int64_t>(1, n)), rng);
        }
    }
    if (kind == "iid" || kind == "blob") m.kind = kind + " " + std::to_string(density);
    return m;
}

/** The edge cases and random masks every spatial kernel is checked on. */
inline std::vector<MaskCase> mask_cases(uint32_t seed) {
    std::vector<MaskCase> cases;
    const std::vector<std::array<int64_t, 3>> sizes{{1, 1, 1}, {1, 16, 16}, {1, 17, 9}, {2, 13, 7}, {3, 24, 33}};
    for (const auto &s : sizes)
        for (const char *kind : {"zero", "all-one", "corners", "borders"})
            cases.push_back(make_mask(s[0], s[1], s[2], kind, 0, seed++));
    for (double d : {0.02, 0.1, 0.3, 0.5, 0.9}) {
        cases.push_back(make_mask(2, 29, 40, "iid", d, seed++));
        cases.push_back(make_mask(2, 40, 29, "blob", d, seed++));
    }
    return cases;
}

/** Every `step`-th mask case, or fewer in the stages that re-run the tests at a share of the cost
 * (CORA_TEST_RANDOM_SCHEDULES, percent: the g++ stage gives 20, the sanitizer stage 15; trial_count.h). */
inline size_t mask_case_step(size_t step) {
    const int share = scaled_trials(100); // the percentage itself
    return (step * 100 + (size_t)share - 1) / (size_t)share;
}

/** The first share of `cases` (at least one), as mask_case_step thins the masks: each case is a
 * kernel compiled, the dominant cost of the sanitizer stage. */
template <typename T> std::vector<T> case_share(const std::vector<T> &cases) {
    const size_t n = std::max<size_t>(1, (size_t)scaled_trials((int)cases.size()));
    return std::vector<T>(cases.begin(), cases.begin() + (long)std::min(n, cases.size()));
}

/** The active tiles [n][TR][TC] of the output grid ceil(h / stride) x ceil(w / stride). */
inline std::vector<uint8_t> tile_bitmap(const MaskCase &m, int64_t th, int64_t tw, int64_t stride) {
    const int64_t oh = (m.h + stride - 1) / stride, ow = (m.w + stride - 1) / stride;
    const int64_t tr = (oh + th - 1) / th, tc = (ow + tw - 1) / tw;
    std::vector<uint8_t> b((size_t)(m.n * tr * tc), 0);
    for (int64_t n = 0; n < m.n; n++)
        for (int64_t y = 0; y < m.h; y++)
            for (int64_t x = 0; x < m.w; x++)
                if (m.mask[(size_t)((n * m.h + y) * m.w + x)])
                    b[(size_t)((n * tr + y / stride / th) * tc + x / stride / tw)] = 1;
    return b;
}

/** Per output position (n, y, x) of an oh x ow grid: whether a tile of `bitmap` covers it. */
inline std::vector<uint8_t> positions_of(const std::vector<uint8_t> &bitmap, int64_t n, int64_t oh, int64_t ow,
                                         int64_t th, int64_t tw) {
    const int64_t tr = (oh + th - 1) / th, tc = (ow + tw - 1) / tw;
    std::vector<uint8_t> p((size_t)(n * oh * ow), 0);
    for (int64_t b = 0; b < n; b++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t x = 0; x < ow; x++)
                p[(size_t)((b * oh + y) * ow + x)] = bitmap[(size_t)((b * tr + y / th) * tc + x / tw)];
    return p;
}

/** The producer tiles (th2 x tw2) within `halo` positions of an active consumer position. */
inline std::vector<uint8_t> grown_bitmap(const std::vector<uint8_t> &consumer_positions, int64_t n, int64_t oh,
                                         int64_t ow, int64_t halo, int64_t th2, int64_t tw2) {
    const int64_t tr = (oh + th2 - 1) / th2, tc = (ow + tw2 - 1) / tw2;
    std::vector<uint8_t> b((size_t)(n * tr * tc), 0);
    for (int64_t k = 0; k < n; k++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t x = 0; x < ow; x++) {
                if (!consumer_positions[(size_t)((k * oh + y) * ow + x)]) continue;
                for (int64_t yy = std::max<int64_t>(0, y - halo); yy <= std::min(oh - 1, y + halo); yy++)
                    for (int64_t xx = std::max<int64_t>(0, x - halo); xx <= std::min(ow - 1, x + halo); xx++)
                        b[(size_t)((k * tr + yy / th2) * tc + xx / tw2)] = 1;
            }
    return b;
}

/** `ref` (channels innermost) with the channels of every position outside `active` set to
 * `outside`: what a kernel over the tiles leaves there (the fill value, or what it held). */
inline std::vector<double> outside_replaced(std::vector<double> ref, const std::vector<uint8_t> &active,
                                            int64_t channels, double outside) {
    for (size_t pos = 0; pos < active.size(); pos++)
        if (!active[pos])
            for (int64_t o = 0; o < channels; o++)
                ref.at(pos * (size_t)channels + (size_t)o) = outside;
    return ref;
}

/** The output positions computed by a list of th x tw tiles made from `m` at `stride`. */
inline std::vector<uint8_t> active_positions(const MaskCase &m, int64_t th, int64_t tw, int64_t stride) {
    const int64_t oh = (m.h + stride - 1) / stride, ow = (m.w + stride - 1) / stride;
    return positions_of(tile_bitmap(m, th, tw, stride), m.n, oh, ow, th, tw);
}

} // namespace cora::testing
