/** The schedule of Funcs left unscheduled (lower/DefaultSchedule.cpp) and the partial
 * accumulators of reductions (lower/LowerReductions.cpp): the nest they make, checked in the
 * lowered IR, and the results against the reference on the edge-case length batches. */
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "common/ragged_testing.h"
#include "common/trial_count.h"
#include "cora/cora.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

void bind_lengths(RaggedShape &s, const Param &B, const LengthArray &len, const std::vector<int32_t> &l) {
    s.set(B, (int64_t)l.size()).set(len, l);
}

/** The (width, vector bits) cases a test runs: all of them, or the first share of the list in
 * the stages that re-run the suite at a share of the cost (CORA_TEST_RANDOM_SCHEDULES). */
class CaseShare {
public:
    explicit CaseShare(std::vector<std::pair<int64_t, int>> cases)
        : cases_(std::move(cases)), share_((size_t)testing::scaled_trials((int)cases_.size())) {}
    bool runs(int64_t width, int bits) const {
        auto it = std::find(cases_.begin(), cases_.end(), std::make_pair(width, bits));
        return it != cases_.end() && (size_t)(it - cases_.begin()) < share_;
    }

private:
    std::vector<std::pair<int64_t, int>> cases_;
    size_t share_;
};

} // namespace

TEST_CASE("default schedule: a ragged LayerNorm runs over one parallel token loop, features vectorized",
          "[default_schedule]") {
    Dim batch("batch"), s("s"), f("f"), k("k");
    Param B("B", 1, 32);
    LengthArray len("len", B, 0, 70);
    Tensor X("X", {{batch, B}, {s, len(batch)}, {f, 64}});
    Func Mean("Mean", {{batch, B}, {s, len(batch)}}), Var("Var", {{batch, B}, {s, len(batch)}});
    Mean.compute([&](Expr b, Expr t) { return sum(k, 64, X(b, t, k)) / 64.0f; });
    Var.compute([&](Expr b, Expr t) {
        Expr d = X(b, t, k) - Mean(b, t);
        return sum(k, 64, d * d) / 64.0f;
    });
    Func Out("Out", {{batch, B}, {s, len(batch)}, {f, 64}});
    Out.compute([&](Expr b, Expr t, Expr c) { return (X(b, t, c) - Mean(b, t)) / sqrt(Var(b, t) + 1e-5f); });
    Pipeline p({Out}, "default_layernorm");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    // Every op: one parallel loop over the packed tokens (batch and s fused; the fusion maps
    // cancel against the packed offsets, so no map is an argument). The rows have a constant
    // width: Mean and Var keep their own nests (DefaultRowFusion.cpp).
    REQUIRE(testing::count_occurrences(ir, "parallel for batch_s") == 3);
    REQUIRE(ir.find("fo_") == std::string::npos);
    REQUIRE_THAT(ir, Contains("vectorized for f in [0, 0 + 64)"));
    REQUIRE_THAT(kern.source(), Contains("cora_vload<cora_v64_float>"));
    // The row sums keep 8 partial sums.
    REQUIRE(testing::count_occurrences(ir, "local acc_k_p7") == 2);
    testing::check_against_reference(
        p, kern, {X}, [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 70, 16,
        901);
}

TEST_CASE("default schedule: a 2-D ragged op fuses its rows and columns only where the fusion maps cancel",
          "[default_schedule]") {
    // [b < B, j < len(b)]: fused into one loop over the packed elements when every read is
    // indexed (b, j) in a tensor stored the same way (its offsets fold to the fused index: no
    // map); else the loop over rows stays (parallel), as reading a row's scale S(b) (directly or
    // through an inlined Func), a dense D(b, j), a row sum's extent len(b) or a condition on j
    // would need a fusion-map entry per element, built, checked and read on every call, and a
    // padded store would not fold to the fused index.
    Dim b("b"), j("j"), f("f");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 70);
    Tensor X("X", {{b, B}, {j, len(b)}}), S("S", {{b, B}}), D("D", {{b, B}, {j, 70}});
    Tensor X3("X3", {{b, B}, {j, len(b)}, {f, 4}});
    Dim b2("b2"), j2("j2"), k("k");
    Tensor X2("X2", {{b2, B}, {j2, len(b2)}}); // the same layout declared with other Dims
    // Inlined by default (elementwise, one reader at its own indices): its reader reads S(b).
    Func T("T", {{b, B}, {j, len(b)}});
    T.compute([&](Expr r, Expr c) { return X(r, c) * S(r); });
    auto bind = [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); };
    struct Case {
        const char *what;
        std::function<Expr(Expr, Expr)> body;
        std::vector<Tensor> inputs;
        bool fused;
        bool padded_output = false;
    };
    const std::vector<Case> cases = {
        {"same-layout reads", [&](Expr r, Expr c) { return X(r, c) * 2.0f + 1.0f; }, {X}, true},
        {"a 3-D read in the same layout", [&](Expr r, Expr c) { return X3(r, c, 1) + X(r, c); }, {X, X3}, true},
        {"the same layout declared with other Dims", [&](Expr r, Expr c) { return X2(r, c) - X(r, c); }, {X, X2}, true},
        {"a per-row scale", [&](Expr r, Expr c) { return X(r, c) * S(r); }, {X, S}, false},
        {"a dense read", [&](Expr r, Expr c) { return D(r, c) + X(r, c); }, {X, D}, false},
        {"a condition on the column", [&](Expr r, Expr c) { return select(c < 3, X(r, c), 0.0f); }, {X}, false},
        {"an inlined producer reading a per-row scale", [&](Expr r, Expr c) { return T(r, c) + 1.0f; }, {X, S}, false},
        {"a row sum", [&](Expr r, Expr c) { return X(r, c) - sum(k, len(r), X(r, k)); }, {X}, false},
        {"padded output storage", [&](Expr r, Expr c) { return X(r, c) * 2.0f; }, {X}, false, true},
    };
    for (const Case &c : cases) {
        INFO(c.what);
        Func Y("Y", {{b, B}, {j, len(b)}});
        Y.compute(c.body);
        if (c.padded_output) Y.pad_storage(j, 8);
        Pipeline p({Y}, "default_fuse_rule");
        Kernel kern = p.compile();
        const std::string ir = kern.lowered();
        INFO(ir);
        REQUIRE(testing::count_occurrences(ir, "parallel for") == 1);
        REQUIRE(ir.find("fo_") == std::string::npos);
        REQUIRE(ir.find("fi_") == std::string::npos);
        if (c.fused)
            REQUIRE_THAT(ir, Contains("parallel for b_j in"));
        else
            REQUIRE_THAT(ir, Contains("parallel for b in") && !Contains("b_j"));
        testing::check_against_reference(p, kern, c.inputs, bind, 70, 16, 912);
    }
}

TEST_CASE("default schedule: rows of a per-sentence matrix are fused once, the ragged row loop stays inside",
          "[default_schedule]") {
    // softmax over [batch, i < len, j < len]: batch and i fuse (maps with one entry per row), j
    // stays a loop, and its max and sum reductions over a ragged extent use partial accumulators
    // with a remainder loop; Mx and Z are computed at P's fused row loop (one loop for all three).
    Dim batch("batch"), i("i"), j("j"), k("k");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40);
    Tensor S("S", {{batch, B}, {i, len(batch)}, {j, len(batch)}});
    Func Mx("Mx", {{batch, B}, {i, len(batch)}}), Z("Z", {{batch, B}, {i, len(batch)}});
    Mx.compute([&](Expr b, Expr r) { return maximum(k, len(b), S(b, r, k)); });
    Z.compute([&](Expr b, Expr r) { return sum(k, len(b), exp(S(b, r, k) - Mx(b, r))); });
    Func P("P", {{batch, B}, {i, len(batch)}, {j, len(batch)}});
    P.compute([&](Expr b, Expr r, Expr c) { return exp(S(b, r, c) - Mx(b, r)) / Z(b, r); });
    Pipeline p({P}, "default_softmax");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE(testing::count_occurrences(ir, "parallel for batch_i") == 1);
    REQUIRE(testing::count_occurrences(ir, "for batch_i") == 1);
    REQUIRE_THAT(ir, Contains("for j in"));
    REQUIRE(testing::count_occurrences(ir, "local acc_k_p7") == 2);
    // A row's max and sum: one value per iteration of the fused loop, on the stack (compute_at
    // slices), not arrays over all rows.
    REQUIRE_THAT(ir, Contains("allocate on stack Mx[float32 * 1]") && Contains("allocate on stack Z[float32 * 1]"));
    testing::check_against_reference(
        p, kern, {S}, [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 40, 16,
        902);
}

TEST_CASE("default schedule: dense loops, long and odd feature extents, GEMM-like definitions", "[default_schedule]") {
    Dim batch("batch"), s("s"), f("f"), g("g"), row("row"), k("k");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20);
    // 128 and 100 features: the whole row is one vectorized loop.
    Tensor X("X", {{batch, B}, {s, len(batch)}, {f, 128}});
    Func Y("Y", {{batch, B}, {s, len(batch)}, {f, 128}});
    Y.compute([&](Expr b, Expr t, Expr c) { return max(X(b, t, c), 0.0f) * 2.0f; });
    Tensor U("U", {{batch, B}, {s, len(batch)}, {g, 100}});
    Func V("V", {{batch, B}, {s, len(batch)}, {g, 100}});
    V.compute([&](Expr b, Expr t, Expr c) { return U(b, t, c) + 1.0f; });
    // Dense rows with a short (8) reduction: no partial sums, parallel rows.
    Tensor D("D", {{row, 48}, {k, 8}});
    Func R("R", {{row, 48}});
    R.compute([&](Expr r) { return sum(k, 8, D(r, k)); });
    // A GEMM with a bias: the reduction loop goes outside the columns, which are vectorized (the
    // ikj order), the bias applied after the reduction.
    Tensor W("W", {{k, 32}, {g, 16}}), Bias("Bias", {{g, 16}});
    Func G("G", {{batch, B}, {s, len(batch)}, {g, 16}});
    G.compute([&](Expr b, Expr t, Expr c) { return sum(k, 32, X(b, t, k) * W(k, c)) + Bias(c); });
    // The same with W stored transposed (reads strided along the row): the row is a plain loop
    // around the reduction, with one accumulator (no partial sums over strided reads).
    Tensor WT("WT", {{g, 16}, {k, 32}});
    Func GT("GT", {{batch, B}, {s, len(batch)}, {g, 16}});
    GT.compute([&](Expr b, Expr t, Expr c) { return sum(k, 32, X(b, t, k * 4) * WT(c, k)); });
    Pipeline p({Y, V, R, G, GT}, "default_dense");
    // The untiled default (no register-tiled contractions): G in the ikj order.
    CompileOptions untiled;
    untiled.vector_bits = -1;
    Kernel kern = p.compile(untiled);
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("vectorized for f in [0, 0 + 128)"));
    REQUIRE_THAT(ir, Contains("vectorized for g in [0, 0 + 100)"));
    REQUIRE_THAT(ir, Contains("\n  for k in [0, 0 + 32):\n    vectorized for g in [0, 0 + 16):\n      G["));
    REQUIRE_THAT(ir, Contains("\n  for g in [0, 0 + 16):\n    local acc_k = 0f")); // GT: a plain row
    REQUIRE(ir.find("acc_k_p0") == std::string::npos);
    REQUIRE_THAT(ir, Contains("parallel for row in"));
    REQUIRE(ir.find("acc_k_p0") == std::string::npos);
    testing::check_against_reference(
        p, kern, {X, U, D, W, Bias, WT},
        [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 20, 16, 903);
    // With 256-bit vectors G gets a register tile (4 rows x 16 columns, the bias applied when
    // the tile is written, W's panel copied once per column tile); so does GT, its panel of WT
    // copied transposed (g innermost in the tile: 16 x 32, in 16 x 16 blocks).
    CompileOptions avx2;
    avx2.vector_bits = 256;
    Kernel tiled = p.compile(avx2);
    const std::string tir = tiled.lowered();
    INFO(tir);
    REQUIRE_THAT(tir, Contains("unrolled for s_i in [0, 0 + 4)"));
    REQUIRE_THAT(tir, Contains("vectorized for g_i in [0, 0 + 16)"));
    REQUIRE_THAT(tir, Contains("allocate on stack W_cache[float32 * 512]"));
    REQUIRE_THAT(tir, Contains("allocate on stack G_tile[float32 * 64]"));
    REQUIRE_THAT(tir, Contains("allocate on stack WT_cache[float32 * 512]"));
    REQUIRE_THAT(tir, Contains("allocate on stack GT_tile[float32 * 64]"));
    REQUIRE_THAT(tir, Contains("for WT_g_ci in [0, 0 + 16)"));
    REQUIRE(tir.find("\n  for g in [0, 0 + 16):\n    local acc_k = 0f") == std::string::npos);
    testing::check_against_reference(
        p, tiled, {X, U, D, W, Bias, WT},
        [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 20, 16, 904);
}

TEST_CASE("default schedule: contractions get register tiles sized for the vector width on every edge",
          "[default_schedule]") {
    // A grouped GEMM (per-expert weights, experts may be empty) and a token GEMM whose depth is
    // not a multiple of the 256-deep panel (two panels, the second partial), a GEMM with a
    // run-time depth (no panel copy: its box is not a constant), and widths that take a full,
    // a smaller or no column tile (20: not a multiple of any vector), at 128, 256 and 512 bits.
    Dim e("e"), t("t"), r("r"), n("n"), m("m");
    Param E("E", 1, 9), K("K", 1, 40);
    LengthArray count("count", E, 0, 23);
    // Each case is two kernels compiled: the stages that re-run the suite at a share of the cost
    // (CORA_TEST_RANDOM_SCHEDULES) take the first cases of this list.
    const CaseShare share(
        {{64, 512}, {20, 256}, {48, 128}, {64, 128}, {48, 256}, {20, 512}, {64, 256}, {48, 512}, {20, 128}});
    for (int64_t width : {int64_t(64), int64_t(48), int64_t(20)}) {
        Tensor X("X", {{e, E}, {t, count(e)}, {r, 300}}), W("W", {{e, E}, {r, 300}, {n, width}});
        Func Y("Y", {{e, E}, {t, count(e)}, {n, width}});
        Y.compute([&](Expr a, Expr b, Expr c) { return sum(r, 300, X(a, b, r) * W(a, r, c)); });
        Tensor A("A", {{m, 13}, {r, K}}), V("V", {{r, K}, {n, width}});
        Func G("G", {{m, 13}, {n, width}});
        G.compute([&](Expr a, Expr c) { return max(sum(r, K, A(a, r) * V(r, c)), 0.0f); });
        Pipeline p({Y, G}, "default_contractions_" + std::to_string(width));
        for (int bits : {128, 256, 512}) {
            if (!share.runs(width, bits)) continue;
            DYNAMIC_SECTION("width " << width << ", " << bits << "-bit vectors") {
                CompileOptions o;
                o.vector_bits = bits;
                Kernel k = p.compile(o);
                const std::string ir = k.lowered();
                INFO(ir);
                const int64_t lanes = bits / 32, vectors = bits >= 512 ? 4 : 2;
                int64_t tile = 0;
                for (int64_t v = vectors; v >= 1 && !tile; v /= 2)
                    if (width % (v * lanes) == 0) tile = v * lanes;
                REQUIRE((testing::count_occurrences(ir, "Y_tile[") > 0) == (tile > 0));
                REQUIRE((testing::count_occurrences(ir, "G_tile[") > 0) == (tile > 0));
                if (tile) {
                    REQUIRE_THAT(ir, Contains("vectorized for n_i in [0, 0 + " + std::to_string(tile) + ")"));
                    REQUIRE_THAT(ir, Contains("W_cache[float32 * " + std::to_string(256 * tile) + "]"));
                    REQUIRE(ir.find("V_cache") == std::string::npos); // run-time depth: no constant box
                }
                testing::check_against_reference(
                    p, k, {X, W, A, V},
                    [&](RaggedShape &sh, const std::vector<int32_t> &l) {
                        sh.set(E, (int64_t)l.size()).set(count, l).set(K, 1 + 3 * (int64_t)l.size());
                    },
                    23, 4, 906);
            }
        }
    }
}

TEST_CASE("default schedule: a contraction with nn.Linear's weight layout tiles over a transposed panel",
          "[default_schedule]") {
    // Y = X W^T with W [n, r] (PyTorch's Linear weight as it is; per expert too): the column
    // operand is read along n with a stride, so its 256-deep panels are copied transposed (n
    // innermost in the tile, in 16 x 16 blocks where both sides are multiples of 16) and the
    // contraction gets the same register tiles as with W [r, n]. A run-time depth has no constant
    // panel: that contraction keeps the plain nest (no tile, no reduction moved outside its row).
    // Depth 300: two panels, the second partial; widths with a full, a smaller or no column tile.
    Dim e("e"), t("t"), r("r"), n("n"), m("m");
    Param E("E", 1, 9), K("K", 1, 40);
    LengthArray count("count", E, 0, 23);
    const CaseShare share({{64, 512}, {20, 128}, {48, 128}, {64, 128}, {48, 512}, {20, 512}});
    for (int64_t width : {int64_t(64), int64_t(48), int64_t(20)}) {
        Tensor X("X", {{e, E}, {t, count(e)}, {r, 300}}), W("W", {{e, E}, {n, width}, {r, 300}});
        Func Y("Y", {{e, E}, {t, count(e)}, {n, width}});
        Y.compute([&](Expr a, Expr b, Expr c) { return sum(r, 300, X(a, b, r) * W(a, c, r)) + 1.0f; });
        Tensor A("A", {{m, 13}, {r, K}}), V("V", {{n, width}, {r, K}});
        Func G("G", {{m, 13}, {n, width}});
        G.compute([&](Expr a, Expr c) { return sum(r, K, A(a, r) * V(c, r)); });
        Pipeline p({Y, G}, "default_linear_layout_" + std::to_string(width));
        for (int bits : {128, 512}) {
            if (!share.runs(width, bits)) continue;
            DYNAMIC_SECTION("width " << width << ", " << bits << "-bit vectors") {
                CompileOptions o;
                o.vector_bits = bits;
                Kernel k = p.compile(o);
                const std::string ir = k.lowered();
                INFO(ir);
                const int64_t lanes = bits / 32, vectors = bits >= 512 ? 4 : 2;
                int64_t tile = 0;
                for (int64_t v = vectors; v >= 1 && !tile; v /= 2)
                    if (width % (v * lanes) == 0) tile = v * lanes;
                REQUIRE((testing::count_occurrences(ir, "Y_tile[") > 0) == (tile > 0));
                REQUIRE(testing::count_occurrences(ir, "G_tile[") == 0);
                REQUIRE(ir.find("V_cache") == std::string::npos);
                if (tile) {
                    REQUIRE_THAT(ir, Contains("vectorized for n_i in [0, 0 + " + std::to_string(tile) + ")"));
                    REQUIRE_THAT(ir, Contains("W_cache[float32 * " + std::to_string(256 * tile) + "]"));
                    // The tile reads the panel with n_i at unit stride.
                    REQUIRE_THAT(ir, Contains("W_cache[(n_i + (r_i * " + std::to_string(tile) + "))]"));
                    REQUIRE((ir.find("for W_n_ci in [0, 0 + 16)") != std::string::npos) == (tile % 16 == 0));
                }
                testing::check_against_reference(
                    p, k, {X, W, A, V},
                    [&](RaggedShape &sh, const std::vector<int32_t> &l) {
                        sh.set(E, (int64_t)l.size()).set(count, l).set(K, 1 + 3 * (int64_t)l.size());
                    },
                    23, 4, 907);
            }
        }
    }
}

TEST_CASE("default schedule: a ragged innermost loop under several fused loops stays a loop (no per-element maps)",
          "[default_schedule]") {
    // K transposed per head, stored [b][h][d][j < len(b)] with j padded: fusing j as well would
    // need a fusion-map entry per element, read per element (the maps cannot cancel).
    Dim batch("batch"), h("h"), d("d"), j("j"), s("s");
    Param B("B", 1, 16), H("H", 1, 4);
    LengthArray len("len", B, 0, 40);
    Tensor K("K", {{batch, B}, {s, len(batch)}, {h, H}, {d, 8}});
    Func KT("KT", {{batch, B}, {h, H}, {d, 8}, {j, len(batch)}});
    KT.compute([&](Expr b, Expr hh, Expr dd, Expr jj) { return K(b, jj, hh, dd); });
    KT.pad_storage(j, 16);
    Pipeline p({KT}, "default_transposed");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("parallel for batch_h_d in"));
    REQUIRE_THAT(ir, Contains("for j in"));
    REQUIRE(ir.find("fo_") == std::string::npos);
    testing::check_against_reference(
        p, kern, {K},
        [&](RaggedShape &sh, const std::vector<int32_t> &l) { sh.set(B, (int64_t)l.size()).set(H, 3).set(len, l); }, 40,
        16, 905);
}

TEST_CASE("default schedule: a Func that is scheduled, or that another op is computed at, keeps its loops",
          "[default_schedule]") {
    Dim batch("batch"), s("s"), f("f"), k("k");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30);
    Tensor X("X", {{batch, B}, {s, len(batch)}, {f, 32}});
    Func Mean("Mean", {{batch, B}, {s, len(batch)}});
    Mean.compute([&](Expr b, Expr t) { return sum(k, 32, X(b, t, k)) / 32.0f; });
    Func Out("Out", {{batch, B}, {s, len(batch)}, {f, 32}});
    Out.compute([&](Expr b, Expr t, Expr c) { return X(b, t, c) - Mean(b, t); });
    Mean.compute_at(Out, s); // names Out's loop s: Out keeps batch and s as loops
    Pipeline p({Out}, "default_kept");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("parallel for batch in"));
    REQUIRE(ir.find("batch_s") == std::string::npos);
    testing::check_against_reference(
        p, kern, {X}, [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 30, 16,
        904);
}

TEST_CASE("default schedule: AttnV tiles its queries inside the heads over each sentence's own keys",
          "[default_schedule]") {
    // out(b, i, h, d) = sum_j P(b, h, i, j) V(b, j, h, d): the rows are the queries i (P uses them,
    // V does not), the heads move outside them, the depth len(b) is ragged (no panel copy).
    Dim batch("batch"), i("i"), h("h"), d("d"), j("j");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 29);
    Tensor P("P", {{batch, B}, {h, 3}, {i, len(batch)}, {j, len(batch)}});
    Tensor V("V", {{batch, B}, {j, len(batch)}, {h, 3}, {d, 32}});
    Func O("O", {{batch, B}, {i, len(batch)}, {h, 3}, {d, 32}});
    O.compute([&](Expr b, Expr q, Expr hh, Expr dd) { return sum(j, len(b), P(b, hh, q, j) * V(b, j, hh, dd)); });
    Pipeline p({O}, "default_attnv");
    CompileOptions o;
    o.vector_bits = 256;
    Kernel k = p.compile(o);
    const std::string ir = k.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("for h in [0, 0 + 3)"));
    REQUIRE_THAT(ir, Contains("unrolled for i_i in [0, 0 + 4)"));
    REQUIRE_THAT(ir, Contains("vectorized for d_i in [0, 0 + 16)"));
    REQUIRE(ir.find("O_tile[") != std::string::npos);
    REQUIRE(ir.find("V_cache") == std::string::npos);
    testing::check_against_reference(
        p, k, {P, V}, [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 29, 4, 907);
}

TEST_CASE("default schedule: a tiled contraction the lowering cannot accept takes its untiled default",
          "[default_schedule]") {
    // W is read through an index tensor: its panel's box spans Idx's whole declared range (1000 x 32
    // elements, over the cache tile limit), so the tiled nest's cache_read is a CompileError and Y
    // gets the untiled default instead; the results stay right.
    Dim t("t"), r("r"), n("n"), w("w");
    Param M("M", 1, 64);
    Tensor X("X", {{t, M}, {r, 300}}), W("W", {{w, 1000}, {n, 32}}), Idx("Idx", {{r, 300}}, Int32);
    Idx.index_range(0, 999);
    Func Y("Y", {{t, M}, {n, 32}});
    Y.compute([&](Expr a, Expr c) { return sum(r, 300, X(a, r) * W(cast(Int64, Idx(r)), c)); });
    Pipeline p({Y}, "default_untiled_fallback");
    CompileOptions o;
    o.vector_bits = 256;
    Kernel k = p.compile(o);
    INFO(k.lowered());
    REQUIRE(k.lowered().find("Y_tile") == std::string::npos);
    REQUIRE_THAT(k.lowered(), Contains("vectorized for n in [0, 0 + 32)")); // the untiled default's row
    for (int64_t m : {int64_t(1), int64_t(5), int64_t(64)}) {
        RaggedShape shape;
        shape.set(M, m);
        Buffer x = Buffer::alloc(X, shape), wb = Buffer::alloc(W, shape), idx = Buffer::alloc(Idx, shape),
               y = Buffer::alloc(Y, shape);
        testing::fill_random(x, 11);
        testing::fill_random(wb, 12);
        for (int64_t i = 0; i < idx.size(); i++)
            idx.data<int32_t>()[i] = int32_t((i * 337) % 1000);
        k.run(shape, {Binding(X, x), Binding(W, wb), Binding(Idx, idx), Binding(Y, y)});
        auto ref = reference_evaluate(p, shape, {{X, &x}, {W, &wb}, {Idx, &idx}});
        testing::require_close(y, Y, shape, ref[0]);
    }
}

TEST_CASE("default schedule: a jagged softmax computes each row's max and sum at the row", "[default_schedule]") {
    // Y(r, j) = exp(X(r, j) - Mx(r)) / Z(r) over rows of 0 to 40: Mx, E and Z are computed inside
    // Y's parallel row loop (one parallel loop, no row-index map per element), and the row's max
    // and sum are read once per row (hoisted), so the C compiler vectorizes the row loops.
    Dim row("row"), j("j"), k("k");
    Param R("R", 1, 64);
    LengthArray len("len", R, 0, 40);
    Tensor X("X", {{row, R}, {j, len(row)}});
    Func Mx("Mx", {{row, R}}), E("E", {{row, R}, {j, len(row)}}), Z("Z", {{row, R}});
    Func Y("Y", {{row, R}, {j, len(row)}});
    Mx.compute([&](Expr r) { return maximum(k, len(r), X(r, k)); });
    E.compute([&](Expr r, Expr c) { return exp(X(r, c) - Mx(r)); });
    Z.compute([&](Expr r) { return sum(k, len(r), E(r, k)); });
    Y.compute([&](Expr r, Expr c) { return E(r, c) / Z(r); });
    Pipeline p({Y}, "default_jagged_softmax");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE(testing::count_occurrences(ir, "parallel for") == 1);
    REQUIRE_THAT(ir, Contains("parallel for row in"));
    REQUIRE(ir.find("fo_") == std::string::npos);
    REQUIRE(testing::count_occurrences(ir, "local acc_k_p7") == 2);
    REQUIRE_THAT(ir, Contains("Mx_h"));
    REQUIRE_THAT(ir, Contains("Z_h"));
    // Each holds one row (compute_at slices): the statistics on the stack, the exponentials a
    // row per iteration of the parallel loop, never an array over all rows.
    REQUIRE_THAT(ir, Contains("allocate on stack Mx[float32 * 1]") && Contains("allocate on stack Z[float32 * 1]") &&
                         Contains("allocate E[float32 * (prefix_row[(row + 1)] - prefix_row[row])]"));
    REQUIRE(ir.find("parallel for row in") < ir.find("allocate E["));
    auto bind = [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, R, len, l); };
    testing::check_against_reference(p, kern, {X}, bind, 40, 16, 906);

    SECTION("compute_root keeps a row's Func in its own nest over all rows") {
        Mx.compute_root();
        E.compute_root();
        Z.compute_root();
        Kernel stored = p.compile();
        INFO(stored.lowered());
        REQUIRE(testing::count_occurrences(stored.lowered(), "parallel for") == 4);
        testing::check_against_reference(p, stored, {X}, bind, 40, 16, 907);
    }
    SECTION("a per-row Func that is also an output, or read at another row, stays in its own nest") {
        Func Shifted("Shifted", {{row, R}, {j, len(row)}});
        Shifted.compute([&](Expr r, Expr c) { return Y(r, c) + Z(max(r - 1, 0)); });
        Pipeline shifted({Shifted}, "default_jagged_shifted");
        Kernel ks = shifted.compile();
        INFO(ks.lowered());
        // Z is read by Shifted at row r - 1: Z, and E, which Z reads, keep their own nests; Mx,
        // read by E alone, is computed at E's row (3 parallel loops: E, Z, Shifted). E and Shifted
        // run over rows, not over a fused (row, j) loop: they read Mx and Z per row, so that
        // loop's fusion maps would not cancel (an entry per element, read and checked per call).
        REQUIRE(testing::count_occurrences(ks.lowered(), "parallel for") == 3);
        REQUIRE(testing::count_occurrences(ks.lowered(), "parallel for row in") == 3);
        REQUIRE(ks.lowered().find("fo_") == std::string::npos);
        testing::check_against_reference(shifted, ks, {X}, bind, 40, 16, 908);
        Pipeline both({Y, Z}, "default_jagged_two_outputs");
        Kernel kb = both.compile();
        INFO(kb.lowered());
        REQUIRE(testing::count_occurrences(kb.lowered(), "parallel for") >= 3);
        testing::check_against_reference(both, kb, {X}, bind, 40, 16, 909);
    }
}

TEST_CASE("default schedule: a per-row LayerNorm over rows of constant width keeps each Func in its own nest",
          "[default_schedule]") {
    Dim t("t"), c("c"), k("k");
    Param T("T", 0, 300);
    Tensor X("X", {{t, T}, {c, 48}});
    Func Mean("Mean", {{t, T}}), Var("Var", {{t, T}}), Out("Out", {{t, T}, {c, 48}});
    Mean.compute([&](Expr r) { return sum(k, 48, X(r, k)) / 48.0f; });
    Var.compute([&](Expr r) {
        Expr d = X(r, k) - Mean(r);
        return sum(k, 48, d * d) / 48.0f;
    });
    Out.compute([&](Expr r, Expr f) { return (X(r, f) - Mean(r)) / sqrt(Var(r) + 1e-5f); });
    Pipeline p({Out}, "default_row_layernorm");
    Kernel kern = p.compile();
    const std::string ir = kern.lowered();
    INFO(ir);
    // Each Func's nest reads the row's statistics without a map and vectorizes whole rows, which
    // ran faster than the statistics computed at the row (DefaultRowFusion.cpp).
    REQUIRE(testing::count_occurrences(ir, "parallel for t in") == 3);
    REQUIRE_THAT(ir, Contains("vectorized for c in [0, 0 + 48)"));
    for (int64_t rows : {0, 1, 7, 300}) {
        RaggedShape sh;
        sh.set(T, rows);
        Buffer x = Buffer::alloc(X, sh), out = Buffer::alloc(Out, sh);
        for (int64_t i = 0; i < x.size(); i++)
            x.at(i) = (float)((i * 37) % 101) / 50.0f - 1.0f + (float)(i / 48) * 0.01f;
        kern.run(sh, {Binding(X, x), Binding(Out, out)});
        double err = 0;
        for (int64_t r = 0; r < rows; r++) {
            double m = 0, v = 0;
            for (int f = 0; f < 48; f++)
                m += x.at(r * 48 + f);
            m /= 48;
            for (int f = 0; f < 48; f++)
                v += (x.at(r * 48 + f) - m) * (x.at(r * 48 + f) - m);
            v /= 48;
            for (int f = 0; f < 48; f++) {
                const double want = (x.at(r * 48 + f) - m) / std::sqrt(v + 1e-5);
                const double d = std::fabs(out.at(r * 48 + f) - want);
                err = std::isnan(d) ? INFINITY : std::max(err, d);
            }
        }
        INFO("rows " << rows);
        REQUIRE(err < 1e-4);
    }
}

TEST_CASE("default schedule: a contraction over a ragged row gets tiles over zero-filled panels",
          "[default_schedule]") {
    // Y(b, m, n) = sum_k A(b, m, k) W(b, k, n) with n < len(b) (vgemm's ragged columns), at a
    // constant and at a run-time depth, and S(b, i, j) = sum_d Q(b, i, d) K(b, j, d) (QK^T: the
    // keys read along the ragged row with a stride). With vector registers: register tiles of 4
    // rows x 2 vectors over panels of the column operand (constant boxes: 64 deep at a run-time
    // depth; K's transposed), the whole tile updated without the column guard (the panel's zeros
    // past the row are summed into columns nobody stores) and the row tiles specialised. Without
    // (vector_bits < 0): the reduction loop outside the row, which the C compiler vectorizes
    // (contiguous in W and Y; QK^T keeps its plain nest).
    Dim b("b"), m("m"), n("n"), k("k");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 40), depth("depth", B, 0, 70);
    Tensor A("A", {{b, B}, {m, len(b)}, {k, 24}}), W("W", {{b, B}, {k, 24}, {n, len(b)}});
    Func Y("Y", {{b, B}, {m, len(b)}, {n, len(b)}});
    Y.compute([&](Expr x, Expr i, Expr j) { return sum(k, 24, A(x, i, k) * W(x, k, j)); });
    Tensor A2("A2", {{b, B}, {m, len(b)}, {k, depth(b)}}), W2("W2", {{b, B}, {k, depth(b)}, {n, len(b)}});
    Func Y2("Y2", {{b, B}, {m, len(b)}, {n, len(b)}});
    Y2.compute([&](Expr x, Expr i, Expr j) { return sum(k, depth(x), A2(x, i, k) * W2(x, k, j)) + 1.0f; });
    Tensor Q("Q", {{b, B}, {m, len(b)}, {k, 32}}), K("K", {{b, B}, {n, len(b)}, {k, 32}});
    Func S("S", {{b, B}, {m, len(b)}, {n, len(b)}});
    S.compute([&](Expr x, Expr i, Expr j) { return sum(k, 32, Q(x, i, k) * K(x, j, k)); });
    Pipeline p({Y, Y2, S}, "default_ragged_row_contraction");
    auto bind = [&](RaggedShape &sh, const std::vector<int32_t> &l) {
        bind_lengths(sh, B, len, l);
        std::vector<int32_t> d(l.size());
        for (size_t i = 0; i < l.size(); i++)
            d[i] = (int32_t)((l[i] * 7 + 3 * i) % 71); // 0 to 70: panels of 64 and one past
        sh.set(depth, d);
    };
    const CaseShare share({{0, 512}, {0, -1}, {0, 256}});
    for (int bits : {-1, 256, 512}) {
        if (!share.runs(0, bits)) continue;
        DYNAMIC_SECTION(bits << "-bit vectors") {
            CompileOptions o;
            o.vector_bits = bits;
            Kernel kern = p.compile(o);
            const std::string ir = kern.lowered();
            INFO(ir);
            if (bits < 0) {
                // The row initialised, then per k an update of the whole row.
                const size_t k_loop = ir.find("for k in"), update = ir.find("for n in", k_loop);
                REQUIRE(k_loop != std::string::npos);
                REQUIRE(update != std::string::npos);
                REQUIRE(ir.find("for n in") < k_loop);
                REQUIRE(ir.find("_tile[") == std::string::npos);
            } else {
                const int64_t cols = 16; // 16 columns per tile on every vector width
                for (const char *f : {"Y", "Y2", "S"}) {
                    REQUIRE_THAT(ir, Contains(std::string("allocate on stack ") + f + "_tile[float32 * " +
                                              std::to_string(4 * cols) + "]"));
                }
                REQUIRE_THAT(ir, Contains("allocate on stack W_cache[float32 * " + std::to_string(24 * cols) + "]"));
                REQUIRE_THAT(ir, Contains("allocate on stack W2_cache[float32 * " + std::to_string(64 * cols) + "]"));
                REQUIRE_THAT(ir, Contains("allocate on stack K_cache[float32 * " + std::to_string(32 * cols) + "]"));
                REQUIRE_THAT(ir, Contains("K_cache[(n_i + (k * " + std::to_string(cols) + "))]"));
                // Every update's vector loop holds the multiply-add alone (no column guard).
                for (const char *f : {"Y", "Y2", "S"}) {
                    const std::string update =
                        std::string(f) + "_tile[((m_i * " + std::to_string(cols) + ") + n_i)] = (" + f + "_tile";
                    int updates = 0;
                    for (size_t at = ir.find(update); at != std::string::npos; at = ir.find(update, at + 1)) {
                        const size_t loop = ir.rfind("vectorized for n_i in", at);
                        REQUIRE(loop != std::string::npos);
                        INFO(f << "'s update at " << at);
                        REQUIRE(ir.find("if (", loop) > at);
                        updates++;
                    }
                    REQUIRE(updates >= 2); // whole row tiles and the last, partial one
                }
            }
            testing::check_against_reference(p, kern, {A, W, A2, W2, Q, K}, bind, 40, 16, 910 + (uint32_t)(bits + 1));
        }
    }
}

TEST_CASE("default schedule: a contraction whose reduction Dim no longer exists still gets its tiles",
          "[default_schedule]") {
    // The definition holds the reduction's variable, not its Dim; the default's reduction loop is
    // a Dim of its own (before, the tiles named the user's Dim after it was freed).
    Dim b("b"), s("s"), n("n");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30);
    Tensor X("X", {{b, B}, {s, len(b)}, {Dim("f"), 40}}), W("W", {{Dim("g"), 40}, {n, 64}});
    Func Y("Y", {{b, B}, {s, len(b)}, {n, 64}});
    {
        Dim gone("reduced_over");
        Y.compute([&](Expr x, Expr i, Expr j) { return sum(gone, 40, X(x, i, gone) * W(gone, j)); });
    }
    Pipeline p({Y}, "default_tiles_without_the_dim");
    CompileOptions o;
    o.vector_bits = 512;
    Kernel kern = p.compile(o);
    const std::string ir = kern.lowered();
    INFO(ir);
    REQUIRE_THAT(ir, Contains("Y_tile["));
    REQUIRE_THAT(ir, Contains("for reduced_over in"));
    testing::check_against_reference(
        p, kern, {X, W}, [&](RaggedShape &sh, const std::vector<int32_t> &l) { bind_lengths(sh, B, len, l); }, 30, 4,
        913);
}
