// compute_inline: a Func expanded into its readers is never stored; results equal the
// reference, including chains of inlined Funcs and reductions that reuse a dim.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

TEST_CASE("softmax with its exponentials inlined stores no exponential tensor", "[inline]") {
    Dim batch("batch"), q("q"), kv("kv"), r("r");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (bool inline_e : {false, true}) {
        DYNAMIC_SECTION("inline E: " << inline_e) {
            testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
            if (inline_e) sm.E.compute_inline();
            Pipeline p({sm.P}, inline_e ? "softmax_inlined" : "softmax_stored");
            Kernel k = p.compile();
            INFO(k.lowered());
            // Without inlining E has a buffer that it stores; inlined, none. Either way the row's
            // Funcs are computed at P's fused row loop by default (DefaultRowFusion.cpp): one loop.
            REQUIRE((count_occurrences(k.lowered(), "E[") == 0) == inline_e);
            REQUIRE(count_occurrences(k.lowered(), "parallel for") == 1u);
            check_against_reference(p, k, {S}, bind, 24, 8, 71);
        }
    }
}

TEST_CASE("inlined reductions read inside a reduction over the same dim, and chains", "[inline]") {
    Dim i("i"), j("j"), r("r");
    Param N("N", 1, 32);
    Tensor A("A", {{i, N}, {j, N}});
    // RowSum(x) = sum_r A(x, r); Twice(x) = 2 * RowSum(x) (inlined chain);
    // G(x) = sum_r Twice(r) * A(x, r): the expanded RowSum reduces over r inside G's r loop.
    Func RowSum("RowSum", {{i, N}}), Twice("Twice", {{i, N}}), G("G", {{i, N}});
    RowSum.compute([&](Expr x) { return sum(r, N, A(x, r)); });
    Twice.compute([&](Expr x) { return 2 * RowSum(x); });
    G.compute([&](Expr x) { return sum(r, N, Twice(r) * A(x, r)) + Twice(x); });
    RowSum.compute_inline();
    Twice.compute_inline();
    Pipeline p({G}, "inline_chain");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(k.lowered().find("RowSum[") == std::string::npos);
    REQUIRE(k.lowered().find("Twice[") == std::string::npos);
    check_against_reference(
        p, k, {A}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(N, 1 + l.back()); }, 31, 8, 72);
}

TEST_CASE("a token-wise producer read once is inlined by default, compute_root keeps it stored", "[inline]") {
    Dim batch("batch"), seq("seq"), c("c");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 33);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {c, 24}}), R("R", {{batch, B}, {seq, len(batch)}, {c, 24}});
    Tensor bias("bias", {{c, 24}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (bool keep : {false, true}) {
        DYNAMIC_SECTION("compute_root: " << keep) {
            Func Biased("Biased", {{batch, B}, {seq, len(batch)}, {c, 24}});
            Func Y("Y", {{batch, B}, {seq, len(batch)}, {c, 24}});
            Biased.compute([&](Expr b, Expr s, Expr f) { return X(b, s, f) + bias(f); });
            Y.compute([&](Expr b, Expr s, Expr f) { return max(Biased(b, s, f), 0.0f) + R(b, s, f); });
            if (keep) Biased.compute_root();
            Pipeline p({Y}, keep ? "tokenwise_stored" : "tokenwise_inlined");
            Kernel k = p.compile();
            INFO(k.lowered());
            REQUIRE((count_occurrences(k.lowered(), "Biased[") == 0) == !keep);
            check_against_reference(p, k, {X, R, bias}, bind, 33, 8, 73);
        }
    }
}
