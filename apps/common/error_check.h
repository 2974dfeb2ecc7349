/** \file The self-checks of the apps and benchmarks: how far an output is from its reference, where
 * a value that is not finite counts.
 *
 * Why a type and not `err = std::max(err, fabs(got - want))`: std::max(x, NaN) is x, so an output
 * that is all NaN (scores that overflowed float32, say) measured an error of 0 and passed. Here a
 * pair where either side is not finite agrees only when both are the same non-finite value (NaN and
 * NaN, or the same infinity): a reference that is itself non-finite can still check that a NaN or
 * an infinity propagates, and anything else is a mismatch that fails every check, whatever the
 * tolerance. The errors (absolute, relative) are taken over the pairs where both are finite. */
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cora::apps {

class ErrorCheck {
public:
    /** One output value and its reference. */
    void add(double got, double want) {
        count_++;
        const bool finite = std::isfinite(got) && std::isfinite(want);
        if (!finite) {
            const bool same = (std::isnan(got) && std::isnan(want)) || got == want; // NaN, or the same infinity
            if (!same) {
                if (mismatches_++ == 0) {
                    first_at_ = count_ - 1;
                    first_got_ = got;
                    first_want_ = want;
                }
            }
            return;
        }
        const double diff = std::fabs(got - want);
        max_abs_ = std::max(max_abs_, diff);
        max_rel_ = std::max(max_rel_, diff / std::max(1.0, std::fabs(want)));
        scale_ = std::max(scale_, std::fabs(want));
    }

    /** Largest |got - want| over the finite pairs. */
    double max_abs() const { return max_abs_; }
    /** Largest |got - want| / max(1, |want|) over the finite pairs. */
    double max_rel() const { return max_rel_; }
    /** Largest |want| over the finite pairs (for an error relative to the output's size). */
    double scale() const { return scale_; }
    /** Pairs where got and want are not the same non-finite value (e.g. NaN where a number was due). */
    int64_t mismatches() const { return mismatches_; }
    int64_t count() const { return count_; }

    /** No non-finite mismatch and max_abs() <= tol. */
    bool abs_within(double tol) const { return mismatches_ == 0 && max_abs_ <= tol; }
    /** No non-finite mismatch and max_rel() <= tol. */
    bool rel_within(double tol) const { return mismatches_ == 0 && max_rel_ <= tol; }

    /** "" when every pair was finite or matched; else e.g. ", 12 of 40 values NaN or infinite where
     * the reference is not, or the reverse (first: element 3 is NaN, expected 0.25)", to append to
     * a check's line. */
    std::string non_finite_note() const {
        if (mismatches_ == 0) return "";
        auto text = [](double v) {
            char b[32];
            std::snprintf(b, sizeof b, "%g", v);
            return std::isnan(v) ? std::string("NaN") : std::string(b);
        };
        return ", " + std::to_string(mismatches_) + " of " + std::to_string(count_) +
               " values NaN or infinite where the reference is not, or the reverse (first: element " +
               std::to_string(first_at_) + " is " + text(first_got_) + ", expected " + text(first_want_) + ")";
    }

private:
    double max_abs_ = 0, max_rel_ = 0, scale_ = 0;
    int64_t count_ = 0, mismatches_ = 0, first_at_ = -1;
    double first_got_ = 0, first_want_ = 0;
};

} // namespace cora::apps
