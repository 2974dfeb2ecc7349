// Multi-op pipelines, extents that depend on several outer dims, storage layouts larger than
// the loop domain, and integer semantics of the generated code.
#include "common/ragged_testing.h"

using namespace cora;

TEST_CASE("two-op pipeline: a consumer reads a ragged producer", "[pipeline]") {
    Dim batch("batch"), seq("seq"), r("r");
    Param B("B", 1, 32);
    LengthArray len("len", B, 0, 50);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func T("T", {{batch, B}, {seq, len(batch)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    T.compute([&](Expr b, Expr s) { return A(b, s) * A(b, s) + 1; });
    // The consumer reads the producer at its own element and over its whole row.
    Out.compute([&](Expr b, Expr s) { return T(b, s) * 3 - sum(r, len(b), T(b, r)) / cast(Float32, len(b)); });
    Pipeline pipe({Out}, "two_ops");
    Kernel k = pipe.compile();
    testing::check_against_reference(
        pipe, k, {A}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); },
        50, 16, 21);
}

TEST_CASE("a pipeline with two outputs computes both", "[pipeline]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Sq("Sq", {{batch, B}, {seq, len(batch)}}), Neg("Neg", {{batch, B}, {seq, len(batch)}});
    Sq.compute([&](Expr b, Expr s) { return A(b, s) * A(b, s); });
    Neg.compute([&](Expr b, Expr s) { return -Sq(b, s); });
    Pipeline pipe({Neg, Sq}, "two_outputs");
    Kernel k = pipe.compile();
    RaggedShape shape;
    shape.set(B, 3).set(len, {4, 0, 20});
    Buffer a = Buffer::alloc(A, shape), sq = Buffer::alloc(Sq, shape), neg = Buffer::alloc(Neg, shape);
    testing::fill_random(a, 3);
    k.run(shape, {{A, a}, {Sq, sq}, {Neg, neg}});
    auto ref = reference_evaluate(pipe, shape, {{A, &a}});
    testing::require_close(neg, ref[0]);
    testing::require_close(sq, ref[1]);
}

TEST_CASE("an extent that depends on two outer dims (nested raggedness)", "[pipeline][nested]") {
    // Window w(b, i) = min(i + 1, W(b)): depends on batch (through a length array) and on the
    // outer loop index i. Its storage needs a two-level prefix-sum aux array.
    Dim batch("batch"), seq("seq"), win("win");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30), W("W", B, 1, 8);
    Tensor X("X", {{batch, B}, {seq, len(batch)}});
    Func Band("Band", {{batch, B}, {seq, len(batch)}, {win, min(seq + 1, W(batch))}});
    // Band[b, i, t] = X[b, i - t] * (t + 1): a causal band of width W(b).
    Band.compute([&](Expr b, Expr i, Expr t) { return X(b, i - t) * cast(Float32, t + 1); });
    Func RowSum("RowSum", {{batch, B}, {seq, len(batch)}});
    Dim r("r");
    RowSum.compute([&](Expr b, Expr i) { return sum(r, min(i + 1, W(b)), Band(b, i, r)); });
    Pipeline pipe({Band, RowSum}, "band");
    Kernel k = pipe.compile();
    uint32_t seed = 70;
    for (const auto &lengths : testing::length_cases(30, 8, 33)) {
        INFO(testing::describe(lengths));
        std::vector<int32_t> widths(lengths.size());
        for (size_t i = 0; i < widths.size(); i++)
            widths[i] = 1 + (int32_t)((i * 5 + lengths[i]) % 8);
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths).set(W, widths);
        int64_t expect = 0;
        for (size_t b = 0; b < lengths.size(); b++)
            for (int32_t i = 0; i < lengths[b]; i++)
                expect += std::min(i + 1, widths[b]);
        Buffer x = Buffer::alloc(X, shape), band = Buffer::alloc(Band, shape), rs = Buffer::alloc(RowSum, shape);
        REQUIRE(band.size() == expect);
        testing::fill_random(x, seed++);
        k.run(shape, {{X, x}, {Band, band}, {RowSum, rs}});
        auto ref = reference_evaluate(pipe, shape, {{X, &x}});
        testing::require_close(band, ref[0]);
        testing::require_close(rs, ref[1]);
    }
}

TEST_CASE("a Func stored in a layout larger than its loop domain", "[pipeline][storage]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
    Out.store_in({{batch, B}, {seq, ceil_mult(len(batch), 4)}});
    Kernel k = Pipeline({Out}, "stored_padded").compile();
    std::vector<int32_t> lengths{3, 0, 4, 5, 20, 1};
    RaggedShape shape;
    shape.set(B, (int64_t)lengths.size()).set(len, lengths);
    Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
    int64_t padded_total = 0;
    for (int32_t l : lengths)
        padded_total += (l + 3) / 4 * 4;
    REQUIRE(out.size() == padded_total);
    for (int64_t i = 0; i < out.size(); i++)
        out.at(i) = -7.0f; // padding must stay untouched
    testing::fill_random(a, 1);
    k.run(shape, {{A, a}, {Out, out}});
    int64_t src = 0, dst = 0;
    for (int32_t l : lengths) {
        int32_t stored = (l + 3) / 4 * 4;
        for (int32_t s = 0; s < stored; s++, dst++) {
            if (s < l)
                REQUIRE(out.at(dst) == a.at(src++) + 1.0f);
            else
                REQUIRE(out.at(dst) == -7.0f);
        }
    }
    // Padded dense round trip: logical elements only; storage padding is not part of the tensor.
    auto dense = out.to_padded(Out, shape, {(int64_t)lengths.size(), 20}, 0.0f);
    int64_t row_start = 0;
    for (size_t b = 0; b < lengths.size(); b++) {
        int32_t stored = (lengths[b] + 3) / 4 * 4;
        for (int32_t s = 0; s < 20; s++)
            REQUIRE(dense[b * 20 + s] == (s < lengths[b] ? out.at(row_start + s) : 0.0f));
        row_start += stored;
    }
}

TEST_CASE("generated integer division and modulo floor like the IR semantics", "[pipeline][semantics]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 4);
    LengthArray len("len", B, 0, 30);
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) {
        Expr x = s - 13;
        return cast(Float32, (x / 4) * 100 + x % 4 + select(x < 0 && b >= 0, 1000, 0));
    });
    Pipeline pipe({Out}, "intsem");
    Kernel k = pipe.compile();
    RaggedShape shape;
    shape.set(B, 2).set(len, {30, 7});
    Buffer out = Buffer::alloc(Out, shape);
    k.run(shape, {{Out, out}});
    testing::require_close(out, reference_evaluate(pipe, shape, {})[0], 0);
    REQUIRE(out.at(0) == -400 + 3 + 1000); // -13 / 4 == -4, -13 % 4 == 3
}

TEST_CASE("a loop domain with a derived extent floor_mult(len(b), 4) reads its input in bounds",
          "[pipeline][derived]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Full("Full", {{batch, B}, {seq, floor_mult(len(batch), 4)}}); // full tiles of 4 only
    Full.compute([&](Expr b, Expr s) { return A(b, s) - cast(Float32, len(b) % 4); });
    Pipeline pipe({Full}, "full_tiles");
    Kernel k = pipe.compile();
    uint32_t seed = 90;
    for (const auto &lengths : testing::length_cases(40, 4, 17)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        int64_t expect = 0;
        for (int32_t l : lengths)
            expect += l / 4 * 4;
        Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Full, shape);
        REQUIRE(out.size() == expect);
        testing::fill_random(a, seed++);
        k.run(shape, {{A, a}, {Full, out}});
        testing::require_close(out, reference_evaluate(pipe, shape, {{A, &a}})[0]);
    }
}

TEST_CASE("a clamped neighbour read is accepted with Z3 and matches the reference", "[pipeline][z3]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Diff("Diff", {{batch, B}, {seq, len(batch)}});
    // Forward difference with the last element clamped to itself.
    Diff.compute([&](Expr b, Expr s) { return A(b, select(s + 1 < len(b), s + 1, s)) - A(b, s); });
    Pipeline pipe({Diff}, "forward_diff");
    CompileOptions bounds_only;
    bounds_only.use_z3 = 0;
    REQUIRE_THROWS_WITH(pipe.compile(bounds_only), Catch::Matchers::Contains("read of 'A' in dim 'seq'"));
    CompileOptions with_z3;
    with_z3.use_z3 = 1;
    Kernel k = pipe.compile(with_z3);
    REQUIRE_THAT(k.prover_stats(),
                 Catch::Matchers::Contains("proved by Z3") && !Catch::Matchers::Contains(" 0 proved by Z3"));
    uint32_t seed = 300;
    for (const auto &lengths : testing::length_cases(40, 8, 23)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Diff, shape);
        testing::fill_random(a, seed++);
        k.run(shape, {{A, a}, {Diff, out}});
        testing::require_close(out, reference_evaluate(pipe, shape, {{A, &a}})[0]);
    }
}
