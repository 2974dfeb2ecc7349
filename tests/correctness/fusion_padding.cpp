// Loop fusion (fo/fi maps built by the prelude), loop and storage padding, bulk padding of a
// fused loop, and storage fusion: each against the reference on the edge-case lengths, and
// the lowered IR of the packed-token projection checked for guards with and without removal.
#include "common/ragged_testing.h"

#include <cstring>

#include "cora_runtime.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;

TEST_CASE("fusion maps built by the prelude invert the prefix sum, pad segment included", "[fuse][prelude]") {
    Dim batch("batch"), seq("seq"), tok("tok");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}}), bias("bias", {{batch, B}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) * 2 + bias(b) + cast(Float32, s); });
    Out.fuse(batch, seq, tok).pad_loop(tok, 4);
    Out.fuse_storage(batch, seq, tok, 4);
    A.fuse_storage(batch, seq, tok, 4);
    Kernel k = Pipeline({Out}, "fused_maps").compile();
    RaggedShape shape;
    shape.set(B, 3).set(len, {3, 0, 2});
    Buffer a = Buffer::alloc(A, shape), bb = Buffer::alloc(bias, shape), out = Buffer::alloc(Out, shape);
    std::vector<cora_arg_t> args = k.make_args(shape, {{A, a}, {bias, bb}, {Out, out}});
    const int64_t *fo = nullptr, *fi = nullptr;
    int64_t n = -1;
    for (size_t i = 0; i < args.size(); i++) {
        if (k.arguments()[i].name == "fo_tok") fo = (const int64_t *)args[i].data, n = args[i].count;
        if (k.arguments()[i].name == "fi_tok") fi = (const int64_t *)args[i].data;
    }
    REQUIRE(fo != nullptr);
    REQUIRE(fi != nullptr);
    REQUIRE(n == 8); // total 5 padded to 8
    std::vector<int64_t> want_fo{0, 0, 0, 2, 2, 2, 2, 2}, want_fi{0, 1, 2, 0, 1, 2, 3, 4};
    REQUIRE(std::vector<int64_t>(fo, fo + n) == want_fo);
    REQUIRE(std::vector<int64_t>(fi, fi + n) == want_fi);
    REQUIRE(shape.size_of(A) == 8);
}

TEST_CASE("a fused batch x seq loop matches the reference, alone, split, and with inner loops", "[fuse]") {
    Dim batch("batch"), seq("seq"), h("h"), tok("tok"), to("to"), ti("ti"), th("th");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {h, 3}});
    Tensor bias("bias", {{batch, B}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (int variant = 0; variant < 4; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func Out("Out", {{batch, B}, {seq, len(batch)}, {h, 3}});
            Out.compute([&](Expr b, Expr s, Expr hh) { return A(b, s, hh) * 2 + bias(b) + cast(Float32, s); });
            Out.fuse(batch, seq, tok);
            if (variant == 1) Out.split(tok, to, ti, 8).parallel(to);
            if (variant == 2) Out.fuse(tok, h, th); // dense fuse of a ragged fused loop with h
            if (variant == 3) { // A is not padded: padded iterations would read past it, guard stays
                Out.pad_loop(tok, 8);
                Out.fuse_storage(batch, seq, tok, 8);
            }
            Pipeline p({Out}, "fused_" + std::to_string(variant));
            Kernel k = p.compile();
            if (variant == 3) REQUIRE_THAT(k.lowered(), Contains("if ("));
            check_against_reference(p, k, {A, bias}, bind, 20, 8, 11 + variant);
        }
    }
}

TEST_CASE("ragged fusion of a vgemm's batch and row loops", "[fuse]") {
    Dim batch("batch"), m("m"), n("n"), r("r"), bm("bm");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 20), Ns("Ns", B, 0, 20), Ks("Ks", B, 0, 20);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
    C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
    C.fuse(batch, m, bm);
    Pipeline p({C}, "vgemm_fused");
    Kernel k = p.compile();
    check_against_reference(
        p, k, {X, Y},
        [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); }, 20, 4,
        5);
}

TEST_CASE("pad_loop with padded storage runs split tiles without guards", "[pad]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    A.pad_storage(seq, 8);
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) * 3 + 1; });
    Out.pad_storage(seq, 16).pad_loop(seq, 8).split(seq, so, si, 8).vectorize(si);
    Pipeline p({Out}, "pad_tiles");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(testing::count_occurrences(k.lowered(), "if (") == 0);
    REQUIRE_THAT(k.prover_stats(), Contains("schedule guards: 2 proved away, 0 kept"));
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    check_against_reference(p, k, {A}, bind, 40, 8, 3);

    // Storage of the row (len = 5) is padded: 8 for A and 16 for Out.
    RaggedShape shape;
    shape.set(B, 2).set(len, {5, 9});
    REQUIRE(shape.size_of(A) == 8 + 16);
    REQUIRE(shape.size_of(Out) == 16 + 16);
}

TEST_CASE("bulk padding: the packed-token projection has no guard in its tiles", "[pad][fuse][bulk]") {
    // Out[b, s, o] = sum_k X[b, s, k] * W[k, o], with (batch, seq) packed into tokens stored
    // padded to a multiple of 16 and the fused token loop bulk-padded by 16 and tiled by 16.
    const int64_t K = 12, O = 8;
    Dim batch("batch"), seq("seq"), k("k"), o("o"), tok("tok"), to("to"), ti("ti"), r("r");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {k, K}}), W("W", {{k, K}, {o, O}});
    X.fuse_storage(batch, seq, tok, 16);
    auto build = [&](const char *name) {
        Func Out(name, {{batch, B}, {seq, len(batch)}, {o, O}});
        Out.compute([&](Expr b, Expr s, Expr oo) { return sum(r, K, X(b, s, r) * W(r, oo)); });
        Out.fuse_storage(batch, seq, tok, 16);
        Out.fuse(batch, seq, tok).pad_loop(tok, 16).split(tok, to, ti, 16).reorder({to, ti, o}).vectorize(o);
        return Out;
    };
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    Func proved = build("Proj");
    Pipeline p({proved}, "proj_bulk");
    Kernel kp = p.compile();
    CompileOptions keep;
    keep.remove_guards = 0;
    Func guarded = build("Proj");
    Pipeline pg({guarded}, "proj_bulk_guarded");
    Kernel kg = pg.compile(keep);
    INFO(kp.lowered());
    // The body loops (after the argument checks) hold no guard; with removal off they do.
    std::string body = kp.lowered().substr(kp.lowered().find("parallel for"));
    REQUIRE(testing::count_occurrences(body, "if (") == 0);
    REQUIRE_THAT(kp.prover_stats(), Contains(" proved away, 0 kept"));
    std::string gbody = kg.lowered().substr(kg.lowered().find("parallel for"));
    INFO(gbody);
    // The split guard tok < ceil_mult(total, 16) stays a branch; the pad guard tok < total, on
    // the serial ti loop, became that loop's bound.
    REQUIRE(testing::count_occurrences(gbody, "if (") == 1);
    REQUIRE(testing::count_occurrences(gbody, "for ti in [0, 0 + max(min(16, ") == 1);
    // Token offsets cancel: no fusion-map load is left in the tile body.
    REQUIRE(body.find("fo_tok[") == std::string::npos);
    auto a = check_against_reference(p, kp, {X, W}, bind, 40, 16, 21);
    auto g = check_against_reference(pg, kg, {X, W}, bind, 40, 16, 21);
    REQUIRE(a.size() == 1);
    REQUIRE(a[0].size() == g[0].size());
    REQUIRE(std::memcmp(a[0].data(), g[0].data(), a[0].size() * sizeof(float)) == 0);

    RaggedShape shape;
    shape.set(B, 3).set(len, {5, 0, 12});
    REQUIRE(shape.size_of(X) == 32 * K); // 17 tokens, padded to 32
    REQUIRE(shape.size_of(proved) == 32 * O);
}

TEST_CASE("the kernel rejects fusion maps that do not invert the prefix sum", "[fuse][runtime]") {
    Dim batch("batch"), seq("seq"), tok("tok");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Tensor bias("bias", {{batch, B}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) + bias(b); });
    Out.fuse(batch, seq, tok);
    Kernel k = Pipeline({Out}, "fused_checked").compile();
    RaggedShape shape;
    shape.set(B, 2).set(len, {2, 3});
    Buffer a = Buffer::alloc(A, shape), bb = Buffer::alloc(bias, shape), out = Buffer::alloc(Out, shape);
    std::vector<cora_arg_t> args = k.make_args(shape, {{A, a}, {bias, bb}, {Out, out}});
    for (int64_t bad : {7, 0}) {
        std::vector<int64_t> fo{0, 0, 1, 1, 1};
        fo[2] = bad; // out of range, then in range but wrong
        std::vector<cora_arg_t> mod = args;
        bool found = false;
        for (size_t i = 0; i < mod.size(); i++)
            if (k.arguments()[i].name == "fo_tok") mod[i].data = fo.data(), found = true;
        REQUIRE(found);
        std::string error;
        REQUIRE(k.run_raw(mod, &error) != CORA_OK);
        REQUIRE_THAT(error, Contains("fusion map 'fo_tok': entry 2 is " + std::to_string(bad)));
    }
    std::string error;
    REQUIRE(k.run_raw(args, &error) == CORA_OK);
}

TEST_CASE("horizontal fusion runs independent ops in one parallel loop", "[hfuse]") {
    Dim batch("batch"), seq("seq"), tok("tok"), j("j"), r("r");
    Param B("B", 1, 16), M("M", 1, 32);
    LengthArray len("len", B, 0, 20);
    Tensor A("A", {{batch, B}, {seq, len(batch)}}), V("V", {{j, M}});
    Func Ew("Ew", {{batch, B}, {seq, len(batch)}}), Rs("Rs", {{batch, B}}), Vs("Vs", {{j, M}});
    Ew.compute([&](Expr b, Expr s) { return A(b, s) * 2; });
    Rs.compute([&](Expr b) { return sum(r, len(b), A(b, r)); });
    Vs.compute([&](Expr jj) { return V(jj) + 1; });
    Ew.fuse(batch, seq, tok); // a token loop, a batch loop and a dense loop in one launch
    Ew.hfuse({Rs, Vs});
    Pipeline p({Ew, Rs, Vs}, "hfused");
    Kernel k = p.compile();
    std::string body = k.lowered().substr(k.lowered().find("parallel for"));
    REQUIRE(testing::count_occurrences(body, "parallel for") == 1);
    REQUIRE_THAT(body, Contains("parallel for hfused_Ew in [0, 0 + ((prefix_batch[B] + B) + M))"));
    // The members' iterations differ in cost (the if-chain depends on the index): dynamic chunks.
    REQUIRE_THAT(k.source(), Contains("schedule(dynamic, cora_chunk("));
    check_against_reference(
        p, k, {A, V},
        [&](RaggedShape &s, const std::vector<int32_t> &l) {
            s.set(B, (int64_t)l.size()).set(len, l).set(M, 1 + (int64_t)l.size());
        },
        20, 4, 31);
}
