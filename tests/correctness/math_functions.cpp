// Math functions in generated CPU code: exp and erf of a float32 are cora's own inline cora_expf
// and cora_erff (so that softmax's exp loops and GELU's epilogue vectorize), checked here against
// the exact value (double precision) over a sweep of every 509th float bit pattern where the
// function is neither constant nor 0 / inf, exp's boundaries around overflow and its subnormal
// results, and the special values.
#include "common/ragged_testing.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

using namespace cora;
using Catch::Matchers::Contains;
using testing::bits_to_float;

namespace {

/** Error of `got` against `exact` in units in the last place of the float nearest to it
 * (subnormal results: in units of the smallest subnormal). */
double ulp_error(double exact, float got) {
    const float nearest = std::fabs((float)exact);
    const float ulp = std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest;
    return std::fabs((double)got - exact) / (double)ulp;
}

/** Inputs every function is checked at, first in each test's list of special values. */
std::vector<float> common_special_values() {
    return {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
            std::numeric_limits<float>::quiet_NaN()};
}

/** `f` applied to every element of `xs` by a JIT-compiled kernel (default schedule). */
std::vector<float> run_elementwise(const char *name, const std::function<Expr(Expr)> &f, const std::vector<float> &xs) {
    Dim i("i");
    Param N("N", 1, int64_t{1} << 30);
    Tensor In("In", {{i, N}});
    Func Out("Out", {{i, N}});
    Out.compute([&](Expr x) { return f(In(x)); });
    Pipeline p({Out}, name);
    Kernel k = p.compile();
    REQUIRE_THAT(k.source(), Contains(std::string("cora_") + name + "f("));
    RaggedShape shape;
    shape.set(N, (int64_t)xs.size());
    Buffer in = Buffer::alloc(In, shape), out = Buffer::alloc(Out, shape);
    std::memcpy(in.data<float>(), xs.data(), xs.size() * sizeof(float));
    k.run(shape, {{In, in}, {Out, out}});
    return std::vector<float>(out.data<float>(), out.data<float>() + xs.size());
}

} // namespace

TEST_CASE("exp of float32 in generated code is within about 1 ulp and exact at the special values", "[math]") {
    std::vector<float> xs;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 509) { // both signs: all magnitudes below 105
        const float x = bits_to_float((uint32_t)b);
        if (std::fabs(x) < 105.0f) xs.push_back(x);
    }
    for (float x = 88.0f; x < 89.0f; x = std::nextafter(x, 100.0f)) // the last finite results
        if (x > 88.7f) xs.push_back(x);
    for (float x = -87.5f; x > -104.5f; x -= 0.0137f) // subnormal results and underflow to 0
        xs.push_back(x);
    std::vector<float> special = common_special_values();
    special.insert(special.end(), {1e30f, -1e30f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::denorm_min()});
    xs.insert(xs.end(), special.begin(), special.end());
    const std::vector<float> got = run_elementwise(
        "exp", [](Expr x) { return exp(x); }, xs);

    double worst = 0;
    float worst_x = 0;
    for (size_t j = 0; j < xs.size(); j++) {
        const float x = xs[j], y = got[j];
        const float want = std::exp(x); // libm: correctly rounded here except within an ulp
        if (std::isnan(x)) {
            REQUIRE(std::isnan(y));
        } else if (std::isinf(want)) {
            INFO("x = " << x);
            REQUIRE(y == want); // overflow to inf where libm's does
        } else if (want == 0.0f) {
            INFO("x = " << x);
            REQUIRE(y <= std::numeric_limits<float>::denorm_min()); // underflow: 0 or within a subnormal ulp
            REQUIRE(y >= 0.0f);
        } else {
            const double e = ulp_error(std::exp((double)x), y);
            if (e > worst) worst = e, worst_x = x;
        }
    }
    INFO("worst error " << worst << " ulp at x = " << worst_x << " over " << xs.size() << " inputs");
    WARN("exp: worst error " << worst << " ulp at x = " << worst_x);
    REQUIRE(worst <= 1.5); // 1.003 measured with clang 14 (the polynomial's own error); 1.5 leaves
                           // room for a compiler that contracts the multiply-adds differently
    // Exact values where exp is exact.
    REQUIRE(got[xs.size() - special.size()] == 1.0f);     // exp(0)
    REQUIRE(got[xs.size() - special.size() + 1] == 1.0f); // exp(-0)
}

TEST_CASE("erf of float32 in generated code is within 3 ulp and exact at the special values", "[math]") {
    std::vector<float> xs;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 509) { // both signs, every magnitude below 5
        const float x = bits_to_float((uint32_t)b);
        if (std::fabs(x) < 5.0f) xs.push_back(x);
    }
    for (float x = 0.49f; x < 0.51f; x += 1e-5f) // where the series hands over to 1 - erfc
        xs.push_back(x);
    std::vector<float> special = common_special_values();
    special.insert(special.end(), {20.0f, -1e30f});
    xs.insert(xs.end(), special.begin(), special.end());
    const std::vector<float> got = run_elementwise(
        "erf", [](Expr x) { return erf(x); }, xs);
    size_t wrong_sign = 0;
    double worst = 0;
    float worst_x = 0;
    for (size_t j = 0; j < xs.size(); j++) {
        const float x = xs[j], y = got[j];
        if (std::isnan(x)) {
            REQUIRE(std::isnan(y));
            continue;
        }
        const double e = ulp_error(std::erf((double)x), y);
        if (e > worst) worst = e, worst_x = x;
        wrong_sign += std::signbit(y) != std::signbit(x); // odd, signed zeros included
    }
    REQUIRE(wrong_sign == 0);
    INFO("worst error " << worst << " ulp at x = " << worst_x << " over " << xs.size() << " inputs");
    WARN("erf: worst error " << worst << " ulp at x = " << worst_x);
    REQUIRE(worst <= 3.0); // 2.7 measured with clang 14
    const size_t s0 = xs.size() - special.size();
    REQUIRE(got[s0] == 0.0f);
    REQUIRE(got[s0 + 2] == 1.0f);
    REQUIRE(got[s0 + 3] == -1.0f);
    REQUIRE(got[s0 + 5] == 1.0f);
    REQUIRE(got[s0 + 6] == -1.0f);
}
