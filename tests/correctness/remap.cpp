// Thread remapping: a longest-first order built by the prelude, and a user permutation that the
// kernel checks on every call. CoRA's unchecked remap skipped a block row at M >= 4096; here
// trmm with M = 4096 and 5000 must compute every row.
#include "common/ragged_testing.h"

#include "cora_runtime.h"

using namespace cora;
using Catch::Matchers::Contains;

TEST_CASE("longest-first remap of trmm rows computes every row at M = 4096 and 5000", "[remap][trmm]") {
    Dim i("i"), j("j"), k("k"), rank("rank");
    Param M("M", 1, 8192);
    const int64_t N = 2;
    Tensor L("L", {{i, M}, {k, i + 1}}); // packed lower triangle
    Tensor X("X", {{k, M}, {j, N}});
    Func C("C", {{i, M}, {j, N}});
    C.compute([&](Expr ii, Expr jj) { return sum(k, ii + 1, L(ii, k) * X(k, jj)); });
    C.remap_longest_first(i, rank, i + 1).parallel(rank);
    Kernel kern = Pipeline({C}, "trmm_longest_first").compile();
    REQUIRE_THAT(kern.lowered(), Contains("order_i"));
    for (int64_t m : {4096, 5000}) {
        INFO("M = " << m);
        RaggedShape shape;
        shape.set(M, m);
        Buffer l = Buffer::alloc(L, shape), x = Buffer::alloc(X, shape), c = Buffer::alloc(C, shape);
        testing::fill_random(l, 1);
        testing::fill_random(x, 2);
        for (int64_t e = 0; e < c.size(); e++)
            c.at(e) = std::nanf("");
        kern.run(shape, {{L, l}, {X, x}, {C, c}});
        // Direct reference (double accumulation): row r of L starts at r * (r + 1) / 2.
        int64_t bad = -1;
        for (int64_t r = 0; r < m && bad < 0; r++) {
            for (int64_t col = 0; col < N; col++) {
                double want = 0;
                for (int64_t q = 0; q <= r; q++)
                    want += (double)l.at(r * (r + 1) / 2 + q) * x.at(q * N + col);
                double got = c.at(r * N + col);
                if (!(std::fabs(got - want) <= 1e-3 * std::max(1.0, std::fabs(want)))) bad = r;
            }
        }
        INFO("first wrong row " << bad);
        REQUIRE(bad < 0);
    }
    // The order itself: decreasing cost, i.e. rows M-1 .. 0.
    RaggedShape shape;
    shape.set(M, 5);
    Buffer l = Buffer::alloc(L, shape), x = Buffer::alloc(X, shape), c = Buffer::alloc(C, shape);
    auto args = kern.make_args(shape, {{L, l}, {X, x}, {C, c}});
    bool found = false;
    for (size_t a = 0; a < args.size(); a++) {
        if (kern.arguments()[a].name != "order_i") continue;
        found = true;
        const int64_t *order = (const int64_t *)args[a].data;
        REQUIRE(std::vector<int64_t>(order, order + args[a].count) == std::vector<int64_t>{4, 3, 2, 1, 0});
    }
    REQUIRE(found);
}

TEST_CASE("longest-first remap of a ragged batch and a user permutation match the reference", "[remap]") {
    Dim batch("batch"), seq("seq"), rank("rank"), tok("tok");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20), perm("perm", B, 0, 15);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func Out("Out", {{batch, B}, {seq, len(batch)}});
            Out.compute([&](Expr b, Expr s) { return A(b, s) * 2 + cast(Float32, b); });
            if (variant == 0) Out.remap_longest_first(batch, rank, len(batch));
            if (variant == 1) Out.remap(batch, rank, perm);
            if (variant == 2) Out.remap_longest_first(batch, rank, len(batch)).fuse(rank, seq, tok).parallel(tok);
            Pipeline p({Out}, "remap_" + std::to_string(variant));
            Kernel kern = p.compile();
            for (const auto &lengths : testing::length_cases(20, 4, 9)) {
                INFO(testing::describe(lengths));
                RaggedShape shape;
                std::vector<int32_t> reversed(lengths.size());
                for (size_t q = 0; q < lengths.size(); q++)
                    reversed[q] = (int32_t)(lengths.size() - 1 - q);
                shape.set(B, (int64_t)lengths.size()).set(len, lengths).set(perm, reversed);
                Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
                testing::fill_random(a, 4);
                kern.run(shape, {{A, a}, {Out, out}});
                testing::require_close(out, Out, shape, reference_evaluate(p, shape, {{A, &a}})[0]);
            }
        }
    }
}

TEST_CASE("a remap that is not a permutation is rejected before anything is written", "[remap][error]") {
    Dim batch("batch"), seq("seq"), rank("rank");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20), perm("perm", B, 0, 15);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
    Out.remap(batch, rank, perm);
    Kernel kern = Pipeline({Out}, "remap_checked").compile();
    RaggedShape shape;
    shape.set(B, 4).set(len, {3, 1, 2, 5});
    Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
    for (int64_t e = 0; e < out.size(); e++)
        out.at(e) = -7.0f;
    shape.set(perm, {0, 2, 2, 3}); // value 2 twice, row 1 would be skipped
    REQUIRE_THROWS_WITH(
        kern.run(shape, {{A, a}, {Out, out}}),
        Contains("remap of loop 'batch' ('perm') is not a permutation: value 2 appears again at entry 2"));
    shape.set(perm, {0, 1, 4, 3}); // inside perm's declared range, outside the loop's
    REQUIRE_THROWS_WITH(kern.run(shape, {{A, a}, {Out, out}}),
                        Contains("remap of loop 'batch' ('perm'): entry 2 is 4, expected a value in [0, 4)"));
    for (int64_t e = 0; e < out.size(); e++)
        REQUIRE(out.at(e) == -7.0f);
    shape.set(perm, {3, 1, 0, 2});
    kern.run(shape, {{A, a}, {Out, out}});
    for (int64_t e = 0; e < out.size(); e++)
        REQUIRE(out.at(e) == a.at(e) + 1.0f);
}
