// float16 storage (IEEE binary16) with float32 arithmetic: the conversions of cora_runtime.h
// (exhaustively and against round-to-nearest-even), float16 tensors and Funcs on the CPU against
// the reference on the edge-case batches, buffers, and the errors that keep partial sums and
// inlined values out of float16. The GPU side is in gpu_schedules.cpp.
#include "common/ragged_testing.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace cora;
using Catch::Matchers::Contains;
using testing::bits_to_float;

namespace {

/** `h` is a nearest binary16 to the finite float `x` below 65520 in magnitude, the even one on a tie. */
void require_nearest(float x, uint16_t h) {
    INFO("x = " << x << " (bits " << std::hex <<
         [&] {
             uint32_t b;
             std::memcpy(&b, &x, sizeof b);
             return b;
         }() << "), half bits "
                << h << std::dec);
    const uint16_t mag = h & 0x7fffu;
    REQUIRE(mag < 0x7c00u); // finite
    if (mag != 0) REQUIRE(((h & 0x8000u) != 0) == std::signbit(x));
    const double ax = std::fabs((double)x), got = cora_half_to_float(mag);
    const double err = std::fabs(ax - got);
    for (int step : {-1, 1}) {
        int other = (int)mag + step;
        if (other < 0 || other >= 0x7c00) continue;
        const double alt = std::fabs(ax - (double)cora_half_to_float((uint16_t)other));
        REQUIRE(err <= alt);
        if (err == alt) REQUIRE((mag & 1u) == 0); // a tie goes to the even neighbour
    }
}

struct Projection {
    Dim batch{"batch"}, seq{"seq"}, k{"k"}, n{"n"}, tok{"tok"}, no{"no"}, ni{"ni"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 40};
    Tensor X, W;
    Tensor bias{"bias", {{n, 20}}};
    Func Y;
    Projection(Type in, Type out)
        : X("X", {{batch, B}, {seq, len(batch)}, {k, 24}}, in), W("W", {{k, 24}, {n, 20}}, in),
          Y("Y", {{batch, B}, {seq, len(batch)}, {n, 20}}, out) {
        Y.compute([&](Expr b, Expr s, Expr j) { return sum(k, 24, X(b, s, k) * W(k, j)) + bias(j); });
    }
    void bind(RaggedShape &s, const std::vector<int32_t> &l) const { s.set(B, (int64_t)l.size()).set(len, l); }
};

} // namespace

TEST_CASE("float16 conversions: exact widening, nearest-even narrowing, infinities and NaN", "[float16]") {
    SECTION("every binary16 value widens exactly and narrows back to itself") {
        for (uint32_t h = 0; h < 0x10000u; h++) {
            float f = cora_half_to_float((uint16_t)h);
            const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
            if (e == 0x1f && m != 0) {
                REQUIRE(std::isnan(f));
                REQUIRE(std::isnan(cora_half_to_float(cora_float_to_half(f))));
                continue;
            }
            // The value, computed independently: (-1)^s * 2^(e - 15) * (1 + m / 1024), or a subnormal.
            double want = e == 0x1f ? std::numeric_limits<double>::infinity()
                          : e == 0  ? std::ldexp((double)m, -24)
                                    : std::ldexp(1.0 + m / 1024.0, (int)e - 15);
            if (h & 0x8000u) want = -want;
            INFO("half bits " << h);
            REQUIRE((double)f == want);
            REQUIRE(std::signbit(f) == ((h & 0x8000u) != 0));
            REQUIRE(cora_float_to_half(f) == h);
        }
    }
    SECTION("narrowing rounds to the nearest binary16, ties to even") {
        std::mt19937 rng(7);
        // Random bit patterns over the range binary16 covers (exponents 2^-26 .. 2^16), and the
        // exact midpoints between neighbouring values (ties).
        std::uniform_int_distribution<uint32_t> exp_bits(101, 142), mantissa(0, 0x7fffff), sign(0, 1);
        for (int i = 0; i < 200000; i++) {
            float x = bits_to_float((sign(rng) << 31) | (exp_bits(rng) << 23) | mantissa(rng));
            if (std::fabs(x) >= 65520.0f) {
                REQUIRE((cora_float_to_half(x) & 0x7fffu) == 0x7c00u);
                continue;
            }
            require_nearest(x, cora_float_to_half(x));
        }
        for (uint32_t h = 0; h < 0x7bffu; h++) {
            float mid = (float)(((double)cora_half_to_float((uint16_t)h) + cora_half_to_float((uint16_t)(h + 1))) / 2);
            uint16_t got = cora_float_to_half(mid);
            require_nearest(mid, got);
            REQUIRE(got == ((h & 1u) ? h + 1 : h));
            REQUIRE(cora_float_to_half(-mid) == (got | 0x8000u));
        }
    }
    SECTION("the edges") {
        REQUIRE(cora_float_to_half(0.0f) == 0x0000u);
        REQUIRE(cora_float_to_half(-0.0f) == 0x8000u);
        REQUIRE(cora_float_to_half(1.0f) == 0x3c00u);
        REQUIRE(cora_float_to_half(65504.0f) == 0x7bffu);   // the largest finite value
        REQUIRE(cora_float_to_half(65519.996f) == 0x7bffu); // just below the midpoint to infinity
        REQUIRE(cora_float_to_half(65520.0f) == 0x7c00u);   // the midpoint: ties to even = infinity
        REQUIRE(cora_float_to_half(1e30f) == 0x7c00u);
        REQUIRE(cora_float_to_half(-INFINITY) == 0xfc00u);
        REQUIRE(cora_float_to_half(std::ldexp(1.0f, -14)) == 0x0400u); // the smallest normal
        REQUIRE(cora_float_to_half(std::ldexp(1.0f, -24)) == 0x0001u); // the smallest subnormal
        REQUIRE(cora_float_to_half(std::ldexp(1.0f, -25)) == 0x0000u); // half of it: a tie, to zero
        REQUIRE(cora_float_to_half(std::ldexp(1.5f, -25)) == 0x0001u);
        REQUIRE(cora_float_to_half(std::ldexp(1.0f, -40)) == 0x0000u);
        REQUIRE((cora_float_to_half(NAN) & 0x7c00u) == 0x7c00u);
        REQUIRE((cora_float_to_half(NAN) & 0x3ffu) != 0);
    }
#if defined(__FLT16_MAX__) && !defined(__clang__) && (defined(__x86_64__) || __GNUC__ >= 13)
    SECTION("the compiler's own _Float16 conversion agrees bit for bit") {
        std::mt19937 rng(11);
        std::uniform_int_distribution<uint32_t> any;
        for (int i = 0; i < 200000; i++) {
            float x = bits_to_float(any(rng));
            if (std::isnan(x)) continue;
            _Float16 h = (_Float16)x;
            uint16_t bits;
            std::memcpy(&bits, &h, sizeof bits);
            INFO("x = " << x);
            REQUIRE(cora_float_to_half(x) == bits);
        }
    }
#endif
}

TEST_CASE("float16 tensors and Funcs on the CPU: float32 arithmetic, stores rounded once", "[float16]") {
    for (auto [in, out] : {std::pair{Float16, Float16}, std::pair{Float16, Float32}, std::pair{Float32, Float16}}) {
        DYNAMIC_SECTION("inputs " << in.str() << ", output " << out.str()) {
            for (int schedule = 0; schedule < 3; schedule++) {
                DYNAMIC_SECTION("schedule " << schedule) {
                    Projection pr(in, out);
                    if (schedule == 1) {
                        // Packed tokens, 4-column register tiles holding float32 sums.
                        pr.Y.fuse(pr.batch, pr.seq, pr.tok).split(pr.n, pr.no, pr.ni, 4);
                        pr.Y.reorder({pr.tok, pr.no, pr.k, pr.ni}).cache_write(pr.no).parallel(pr.tok);
                    } else if (schedule == 2) {
                        pr.Y.fuse(pr.batch, pr.seq, pr.tok).vectorize(pr.n); // the reduction stays inside
                    }
                    Pipeline p({pr.Y}, "f16_projection");
                    Kernel kern = p.compile();
                    // (The source begins with cora_runtime.h, which defines both conversions.)
                    if (in == Float16) REQUIRE_THAT(kern.source(), Contains("cora_half_to_float(X"));
                    if (out == Float16) REQUIRE_THAT(kern.source(), Contains("= cora_float_to_half("));
                    testing::check_against_reference(
                        p, kern, {pr.X, pr.W, pr.bias},
                        [&](RaggedShape &s, const std::vector<int32_t> &l) { pr.bind(s, l); }, 40, 8, 3);
                }
            }
        }
    }
    SECTION("an elementwise float16 op: vector loops widen element by element") {
        Dim batch("batch"), seq("seq"), d("d");
        Param B("B", 1, 64);
        LengthArray len("len", B, 0, 33);
        Tensor X("X", {{batch, B}, {seq, len(batch)}, {d, 16}}, Float16);
        Func Y("Y", {{batch, B}, {seq, len(batch)}, {d, 16}}, Float16);
        Y.compute([&](Expr b, Expr s, Expr j) { return X(b, s, j) * 3.0f + 0.25f; });
        Y.vectorize(d);
        Pipeline p({Y}, "f16_map");
        Kernel kern = p.compile();
        auto out = testing::check_against_reference(
            p, kern, {X},
            [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); }, 33, 8, 5);
        // Exactly the reference: one float32 multiply-add, rounded once.
        RaggedShape shape;
        shape.set(B, 1).set(len, {3});
        Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(Y, shape);
        testing::fill_random(x, 9, -100.0f, 100.0f);
        kern.run(shape, {{X, x}, {Y, y}});
        for (int64_t i = 0; i < y.size(); i++) {
            float want = cora_half_to_float(x.data<uint16_t>()[i]) * 3.0f + 0.25f;
            REQUIRE(y.data<uint16_t>()[i] == cora_float_to_half(want));
        }
    }
}

TEST_CASE("float16 buffers: padded packing rounds, views take the bits", "[float16]") {
    Dim batch("batch"), seq("seq"), d("d");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 4);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {d, 2}}, Float16);
    RaggedShape shape;
    shape.set(B, 2).set(len, {1, 3});
    std::vector<float> padded(2 * 4 * 2);
    for (size_t i = 0; i < padded.size(); i++)
        padded[i] = 0.1f * (float)i + 1000.0f;
    Buffer b = Buffer::from_padded(X, shape, padded, {2, 4, 2});
    REQUIRE(b.type() == Float16);
    REQUIRE(b.size() == 8);
    REQUIRE(b.data<uint16_t>()[0] == cora_float_to_half(1000.0f));
    std::vector<float> back = b.to_padded(X, shape, {2, 4, 2}, -1.0f);
    for (size_t i = 0; i < back.size(); i++) {
        bool present = (i / 8 == 0 && (i % 8) / 2 < 1) || (i / 8 == 1 && (i % 8) / 2 < 3);
        REQUIRE(back[i] == (present ? cora_half_to_float(cora_float_to_half(padded[i])) : -1.0f));
    }
    std::vector<uint16_t> bits(8, 0x3c00u);
    Buffer v = Buffer::view(X, shape, bits.data(), 8);
    REQUIRE(v.type() == Float16);
    REQUIRE(!v.owns_data());
    const std::vector<uint16_t> &cbits = bits;
    REQUIRE(Buffer::view(X, shape, cbits.data(), 8).read_only());
    std::vector<float> floats(8);
    REQUIRE_THROWS_WITH(Buffer::view(X, shape, floats.data(), 8),
                        Contains("Buffer::view of tensor 'X': the data is float32, the tensor's elements are float16"));
    Tensor I("I", {{batch, B}}, Int32);
    REQUIRE_THROWS_WITH(Buffer::from_padded(I, shape, {0, 0}, {2}), Contains("is int32, not float32 or float16"));
}

TEST_CASE("float16 errors: casts, inlining and partial sums in storage", "[float16][errors]") {
    Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), jo("jo"), ji("ji");
    Param N("N", 0, 64);
    Tensor A("A", {{i, N}, {k, N}}, Float16), Bm("Bm", {{k, N}, {j, N}}, Float16);
    REQUIRE_THROWS_AS(cast(Float16, A(i, k) * 2.0f), CompileError);
    REQUIRE_THROWS_WITH(cast(Float16, A(i, k) * 2.0f), Contains("float16 is a storage type; values are float32"));
    SECTION("a float16 Func is defined by a float32 value") {
        Func C("C", {{i, N}}, Float16);
        REQUIRE_THROWS_WITH(C.compute([&](Expr x) { return cast(Int64, x); }),
                            Contains("Func 'C' holds float16 but its definition") &&
                                Contains("(a float16 Func is defined by a float32 value)"));
    }
    SECTION("a float16 Func does not reduce across threads") {
        Func R("R", {{i, N}}, Float16);
        R.compute([&](Expr x) { return sum(k, N, A(x, k)); });
        Dim ko("ko"), ki("ki");
        R.split(k, ko, ki, 32).reorder({i, ki, ko}).gpu_blocks(i).gpu_threads(ki);
        CompileOptions o;
        o.target = Target::CudaEmulated;
        REQUIRE_THROWS_WITH(Pipeline({R}, "f16_thread_sum").compile(o),
                            Contains("Func 'R' holds float16 and reduces across threads (loop 'ki')") &&
                                Contains("reduce into a float32 Func and convert in a consumer"));
    }
    SECTION("an inlined float16 Func would skip its rounding") {
        Func H("H", {{i, N}, {k, N}}, Float16), C("C", {{i, N}, {k, N}});
        H.compute([&](Expr x, Expr y) { return A(x, y) * 2.0f; });
        C.compute([&](Expr x, Expr y) { return H(x, y) + 1.0f; });
        H.compute_inline();
        REQUIRE_THROWS_WITH(
            Pipeline({C}, "inline_f16").compile(),
            Contains("compute_inline of Func 'H': it holds float16, a storage type whose stores round"));
    }
    SECTION("a scheduled reduction must keep its partial sums in a float32 tile") {
        Func C("C", {{i, N}, {j, N}}, Float16);
        C.compute([&](Expr x, Expr y) { return sum(k, N, A(x, k) * Bm(k, y)); });
        C.split(i, io, ii, 4).reorder({io, k, ii, j});
        REQUIRE_THROWS_WITH(Pipeline({C}, "f16_panels").compile(),
                            Contains("Func 'C' holds float16 and its scheduled reduction loop 'k' is outside any "
                                     "cache_write tile") &&
                                Contains("cache_write it at a loop that encloses all its reduction loops"));
        Func D("D", {{i, N}, {j, N}}, Float16);
        D.compute([&](Expr x, Expr y) { return sum(k, N, A(x, k) * Bm(k, y)); });
        D.split(i, io, ii, 4).reorder({io, k, ii, j}).cache_write(ii);
        REQUIRE_THROWS_WITH(Pipeline({D}, "f16_panels_tile").compile(), Contains("is outside its cache_write tile"));
        // The tile around the reduction: accepted, and exact to the reference.
        Func E("E", {{i, N}, {j, N}}, Float16);
        E.compute([&](Expr x, Expr y) { return sum(k, N, A(x, k) * Bm(k, y)); });
        E.split(i, io, ii, 4).split(j, jo, ji, 8).reorder({io, jo, ii, ji, k}).cache_write(jo);
        Pipeline p({E}, "f16_tile");
        Kernel kern = p.compile();
        for (int n : {0, 1, 4, 5, 64}) {
            RaggedShape shape;
            shape.set(N, n);
            Buffer a = Buffer::alloc(A, shape), b = Buffer::alloc(Bm, shape), c = Buffer::alloc(E, shape);
            testing::fill_random(a, 1 + n);
            testing::fill_random(b, 2 + n);
            kern.run(shape, {{A, a}, {Bm, b}, {E, c}});
            testing::require_close(c, reference_evaluate(p, shape, {{A, &a}, {Bm, &b}})[0]);
        }
    }
}
