// Scheduled reduction loops, cache_write (per-tile accumulators, i.e. register blocking) and
// cache_read (per-tile copies of the region an op reads), on ragged vgemm, trmm, row max and
// elementwise ops; every result equals the reference on the edge-case batches.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

TEST_CASE("vgemm with the reduction loop scheduled, register tiles and packed panels", "[cache]") {
    Dim batch("batch"), m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni"), ro("ro"), ri("ri");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 23), Ns("Ns", B, 0, 23), Ks("Ks", B, 0, 23);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); };
    // 0: reduction loop between the tile loops, accumulating in C's storage (init nest first)
    // 1: + cache_write: a 4 x 8 accumulator tile per (mo, no)
    // 2: + reduction split, X and Y panels copied per ro (cache_read)
    // 3: as 2 with the prover off: guards stay, numbers equal
    // 4: k-panels: ro outside the tile loop (C accumulates across panels), Y panel per no
    // 5: as 4 with the prover off
    for (int variant = 0; variant < 6; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
            C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
            C.split(m, mo, mi, 4).split(n, no, ni, 8);
            if (variant <= 1) {
                C.reorder({batch, mo, no, r, mi, ni});
            } else if (variant >= 4) {
                C.split(r, ro, ri, 8).reorder({batch, mo, ro, no, ri, mi, ni});
                C.cache_read(Y, no);
            } else {
                C.split(r, ro, ri, 8).reorder({batch, mo, no, ro, ri, mi, ni});
                C.cache_read(X, ro).cache_read(Y, ro);
            }
            C.unroll(mi).vectorize(ni);
            if (variant >= 1) C.cache_write(no);
            CompileOptions opts;
            opts.remove_guards = variant != 3 && variant != 5;
            Pipeline p({C}, "vgemm_cache_" + std::to_string(variant));
            Kernel k = p.compile(opts);
            const std::string ir = k.lowered();
            INFO(ir);
            if (variant == 0) {
                // The elements are set to 0 before the reduction loop, which runs outside mi.
                size_t init = ir.find("] = 0f"), update = ir.find("for r in");
                REQUIRE(init < update);
                REQUIRE(update != std::string::npos);
                REQUIRE(ir.find("for mi in", update) != std::string::npos);
                REQUIRE(count_occurrences(ir, "allocate on stack") == 0);
            } else {
                REQUIRE_THAT(ir, Contains("allocate on stack C_tile[float32 * 32]"));
            }
            if (variant >= 4) {
                // C is zeroed before the panel loop; each tile visit starts from C.
                size_t init = ir.find("] = 0f"), panels = ir.find("for ro in"), tile = ir.find("C_tile[");
                REQUIRE(init < panels);
                REQUIRE(panels < tile);
                REQUIRE(tile != std::string::npos);
                REQUIRE_THAT(ir, Contains("allocate on stack Y_cache[float32 * 64]"));
            } else if (variant >= 2) {
                REQUIRE_THAT(ir, Contains("allocate on stack X_cache[float32 * 32]"));
                REQUIRE_THAT(ir, Contains("allocate on stack Y_cache[float32 * 64]"));
            }
            check_against_reference(p, k, {X, Y}, bind, 23, 8, 61 + (uint32_t)variant);
        }
    }
}

TEST_CASE("cache_read with a transposed tile: vgemm panels stored in another dim order", "[cache]") {
    // The tiles of X (rows x panel) and Y (panel x columns) stored with their dims swapped, the
    // copy writing them in that order: the element reads the transposed tile; every result equals
    // the reference, with the prover on (copies unguarded where proved) and off (every copy
    // guarded, zeros outside the ragged shape).
    Dim batch("batch"), m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni"), ro("ro"), ri("ri");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 23), Ns("Ns", B, 0, 23), Ks("Ks", B, 0, 23);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); };
    for (bool prove : {true, false}) {
        DYNAMIC_SECTION((prove ? "prover on" : "prover off")) {
            Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
            C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
            C.split(m, mo, mi, 4).split(n, no, ni, 8).split(r, ro, ri, 8).reorder({batch, mo, no, ro, ri, mi, ni});
            C.cache_read(X, ro, {batch, r, m}).cache_read(Y, ro, {n, batch, r});
            C.unroll(mi).vectorize(ni).cache_write(no);
            CompileOptions opts;
            opts.remove_guards = prove;
            Pipeline p({C}, std::string("vgemm_transposed_") + (prove ? "proved" : "guarded"));
            Kernel k = p.compile(opts);
            const std::string ir = k.lowered();
            INFO(ir);
            REQUIRE_THAT(ir, Contains("allocate on stack X_cache[float32 * 32]"));
            REQUIRE_THAT(ir, Contains("allocate on stack Y_cache[float32 * 64]"));
            // The copies' loops run in the tiles' order: X's r outside its m, Y's n outside its r;
            // the element reads X's tile at mi + ri * 4 and Y's at ri + ni * 8.
            const size_t x_r = ir.find("for X_r_c in"), x_m = ir.find("for X_m_c in");
            const size_t y_n = ir.find("for Y_n_c in"), y_r = ir.find("for Y_r_c in");
            REQUIRE(x_r != std::string::npos);
            REQUIRE(x_r < x_m);
            REQUIRE(x_m != std::string::npos);
            REQUIRE(y_n != std::string::npos);
            REQUIRE(y_n < y_r);
            REQUIRE(y_r != std::string::npos);
            REQUIRE_THAT(ir, Contains("X_cache[(X_m_c + (X_r_c * 4))] = X["));
            REQUIRE_THAT(ir, Contains("X_cache[(mi + (ri * 4))]"));
            REQUIRE_THAT(ir, Contains("Y_cache[(ri + (ni * 8))]"));
            check_against_reference(p, k, {X, Y}, bind, 23, 8, 71 + (uint32_t)prove);
        }
    }
}

TEST_CASE("cache_read with a transposed tile of 16-multiples is copied in 16 x 16 blocks", "[cache]") {
    // X's tile of 16 rows x a 32-deep panel, stored panel-major: both its innermost dim (m) and
    // X's (r) are multiples of 16, so the copy runs block by block (the loads of one block's
    // column reuse 16 lines); the tiles of ragged sizes up to 40 are partly outside X (zeros),
    // and every result equals the reference with the prover on and off.
    Dim batch("batch"), m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni"), ro("ro"), ri("ri");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 40), Ns("Ns", B, 0, 40), Ks("Ks", B, 0, 40);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); };
    for (bool prove : {true, false}) {
        DYNAMIC_SECTION((prove ? "prover on" : "prover off")) {
            Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
            C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
            C.split(m, mo, mi, 16).split(n, no, ni, 8).split(r, ro, ri, 32).reorder({batch, mo, no, ro, ri, mi, ni});
            C.cache_read(X, ro, {batch, r, m});
            C.vectorize(ni);
            CompileOptions opts;
            opts.remove_guards = prove;
            Pipeline p({C}, std::string("vgemm_transposed_blocks_") + (prove ? "proved" : "guarded"));
            Kernel k = p.compile(opts);
            const std::string ir = k.lowered();
            INFO(ir);
            REQUIRE_THAT(ir, Contains("allocate on stack X_cache[float32 * 512]"));
            const size_t m_blocks = ir.find("for X_m_co in [0, 0 + 1)"), r_blocks = ir.find("for X_r_co in [0, 0 + 2)");
            const size_t r_in = ir.find("for X_r_ci in [0, 0 + 16)"), m_in = ir.find("for X_m_ci in [0, 0 + 16)");
            REQUIRE(m_blocks < r_blocks);
            REQUIRE(r_blocks < r_in);
            REQUIRE(r_in < m_in);
            REQUIRE(m_in != std::string::npos);
            REQUIRE_THAT(ir, Contains("X_cache[(mi + (ri * 16))]"));
            check_against_reference(p, k, {X, Y}, bind, 40, 8, 81 + (uint32_t)prove);
        }
    }
}

TEST_CASE("cache_read of a weight stored in column panels copies whole panel rows, not element by element", "[cache]") {
    // W (40 x 100) stored in 16-column panels (the encoder's weight layout): a 64-column tile of it
    // is copied 16 columns at a time, each chunk one contiguous run of a panel row, so the copy's
    // reads have no division or modulo per element (one loop of 64 made the C compiler gather);
    // 100 columns end in a partial tile (zeros past the last column) and a partial panel.
    Dim batch("batch"), seq("seq"), r("r"), n("n"), wo("wo"), wi("wi"), no("no"), ni("ni"), ro("ro"), ri("ri");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 24);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {r, 40}});
    Tensor W("W", {{r, 40}, {n, 100}});
    W.split_storage(n, wo, wi, 16).reorder_storage({wo, r, wi});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (int tile : {64, 16}) {
        DYNAMIC_SECTION("tile of " << tile << " columns") {
            Func Y("Y", {{batch, B}, {seq, len(batch)}, {n, 100}});
            Y.compute([&](Expr b, Expr s, Expr j) { return sum(r, 40, X(b, s, r) * W(r, j)); });
            Y.split(n, no, ni, tile).split(r, ro, ri, 32).reorder({batch, no, ro, seq, ri, ni}).vectorize(ni);
            Y.cache_read(W, ro);
            Pipeline p({Y}, "panel_rows_" + std::to_string(tile));
            Kernel k = p.compile();
            const std::string ir = k.lowered();
            INFO(ir);
            std::string copy_line;
            for (size_t at = ir.find("W_cache["); at != std::string::npos && copy_line.empty();
                 at = ir.find("W_cache[", at + 1)) {
                const size_t begin = ir.rfind('\n', at) + 1, end = ir.find('\n', at);
                const std::string line = ir.substr(begin, end - begin);
                if (line.find("= W[") != std::string::npos) copy_line = line;
            }
            REQUIRE_FALSE(copy_line.empty());
            REQUIRE(copy_line.find('/') == std::string::npos);
            REQUIRE(copy_line.find('%') == std::string::npos);
            if (tile == 64) {
                REQUIRE_THAT(ir, Contains("for W_n_co in [0, 0 + 4)") && Contains("for W_n_ci in [0, 0 + 16)"));
            } else { // a tile of one panel's width is one loop, as before
                REQUIRE_THAT(ir, Contains("for W_n_c in [0, 0 + 16)"));
            }
            check_against_reference(p, k, {X, W}, bind, 24, 8, 83 + (uint32_t)tile);
        }
    }
}

TEST_CASE("trmm: a reduction whose extent depends on the row, cached per tile", "[cache]") {
    Dim m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni");
    Param M("M", 1, 64);
    Tensor L("L", {{m, M}, {r, M}}), X("X", {{r, M}, {n, 20}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(M, 1 + l.back()); };
    Func C("C", {{m, M}, {n, 20}});
    C.compute([&](Expr i, Expr j) { return sum(r, i + 1, L(i, r) * X(r, j)); });
    // The reduction (r < i + 1) must stay inside mi; it runs inside the tile, before ni.
    C.split(m, mo, mi, 4).split(n, no, ni, 8).reorder({mo, no, mi, r, ni}).vectorize(ni).cache_write(no);
    Pipeline p({C}, "trmm_cache");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE_THAT(k.lowered(), Contains("allocate on stack C_tile[float32 * 32]"));
    check_against_reference(p, k, {L, X}, bind, 40, 8, 71);
}

TEST_CASE("row maximum with a split reduction loop and a cached accumulator", "[cache]") {
    Dim batch("batch"), seq("seq"), h("h"), ho("ho"), hi("hi"), k("k"), ko("ko"), ki("ki");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {k, 12}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Func Mx("Mx", {{batch, B}, {seq, len(batch)}});
            Mx.compute([&](Expr b, Expr s) { return maximum(k, 12, A(b, s, k) - cast(Float32, s)); });
            // The 12-long reduction split by 5: its last block is guarded (k < 12).
            Mx.split(k, ko, ki, 5).unroll(ki);
            if (variant == 1) Mx.cache_write(seq);
            // 2: the panel loop ko outside the rows: the maximum is kept in Mx between panels
            if (variant == 2) Mx.reorder({batch, ko, seq, ki}).cache_write(seq);
            Pipeline p({Mx}, "max_cache_" + std::to_string(variant));
            Kernel kern = p.compile();
            INFO(kern.lowered());
            check_against_reference(p, kern, {A}, bind, 30, 4, 81 + (uint32_t)variant);
        }
    }
}

TEST_CASE("elementwise: ragged tiles through a cache_write and a cache_read", "[cache]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return 2 * A(b, s) + cast(Float32, s); });
    // The last tile of a row runs past len(b): its copy is guarded (zeros) and so is its store.
    Out.split(seq, so, si, 8).vectorize(si).cache_read(A, so).cache_write(so);
    Pipeline p({Out}, "elementwise_cache");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE_THAT(k.lowered(), Contains("allocate on stack A_cache[float32 * 8]"));
    REQUIRE_THAT(k.lowered(), Contains("allocate on stack Out_tile[float32 * 8]"));
    check_against_reference(p, k, {A}, bind, 40, 8, 91);
}

TEST_CASE("op split vgemm: cached full tiles without checks, a plain tail", "[cache][opsplit]") {
    Dim batch("batch"), m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni");
    Param B("B", 1, 16);
    LengthArray Ms("Ms", B, 0, 21), Ns("Ns", B, 0, 21), Ks("Ks", B, 0, 21);
    Tensor X("X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}), Y("Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}});
    Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
    C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), X(b, i, r) * Y(b, r, j)); });
    Func rows_tail = C.split_op(m, floor_mult(Ms(batch), 4));
    rows_tail.split_op(n, floor_mult(Ns(batch), 8)); // the last rows: full 8-column tiles, then the rest
    C.split(m, mo, mi, 4).split(n, no, ni, 8).reorder({batch, mo, no, r, mi, ni}).unroll(mi).vectorize(ni);
    C.cache_write(no);
    rows_tail.split(n, no, ni, 8).reorder({batch, m, no, r, ni}).cache_write(no);
    Pipeline p({C}, "vgemm_cache_opsplit");
    Kernel k = p.compile();
    INFO(k.lowered());
    check_against_reference(
        p, k, {X, Y},
        [&](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); }, 21, 4,
        95);
}

TEST_CASE("trmm in register tiles: a block-rectangular reduction moves outside the tile rows", "[cache]") {
    // sum over r < min(floor_mult(i, 4) + 4, M) with the upper triangle masked: once m is split
    // by 4, floor_mult(mo * 4 + mi, 4) folds to mo * 4, so r can run outside mi.
    Dim m("m"), n("n"), r("r"), mo("mo"), mi("mi"), no("no"), ni("ni");
    Param M("M", 1, 64);
    Tensor L("L", {{m, M}, {r, M}}), X("X", {{r, M}, {n, 20}});
    Func C("C", {{m, M}, {n, 20}});
    C.compute(
        [&](Expr i, Expr j) { return sum(r, min(floor_mult(i, 4) + 4, M), select(r <= i, L(i, r), 0.0f) * X(r, j)); });
    C.split(m, mo, mi, 4).split(n, no, ni, 8).reorder({mo, no, r, mi, ni}).unroll(mi).vectorize(ni).cache_write(no);
    Pipeline p({C}, "trmm_blocked");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE_THAT(k.lowered(), Contains("allocate on stack C_tile[float32 * 32]"));
    check_against_reference(
        p, k, {L, X}, [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(M, 1 + l.back()); }, 40, 8, 73);
}

TEST_CASE("a split reduction's outer loop runs outside the loops its extent uses", "[cache][guards]") {
    // Y[i] = sum over r <= i of A(i, r), 37 rows: with split(r, ro, ri, 8) and ro outside i,
    // ro runs to ceil(37 / 8) = 5 (its largest extent over i) and each row's ri loop is
    // bounded by its own length: ri < min(8, i + 1 - ro * 8), no branch.
    Dim i("i"), r("r"), ro("ro"), ri("ri");
    Param N("N", 1, 64);
    Tensor A("A", {{i, 37}, {r, 37}}), AN("AN", {{i, N}, {r, N}});
    Func Y("Y", {{i, 37}});
    Y.compute([&](Expr ii) { return sum(r, ii + 1, A(ii, r)); });
    Y.split(r, ro, ri, 8).reorder({ro, i, ri});
    Pipeline p({Y}, "row_prefix_panels");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE_THAT(k.lowered(), Contains("for ro in [0, 0 + 5)"));
    REQUIRE_THAT(k.lowered(), Contains("for ri in [0, 0 + max(min(8, "));
    REQUIRE(k.lowered().find("if (", k.lowered().find("for ro in")) == std::string::npos);
    check_against_reference(
        p, k, {A}, [](RaggedShape &, const std::vector<int32_t> &) {}, 1, 1, 91);

    // With N rows the largest extent over i is not known at this point: still an error.
    Func YN("YN", {{i, N}});
    YN.compute([&](Expr ii) { return sum(r, ii + 1, AN(ii, r)); });
    YN.split(r, ro, ri, 8).reorder({ro, i, ri});
    REQUIRE_THROWS_WITH(Pipeline({YN}, "row_prefix_ragged").compile(),
                        Contains("loop 'ro' has extent") && Contains("which depends on loop 'i'"));
}

TEST_CASE("k-panels that visit every element: the first starts the tile, the last applies the epilogue", "[cache]") {
    // A token GEMM with bias + ReLU, k-panels of 8 outside the 4-token tiles (as the encoder's
    // projections). With K >= 1 every tile visits every panel, so nothing zeroes C before the
    // panels and no pass applies the epilogue after them; with K possibly 0 (no panel at all),
    // C is zeroed first and the epilogue runs in a pass after the panels.
    Dim batch("batch"), s("s"), n("n"), r("r"), so("so"), si("si"), no("no"), ni("ni"), ro("ro"), ri("ri");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 19);
    for (int64_t min_k : {1, 0}) {
        DYNAMIC_SECTION("K >= " << min_k) {
            Param K("K", min_k, 21);
            Tensor X("X", {{batch, B}, {s, len(batch)}, {r, K}}), W("W", {{r, K}, {n, 16}}), bias("bias", {{n, 16}});
            Func C("C", {{batch, B}, {s, len(batch)}, {n, 16}});
            C.compute([&](Expr b, Expr t, Expr j) { return max(sum(r, K, X(b, t, r) * W(r, j)) + bias(j), 0.0f); });
            C.split(s, so, si, 4)
                .split(n, no, ni, 8)
                .split(r, ro, ri, 8)
                .reorder({batch, no, ro, so, ri, si, ni})
                .unroll(si)
                .vectorize(ni)
                .cache_read(W, ro)
                .cache_write(so);
            Pipeline p({C}, "panels_fused_" + std::to_string(min_k));
            Kernel k = p.compile();
            const std::string ir = k.lowered();
            INFO(ir);
            size_t panels = ir.find("for ro in");
            REQUIRE(panels != std::string::npos);
            if (min_k == 1) {
                REQUIRE_THAT(ir, Contains("if (ro == 0):"));
                REQUIRE(ir.find("C[", 0) > panels); // C is not written before the panels
                REQUIRE(count_occurrences(ir, "for so in") == 1);
            } else {
                REQUIRE_THAT(ir, !Contains("if (ro == 0):"));
                REQUIRE(ir.find("C[", 0) < panels);               // zeroed before the panels
                REQUIRE(count_occurrences(ir, "for so in") == 3); // init, panels, epilogue pass
            }
            check_against_reference(
                p, k, {X, W, bias},
                [&](RaggedShape &shape, const std::vector<int32_t> &l) {
                    shape.set(B, (int64_t)l.size()).set(len, l).set(K, std::max<int64_t>(min_k, l.back() % 22));
                },
                19, 4, 97 + (uint32_t)min_k);
        }
    }
}
