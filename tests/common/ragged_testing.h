/** \file Helpers shared by the tests: length cases with the edge cases every feature must
 * pass, random buffers, and comparison of a kernel's output with the reference. */
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cora/cora.h"
#include "runtime/RaggedShapeImpl.h"

namespace cora::testing {

/** Batches of lengths in [0, max_len]: a batch of one (0, 1, max), all zeros, values equal to
 * and one past the padding multiple, the maximum, and random batches. */
inline std::vector<std::vector<int32_t>> length_cases(int32_t max_len, int32_t pad, uint32_t seed,
                                                      int random_batches = 3, int32_t min_len = 0) {
    std::vector<std::vector<int32_t>> cases;
    auto clamp = [&](int32_t v) { return std::clamp(v, min_len, max_len); };
    cases.push_back({clamp(0)});
    cases.push_back({clamp(1)});
    cases.push_back({clamp(max_len)});
    cases.push_back({clamp(0), clamp(0), clamp(0)});
    cases.push_back({clamp(pad), clamp(pad + 1), clamp(2 * pad), clamp(pad - 1), clamp(0), clamp(1), clamp(max_len)});
    std::mt19937 rng(seed);
    for (int r = 0; r < random_batches; r++) {
        std::uniform_int_distribution<int32_t> n(1, 9), v(min_len, max_len);
        std::vector<int32_t> l(n(rng));
        for (auto &x : l)
            x = v(rng);
        cases.push_back(l);
    }
    return cases;
}

inline std::string describe(const std::vector<int32_t> &l) {
    std::string s = "lengths {";
    for (size_t i = 0; i < l.size(); i++)
        s += (i ? ", " : "") + std::to_string(l[i]);
    return s + "}";
}

inline void fill_random(Buffer &b, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < b.size(); i++)
        b.data<float>()[i] = d(rng);
}

/** Every element of `out` equals the reference within a relative tolerance. */
inline void require_close(const Buffer &out, const std::vector<double> &ref, double tol = 1e-4) {
    REQUIRE(out.size() == (int64_t)ref.size());
    int64_t bad = -1;
    for (int64_t i = 0; i < out.size() && bad < 0; i++) {
        double got = out.data<float>()[i], want = ref[(size_t)i];
        if (!(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)))) bad = i;
    }
    if (bad >= 0) {
        INFO("first mismatch at packed element " << bad << ": got " << out.data<float>()[bad] << ", expected "
                                                 << ref[(size_t)bad]);
        CHECK(bad < 0);
    }
}

/** The logical elements of a tensor's buffer in domain order (storage padding skipped). */
inline std::vector<double> logical_values(const Buffer &b, const Tensor &t, const RaggedShape &shape) {
    std::vector<double> v;
    shape.impl()->for_each_element(
        *t.node(), [&](const std::vector<int64_t> &, int64_t offset) { v.push_back(b.data<float>()[offset]); });
    return v;
}

/** Every logical element of `t` in `out` equals the reference within a relative tolerance. */
inline void require_close(const Buffer &out, const Tensor &t, const RaggedShape &shape, const std::vector<double> &ref,
                          double tol = 1e-4) {
    REQUIRE(out.size() == shape.size_of(t));
    std::vector<double> got = logical_values(out, t, shape);
    REQUIRE(got.size() == ref.size());
    int64_t bad = -1;
    for (size_t i = 0; i < got.size() && bad < 0; i++)
        if (!(std::fabs(got[i] - ref[i]) <= tol * std::max(1.0, std::fabs(ref[i])))) bad = (int64_t)i;
    if (bad >= 0) {
        INFO("first mismatch at logical element " << bad << ": got " << got[(size_t)bad] << ", expected "
                                                  << ref[(size_t)bad]);
        CHECK(bad < 0);
    }
}

} // namespace cora::testing
