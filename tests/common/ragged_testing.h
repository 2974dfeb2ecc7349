/** \file Helpers shared by the tests: length cases with the edge cases every feature must
 * pass, random buffers, and comparison of a kernel's output with the reference. */
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/trial_count.h"
#include "cora/cora.h"
#include "runtime/RaggedShapeImpl.h"

namespace cora::testing {

/** Batches of lengths in [0, max_len]: a batch of one (0, 1, max), all zeros, values equal to
 * and one past the padding multiple, the maximum, and random batches. The stages that re-run the
 * tests at a share of the cost (CORA_TEST_RANDOM_SCHEDULES: g++ 35%, sanitizers 25%) keep every
 * edge case and the first share of the random batches (at least one): under the sanitizers the
 * reference interpreter on those batches was most of the encoder test's 92 s. */
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
    const int batches = random_batches > 0 ? scaled_trials(random_batches) : 0;
    for (int r = 0; r < batches; r++) {
        std::uniform_int_distribution<int32_t> n(1, 9), v(min_len, max_len);
        std::vector<int32_t> l(n(rng));
        for (auto &x : l)
            x = v(rng);
        cases.push_back(l);
    }
    return cases;
}

/** The float whose IEEE bits are `x` (for sweeps over bit patterns). */
inline float bits_to_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline std::string describe(const std::vector<int32_t> &l) {
    std::string s = "lengths {";
    for (size_t i = 0; i < l.size(); i++)
        s += (i ? ", " : "") + std::to_string(l[i]);
    return s + "}";
}

/** Random values in [lo, hi) (a float16 buffer gets them rounded to binary16). */
inline void fill_random(Buffer &b, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < b.size(); i++) {
        float v = d(rng);
        if (b.type() == Float16)
            b.data<uint16_t>()[i] = cora_float_to_half(v);
        else
            b.data<float>()[i] = v;
    }
}

/** Element i of a float32 or float16 buffer. */
inline double value_at(const Buffer &b, int64_t i) {
    return b.type() == Float16 ? (double)cora_half_to_float(b.data<uint16_t>()[i]) : (double)b.data<float>()[i];
}

/** The tolerance for comparing `out` to a reference: float16 results are rounded to 11 bits, and
 * the reference's double sums may round the other way: about one unit in the last place at the
 * bottom of a binade (2^-10 relative), so a result one binary16 step off still agrees. */
inline double tolerance_for(const Buffer &out, double tol) { return out.type() == Float16 ? std::max(tol, 1e-3) : tol; }

/** got agrees with want: within a relative tolerance, the same infinity, or both NaN (a reduction
 * over an empty row: the minimum is +inf, and inf - inf is NaN on both sides). */
inline bool agrees(double got, double want, double tol) {
    if (got == want || (std::isnan(got) && std::isnan(want))) return true;
    return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

/** Every element of `out` equals the reference within a relative tolerance. */
inline void require_close(const Buffer &out, const std::vector<double> &ref, double tol = 1e-4) {
    REQUIRE(out.size() == (int64_t)ref.size());
    tol = tolerance_for(out, tol);
    int64_t bad = -1;
    for (int64_t i = 0; i < out.size() && bad < 0; i++) {
        double got = value_at(out, i), want = ref[(size_t)i];
        if (!agrees(got, want, tol)) bad = i;
    }
    if (bad >= 0) {
        INFO("first mismatch at packed element " << bad << ": got " << value_at(out, bad) << ", expected "
                                                 << ref[(size_t)bad]);
        CHECK(bad < 0);
    }
}

/** Two kernels' float32 outputs hold the same sums, element for element, up to how the host compiler
 * contracted each kernel's multiply-adds (g++ contracts two kernel variants differently): within
 * 1e-5 relative. Unlike require_close, a NaN on either side fails. */
inline void require_same_sums(const Buffer &a, const Buffer &b) {
    REQUIRE(a.size() == b.size());
    for (int64_t i = 0; i < a.size(); i++) {
        const double x = a.data<float>()[i], y = b.data<float>()[i];
        INFO("element " << i << ": " << x << " and " << y);
        REQUIRE(std::abs(x - y) <= 1e-5 * (1.0 + std::abs(y)));
    }
}

/** The logical elements of a tensor's buffer in domain order (storage padding skipped). */
inline std::vector<double> logical_values(const Buffer &b, const Tensor &t, const RaggedShape &shape) {
    std::vector<double> v;
    shape_impl(shape)->for_each_element(
        *t.node(), [&](const std::vector<int64_t> &, int64_t offset) { v.push_back(value_at(b, offset)); });
    return v;
}

/** Every logical element of `t` in `out` equals the reference within a relative tolerance. */
inline void require_close(const Buffer &out, const Tensor &t, const RaggedShape &shape, const std::vector<double> &ref,
                          double tol = 1e-4) {
    REQUIRE(out.size() == shape.size_of(t));
    tol = tolerance_for(out, tol);
    std::vector<double> got = logical_values(out, t, shape);
    REQUIRE(got.size() == ref.size());
    int64_t bad = -1;
    for (size_t i = 0; i < got.size() && bad < 0; i++)
        if (!agrees(got[i], ref[i], tol)) bad = (int64_t)i;
    if (bad >= 0) {
        INFO("first mismatch at logical element " << bad << ": got " << got[(size_t)bad] << ", expected "
                                                  << ref[(size_t)bad]);
        CHECK(bad < 0);
    }
}

/** Runs each of `kernels` (Kernels, or anything with run(shape, bindings), all compiled from `p`)
 * and the reference (inputs filled at random) for every length case, the reference evaluated once
 * per case for all of them (it is most of a check's time under the sanitizers); returns the first
 * kernel's outputs of the last case. */
template <class CompiledKernel>
std::vector<std::vector<float>>
check_against_reference(const Pipeline &p, const std::vector<const CompiledKernel *> &kernels,
                        const std::vector<Tensor> &inputs,
                        const std::function<void(RaggedShape &, const std::vector<int32_t> &)> &bind, int32_t max_len,
                        int32_t pad, uint32_t seed) {
    REQUIRE(!kernels.empty());
    std::vector<std::vector<float>> last;
    for (const auto &lengths : testing::length_cases(max_len, pad, seed)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        bind(shape, lengths);
        std::vector<Buffer> ins;
        std::vector<std::pair<Tensor, const Buffer *>> ref_in;
        for (size_t i = 0; i < inputs.size(); i++) {
            ins.push_back(Buffer::alloc(inputs[i], shape));
            testing::fill_random(ins.back(), seed + (uint32_t)i);
        }
        for (size_t i = 0; i < inputs.size(); i++)
            ref_in.emplace_back(inputs[i], &ins[i]);
        std::optional<std::vector<std::vector<double>>> ref;
        last.clear();
        for (size_t which = 0; which < kernels.size(); which++) {
            INFO("kernel " << which << " of " << kernels.size());
            std::vector<Binding> bindings;
            for (size_t i = 0; i < inputs.size(); i++)
                bindings.emplace_back(inputs[i], ins[i]);
            std::vector<Buffer> outs;
            for (const Func &o : p.outputs())
                outs.push_back(Buffer::alloc(o, shape));
            for (size_t i = 0; i < outs.size(); i++)
                bindings.emplace_back(p.outputs()[i], outs[i]);
            kernels[which]->run(shape, bindings);
            if (!ref) ref = reference_evaluate(p, shape, ref_in);
            for (size_t i = 0; i < outs.size(); i++) {
                testing::require_close(outs[i], p.outputs()[i], shape, (*ref)[i]);
                if (which == 0) {
                    auto v = testing::logical_values(outs[i], p.outputs()[i], shape);
                    last.emplace_back(v.begin(), v.end());
                }
            }
        }
    }
    return last;
}

/** check_against_reference of one kernel. */
template <class CompiledKernel>
std::vector<std::vector<float>>
check_against_reference(const Pipeline &p, const CompiledKernel &k, const std::vector<Tensor> &inputs,
                        const std::function<void(RaggedShape &, const std::vector<int32_t> &)> &bind, int32_t max_len,
                        int32_t pad, uint32_t seed) {
    return check_against_reference(p, std::vector<const CompiledKernel *>{&k}, inputs, bind, max_len, pad, seed);
}

/** How often `what` occurs in `s` (e.g. guards in lowered IR). */
inline size_t count_occurrences(const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
        n++;
    return n;
}

/** A vgemm batch from one list of lengths: M = the lengths, N = them reversed, K = them
 * rotated by one, so the three differ per item while the edge cases stay in play. */
inline void bind_vgemm_shape(RaggedShape &s, const Param &B, const LengthArray &Ms, const LengthArray &Ns,
                             const LengthArray &Ks, const std::vector<int32_t> &l) {
    std::vector<int32_t> ns(l.rbegin(), l.rend()), ks(l.size());
    for (size_t i = 0; i < l.size(); i++)
        ks[i] = l[(i + 1) % l.size()];
    s.set(B, (int64_t)l.size()).set(Ms, l).set(Ns, ns).set(Ks, ks);
}

/** The inputs of a ragged vgemm C_b = X_b Y_b over [batch: B, m: Ms(b), r: Ks(b)] x [.., r, n: Ns(b)],
 * sizes up to 23, bound by bind_vgemm_shape. */
struct VgemmInputs {
    Dim batch{"batch"}, m{"m"}, n{"n"}, r{"r"};
    Param B{"B", 1, 16};
    LengthArray Ms{"Ms", B, 0, 23}, Ns{"Ns", B, 0, 23}, Ks{"Ks", B, 0, 23};
    Tensor X{"X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}}, Y{"Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}}};
    /** C = X Y, defined (unscheduled). */
    Func product(const std::string &name) const {
        Func C(name, {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
        C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
        return C;
    }
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> bind() const {
        return [B = B, Ms = Ms, Ns = Ns, Ks = Ks](RaggedShape &s, const std::vector<int32_t> &l) {
            bind_vgemm_shape(s, B, Ms, Ns, Ks, l);
        };
    }
};

/** Runs each of `kernels` (Kernels computing C = A Bm, dense, sizes from params M, N, K) on each
 * (M, N, K) of `sizes` with the same random inputs, against one reference per size. The stages
 * that re-run the tests at a share (CORA_TEST_RANDOM_SCHEDULES below 100: g++, sanitizers) leave
 * out the sizes of more than 2^22 multiply-adds when a smaller one remains: the reference
 * interpreter on 300 x 257 x 300 was most of a 40 s case under the sanitizers, and the tests'
 * smaller sizes still hold partial tiles and more than one block and k-panel. */
template <class... CompiledKernels>
void check_dense_gemm_kernels(const Pipeline &p, const Param &M, const Param &N, const Param &K, const Tensor &A,
                              const Tensor &Bm, const Func &C, const std::vector<std::tuple<int, int, int>> &sizes,
                              const CompiledKernels &...kernels) {
    constexpr int64_t kShareMaxMacs = int64_t{1} << 22;
    const bool share = scaled_trials(100) < 100;
    const bool small_one = std::any_of(sizes.begin(), sizes.end(), [&](const std::tuple<int, int, int> &s) {
        return (int64_t)std::get<0>(s) * std::get<1>(s) * std::get<2>(s) <= kShareMaxMacs;
    });
    for (auto [m, n, kk] : sizes) {
        if (share && small_one && (int64_t)m * n * kk > kShareMaxMacs) continue;
        INFO("M " << m << " N " << n << " K " << kk);
        RaggedShape shape;
        shape.set(M, m).set(N, n).set(K, kk);
        Buffer a = Buffer::alloc(A, shape), b = Buffer::alloc(Bm, shape);
        fill_random(a, 1 + m);
        fill_random(b, 2 + n);
        const std::vector<double> want = reference_evaluate(p, shape, {{A, &a}, {Bm, &b}})[0];
        int which = 0;
        auto check = [&](const auto &k) {
            INFO("kernel " << which++ << " of " << sizeof...(kernels));
            Buffer c = Buffer::alloc(C, shape);
            k.run(shape, {{A, a}, {Bm, b}, {C, c}});
            require_close(c, want);
        };
        (check(kernels), ...);
    }
}

/** check_dense_gemm_kernels for one kernel `k`. */
template <class CompiledKernel>
void check_dense_gemm(const Pipeline &p, const CompiledKernel &k, const Param &M, const Param &N, const Param &K,
                      const Tensor &A, const Tensor &Bm, const Func &C,
                      const std::vector<std::tuple<int, int, int>> &sizes) {
    check_dense_gemm_kernels(p, M, N, K, A, Bm, C, sizes, k);
}

/** Row softmax of scores S over [batch: B, q: len(b), kv: len(b)], as four Funcs: the row
 * max Mx, the exponentials E, the row sum Sum and the result P (returned in that order). */
struct RowSoftmax {
    Func Mx, E, Sum, P;
    RowSoftmax(const Tensor &S, const Dim &batch, const Dim &q, const Dim &kv, const Dim &r, const Param &B,
               const LengthArray &len)
        : Mx("Mx", {{batch, B}, {q, len(batch)}}), E("E", {{batch, B}, {q, len(batch)}, {kv, len(batch)}}),
          Sum("Sum", {{batch, B}, {q, len(batch)}}), P("P", {{batch, B}, {q, len(batch)}, {kv, len(batch)}}) {
        Mx.compute([&](Expr b, Expr i) { return maximum(r, len(b), S(b, i, r)); });
        E.compute([&](Expr b, Expr i, Expr j) { return exp(S(b, i, j) - Mx(b, i)); });
        Sum.compute([&](Expr b, Expr i) { return sum(r, len(b), E(b, i, r)); });
        P.compute([&](Expr b, Expr i, Expr j) { return E(b, i, j) / Sum(b, i); });
    }
};

} // namespace cora::testing
