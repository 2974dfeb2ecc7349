// The IR: printing, structural equality, the simplifier and the bounds prover.
#include <catch2/catch.hpp>

#include <random>

#include "analysis/Bounds.h"
#include "analysis/IntMath.h"
#include "analysis/Interpreter.h"
#include "analysis/Simplify.h"
#include "common/brute_force.h"
#include "cora/cora.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"

using namespace cora;
using namespace cora::ir;

TEST_CASE("printer and structural equality", "[ir]") {
    Dim b("b"), s("s");
    LengthArray len("len", 4, 0, 10);
    Expr e = len(b) * 8 + s;
    REQUIRE(print(e) == "((len(b) * 8) + s)");
    REQUIRE(equal(e, len(b) * 8 + s));
    REQUIRE_FALSE(equal(e, len(b) * 8 + b));
    Dim other("s"); // same name, different identity
    REQUIRE_FALSE(equal(e, len(b) * 8 + other));
    REQUIRE(print(select(s < 3, 1.5f, 2.0f)) == "select((s < 3), 1.5f, 2f)");
}

TEST_CASE("simplifier: linear forms cancel and floor division pulls out multiples", "[ir][simplify]") {
    Dim b("b"), s("s"), x("x");
    LengthArray len("len", 4, 0, 10);
    REQUIRE(print(simplify(len(b) - (len(b) - 1))) == "1");
    REQUIRE(print(simplify((s * 4 + 3) / 4)) == "s");
    REQUIRE(print(simplify((s * 4 + 7) / 4)) == "(s + 1)");
    REQUIRE(print(simplify((s * 4 + 6) % 4)) == "2");
    REQUIRE(print(simplify(s + 0 - s * 1)) == "0");
    REQUIRE(print(simplify(min(s + 1, s))) == "s");
    REQUIRE(print(simplify(max(s + 1, s))) == "(s + 1)");
    REQUIRE(print(simplify(Expr(-7) / 2)) == "-4");
    REQUIRE(print(simplify(Expr(-7) % 2)) == "1");
    REQUIRE(print(simplify(select(Expr(3) < 4, s, b))) == "s");
    REQUIRE(print(simplify(Expr(2.0f) * 1.0f + 0.0f)) == "2f");
    // A flat index split and joined again (GPU lanes over a tile), also scaled; not when the
    // coefficients do not match.
    REQUIRE(print(simplify((s / 16) * 16 + s % 16)) == "s");
    REQUIRE(print(simplify(((s + 3) / 4) * 8 + ((s + 3) % 4) * 2 + 1)) == "((s * 2) + 7)");
    REQUIRE(print(simplify((s / 16) * 8 + s % 16)) == "(((s / 16) * 8) + (s % 16))");
}

TEST_CASE("simplifier preserves values on random integer expressions", "[ir][simplify][fuzz]") {
    Dim a("a"), c("c");
    std::mt19937 rng(1234);
    auto leaf = [&](int pick) -> Expr {
        switch (pick % 4) {
        case 0: return a.var();
        case 1: return c.var();
        default: return Expr((int64_t)(rng() % 19) - 9);
        }
    };
    std::function<Expr(int)> gen = [&](int depth) -> Expr {
        if (depth == 0) return leaf((int)rng());
        Expr x = gen(depth - 1), y = gen(depth - 1);
        switch (rng() % 8) {
        case 7: {
            Expr k((int64_t)(rng() % 5) + 1);
            return (x / k) * k + x % k;
        }
        case 0: return x + y;
        case 1: return x - y;
        case 2: return x * Expr((int64_t)(rng() % 7) - 3);
        case 3: return x / Expr((int64_t)(rng() % 5) + 1);
        case 4: return x % Expr((int64_t)(rng() % 5) + 1);
        case 5: return min(x, y);
        default: return max(x, y);
        }
    };
    for (int t = 0; t < 300; t++) {
        Expr e = gen(4);
        Expr s = simplify(e);
        for (int va = -6; va <= 6; va += 3)
            for (int vc = -5; vc <= 5; vc += 5) {
                Interpreter in;
                in.ints[a.node()->var.get()] = va;
                in.ints[c.node()->var.get()] = vc;
                INFO(print(e) << "  simplified to  " << print(s));
                REQUIRE(in.eval_int(e) == in.eval_int(s));
            }
    }
}

TEST_CASE("floor division and floor modulo", "[ir]") {
    REQUIRE(div_floor(-7, 2) == -4);
    REQUIRE(div_floor(7, 2) == 3);
    REQUIRE(div_floor(-8, 2) == -4);
    REQUIRE(mod_floor(-7, 2) == 1);
    REQUIRE(mod_floor(7, -2) == -1);
    REQUIRE(mod_floor(-7, -2) == -1);
    for (int64_t a = -9; a <= 9; a++)
        for (int64_t b : {-4, -3, -1, 1, 2, 5})
            REQUIRE(div_floor(a, b) * b + mod_floor(a, b) == a);
}

TEST_CASE("bounds prover: proves ragged in-bounds facts and refuses false ones", "[ir][prover]") {
    Dim b("b"), i("i"), j("j");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 100), w("w", B, 1, 8);
    BoundsProver p;
    Scope scope{{b.node()->var.get(), Expr(0), B}, {i.node()->var.get(), Expr(0), len(b)}};
    REQUIRE(p.prove_nonneg(len(b) - i - 1, scope));       // i < len(b)
    REQUIRE_FALSE(p.prove_nonneg(len(b) - i - 2, scope)); // i + 1 < len(b) does not hold
    REQUIRE(p.prove_nonneg(B - b - 1, scope));
    REQUIRE(p.prove_nonneg(ceil_mult(len(b), 8) - len(b), scope));
    REQUIRE_FALSE(p.prove_nonneg(len(b) - ceil_mult(len(b), 8), scope));
    REQUIRE(p.prove_nonneg(len(b) - floor_mult(len(b), 8), scope));
    // Triangular: j < i + 1 and i < len(b) imply j < len(b).
    Scope tri = scope;
    tri.push_back({j.node()->var.get(), Expr(0), i + 1});
    REQUIRE(p.prove_nonneg(len(b) - j - 1, tri));
    REQUIRE(p.prove_nonneg(i - j, tri));
    REQUIRE_FALSE(p.prove_nonneg(i - j - 1, tri));
    // An extent depending on two outer dims: j < min(i + 1, w(b)) implies i - j >= 0.
    Scope band = scope;
    band.push_back({j.node()->var.get(), Expr(0), min(i + 1, w(b))});
    REQUIRE(p.prove_nonneg(i - j, band));
    REQUIRE(p.prove_nonneg(w(b) - j - 1, band));
    REQUIRE_FALSE(p.prove_nonneg(w(b) - j - 2, band));
    REQUIRE_FALSE(p.last_failure().empty());
}

TEST_CASE("bounds prover never proves a false statement (brute-force check)", "[ir][prover][fuzz]") {
    Dim b("b"), i("i"), j("j");
    Param B("B", 1, 3);
    LengthArray len("len", B, 0, 5);
    const VarNode *vb = b.node()->var.get(), *vi = i.node()->var.get(), *vj = j.node()->var.get();
    Scope scope{{vb, Expr(0), B}, {vi, Expr(0), len(b)}, {vj, Expr(0), min(i + 1, len(b))}};
    std::mt19937 rng(99);
    auto gen = [&](int depth) {
        return testing::random_fuzz_expr(rng, depth, testing::FuzzOps::Linear, i, j, len(b), B);
    };
    BoundsProver p;
    int proved = 0;
    for (int t = 0; t < 400; t++) {
        Expr e = gen(1 + (int)(rng() % 3));
        if (!p.prove_nonneg(e, scope)) continue;
        proved++;
        // Every B in [1, 3], every lengths vector in [0, 5]^B, every (b, i, j) in the scope.
        testing::require_nonneg_everywhere(e, B.expr().as<VarNode>(), vb, vi, vj, 3, 5);
    }
    REQUIRE(proved > 20); // the check exercised a meaningful number of proofs
}
