// A ragged row softmax (max, exp, sum, divide) over [batch, seq(b), heads, seq(b)]: four ops
// in one pipeline, reductions whose extent is a vloop.
#include "common/ragged_testing.h"

using namespace cora;

TEST_CASE("ragged row softmax over [batch, seq(b), heads, seq(b)] matches the reference", "[softmax]") {
    Dim batch("batch"), q("q"), heads("heads"), kv("kv"), r("r");
    const int64_t H = 3;
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 33);
    Shape attn{{batch, B}, {q, len(batch)}, {heads, H}, {kv, len(batch)}};
    Shape rows{{batch, B}, {q, len(batch)}, {heads, H}};
    Tensor S("S", attn);
    Func Mx("Mx", rows), E("E", attn), Sum("Sum", rows), P("P", attn);
    Mx.compute([&](Expr b, Expr i, Expr h) { return maximum(r, len(b), S(b, i, h, r)); });
    E.compute([&](Expr b, Expr i, Expr h, Expr j) { return exp(S(b, i, h, j) - Mx(b, i, h)); });
    Sum.compute([&](Expr b, Expr i, Expr h) { return sum(r, len(b), E(b, i, h, r)); });
    P.compute([&](Expr b, Expr i, Expr h, Expr j) { return E(b, i, h, j) / Sum(b, i, h); });
    Pipeline pipe({P}, "softmax");
    Kernel k = pipe.compile();

    uint32_t seed = 7;
    for (const auto &lengths : testing::length_cases(33, 8, 5)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer s = Buffer::alloc(S, shape), p = Buffer::alloc(P, shape);
        int64_t expect = 0;
        for (int32_t l : lengths)
            expect += H * (int64_t)l * l;
        REQUIRE(s.size() == expect);
        testing::fill_random(s, seed++, -4.0f, 4.0f);
        k.run(shape, {{S, s}, {P, p}});
        testing::require_close(p, reference_evaluate(pipe, shape, {{S, &s}})[0], 1e-5);
        // Each row sums to one (independent of the reference).
        int64_t at = 0;
        for (int32_t l : lengths)
            for (int64_t row = 0; row < (int64_t)l * H; row++) {
                double total = 0;
                for (int32_t j = 0; j < l; j++)
                    total += p.at(at++);
                REQUIRE(total == Approx(1.0).epsilon(1e-5));
            }
    }
}
