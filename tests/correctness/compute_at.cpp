// compute_at: a producer's loops run inside a consumer's loop over shared outer dims; results
// equal the reference, the nest count drops, and chains move together.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

TEST_CASE("row softmax with max and sum computed at each row of the output", "[compute_at]") {
    Dim batch("batch"), q("q"), kv("kv"), r("r"), ko("ko"), ki("ki");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
            Func &Mx = sm.Mx, &E = sm.E, &Sum = sm.Sum, &P = sm.P;
            if (variant == 0) { // everything at P's row loop: one nest
                Mx.compute_at(P, q);
                E.compute_at(P, q);
                Sum.compute_at(P, q);
            } else if (variant == 1) { // at the batch loop, E's inner loop split
                E.split(kv, ko, ki, 4).compute_at(P, batch);
                Mx.compute_at(P, batch);
                Sum.compute_at(P, batch);
            } else { // a chain: Mx at E's row, E at P's row; Sum stays a nest of its own
                Mx.compute_at(E, q);
                E.compute_at(Sum, q);
            }
            Pipeline p({P}, "softmax_at_" + std::to_string(variant));
            Kernel k = p.compile();
            INFO(k.lowered());
            REQUIRE(count_occurrences(k.lowered(), "parallel for") == (variant == 2 ? 2u : 1u));
            check_against_reference(p, k, {S}, bind, 24, 8, 81 + (uint32_t)variant);
        }
    }
}

TEST_CASE("compute_at inside a fused loop that the producer fuses the same way", "[compute_at]") {
    // G's rows (batch, q) fused into one loop bq; F fuses the same dims into the same Dim, so its
    // nest starts with the same loop and can be computed at G's kv: F's element right before G's.
    Dim batch("batch"), q("q"), kv("kv"), bq("bq"), other("other");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    Func F("F", {{batch, B}, {q, len(batch)}, {kv, len(batch)}}),
        G("G", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    F.compute([&](Expr b, Expr i, Expr j) { return S(b, i, j) * 2.0f + 1.0f; });
    G.compute([&](Expr b, Expr i, Expr j) { return F(b, i, j) * F(b, i, j) - S(b, i, j); });
    G.fuse(batch, q, bq);
    SECTION("the same fused loop: one nest") {
        F.fuse(batch, q, bq).compute_at(G, kv);
        Pipeline p({G}, "fused_compute_at");
        Kernel k = p.compile();
        INFO(k.lowered());
        REQUIRE(count_occurrences(k.lowered(), "parallel for") == 1u);
        check_against_reference(p, k, {S}, bind, 24, 8, 85);
    }
    SECTION("another fused loop, or none: rejected") {
        F.fuse(batch, q, other).compute_at(G, kv);
        REQUIRE_THROWS_WITH(Pipeline({G}).compile(),
                            Contains("the consumer's loop 'bq' fuses several of its dims, and its own nest does not "
                                     "start with the same fused loop over the same extent") &&
                                Contains("compute_at needs the consumer's loops down to 'kv'"));
        Func F2("F2", {{batch, B}, {q, len(batch)}, {kv, len(batch)}}),
            G2("G2", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
        F2.compute([&](Expr b, Expr i, Expr j) { return S(b, i, j) + 1.0f; });
        G2.compute([&](Expr b, Expr i, Expr j) { return F2(b, i, j) * 3.0f; });
        G2.fuse(batch, q, bq);
        F2.compute_at(G2, kv);
        REQUIRE_THROWS_WITH(Pipeline({G2}).compile(), Contains("the consumer's loop 'bq' fuses several of its dims"));
    }
}
