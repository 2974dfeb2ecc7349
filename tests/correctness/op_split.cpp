// Operation splitting: an op split at a UF point (e.g. floor_mult(len(b), 8)) into a head of
// full tiles, proved guard-free, and a tail, each scheduled on its own and optionally run in
// one loop with hfuse; nested splits; the result always equals the reference.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

TEST_CASE("op split of a ragged row: check-free head tiles and a guarded tail", "[opsplit]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func Out("Out", {{batch, B}, {seq, len(batch)}});
            Out.compute([&](Expr b, Expr s) { return 2 * A(b, s) + cast(Float32, s); });
            Func tail = Out.split_op(seq, floor_mult(len(batch), 8));
            REQUIRE(tail.name() == "Out_tail");
            Out.split(seq, so, si, 8).vectorize(si);
            if (variant >= 1) tail.split(seq, so, si, 8); // the tail is shorter than 8: guarded
            if (variant == 2) Out.hfuse({tail});
            Pipeline p({Out}, "opsplit_" + std::to_string(variant));
            Kernel k = p.compile();
            INFO(k.lowered());
            // The head's split guard is proved away; only the tail's (variant >= 1) stays.
            REQUIRE_THAT(k.prover_stats(), Contains(variant == 0 ? "schedule guards: 1 proved away, 0 kept"
                                                                 : "schedule guards: 1 proved away, 1 kept"));
            REQUIRE(count_occurrences(k.lowered(), "parallel for") == (variant == 2 ? 1u : 2u));
            check_against_reference(p, k, {A}, bind, 40, 8, 31 + (uint32_t)variant);
        }
    }
}

TEST_CASE("op split of vgemm rows, nested split of the tail's columns, all fused", "[opsplit]") {
    Dim batch("batch"), m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 20), Ns("Ns", B, 0, 20), Ks("Ks", B, 0, 20);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
    C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
    Func rows_tail = C.split_op(m, floor_mult(Ms(batch), 4));
    Func cols_tail = rows_tail.split_op(n, min(Ns(batch), 4));
    C.split(m, mo, mi, 4).unroll(mi);
    cols_tail.split(n, no, ni, 4);
    C.hfuse({rows_tail, cols_tail});
    Pipeline p({C}, "vgemm_opsplit");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(count_occurrences(k.lowered(), "parallel for") == 1);
    check_against_reference(
        p, k, {X, Y},
        [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); }, 20, 4,
        41);
}

TEST_CASE("op split of trmm rows at a param-dependent point, tail padded into padded storage", "[opsplit]") {
    Dim m("m"), n("n"), r("r"), mo("mo"), mi("mi");
    Param M("M", 1, 64);
    Tensor L("L", {{m, M}, {r, M}}), X("X", {{r, M}, {n, 12}});
    Func C("C", {{m, M}, {n, 12}});
    C.compute([&](Expr i, Expr j) { return sum(r, i + 1, L(i, r) * X(r, j)); });
    C.pad_storage(m, 8);
    Func tail = C.split_op(m, floor_mult(M, 8));
    C.split(m, mo, mi, 8);
    tail.pad_loop(m, 8).split(m, mo, mi, 8); // the tail's padded rows go to C's padded storage
    Pipeline p({C}, "trmm_opsplit");
    Kernel k = p.compile();
    INFO(k.lowered());
    check_against_reference(
        p, k, {L, X}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(M, 1 + l.back()); }, 40, 8, 51);
}
