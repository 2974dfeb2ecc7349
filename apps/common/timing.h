/** \file Timing shared by the apps and the benchmarks: the best wall time of several runs, a pause
 * that lets other libraries' thread pools go idle before a library is timed, and the ratios the
 * apps report beside their times. */
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

/** best_seconds after one untimed warm-up call (first-call costs: page faults, a kernel's load). */
template <typename F> double best_seconds_warm(int runs, F &&f) {
    f();
    return best_seconds(runs, f);
}

/** Several thread pools share a process that times cora against OpenBLAS (its pthreads), cora's
 * kernels (libomp) and Halide (its own); each spins for up to ~200 ms after its last call
 * (KMP_BLOCKTIME, OpenBLAS's THREAD_TIMEOUT). Timing one library while another's threads spin
 * takes a core from it: 2-thread ratios swung by 1.5x from run to run, while each library alone
 * scales 1.9x. Call this before timing the next library. */
inline void let_thread_pools_sleep() { std::this_thread::sleep_for(std::chrono::milliseconds(400)); }

/** padded / useful work: 1 when there is no work at all (a batch of empty sequences, 0 x 0
 * matrices), where the plain quotient 0 / 0 would print as "-nan". */
inline double work_ratio(double padded, double useful) {
    if (useful > 0) return padded / useful;
    return padded > 0 ? padded : 1.0; // padded work for nothing useful: the work itself
}

/** `count` per second of `seconds`; 0 for no time (nothing ran). */
inline double per_second(double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }

} // namespace cora::apps
