/** \file The built-in sentence-length profile the apps use when no lengths file is given, so they
 * run with no data files: lengths drawn (std::mt19937 seed 2022) from the quantiles, every 5%, of
 * MNLI's training-set token counts. */
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace cora::apps {

/** The quantiles (0%, 5%, ..., 100%) of MNLI's training-set token counts. */
inline constexpr int kMnliQuantiles[21] = {5,  14, 18, 21, 24, 27, 29, 31, 34, 36, 39,
                                           41, 44, 47, 50, 54, 58, 64, 74, 89, 128};

/** `count` lengths from the profile, interpolated between its quantiles. */
inline std::vector<int32_t> builtin_lengths(int64_t count) {
    std::mt19937 rng(2022);
    std::uniform_real_distribution<double> u(0.0, 20.0);
    std::vector<int32_t> l((size_t)count);
    for (auto &x : l) {
        double q = u(rng);
        int k = std::min(19, (int)q);
        x = (int32_t)std::lround(kMnliQuantiles[k] + (q - k) * (kMnliQuantiles[k + 1] - kMnliQuantiles[k]));
    }
    return l;
}

} // namespace cora::apps
