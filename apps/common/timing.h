/** \file Timing shared by the apps: the best wall time of several runs. */
#pragma once

#include <algorithm>
#include <chrono>

namespace cora::apps {

template <typename F> double best_seconds(int runs, F &&f) {
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

} // namespace cora::apps
