// Math functions in generated CPU code: exp of a float32 is cora's own inline cora_expf (so that
// softmax's exp loops vectorize), checked here against the exact value over a sweep of every
// 509th float bit pattern in the range where exp is neither 0 nor inf, the boundaries around
// overflow and the subnormal results, and the special values.
#include "common/ragged_testing.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

float bits_to_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

/** Error of `got` against exp(x) in units in the last place of the float nearest to exp(x)
 * (subnormal results: in units of the smallest subnormal). */
double ulp_error(float x, float got) {
    const double exact = std::exp((double)x);
    const float nearest = (float)exact;
    const float ulp = std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest;
    return std::fabs((double)got - exact) / (double)ulp;
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
    const std::vector<float> special = {0.0f,
                                        -0.0f,
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        std::numeric_limits<float>::quiet_NaN(),
                                        1e30f,
                                        -1e30f,
                                        std::numeric_limits<float>::max(),
                                        -std::numeric_limits<float>::max(),
                                        std::numeric_limits<float>::denorm_min()};
    xs.insert(xs.end(), special.begin(), special.end());

    Dim i("i");
    Param N("N", 1, int64_t{1} << 30);
    Tensor In("In", {{i, N}});
    Func Out("Out", {{i, N}});
    Out.compute([&](Expr x) { return exp(In(x)); });
    Pipeline p({Out}, "exp_sweep");
    Kernel k = p.compile();
    REQUIRE_THAT(k.source(), Contains("cora_expf("));

    RaggedShape shape;
    shape.set(N, (int64_t)xs.size());
    Buffer in = Buffer::alloc(In, shape), out = Buffer::alloc(Out, shape);
    std::memcpy(in.data<float>(), xs.data(), xs.size() * sizeof(float));
    k.run(shape, {{In, in}, {Out, out}});

    double worst = 0;
    float worst_x = 0;
    for (size_t j = 0; j < xs.size(); j++) {
        const float x = xs[j], got = out.data<float>()[j];
        const float want = std::exp(x); // libm: correctly rounded here except within an ulp
        if (std::isnan(x)) {
            REQUIRE(std::isnan(got));
        } else if (std::isinf(want)) {
            INFO("x = " << x);
            REQUIRE(got == want); // overflow to inf where libm's does
        } else if (want == 0.0f) {
            INFO("x = " << x);
            REQUIRE(got <= std::numeric_limits<float>::denorm_min()); // underflow: 0 or within a subnormal ulp
            REQUIRE(got >= 0.0f);
        } else {
            const double e = ulp_error(x, got);
            if (e > worst) worst = e, worst_x = x;
        }
    }
    INFO("worst error " << worst << " ulp at x = " << worst_x << " over " << xs.size() << " inputs");
    REQUIRE(worst <= 1.5); // 1.003 measured with clang 14 (the polynomial's own error); 1.5 leaves
                           // room for a compiler that contracts the multiply-adds differently
    // Exact values where exp is exact.
    REQUIRE(out.data<float>()[xs.size() - special.size()] == 1.0f);     // exp(0)
    REQUIRE(out.data<float>()[xs.size() - special.size() + 1] == 1.0f); // exp(-0)
}
