/** \file How many random schedules a differential test runs.
 *
 * The release stage runs every test's full count (580 random schedules, CPU and emulated GPU
 * together; each test's share is rounded up). The g++ and sanitizer stages re-run the same tests to check other things (another
 * kernel compiler; memory errors and undefined behaviour) at 2-5x the cost per schedule, and run
 * a share of them: CORA_TEST_RANDOM_SCHEDULES=<percent> (1-100; scripts/test.sh gives 20,
 * scripts/sanitize.sh 15). The share is the first schedules of the same seeds, so a failure
 * there reproduces in a full run. */
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cora::testing {

/** `trials` scaled by CORA_TEST_RANDOM_SCHEDULES (percent, rounded up, at least 1). A value that
 * is not an integer in [1, 100] is an error, not a silent full run. */
inline int scaled_trials(int trials) {
    const char *s = std::getenv("CORA_TEST_RANDOM_SCHEDULES");
    if (!s || !*s) return trials;
    char *end = nullptr;
    long percent = std::strtol(s, &end, 10);
    if (*end != '\0' || percent < 1 || percent > 100)
        throw std::invalid_argument("CORA_TEST_RANDOM_SCHEDULES must be a percentage in [1, 100], got '" +
                                    std::string(s) + "'");
    return (int)((trials * percent + 99) / 100);
}

} // namespace cora::testing
