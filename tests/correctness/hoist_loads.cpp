// Load hoisting: loop-invariant reads of prefix sums and length arrays leave inner loops,
// guarded so that no read happens that the unhoisted code would not make; results unchanged.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

namespace {
/** The kernel body: the lowered IR after the argument checks. */
std::string body_of(const Kernel &k) { return k.lowered().substr(k.lowered().find("parallel for")); }
} // namespace

TEST_CASE("a row's prefix-sum read leaves the token and reduction loops", "[hoist]") {
    Dim batch("batch"), seq("seq"), o("o"), r("r");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {r, 8}}), W("W", {{r, 8}, {o, 8}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}, {o, 8}});
    Out.compute([&](Expr b, Expr s, Expr oo) { return sum(r, 8, X(b, s, r) * W(r, oo)); });
    Out.parallel(batch); // the nest as written (the default schedule would fuse batch and seq)
    Pipeline p({Out}, "hoisted_projection");
    Kernel k = p.compile();
    std::string body = body_of(k);
    INFO(body);
    // One read per row, before the token loop; batch < B is in range, so no check is needed.
    REQUIRE(count_occurrences(body, "prefix_batch[") == 1);
    REQUIRE_THAT(body, Contains("let prefix_batch_h = prefix_batch[batch]\n  for seq in"));
    check_against_reference(
        p, k, {X, W}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); },
        40, 8, 61);
}

TEST_CASE("a read valid only inside a possibly empty loop stays behind its trip-count check", "[hoist]") {
    // Row b has B - 1 - b entries and reads len(b + 1): in range only because the row is not
    // empty (b + 1 < B). The hoisted read must not run for the last row.
    Dim batch("batch"), j("j");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {j, B - 1 - batch}});
    Func Out("Out", {{batch, B}, {j, B - 1 - batch}});
    Out.compute([&](Expr b, Expr jj) { return A(b, jj) * cast(Float32, len(b + 1)); });
    Out.parallel(batch); // the nest as written (the default schedule would fuse batch and j)
    Pipeline p({Out}, "hoist_guarded");
    Kernel k = p.compile();
    std::string body = body_of(k);
    INFO(body);
    REQUIRE_THAT(body, Contains("select((0 < ((B - batch) - 1)), len[(batch + 1)], 0)"));
    check_against_reference(
        p, k, {A}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); }, 40,
        8, 62);
}

TEST_CASE("fusion-map reads of a fused token loop leave the inner loop unguarded", "[hoist][fuse]") {
    Dim batch("batch"), seq("seq"), h("h"), tok("tok");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {h, 4}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}, {h, 4}});
    Out.compute([&](Expr b, Expr s, Expr hh) { return A(b, s, hh) + cast(Float32, s * len(b)); });
    Out.fuse(batch, seq, tok);
    Pipeline p({Out}, "hoist_fused");
    Kernel k = p.compile();
    std::string body = body_of(k);
    INFO(body);
    // fi(tok) and len(fo(tok)) are read once per token, before the loop over h (extent 4 > 0).
    REQUIRE_THAT(body, Contains("let fi_tok_h = fi_tok[tok]"));
    REQUIRE(count_occurrences(body.substr(body.find("for h in")), "fi_tok[") == 0);
    check_against_reference(
        p, k, {A}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); }, 40,
        8, 63);
}
