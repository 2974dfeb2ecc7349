// The Z3 backend and the prover chain: more proofs than the built-in prover, never a false one,
// deterministic answers, cached repeats.
#include <catch2/catch.hpp>

#include <random>

#include "analysis/Interpreter.h"
#include "analysis/ProverChain.h"
#include "formats/ragged/StorageLayout.h"
#include "analysis/Z3Prover.h"
#include "common/brute_force.h"
#include "cora/cora.h"
#include "ir/IRPrinter.h"

using namespace cora;
using namespace cora::ir;

namespace {
struct Setup {
    Dim b{"b"}, i{"i"}, x{"x"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 100};
    Scope scope{{b.node()->var.get(), Expr(0), B}, {i.node()->var.get(), Expr(0), len(b)}};
};
} // namespace

TEST_CASE("Z3 proves a clamped neighbour read that the built-in prover cannot", "[prover][z3]") {
    if (!z3_available()) {
        WARN("skipped: cora was built without Z3");
        return;
    }
    Setup s;
    Expr next = select(s.i + 1 < s.len(s.b), s.i + 1, s.i);
    Expr room = s.len(s.b) - next - 1; // next < len(b)
    BoundsProver bounds;
    REQUIRE_FALSE(bounds.prove_nonneg(room, s.scope));
    auto z3 = make_z3_prover();
    REQUIRE(z3->prove_nonneg(room, s.scope));
    REQUIRE(z3->prove_nonneg(next, s.scope));
    // Without the clamp the claim is false, and Z3 says so.
    REQUIRE_FALSE(z3->prove_nonneg(s.len(s.b) - (s.i + 1) - 1, s.scope));
    REQUIRE_THAT(z3->last_failure(), Catch::Matchers::Contains("Z3 found inputs"));
}

TEST_CASE("Z3 encodes floor division and modulo as the generated code computes them", "[prover][z3]") {
    if (!z3_available()) {
        WARN("skipped: cora was built without Z3");
        return;
    }
    Setup s;
    Scope neg{{s.x.node()->var.get(), Expr(-50), Expr(100)}}; // x in [-50, 49]
    auto z3 = make_z3_prover();
    Expr x = s.x;
    REQUIRE(z3->prove_nonneg(x % 4, neg)); // floor modulo is never negative
    REQUIRE(z3->prove_nonneg(x - (x / 4) * 4, neg));
    REQUIRE(z3->prove_nonneg((x / -3) * -3 - x, neg)); // negative divisor: remainder in (-3, 0]
    REQUIRE(z3->prove_nonneg(-(x % -3), neg));
    REQUIRE_FALSE(z3->prove_nonneg(x / 4, neg));      // x / 4 < 0 for x < 0
    REQUIRE(z3->prove_nonneg(x / 4 + 13, neg));       // floor(-50 / 4) = -13
    REQUIRE_FALSE(z3->prove_nonneg(x / 4 + 12, neg)); // (truncation would give -12)
}

TEST_CASE("the prover chain never proves a false statement (brute force, with select)", "[prover][z3][fuzz]") {
    Dim b("b"), i("i"), j("j");
    Param B("B", 1, 3);
    LengthArray len("len", B, 0, 4);
    const VarNode *vb = b.node()->var.get(), *vi = i.node()->var.get(), *vj = j.node()->var.get();
    Scope scope{{vb, Expr(0), B}, {vi, Expr(0), len(b)}, {vj, Expr(0), min(i + 1, len(b))}};
    std::mt19937 rng(4242);
    auto gen = [&](int depth) {
        return testing::random_fuzz_expr(rng, depth, testing::FuzzOps::Branching, i, j, len(b), B);
    };
    ProverChain chain(/*use_z3=*/true);
    int proved = 0;
    for (int t = 0; t < 300; t++) {
        Expr e = gen(1 + (int)(rng() % 3));
        if (!chain.prove_nonneg(e, scope)) continue;
        proved++;
        testing::require_nonneg_everywhere(e, B.expr().as<VarNode>(), vb, vi, vj, 3, 4);
    }
    REQUIRE(proved > 20);
    INFO(chain.stats().str());
    if (z3_available()) REQUIRE(chain.stats().proved_by_z3 > 0);
}

TEST_CASE("prover answers are deterministic and repeats are cached", "[prover][z3]") {
    Setup s;
    std::vector<Expr> queries = {s.len(s.b) - s.i - 1, s.len(s.b) - s.i - 2,
                                 s.len(s.b) - select(s.i + 1 < s.len(s.b), s.i + 1, s.i) - 1, ceil_mult(s.i, 8) - s.i};
    ProverChain first(true), second(true);
    for (const Expr &q : queries)
        REQUIRE(first.prove_nonneg(q, s.scope) == second.prove_nonneg(q, s.scope));
    for (const Expr &q : queries)
        first.prove_nonneg(q, s.scope);
    REQUIRE(first.stats().cache_hits == (int)queries.size());
    REQUIRE(first.stats().queries == 2 * (int)queries.size());
}

TEST_CASE("Z3 knows prefix sums are monotone, start at 0 and step by the summand", "[prover][z3][prefix]") {
    if (!z3_available()) {
        WARN("skipped: cora was built without Z3");
        return;
    }
    Setup s;
    // P(x) = sum_{x' < x} len(x') over x in [0, B]: the packed offsets of [b: B, i: len(b)].
    Dim pb("pb");
    AuxTable table;
    auto P = prefix_sum_aux(table, {LayoutDim{pb.node(), Expr(s.B) + 1}}, s.len(pb));
    auto p = [&](const Expr &x) { return UFCall::make(P, {x}); };
    auto z3 = make_z3_prover();
    BoundsProver bounds;
    Expr last_in_bounds = p(s.B) - (p(s.b) + s.i) - 1; // every packed offset is inside the total
    REQUIRE_FALSE(bounds.prove_nonneg(last_in_bounds, s.scope));
    REQUIRE(z3->prove_nonneg(last_in_bounds, s.scope));
    REQUIRE(z3->prove_nonneg(p(s.b + 1) - p(s.b), s.scope));              // monotone
    REQUIRE(z3->prove_nonneg(-p(Expr(0)), s.scope));                      // P(0) = 0
    REQUIRE(z3->prove_nonneg(p(s.b) + s.len(s.b) - p(s.b + 1), s.scope)); // one step is exactly len(b)
    // False claims stay unproved: the row after the last one is not inside the total, and
    // P(b) may exceed B (rows longer than 1).
    REQUIRE_FALSE(z3->prove_nonneg(p(s.B) - (p(s.b) + s.len(s.b)) - 1, s.scope));
    REQUIRE_FALSE(z3->prove_nonneg(s.B - p(s.b), s.scope));
}

TEST_CASE("Z3 encodes fusion maps whose prefix-sum terms it builds itself", "[prover][z3][prefix]") {
    if (!z3_available()) {
        WARN("skipped: cora was built without Z3");
        return;
    }
    // The inverse law fi(f) = f - P(fo(f)) makes the encoder build the term P(fo(f)) on the fly;
    // the prefix-sum axioms read it after encoding ends (a use-after-free under ASan once).
    Setup s;
    Dim pb("pb"), fused("fused"), f("f");
    AuxTable table;
    auto P = prefix_sum_aux(table, {LayoutDim{pb.node(), Expr(s.B) + 1}}, s.len(pb));
    FusionMaps maps = fusion_maps(table, fused.node(), P, s.B, 1);
    Scope scope{{f.node()->var.get(), Expr(0), maps.total}};
    Expr fo = UFCall::make(maps.outer, {Expr(f)}), fi = UFCall::make(maps.inner, {Expr(f)});
    auto z3 = make_z3_prover();
    REQUIRE(z3->prove_nonneg(fi, scope));
    REQUIRE(z3->prove_nonneg(s.len(fo) - fi - 1, scope)); // inside the row it maps to
    REQUIRE_FALSE(z3->prove_nonneg(s.len(fo) - fi - 2, scope));
}
