// Reductions with an epilogue — `sum(...) + bias(o)`, `max(sum(...) + bias, 0)`, a residual, a
// scale — scheduled like bare reductions (ir/Epilogue.h): the epilogue is applied once per
// element after the reduction completes, in every place a schedule can finish it (the register
// tile's write-back, a pass after the reduction loop, a pass after the k-panels). Each schedule
// against the reference on the edge-case batches, and the lowered IR where the epilogue lands.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;
using testing::count_occurrences;

namespace {

/** The projection of packed tokens with an epilogue, as the encoder's kernels have it. */
struct Projection {
    static constexpr int64_t K = 24, O = 32;
    Dim b{"b"}, s{"s"}, k{"k"}, o{"o"}, r{"r"}, tok{"tok"}, to{"to"}, ti{"ti"}, oo{"oo"}, oi{"oi"}, ro{"ro"}, ri{"ri"};
    Param B{"B", 1, 16};
    LengthArray len{"len", B, 0, 33};
    Tensor X{"X", {{b, B}, {s, len(b)}, {k, K}}};
    Tensor W{"W", {{k, K}, {o, O}}};
    Tensor bias{"bias", {{o, O}}};
    Tensor R{"R", {{b, B}, {s, len(b)}, {o, O}}}; // a residual
    Func Out{"Out", {{b, B}, {s, len(b)}, {o, O}}};
    void bind(RaggedShape &shape, const std::vector<int32_t> &l) const { shape.set(B, (int64_t)l.size()).set(len, l); }
};

} // namespace

TEST_CASE("a reduction with an epilogue schedules like a bare reduction", "[epilogue]") {
    // 0: unscheduled (the reduction computed in place, lower_reductions)
    // 1: reduction loop reordered outside the output columns: init, update, epilogue pass
    // 2: packed tokens, bulk padding, 4 x 16 register tiles: the epilogue at the write-back
    // 3: as 2 with k-panels outside the tile: storage accumulates, an epilogue pass follows
    // 4: as 2 with the prover off (guards kept)
    for (int variant = 0; variant < 5; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Projection p;
            p.Out.compute([&](Expr bb, Expr ss, Expr oo) {
                return max(sum(p.r, Projection::K, p.X(bb, ss, p.r) * p.W(p.r, oo)) + p.bias(oo), 0.0f);
            });
            if (variant == 1) p.Out.reorder({p.b, p.s, p.r, p.o});
            if (variant >= 2) {
                p.Out.fuse(p.b, p.s, p.tok).pad_loop(p.tok, 4).fuse_storage(p.b, p.s, p.tok, 4);
                p.X.fuse_storage(p.b, p.s, p.tok, 4);
                p.Out.split(p.tok, p.to, p.ti, 4).split(p.o, p.oo, p.oi, 16);
                if (variant == 3)
                    p.Out.split(p.r, p.ro, p.ri, 8).reorder({p.to, p.ro, p.oo, p.ri, p.ti, p.oi});
                else
                    p.Out.reorder({p.to, p.oo, p.r, p.ti, p.oi});
                p.Out.unroll(p.ti).vectorize(p.oi).cache_write(p.oo);
            }
            CompileOptions opts;
            opts.remove_guards = variant != 4;
            Pipeline pipe({p.Out}, "epilogue_relu_" + std::to_string(variant));
            Kernel kern = pipe.compile(opts);
            const std::string ir = kern.lowered();
            INFO(ir);
            if (variant >= 2) REQUIRE_THAT(ir, Contains("allocate on stack Out_tile"));
            // The bias is read once per element, never inside the reduction loop. The default's
            // register tiles (variant 0) are written twice, for whole tiles and for the guarded
            // last one (specialize_interior), each reading it once at its write-back.
            REQUIRE(count_occurrences(ir, "bias[") == (variant == 0 ? 2 : 1));
            if (variant == 1 || variant == 3) {
                // A pass after the reduction reads back what it stored and applies the epilogue.
                size_t reduction = ir.find(variant == 1 ? "for r in" : "for ro in");
                REQUIRE(reduction != std::string::npos);
                REQUIRE(ir.find("bias[") > reduction);
            }
            auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { p.bind(s, l); };
            check_against_reference(pipe, kern, {p.X, p.W, p.bias}, bind, 33, 4, 90 + (uint32_t)variant);
        }
    }
}

TEST_CASE("epilogues that read a residual and scale: output projection and attention scores", "[epilogue]") {
    SECTION("residual + bias on register tiles") {
        Projection p;
        p.Out.compute([&](Expr bb, Expr ss, Expr oo) {
            return sum(p.r, Projection::K, p.X(bb, ss, p.r) * p.W(p.r, oo)) + p.bias(oo) + p.R(bb, ss, oo);
        });
        p.Out.fuse(p.b, p.s, p.tok).pad_loop(p.tok, 4).fuse_storage(p.b, p.s, p.tok, 4);
        for (Tensor *t : {&p.X, &p.R})
            t->fuse_storage(p.b, p.s, p.tok, 4);
        p.Out.split(p.tok, p.to, p.ti, 4)
            .split(p.o, p.oo, p.oi, 16)
            .reorder({p.to, p.oo, p.r, p.ti, p.oi})
            .unroll(p.ti)
            .vectorize(p.oi)
            .cache_write(p.oo);
        Pipeline pipe({p.Out}, "epilogue_residual");
        Kernel kern = pipe.compile();
        auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { p.bind(s, l); };
        check_against_reference(pipe, kern, {p.X, p.W, p.bias, p.R}, bind, 33, 4, 101);
    }
    SECTION("scaled attention scores with the reduction split") {
        Dim b("b"), i("i"), j("j"), d("d"), dd("dd"), jo("jo"), ji("ji"), d_o("d_o"), d_i("d_i");
        Param B("B", 1, 8);
        LengthArray len("len", B, 0, 33);
        const int64_t D = 16;
        Tensor Q("Q", {{b, B}, {i, len(b)}, {d, D}}), Kt("Kt", {{b, B}, {j, len(b)}, {d, D}});
        Func S("S", {{b, B}, {i, len(b)}, {j, len(b)}});
        S.compute([&](Expr bb, Expr ii, Expr jj) { return sum(dd, D, Q(bb, ii, dd) * Kt(bb, jj, dd)) * 0.25f; });
        S.split(dd, d_o, d_i, 8).reorder({b, i, d_o, j, d_i});
        Pipeline pipe({S}, "epilogue_scale");
        Kernel kern = pipe.compile();
        auto bind = [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
        check_against_reference(pipe, kern, {Q, Kt}, bind, 33, 4, 102);
    }
}

TEST_CASE("a definition with two reductions side by side has no schedulable reduction dim", "[epilogue]") {
    Dim b("b"), r("r"), q("q");
    Param B("B", 1, 8);
    Tensor X("X", {{b, B}, {r, 8}});
    Func F("F", {{b, B}});
    F.compute([&](Expr bb) { return sum(r, 8, X(bb, r)) + sum(q, 8, X(bb, q) * 2.0f); });
    REQUIRE_THROWS_AS(F.reorder({r, b}), CompileError);
    REQUIRE_THROWS_WITH(F.reorder({r, b}),
                        Contains("not a loop of this Func: 'r' is the dim of one of the 2 reductions in the "
                                 "definition of 'F'") &&
                            Contains("compute each reduction in a Func of its own"));
    Func N("N", {{b, B}});
    N.compute([&](Expr bb) { return sum(r, 8, X(bb, r) * sum(q, 8, X(bb, q))); });
    REQUIRE_THROWS_WITH(N.split(q, b, r, 2),
                        Contains("'q' is the dim of a reduction nested in another reduction's body; only a "
                                 "definition's outermost reduction can be scheduled"));
}
