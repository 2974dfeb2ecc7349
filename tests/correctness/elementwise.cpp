// CoRA's first example: B = 2 * A over a ragged [batch, len(b)] tensor.
#include "common/ragged_testing.h"

using namespace cora;

TEST_CASE("B = 2 * A over a ragged [batch, len(b)] tensor matches the reference", "[elementwise]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return 2 * A(b, s); });
    Kernel k = Pipeline({Out}, "scale2").compile();

    uint32_t seed = 1;
    for (const auto &lengths : testing::length_cases(40, 8, 11)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
        int64_t total = 0;
        for (int32_t l : lengths)
            total += l;
        REQUIRE(a.size() == total); // packed: no padding at all
        testing::fill_random(a, seed++);
        k.run(shape, {{A, a}, {Out, out}});
        auto ref = reference_evaluate(Pipeline({Out}), shape, {{A, &a}});
        testing::require_close(out, ref[0]);
        for (int64_t i = 0; i < total; i++)
            REQUIRE(out.at(i) == 2 * a.at(i));
    }
}

TEST_CASE("tensors of one ragged layout declared with different Dims match the reference", "[elementwise]") {
    // A[batch, len(batch)] and A2[b2, len(b2)] share their prefix sum (one structural key); the
    // reference's lookups of it bind the variables of the layout it was flattened from (an
    // InternalError "cannot evaluate batch: unbound variable" before).
    Dim batch("batch"), seq("seq"), b2("b2"), s2("s2");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}}), A2("A2", {{b2, B}, {s2, len(b2)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A2(b, s) - 3 * A(b, s); });
    Kernel k = Pipeline({Out}, "two_dim_sets").compile();
    uint32_t seed = 21;
    for (const auto &lengths : testing::length_cases(40, 8, 12)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer a = Buffer::alloc(A, shape), a2 = Buffer::alloc(A2, shape), out = Buffer::alloc(Out, shape);
        testing::fill_random(a, seed++);
        testing::fill_random(a2, seed++);
        k.run(shape, {{A, a}, {A2, a2}, {Out, out}});
        auto ref = reference_evaluate(Pipeline({Out}), shape, {{A, &a}, {A2, &a2}});
        testing::require_close(out, ref[0]);
        REQUIRE(out.size() == a.size());
        for (int64_t i = 0; i < out.size(); i++)
            REQUIRE(out.at(i) == Approx(a2.at(i) - 3 * a.at(i)).epsilon(1e-6).margin(1e-6)); // FMA contraction
    }
}
