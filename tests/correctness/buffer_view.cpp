/** Buffer::view: kernels read and write the caller's memory in place; every mismatch is a
 * RuntimeError naming the tensor, and a failed run writes nothing. */
#include <catch2/catch.hpp>

#include "common/ragged_testing.h"
#include "cora/cora.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

struct RaggedScale {
    Dim batch{"batch"}, s{"s"}, f{"f"};
    Param B{"B", 1, 16};
    LengthArray len{"len", B, 0, 33};
    Tensor X{"X", {{batch, B}, {s, len(batch)}, {f, 8}}};
    Func Y{"Y", {{batch, B}, {s, len(batch)}, {f, 8}}};
    Kernel k = define_and_compile();
    Kernel define_and_compile() {
        Y.compute([&](Expr b, Expr t, Expr c) { return X(b, t, c) * 3.0f + 1.0f; });
        return Pipeline({Y}, "view_scale").compile();
    }
};

} // namespace

TEST_CASE("Buffer::view: a kernel reads and writes the caller's memory, no copy", "[buffer][view]") {
    RaggedScale t;
    for (const auto &lengths : testing::length_cases(33, 16, 77)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(t.B, (int64_t)lengths.size()).set(t.len, lengths);
        const int64_t n = shape.size_of(t.X);
        std::vector<float> x((size_t)n), y((size_t)n, -7.0f);
        for (int64_t i = 0; i < n; i++)
            x[(size_t)i] = 0.25f * (float)(i % 13) - 1.0f;
        const std::vector<float> &cx = x;
        Buffer xv = Buffer::view(t.X, shape, cx.data(), n), yv = Buffer::view(t.Y, shape, y.data(), n);
        REQUIRE_FALSE(xv.owns_data());
        REQUIRE(xv.read_only());
        REQUIRE_FALSE(yv.read_only());
        REQUIRE(xv.raw() == (const void *)x.data());
        REQUIRE(xv.alignment() >= 4);
        t.k.run(shape, {{t.X, xv}, {t.Y, yv}});
        for (int64_t i = 0; i < n; i++)
            REQUIRE(y[(size_t)i] == x[(size_t)i] * 3.0f + 1.0f); // written in place
        // The same through owned buffers and the reference.
        Buffer xo = Buffer::alloc(t.X, shape), yo = Buffer::alloc(t.Y, shape);
        // Owned storage starts on a cache line, so no vector load of it straddles two.
        REQUIRE(xo.alignment() == 64);
        REQUIRE(yo.alignment() == 64);
        std::copy(x.begin(), x.end(), xo.data<float>());
        t.k.run(shape, {{t.X, xo}, {t.Y, yo}});
        auto ref = reference_evaluate(Pipeline({t.Y}, "view_scale"), shape, {{t.X, &xo}});
        testing::require_close(yv, ref[0]);
    }
}

TEST_CASE("Buffer::view: wrong size, type, null, misaligned or read-only output are errors; nothing is written",
          "[buffer][view][errors]") {
    RaggedScale t;
    RaggedShape shape;
    shape.set(t.B, 3).set(t.len, {5, 0, 33});
    const int64_t n = shape.size_of(t.X); // 38 tokens x 8
    REQUIRE(n == 304);
    std::vector<float> x((size_t)n + 1, 1.0f), y((size_t)n + 1, -7.0f);
    REQUIRE_THROWS_AS(Buffer::view(t.X, shape, x.data(), n - 1), RuntimeError);
    REQUIRE_THROWS_WITH(Buffer::view(t.X, shape, x.data(), n - 1),
                        Contains("Buffer::view of tensor 'X': 303 elements given, the tensor has 304 in this shape"));
    REQUIRE_THROWS_WITH(Buffer::view(t.X, shape, x.data(), n + 1), Contains("305 elements given"));
    std::vector<double> xd((size_t)n);
    REQUIRE_THROWS_WITH(Buffer::view(t.X, shape, xd.data(), n),
                        Contains("the data is float64, the tensor's elements are float32"));
    REQUIRE_THROWS_WITH(Buffer::view(t.X, shape, (float *)nullptr, n), Contains("null data for 304 elements"));
    float *misaligned = reinterpret_cast<float *>(reinterpret_cast<char *>(x.data()) + 1);
    REQUIRE_THROWS_WITH(Buffer::view(t.X, shape, misaligned, n), Contains("is not aligned to its 4-byte elements"));
    // An empty batch: a view of no elements may be null.
    RaggedShape empty;
    empty.set(t.B, 1).set(t.len, {0});
    REQUIRE(Buffer::view(t.X, empty, (float *)nullptr, 0).size() == 0);

    // A const view bound to the output: rejected before the kernel runs.
    const std::vector<float> &cy = y;
    Buffer xv = Buffer::view(t.X, shape, x.data(), n), yro = Buffer::view(t.Y, shape, cy.data(), n);
    REQUIRE_THROWS_AS(t.k.run(shape, {{t.X, xv}, {t.Y, yro}}), RuntimeError);
    REQUIRE_THROWS_WITH(t.k.run(shape, {{t.X, xv}, {t.Y, yro}}),
                        Contains("output 'Y' of kernel 'view_scale' is bound to a read-only buffer"));
    // A view made for another shape (one more token): the kernel's own check rejects it.
    RaggedShape other;
    other.set(t.B, 3).set(t.len, {5, 1, 33});
    std::vector<float> y_other((size_t)n + 8, -7.0f);
    Buffer yv_other = Buffer::view(t.Y, other, y_other.data(), n + 8);
    REQUIRE_THROWS_WITH(t.k.run(shape, {{t.X, xv}, {t.Y, yv_other}}), Contains("'Y'"));
    for (float v : y_other)
        REQUIRE(v == -7.0f);
    for (float v : y)
        REQUIRE(v == -7.0f);
}
