// Schedules are checked differentially: many random legal schedules of the same definitions
// must give the reference's results; illegal reorders must be rejected with a clear message.
#include "common/ragged_testing.h"
#include "common/random_schedule.h"
#include "common/trial_count.h"

#include <iostream>
#include <memory>
#include <optional>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

/** One workload: builds fresh Funcs (schedules mutate them), binds inputs for a shape. */
struct Workload {
    std::string name;
    std::function<std::vector<Func>(std::vector<Func> &all)> build; // returns outputs; fills all Funcs
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> shape;
    std::vector<Tensor> inputs;
    bool hfuse_all = false; ///< the Funcs are independent: sometimes fuse them horizontally
    /** Optional: a random choice of compute_inline / compute_at before the loop schedules;
     * marks the Funcs whose loops it took over, so they get no random schedule. */
    std::function<std::string(std::vector<Func> &all, std::mt19937 &rng, std::vector<bool> &placed)> place = {};
};

/** One legal random schedule waiting for its batch to be compiled. */
struct ScheduledCase {
    std::string desc;
    std::vector<Func> outs;
    std::unique_ptr<Pipeline> pipe;
};

/** Runs a compiled schedule on two shapes (a rotating edge case and a random batch) against the
 * reference evaluator. */
void check_schedule(Workload &w, const ScheduledCase &c, const Kernel &k, const std::vector<int32_t> &edge,
                    const std::vector<int32_t> &random_batch, uint32_t seed) {
    INFO(w.name << " schedule: " << c.desc);
    for (const std::vector<int32_t> *lengths : {&edge, &random_batch}) {
        INFO(testing::describe(*lengths));
        RaggedShape shape;
        w.shape(shape, *lengths);
        std::vector<Buffer> ins;
        for (size_t i = 0; i < w.inputs.size(); i++) {
            ins.push_back(Buffer::alloc(w.inputs[i], shape));
            testing::fill_random(ins.back(), seed + (uint32_t)i);
        }
        std::vector<Buffer> out_bufs;
        for (const Func &o : c.outs)
            out_bufs.push_back(Buffer::alloc(o, shape));
        std::vector<Binding> bind;
        std::vector<std::pair<Tensor, const Buffer *>> ref_in;
        for (size_t i = 0; i < ins.size(); i++) {
            bind.emplace_back(w.inputs[i], ins[i]);
            ref_in.emplace_back(w.inputs[i], &ins[i]);
        }
        for (size_t i = 0; i < c.outs.size(); i++)
            bind.emplace_back(c.outs[i], out_bufs[i]);
        k.run(shape, bind);
        auto ref = reference_evaluate(*c.pipe, shape, ref_in);
        for (size_t i = 0; i < c.outs.size(); i++)
            testing::require_close(out_bufs[i], c.outs[i], shape, ref[i], 1e-4);
    }
}

/** `trials` legal random schedules of `w`, compiled in batches of `kBatch` (one compiler run each:
 * KernelBatch), each checked against the reference. */
void run_differential(Workload &w, int trials, uint32_t seed, const Dim &reduction, bool full = true) {
    constexpr size_t kBatch = 12;
    std::mt19937 rng(seed);
    auto cases = testing::length_cases(20, 4, seed, 1);
    int legal = 0, illegal = 0, op_splits = 0, fused_splits = 0, placed_ops = 0, reduction_loops = 0, caches = 0,
        built_aux = 0, checked = 0;
    // A third of the kernels build their aux arrays themselves, as AOT libraries do: a batch has
    // one CompileOptions, so each batch holds one kind.
    std::vector<ScheduledCase> pending;
    std::optional<KernelBatch> batch;
    bool batch_builds_aux = false;
    auto flush = [&] {
        if (pending.empty()) return;
        std::vector<Kernel> kernels = batch->compile();
        REQUIRE(kernels.size() == pending.size());
        for (size_t i = 0; i < pending.size(); i++) {
            checked++;
            check_schedule(w, pending[i], kernels[i], cases[(size_t)checked % 5], cases.back(), seed);
        }
        pending.clear();
    };
    // Random reorders are often illegal (a vloop moved outside the loop its extent uses); count
    // legal schedules, not attempts.
    for (int t = 0; legal < trials && t < 16 * trials; t++) {
        if (pending.empty()) {
            CompileOptions options;
            batch_builds_aux = rng() % 3 == 0;
            options.build_aux_in_kernel = batch_builds_aux;
            batch.emplace(options);
        }
        std::vector<Func> all;
        std::vector<Func> outs = w.build(all);
        std::string desc;
        bool grouped = false; // a head and its tail are fused: no other group for them
        std::vector<bool> placed(all.size(), false);
        if (w.place) desc += w.place(all, rng, placed);
        testing::ScheduleChoices choices{&reduction, w.inputs, true};
        choices.cacheable.insert(choices.cacheable.end(), all.begin(), all.end());
        for (size_t i = 0; i < all.size(); i++)
            if (!placed[i]) desc += testing::random_schedule(all[i], rng, &grouped, true, choices) + "  ";
        if (w.hfuse_all && !grouped && all.size() >= 2 && rng() % 2) {
            all[0].hfuse(std::vector<Func>(all.begin() + 1, all.end()));
            desc += " hfuse(all)";
        }
        if (batch_builds_aux) desc += " [aux arrays built in the kernel]";
        INFO(w.name << " schedule: " << desc);
        auto pipe = std::make_unique<Pipeline>(outs, w.name);
        try {
            batch->add(*pipe);
        } catch (const CompileError &e) {
            // Only a reorder across a dependence, a fuse of loops whose extents are not
            // (invariant, depends on the outer only), hfuse of loops of different kinds, or a
            // consumer schedule that changes the loops a compute_at needs may be rejected.
            std::string msg = e.what();
            bool expected = msg.find("must stay outside it") != std::string::npos ||
                            msg.find("the outermost loops differ in kind") != std::string::npos ||
                            msg.find("is not a loop (a guard sits outside it)") != std::string::npos ||
                            msg.find("only a loop with a loop-invariant extent") != std::string::npos ||
                            msg.find("not only on") != std::string::npos ||
                            msg.find("compute_at needs the consumer's loops down to") != std::string::npos ||
                            msg.find("not over its extent") != std::string::npos ||
                            msg.find("(hfuse) and reads it") != std::string::npos ||
                            // cache_read regions that are not a constant box
                            msg.find("not a constant; split the loops") != std::string::npos ||
                            msg.find("a loop inside") != std::string::npos ||
                            msg.find("must be read at one index tuple") != std::string::npos ||
                            msg.find("no read of it is left") != std::string::npos ||
                            msg.find("after the copy would be made") != std::string::npos;
            INFO(msg);
            if (getenv("CORA_TEST_SHOW_REJECTED")) std::cerr << "REJECTED " << msg << "\n";
            REQUIRE(expected);
            illegal++;
            continue;
        }
        legal++;
        op_splits += desc.find("split_op") != std::string::npos;
        fused_splits += desc.find("hfuse(head, tail)") != std::string::npos;
        placed_ops += desc.find("compute_") != std::string::npos;
        reduction_loops += desc.find("reduction_loop") != std::string::npos;
        caches += desc.find("cache_") != std::string::npos;
        built_aux += batch_builds_aux;
        pending.push_back(ScheduledCase{desc, outs, std::move(pipe)});
        if (pending.size() == kBatch) flush();
    }
    flush();
    INFO(w.name << ": " << legal << " legal, " << illegal << " rejected, " << op_splits << " with an op split ("
                << fused_splits << " fused with the tail)");
    REQUIRE(legal == trials);
    REQUIRE(checked == trials);
    if (full) {                    // the generator's coverage, checked on the full run (a share may miss a kind)
        REQUIRE(fused_splits > 0); // op split + hfuse is exercised on every workload
        if (w.place) REQUIRE(placed_ops > 0);
        REQUIRE(caches > 0);
        REQUIRE(built_aux > 0);
    }
    std::cout << "differential " << w.name << ": " << legal << " legal schedules (" << illegal << " rejected), "
              << op_splits << " op splits, " << fused_splits << " fused with their tail, " << placed_ops
              << " with compute_inline/compute_at, " << reduction_loops << " with a reduction loop, " << caches
              << " with cache_read/cache_write, " << built_aux << " building their aux arrays\n";
}

/** The six workloads of the differential test, over shared dims and tensors. */
struct Workloads {
    Dim batch{"batch"}, seq{"seq"}, q{"q"}, heads{"heads"}, kv{"kv"}, r{"r"}, m{"m"}, n{"n"}, d{"d"}, t{"t"};
    Param B{"B", 1, 16}, M{"M", 1, 40};
    LengthArray len{"len", B, 0, 20}, Ms{"Ms", B, 0, 20}, Ns{"Ns", B, 0, 20}, Ks{"Ks", B, 0, 20};
    static constexpr int64_t H = 2, D = 8;
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    Shape attn{{batch, B}, {q, len(batch)}, {heads, H}, {kv, len(batch)}};
    Shape rows{{batch, B}, {q, len(batch)}, {heads, H}};
    Tensor S{"S", attn};
    Tensor VA{"VA", {{batch, B}, {m, Ms(batch)}, {d, Ks(batch)}}};
    Tensor VB{"VB", {{batch, B}, {d, Ks(batch)}, {n, Ns(batch)}}};
    Tensor L{"L", {{m, M}, {d, M}}}, X{"X", {{d, M}, {n, 12}}};
    Tensor Q{"Q", {{batch, B}, {q, len(batch)}, {heads, H}, {d, D}}};
    Tensor K{"K", {{batch, B}, {kv, len(batch)}, {heads, H}, {d, D}}};
    Tensor V{"V", {{m, M}, {n, 12}}};
    Tensor W9{"W9", {{t, 9}}};

    std::function<void(RaggedShape &, const std::vector<int32_t> &)> lengths_shape() {
        return [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    }

    Workload elementwise() {
        return {"elementwise",
                [this](std::vector<Func> &all) {
                    Func Out("Out", {{batch, B}, {seq, len(batch)}});
                    Out.compute([&](Expr b, Expr s) { return 2 * A(b, s) + 1; });
                    all = {Out};
                    return all;
                },
                lengths_shape(),
                {A}};
    }

    Workload softmax() {
        return {"softmax",
                [this](std::vector<Func> &all) {
                    Func Mx("Mx", rows), E("E", attn), Sum("Sum", rows), P("P", attn);
                    Mx.compute([&](Expr b, Expr i, Expr h) { return maximum(r, len(b), S(b, i, h, r)); });
                    E.compute([&](Expr b, Expr i, Expr h, Expr j) { return exp(S(b, i, h, j) - Mx(b, i, h)); });
                    Sum.compute([&](Expr b, Expr i, Expr h) { return sum(r, len(b), E(b, i, h, r)); });
                    P.compute([&](Expr b, Expr i, Expr h, Expr j) { return E(b, i, h, j) / Sum(b, i, h); });
                    all = {Mx, E, Sum, P};
                    return std::vector<Func>{P};
                },
                lengths_shape(),
                {S},
                false,
                [](std::vector<Func> &all, std::mt19937 &rng, std::vector<bool> &placed) -> std::string {
                    // all = {Mx, E, Sum, P}
                    int r = (int)(rng() % 3);
                    if (r == 0) {
                        all[1].compute_inline();
                        placed[1] = true;
                        return "E.compute_inline()  ";
                    }
                    if (r == 1) {
                        Dim at = all[3].domain()[rng() % 3].dim; // batch, q or heads
                        for (size_t i = 0; i < 3; i++) {
                            all[i].compute_at(all[3], at);
                            placed[i] = true;
                        }
                        return "Mx, E, Sum compute_at(P, " + at.name() + ")  ";
                    }
                    return "";
                }};
    }

    Workload vgemm() {
        return {
            "vgemm",
            [this](std::vector<Func> &all) {
                Func C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}});
                C.compute([&](Expr b, Expr i, Expr j) { return sum(r, Ks(b), VA(b, i, r) * VB(b, r, j)); });
                all = {C};
                return all;
            },
            [this](RaggedShape &s, const std::vector<int32_t> &l) { testing::bind_vgemm_shape(s, B, Ms, Ns, Ks, l); },
            {VA, VB}};
    }

    Workload trmm() {
        return {"trmm",
                [this](std::vector<Func> &all) {
                    Func C("C", {{m, M}, {n, 12}});
                    C.compute([&](Expr i, Expr j) { return sum(r, i + 1, L(i, r) * X(r, j)); });
                    all = {C};
                    return all;
                },
                [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(M, 1 + l.back()); },
                {L, X}};
    }

    /** A 3x3 convolution of an M x 12 image with zero padding written as a select around clamped
     * reads (apps/spatial/conv_layer.h's form): what specialize_interior removes. */
    Workload stencil() {
        return {"stencil",
                [this](std::vector<Func> &all) {
                    Func C("C", {{m, M}, {n, 12}});
                    C.compute([&](Expr i, Expr j) {
                        Expr y = i + r / 3 - 1, x = j + r % 3 - 1;
                        Expr inside = y >= 0 && y < Expr(M) && x >= 0 && x < 12;
                        Expr read = V(min(max(y, 0), Expr(M) - 1), min(max(x, 0), 11));
                        return sum(r, 9, select(inside, read, 0.0f) * W9(r));
                    });
                    all = {C};
                    return all;
                },
                [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(M, 1 + l.back()); },
                {V, W9}};
    }

    Workload qkt() {
        return {"qkt",
                [this](std::vector<Func> &all) {
                    Func Sc("Sc", attn);
                    Sc.compute(
                        [&](Expr b, Expr i, Expr h, Expr j) { return sum(r, D, Q(b, i, h, r) * K(b, j, h, r)); });
                    all = {Sc};
                    return all;
                },
                lengths_shape(),
                {Q, K}};
    }

    Workload independent() {
        return {"independent ops",
                [this](std::vector<Func> &all) {
                    Func Ew("Ew", {{batch, B}, {seq, len(batch)}}), Rs("Rs", {{batch, B}}), Cs("Cs", {{n, 12}});
                    Ew.compute([&](Expr b, Expr s_) { return 2 * A(b, s_) + 1; });
                    Rs.compute([&](Expr b) { return sum(r, len(b), A(b, r)); });
                    Cs.compute([&](Expr j) { return maximum(r, M, V(r, j)); });
                    all = {Ew, Rs, Cs};
                    return all;
                },
                [this](RaggedShape &s, const std::vector<int32_t> &l) {
                    s.set(B, (int64_t)l.size()).set(len, l).set(M, 1 + l.back());
                },
                {A, V},
                true};
    }
};

/** `trials` random schedules of the workload `make` builds (run_differential), or the share
 * CORA_TEST_RANDOM_SCHEDULES asks for (common/trial_count.h). */
void run_workload(Workload (Workloads::*make)(), int trials, uint32_t seed) {
    Workloads w;
    Workload wl = (w.*make)();
    const int share = testing::scaled_trials(trials);
    run_differential(wl, share, seed, w.r, share == trials);
}

} // namespace

// One test case per workload, so that ctest runs them side by side. Each compiles its schedules in
// batches (KernelBatch); together they check 500 random CPU schedules per run.
TEST_CASE("random schedules of a ragged elementwise op match the reference", "[schedule][differential]") {
    run_workload(&Workloads::elementwise, 80, 1);
}
TEST_CASE("random schedules of independent ops, horizontally fused, match the reference", "[schedule][differential]") {
    run_workload(&Workloads::independent, 60, 6);
}
TEST_CASE("random schedules of a ragged softmax match the reference", "[schedule][differential]") {
    run_workload(&Workloads::softmax, 60, 2);
}
TEST_CASE("random schedules of vgemm match the reference", "[schedule][differential]") {
    run_workload(&Workloads::vgemm, 80, 3);
}
TEST_CASE("random schedules of trmm match the reference", "[schedule][differential]") {
    run_workload(&Workloads::trmm, 80, 4);
}
TEST_CASE("random schedules of a zero-padded 3x3 stencil match the reference", "[schedule][differential]") {
    run_workload(&Workloads::stencil, 60, 7);
}
TEST_CASE("random schedules of attention QK^T match the reference", "[schedule][differential]") {
    run_workload(&Workloads::qkt, 80, 5);
}

TEST_CASE("split guards: removed when proved, kept on ragged extents, same results", "[schedule][guards]") {
    Dim batch("batch"), seq("seq"), feat("feat"), fo("fo"), fi("fi"), so("so"), si("si");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {feat, 16}});
    auto build = [&](bool split_feat, bool split_seq) {
        Func Y("Y", {{batch, B}, {seq, len(batch)}, {feat, 16}});
        Y.compute([&](Expr b, Expr s, Expr f) { return X(b, s, f) * 3; });
        if (split_feat) Y.split(feat, fo, fi, 4).vectorize(fi);
        if (split_seq) Y.split(seq, so, si, 4);
        return Y;
    };
    Func even = build(true, false);
    Kernel ke = Pipeline({even}, "split_even").compile();
    REQUIRE_THAT(ke.prover_stats(), Contains("1 proved away, 0 kept"));
    REQUIRE(ke.lowered().find("if ") == std::string::npos); // 16 = 4 * 4: no guard left
    REQUIRE(ke.lowered().find("vectorized for fi") != std::string::npos);

    Func ragged = build(true, true);
    Kernel kr = Pipeline({ragged}, "split_ragged").compile();
    REQUIRE_THAT(kr.prover_stats(), Contains("1 proved away, 1 kept"));
    // The kept guard so * 4 + si < len is the si loop's bound, not a branch (len[batch] is read
    // once per row, hoisted out of the tile loops).
    INFO(kr.lowered());
    REQUIRE(kr.lowered().find("for si in [0, 0 + max(min(4, (int64(len_h) - (so * 4))), 0))") != std::string::npos);
    REQUIRE(kr.lowered().find("if (", kr.lowered().find("parallel for")) == std::string::npos);

    Func plain = build(false, false);
    Kernel kp = Pipeline({plain}, "split_none").compile();
    RaggedShape shape;
    shape.set(B, 4).set(len, {0, 5, 16, 30});
    Buffer x = Buffer::alloc(X, shape), a = Buffer::alloc(plain, shape), b = Buffer::alloc(even, shape),
           c = Buffer::alloc(ragged, shape);
    testing::fill_random(x, 8);
    kp.run(shape, {{X, x}, {plain, a}});
    ke.run(shape, {{X, x}, {even, b}});
    kr.run(shape, {{X, x}, {ragged, c}});
    for (int64_t i = 0; i < a.size(); i++) {
        REQUIRE(b.at(i) == a.at(i));
        REQUIRE(c.at(i) == a.at(i));
    }
}
