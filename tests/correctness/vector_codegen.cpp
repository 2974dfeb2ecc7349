// The CPU micro-kernel path: vectorized loops emitted as whole-vector statements, split guards
// peeled out of aligned inner loops, blocked-layout offsets folded over loop ranges, and a
// k-panel trmm and vgemm. Each kernel equals the reference on the edge-case batches, and the generated
// code has the shape that makes it fast.
#include <cmath>
#include <limits>

#include "common/ragged_testing.h"
#include "trmm/trmm_def.h"
#include "vgemm/vgemm_def.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

namespace {

/** The body of the loop over `var` in the lowered IR (up to the next line at its indentation). */
std::string loop_body(const std::string &ir, const std::string &var) {
    size_t at = ir.find("for " + var + " in");
    if (at == std::string::npos) return "";
    size_t line_start = ir.rfind('\n', at) + 1;
    size_t indent = at - line_start;
    size_t end = at;
    while (true) {
        end = ir.find('\n', end + 1);
        if (end == std::string::npos) return ir.substr(at);
        size_t next = end + 1;
        size_t spaces = 0;
        while (next + spaces < ir.size() && ir[next + spaces] == ' ')
            spaces++;
        if (spaces <= indent) return ir.substr(at, end - at);
    }
}

} // namespace

TEST_CASE("contiguous vectorized loops become vector statements; others stay scalar loops", "[vector]") {
    Dim batch("batch"), seq("seq"), h("h"), ho("ho"), hi("hi");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {h, 48}}), Y("Y", {{batch, B}, {h, 48}, {seq, len(batch)}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    SECTION("contiguous reads, a broadcast and a scalar operand") {
        Func O("O", {{batch, B}, {seq, len(batch)}, {h, 48}});
        O.compute([&](Expr b, Expr s, Expr j) { return X(b, s, j) * X(b, s, 0) + 2.0f; });
        O.split(h, ho, hi, 16).vectorize(hi);
        Pipeline p({O}, "vec_contiguous");
        Kernel k = p.compile();
        INFO(k.source());
        REQUIRE_THAT(k.source(), Contains("cora_vstore(&O_["));
        REQUIRE_THAT(k.source(), Contains("vector_size(64)"));
        check_against_reference(p, k, {X}, bind, 40, 8, 301);
    }
    SECTION("a strided read (transpose) keeps the scalar loop") {
        Func O("O", {{batch, B}, {seq, len(batch)}, {h, 48}});
        O.compute([&](Expr b, Expr s, Expr j) { return Y(b, j, s) + 1.0f; });
        O.split(h, ho, hi, 16).vectorize(hi);
        Pipeline p({O}, "vec_strided");
        Kernel k = p.compile();
        INFO(k.source());
        REQUIRE(count_occurrences(k.source(), "cora_vstore(&") == 0);
        REQUIRE_THAT(k.source(), Contains("#pragma omp simd"));
        check_against_reference(p, k, {Y}, bind, 40, 8, 302);
    }
    SECTION("a guarded (ragged) vectorized loop keeps the scalar loop") {
        Func O("O", {{batch, B}, {seq, len(batch)}});
        Tensor Z("Z", {{batch, B}, {seq, len(batch)}});
        O.compute([&](Expr b, Expr s) { return Z(b, s) * 3.0f; });
        O.split(seq, ho, hi, 8).vectorize(hi); // the last block of a row runs past len(b)
        Pipeline p({O}, "vec_guarded");
        Kernel k = p.compile();
        INFO(k.source());
        REQUIRE(count_occurrences(k.source(), "cora_vstore(&") == 0);
        check_against_reference(p, k, {Z}, bind, 40, 8, 303);
    }
    SECTION("a register tile: init with a splat, accumulate, write back") {
        Dim r("r"), mo("mo"), mi("mi");
        Tensor Wt("Wt", {{h, 48}, {r, 48}});
        Func O("O", {{batch, B}, {seq, len(batch)}, {h, 48}});
        O.compute([&](Expr b, Expr s, Expr j) { return sum(r, 48, X(b, s, r) * Wt(r, j)); });
        O.split(seq, mo, mi, 4).split(h, ho, hi, 16).reorder({batch, mo, ho, r, mi, hi}).unroll(mi).vectorize(hi);
        O.cache_write(ho);
        Pipeline p({O}, "vec_tile");
        Kernel k = p.compile();
        INFO(k.source());
        REQUIRE_THAT(k.source(), Contains("cora_splat<"));
        REQUIRE(count_occurrences(k.source(), "cora_vstore(&O_tile_[") >= 1);
        check_against_reference(p, k, {X, Wt}, bind, 40, 8, 304);
    }
    SECTION("max and min (a ReLU epilogue, a clip) stay one vector statement, with std::fmax's NaN rule") {
        Func O("O", {{batch, B}, {seq, len(batch)}, {h, 48}});
        O.compute([&](Expr b, Expr s, Expr j) { return min(max(X(b, s, j), 0.0f), X(b, s, 0) + 0.5f); });
        O.split(h, ho, hi, 16).vectorize(hi);
        Pipeline p({O}, "vec_max_min");
        Kernel k = p.compile();
        INFO(k.source());
        REQUIRE_THAT(k.source(), Contains("cora_vfmin(cora_vfmax("));
        REQUIRE(count_occurrences(k.source(), "#pragma omp simd") == 0);
        check_against_reference(p, k, {X}, bind, 40, 8, 305);
        // A NaN operand yields the other one (std::fmax / std::fmin), whichever side it is on.
        RaggedShape shape;
        bind(shape, {2});
        Buffer x = Buffer::alloc(X, shape), o = Buffer::alloc(O, shape);
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (int64_t i = 0; i < x.size(); i++)
            x.at(i) = (i % 3 == 0) ? nan : (float)(i % 7) - 3.0f;
        x.at(48) = 1.0f; // row 1's X(b, s, 0): the clip is 1.5 there
        k.run(shape, {{X, x}, {O, o}});
        for (int64_t row = 0; row < 2; row++)
            for (int64_t j = 0; j < 48; j++) {
                const float v = x.at(row * 48 + j), clip = x.at(row * 48) + 0.5f;
                INFO("row " << row << ", h " << j << ": x " << v << ", clip " << clip);
                REQUIRE(o.at(row * 48 + j) == std::fmin(std::fmax(v, 0.0f), clip));
            }
    }
}

TEST_CASE("a split guard leaves an aligned inner loop; blocked layouts read contiguously", "[vector]") {
    Dim r("r"), n("n"), nc("nc"), nb("nb"), no("no"), ni("ni"), rb("rb"), rbi("rbi");
    Param K("K", 1, 64), N("N", 1, 300);
    Tensor X("X", {{r, K}, {n, N}});
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) {
        s.set(K, 1 + (int64_t)l.size()).set(N, std::max<int64_t>(1, l.back() * 7 % 300));
    };
    // Bp: X stored in 16-column panels, each panel's rows contiguous. O reads Bp over a column
    // split whose outer loop is split again: the guard nc < ceil(N/16) sits on `no`, and the
    // guard on the vectorized ni, nb*64 + no*16 + ni < floor_mult(N, 16), peels to `no` too.
    Func Bp("Bp", {{r, K}, {n, N}}), O("O", {{r, K}, {n, N}});
    Bp.compute([&](Expr k, Expr j) { return X(k, j); });
    Bp.split_storage(n, rb, rbi, 16).reorder_storage({rb, r, rbi});
    O.compute([&](Expr k, Expr j) { return Bp(k, j) * 2.0f; });
    Func tail = O.split_op(n, floor_mult(N, 16));
    O.split(n, nc, ni, 16).split(nc, nb, no, 4).reorder({nb, r, no, ni}).vectorize(ni);
    tail.reorder({r, n});
    Pipeline p({O}, "peeled_guard");
    Kernel k = p.compile();
    const std::string ir = k.lowered();
    INFO(ir);
    const std::string inner = loop_body(ir, "ni");
    REQUIRE(!inner.empty());
    REQUIRE(count_occurrences(inner, "if (") == 0);  // no guard left inside the vector loop
    REQUIRE(count_occurrences(inner, " / 16") == 0); // Bp's offset: (no * 16 + ni) / 16 folded
    REQUIRE(count_occurrences(inner, " % 16") == 0);
    REQUIRE_THAT(k.source(), Contains("cora_vstore(&O_["));
    check_against_reference(p, k, {X}, bind, 60, 4, 311);
}

TEST_CASE("trmm app schedule: k-panels, a panel-major copy of B and register tiles", "[vector][trmm]") {
    // The schedule of apps/trmm (op splits for the last rows and columns) with 16-row blocks and
    // 4 x 16 tiles (4 x 4 vector tiles, then single columns, past the last full tile: N = 45 has
    // all three), at sizes that leave every part non-empty. Panels of 16 divide every block's
    // reduction; panels of 24 leave a partial last panel (e.g. 32 = 24 + 8), whose k loop is
    // bounded rather than guarded; panels of 64 are longer than most blocks' reductions.
    const int64_t panel = GENERATE(16, 24, 64);
    apps::Trmm t(apps::TrmmBlocking{4, 16, 16, 32, panel});
    Pipeline p({t.C}, "trmm_kpanel");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(count_occurrences(loop_body(k.lowered(), "ki"), "if (") == 0);
    if (panel != 16) REQUIRE_THAT(k.lowered(), Contains("for ki in [0, 0 + max(min(" + std::to_string(panel) + ", "));
    REQUIRE_THAT(k.source(), Contains("cora_vstore(&C_tile_["));
    // Plain loops, not sections: Catch re-enters the test case for each section, and each entry
    // would lower the pipeline again (90 lowerings: 29 s of the test's 30, 225 s under ASan).
    for (int64_t mm : {1, 15, 16, 17, 48, 67}) {
        for (int64_t nn : {1, 16, 33, 45, 64}) {
            INFO("panel " << panel << ", M = " << mm << ", N = " << nn);
            check_against_reference(
                p, k, {t.L, t.B}, [&](RaggedShape &s, const std::vector<int32_t> &) { s.set(t.M, mm).set(t.N, nn); }, 1,
                1, 321);
        }
    }
}

TEST_CASE("trmm app schedule with wide tiles: narrow, 4-column and single-column tails", "[vector][trmm]") {
    // The two blockings' shapes (AVX-512: 4 x 64 tiles; AVX2: 8 x 32) with 16-row blocks: past the
    // last full tile, tile_cols / 4 vector tiles, then 4-column ones, then single columns. With
    // 4 x 64: N = 87 = 64 + 16 + 4 + 3, 45 = 2 x 16 + 3 x 4 + 1 (no full tile), 150 = 2 x 64 + 16
    // + 4 + 2; with 8 x 32: 45 = 32 + 8 + 4 + 1, 87 = 2 x 32 + 2 x 8 + 4 + 3, 150 = 4 x 32 + 2 x 8
    // + 4 + 2. M = 17 and 67 have head rows (whose column tails run their blocks longest first)
    // and last rows; M = 1 only the corner.
    const bool wide = GENERATE(true, false);
    const apps::TrmmBlocking blocking =
        wide ? apps::TrmmBlocking{4, 64, 16, 128, 24} : apps::TrmmBlocking{8, 32, 16, 64, 24};
    apps::Trmm t(blocking);
    Pipeline p({t.C}, "trmm_wide_tiles");
    Kernel k = p.compile();
    INFO(k.lowered());
    REQUIRE(count_occurrences(loop_body(k.lowered(), "ki"), "if (") == 0);
    // Vector tiles of tile_cols / 4 and of 4 columns; eleven parallel loops (Lb's copy, Bp's two
    // (its full panels, one whole vector per row, and its last columns), the full tiles, the last
    // rows, the corner's three column tails by default over their single block, the head rows'
    // three column tails), four of them over the row blocks longest first.
    const std::string narrow = "cora_v" + std::to_string(blocking.tile_cols / 4) + "_float";
    REQUIRE_THAT(k.source(), Contains(narrow) && Contains("cora_v4_float"));
    const std::string panel_row = "cora_v" + std::to_string(blocking.tile_cols) + "_float>(&B_[";
    REQUIRE_THAT(k.source(), Contains(panel_row));
    REQUIRE(count_occurrences(k.source(), "#pragma omp parallel for") == 11);
    REQUIRE(count_occurrences(k.source(), "= order_mb_[rank_];") == 4);
    // Lb's copy runs per row: no fusion maps (an entry per element of the triangle) to build,
    // check and read on every call.
    REQUIRE_THAT(k.source(), !Contains("fo_m_r") && !Contains("fi_m_r"));
    for (int64_t mm : {1, 17, 67}) {
        for (int64_t nn : {1, 45, 64, 87, 150}) {
            INFO("M = " << mm << ", N = " << nn);
            check_against_reference(
                p, k, {t.L, t.B}, [&](RaggedShape &s, const std::vector<int32_t> &) { s.set(t.M, mm).set(t.N, nn); }, 1,
                1, 322);
        }
    }
}

TEST_CASE("vgemm app schedule: (item, column panel) units, packed W panels, register tiles", "[vector][vgemm]") {
    // The schedule of apps/vgemm with 4 x 16 tiles (4 x 4 vector tiles, then single columns,
    // past the last full tile) and k-panels of 8 or 12 (a partial last panel when K is not a
    // multiple), on batches whose M, N, K cover 0, 1, the tile sizes and one past, and the max.
    const int64_t panel = GENERATE(8, 12);
    apps::VGemm v(apps::VGemmTiling{4, 16, panel});
    Pipeline p({v.C}, "vgemm_app_schedule");
    Kernel k = p.compile();
    const std::string ir = k.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("allocate on stack W_cache[float32 * " + std::to_string(16 * panel) + "]"));
    REQUIRE(count_occurrences(loop_body(ir, "ki"), "if (") == 0);
    // One parallel loop over every item's column panels, dynamically scheduled.
    REQUIRE_THAT(k.source(), Contains("schedule(dynamic, cora_chunk("));
    REQUIRE_THAT(k.source(), Contains("cora_vstore(&C_tile_["));
    auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) {
        testing::bind_vgemm_shape(s, v.B, v.M, v.N, v.K, l);
    };
    check_against_reference(p, k, {v.A, v.W}, bind, 37, 4, 331 + (uint32_t)panel);
    // A dense GEMM (batch of one) whose panels are shared by every thread.
    check_against_reference(
        p, k, {v.A, v.W},
        [&](RaggedShape &s, const std::vector<int32_t> &) {
            s.set(v.B, 1).set(v.M, {45}).set(v.N, {70}).set(v.K, {29});
        },
        1, 1, 341);
}

TEST_CASE("parallel loops: static over uniform bodies, dynamic chunks over ragged ones", "[vector][parallel]") {
    Dim batch("batch"), seq("seq"), h("h"), i("i");
    Param B("B", 1, 4096);
    LengthArray len("len", B, 0, 50);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {h, 8}}), D("D", {{i, 64}, {h, 8}});
    Func Ragged("Ragged", {{batch, B}, {seq, len(batch)}, {h, 8}}), Dense("Dense", {{i, 64}, {h, 8}});
    Ragged.compute([&](Expr b, Expr s, Expr hh) { return X(b, s, hh) * 2.0f + 1.0f; });
    Dense.compute([&](Expr ii, Expr hh) { return D(ii, hh) * 2.0f + 1.0f; });
    Ragged.parallel(batch); // one loop per sentence (the default schedule fuses batch and seq)
    Dense.parallel(i);
    Kernel kr = Pipeline({Ragged}, "par_ragged").compile(), kd = Pipeline({Dense}, "par_dense").compile();
    // The seq loop's bound depends on batch: rows differ in cost. The dense rows do not.
    REQUIRE_THAT(kr.source(), Contains("#pragma omp parallel for schedule(dynamic, cora_chunk(B_))"));
    REQUIRE_THAT(kd.source(), Contains("#pragma omp parallel for schedule(static)"));
    REQUIRE(kd.source().find("schedule(dynamic") == std::string::npos);
    // Enough rows for chunks of several rows at any thread count up to 32, and a batch of one.
    for (int64_t rows : {1, 17, 2000}) {
        DYNAMIC_SECTION("B = " << rows) {
            std::vector<int32_t> lengths((size_t)rows);
            for (int64_t r = 0; r < rows; r++)
                lengths[(size_t)r] = (int32_t)((r * 37 + 11) % 51); // 0..50, the maximum included
            RaggedShape shape;
            shape.set(B, rows).set(len, lengths);
            Buffer x = Buffer::alloc(X, shape), out = Buffer::alloc(Ragged, shape);
            testing::fill_random(x, 5);
            kr.run(shape, {{X, x}, {Ragged, out}});
            REQUIRE(out.size() == x.size());
            for (int64_t e = 0; e < x.size(); e++)
                REQUIRE(out.at(e) == x.at(e) * 2.0f + 1.0f);
        }
    }
}

TEST_CASE("register tiles: an address adds the unrolled tile rows last (codegen/IndexTerms.h)",
          "[vector][index_terms]") {
    // Y[t, n] = sum_k X[t, k] W[k, n] in 4 x 16 tiles over ragged tokens: X's read in the tile is
    // (row of the tile's first token) + k + (ti * 40), so that after unrolling ti the four reads
    // are constant offsets of one base (before: four loop-invariant bases, spilled in the 8x8
    // block-sparse kernel).
    Dim b("b"), s("s"), n("n"), k("k"), to("to"), ti("ti"), no("no"), ni("ni");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{b, B}, {s, len(b)}, {k, 40}}), W("W", {{k, 40}, {n, 32}});
    Func Y("Y", {{b, B}, {s, len(b)}, {n, 32}});
    Y.compute([&](Expr bb, Expr ss, Expr nn) { return sum(k, 40, X(bb, ss, k) * W(k, nn)); });
    Y.split(s, to, ti, 4).split(n, no, ni, 16).reorder({b, to, no, k, ti, ni});
    Y.pad_storage(s, 4).cache_write(no).unroll(ti).vectorize(ni);
    X.pad_storage(s, 4);
    Pipeline p({Y}, "index_terms_tile");
    Kernel kernel = p.compile();
    INFO(kernel.source());
    REQUIRE_THAT(kernel.source(), Contains("+ (ti_ * int64_t(40)))]"));
    check_against_reference(
        p, kernel, {X, W},
        [&](RaggedShape &sh, const std::vector<int32_t> &l) { sh.set(B, (int64_t)l.size()).set(len, l); }, 40, 8, 331);
}
