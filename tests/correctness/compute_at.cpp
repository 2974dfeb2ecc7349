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

namespace {
/** Position of `needle` in `text` (npos when absent), for the order of lines in the lowered IR. */
size_t at(const std::string &text, const std::string &needle) { return text.find(needle); }
} // namespace

TEST_CASE("a producer computed at a consumer's loop is stored one slice per iteration", "[compute_at]") {
    Dim batch("batch"), q("q"), kv("kv"), r("r"), ko("ko"), ki("ki");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    SECTION("at the row: the row's statistics on the stack, its exponentials one row, allocated per sentence") {
        testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
        for (Func *f : {&sm.Mx, &sm.E, &sm.Sum})
            f->compute_at(sm.P, q);
        Pipeline p({sm.P}, "sliced_rows");
        Kernel k = p.compile();
        const std::string ir = k.lowered();
        INFO(ir);
        // E(batch, q, kv) at P's q: a row of len(batch) elements, the same for every row of a
        // sentence, so allocated once per sentence inside the parallel loop (one per thread).
        REQUIRE(at(ir, "allocate E[float32 * int64(len[batch])]") != std::string::npos);
        REQUIRE(at(ir, "parallel for batch") < at(ir, "allocate E["));
        REQUIRE(at(ir, "allocate E[") < at(ir, "for q in"));
        REQUIRE(at(ir, "allocate on stack Mx[float32 * 1]") != std::string::npos);
        REQUIRE(at(ir, "allocate on stack Sum[float32 * 1]") != std::string::npos);
        check_against_reference(p, k, {S}, bind, 24, 8, 91);
    }
    SECTION("at the sentence, its inner loop split: one sentence's elements") {
        testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
        sm.E.split(kv, ko, ki, 4).compute_at(sm.P, batch);
        sm.Mx.compute_at(sm.P, batch);
        sm.Sum.compute_at(sm.P, batch);
        Pipeline p({sm.P}, "sliced_sentences");
        Kernel k = p.compile();
        const std::string ir = k.lowered();
        INFO(ir);
        // One sentence's elements: the difference of two consecutive entries of the prefix sums.
        REQUIRE(at(ir, "allocate E[float32 * (prefix_batch2[(batch + 1)] - prefix_batch2[batch])]") !=
                std::string::npos);
        REQUIRE(at(ir, "allocate Mx[float32 * (prefix_batch[(batch + 1)] - prefix_batch[batch])]") !=
                std::string::npos);
        REQUIRE(at(ir, "parallel for batch") < at(ir, "allocate E["));
        check_against_reference(p, k, {S}, bind, 24, 8, 92);
    }
    SECTION("at a fused row loop: a slice of the longest row on the stack, or the whole past the stack limit") {
        // Left unscheduled, the softmax's rows (batch, q) fuse into one parallel loop and Mx, E and
        // Sum are computed at it (DefaultRowFusion.cpp). There batch is no loop variable: a slice
        // of E takes the longest row the declared range allows, on the stack if it fits 4 KB.
        // lowered(l, ...): the unscheduled softmax over rows of lengths l, compiled to one parallel
        // loop and checked against the reference on lengths up to `checked_max`; its lowered IR.
        auto lowered = [&](const LengthArray &l, const std::string &name, int32_t checked_max, uint32_t seed) {
            Tensor s("S", {{batch, B}, {q, l(batch)}, {kv, l(batch)}});
            testing::RowSoftmax sm(s, batch, q, kv, r, B, l);
            Pipeline p({sm.P}, name);
            Kernel k = p.compile();
            const std::string ir = k.lowered();
            INFO(ir);
            REQUIRE(count_occurrences(ir, "parallel for") == 1u);
            auto bind_l = [&](RaggedShape &sh, const std::vector<int32_t> &v) {
                sh.set(B, (int64_t)v.size()).set(l, v);
            };
            check_against_reference(p, k, {s}, bind_l, checked_max, 8, seed);
            return ir;
        };
        const std::string ir = lowered(len, "sliced_fused_rows", 24, 94);
        INFO(ir);
        REQUIRE(at(ir, "allocate on stack E[float32 * 24]") != std::string::npos);
        REQUIRE(at(ir, "allocate on stack Mx[float32 * 1]") != std::string::npos);
        REQUIRE(at(ir, "allocate on stack Sum[float32 * 1]") != std::string::npos);
        REQUIRE(at(ir, "parallel for batch_q") < at(ir, "allocate on stack E["));

        // Rows of up to 1025 floats (4100 bytes) are past the stack's 4096: E is stored whole (one
        // allocation before the loop), the row statistics still one per iteration.
        const std::string irl = lowered(LengthArray("len", B, 0, 1025), "sliced_fused_long_rows", 40, 95);
        INFO(irl);
        REQUIRE(at(irl, "allocate on stack E[") == std::string::npos);
        REQUIRE(at(irl, "allocate E[") < at(irl, "parallel for batch_q"));
        REQUIRE(at(irl, "allocate on stack Mx[float32 * 1]") != std::string::npos);
    }
    SECTION("read by another op outside the consumer's loop: stored whole") {
        testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
        Func Twice("Twice", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
        Twice.compute([&](Expr b, Expr i, Expr j) { return sm.E(b, i, j) * 2.0f; });
        for (Func *f : {&sm.Mx, &sm.E, &sm.Sum})
            f->compute_at(sm.P, q);
        Pipeline p({sm.P, Twice}, "sliced_read_outside");
        Kernel k = p.compile();
        const std::string ir = k.lowered();
        INFO(ir);
        REQUIRE(at(ir, "allocate E[float32 * int64(len[batch])]") == std::string::npos);
        REQUIRE(at(ir, "allocate E[") < at(ir, "parallel for"));
        REQUIRE(at(ir, "allocate on stack Mx[float32 * 1]") != std::string::npos);
        check_against_reference(p, k, {S}, bind, 24, 8, 93);
    }
}

TEST_CASE("op-split parts run inside the consumer's loop: the producer's with it, the consumer's after it",
          "[compute_at]") {
    // Attention-like: scores S(b, i, j) = X(b, i) X(b, j) in tiles of 4 rows, the last rows split
    // off (split_op); P(b, i) = sum_j S(b, i, j) X(b, j), its rows split the same way. S is
    // computed at P's b: both parts of S, then P's tail (which reads S) run inside P's loop, and S
    // is stored one sentence at a time.
    Dim b("b"), i("i"), j("j"), r("r"), io("io"), ii("ii");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{b, B}, {i, len(b)}});
    Func S("S", {{b, B}, {i, len(b)}, {j, len(b)}}), P("P", {{b, B}, {i, len(b)}});
    S.compute([&](Expr bb, Expr ii_, Expr jj) { return X(bb, ii_) * X(bb, jj); });
    P.compute([&](Expr bb, Expr ii_) { return sum(r, len(bb), S(bb, ii_, r) * X(bb, r)); });
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    Func s_rows = S.split_op(i, floor_mult(len(b), 4));
    S.split(i, io, ii, 4).reorder({b, io, j, ii}).unroll(ii);
    Func p_rows = P.split_op(i, floor_mult(len(b), 4));
    P.split(i, io, ii, 4).reorder({b, io, ii}).parallel(b);
    (void)s_rows;
    (void)p_rows;
    S.compute_at(P, b);
    Pipeline p({P}, "split_parts_at");
    Kernel k = p.compile();
    const std::string ir = k.lowered();
    INFO(ir);
    REQUIRE(count_occurrences(ir, "parallel for") == 1u);
    // S's slice (one sentence's len(b)^2 scores) allocated inside the parallel loop over b, then
    // both parts of S, then P's tail, then P's own tiles.
    REQUIRE(at(ir, "parallel for b") < at(ir, "allocate S["));
    REQUIRE(at(ir, "allocate S[float32 * prefix_b[B]") == std::string::npos);
    check_against_reference(p, k, {X}, bind, 40, 8, 94);
}

TEST_CASE("producers computed at two nested loops of one consumer", "[compute_at]") {
    // Mx at P's batch loop (every row's max of the item), E and Sum at P's row loop inside it: the
    // producers go into both loops of one nest, whatever order their loop variables sit in memory.
    Dim batch("batch"), q("q"), kv("kv"), r("r");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {kv, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    testing::RowSoftmax sm(S, batch, q, kv, r, B, len);
    sm.Mx.compute_at(sm.P, batch);
    sm.E.compute_at(sm.P, q);
    sm.Sum.compute_at(sm.P, q);
    Pipeline p({sm.P}, "softmax_at_two_loops");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(count_occurrences(k.lowered(), "parallel for") == 1u);
    check_against_reference(p, k, {S}, bind, 24, 8, 89);
}
