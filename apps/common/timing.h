/** \file Timing shared by the apps and the benchmarks: the best wall time of several runs, and
 * a pause that lets other libraries' thread pools go idle before a library is timed. */
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

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

/** Several thread pools share a process that times cora against OpenBLAS (its pthreads), cora's
 * kernels (libomp) and Halide (its own); each spins for up to ~200 ms after its last call
 * (KMP_BLOCKTIME, OpenBLAS's THREAD_TIMEOUT). Timing one library while another's threads spin
 * takes a core from it: 2-thread ratios swung by 1.5x from run to run, while each library alone
 * scales 1.9x. Call this before timing the next library. */
inline void let_thread_pools_sleep() { std::this_thread::sleep_for(std::chrono::milliseconds(400)); }

} // namespace cora::apps
