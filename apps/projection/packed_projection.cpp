// The packed-token projection Out[b, s, o] = sum_k X[b, s, k] * W[k, o], scheduled one
// primitive at a time: prints the lowered loop nest after each step (the worked example of
// docs/user-guide.md §4b), checks every step against the reference on small random lengths,
// then times the default and the final schedule on a ragged batch.
#include <cora/cora.h>

#include "common/cli.h"
#include "common/error_check.h"
#include "common/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace cora;
using cora::apps::best_seconds;

namespace {

struct Step {
    const char *title;
    std::function<void(Func &, Tensor &)> apply; // cumulative: applied after the previous steps
};

/** The kernel body only: the lines after the argument checks. */
std::string loop_nest(const std::string &lowered) {
    size_t at = lowered.find("parallel for");
    return at == std::string::npos ? lowered : lowered.substr(at);
}

int run(int argc, char **argv) {
    int64_t features = 256, batch = 32;
    apps::CommandLine cli("packed_projection", "A packed-token projection scheduled one primitive at a time: the "
                                               "loop nest after each step, checked against the reference, then timed.");
    cli.integer("--features", &features, 1, 4096, "input and output features (K = O)")
        .integer("--batch", &batch, 1, 4096, "batch size of the timed run");
    if (!cli.parse(argc, argv)) return 0;
    const int64_t K = features, O = features;
    Dim b("batch"), s("seq"), k("k"), o("o"), r("r"), tok("tok"), to("to"), ti("ti"), oo("oo"), oi("oi"), tio("tio"),
        tii("tii");
    Param B("B", 1, 4096);
    LengthArray len("len", B, 0, 512);

    std::vector<Step> steps = {
        {"default schedule", [](Func &, Tensor &) {}},
        {"fuse(batch, seq, tok): one loop over all tokens (fo/fi maps from the prelude)",
         [&](Func &f, Tensor &) { f.fuse(b, s, tok); }},
        {"pad_loop(tok, 16) + fuse_storage(batch, seq, tok, 16) on X and Out: bulk padding",
         [&](Func &f, Tensor &x) {
             f.pad_loop(tok, 16).fuse_storage(b, s, tok, 16);
             x.fuse_storage(b, s, tok, 16);
         }},
        {"split(tok, to, ti, 16): 16-token tiles, no guard (the padded total is a multiple of 16)",
         [&](Func &f, Tensor &) { f.split(tok, to, ti, 16); }},
        {"split(o, oo, oi, 16), reorder, vectorize(oi): dense 16x16 output tiles",
         [&](Func &f, Tensor &) {
             f.split(o, oo, oi, 16).reorder({to, oo, ti, oi}).vectorize(oi);
         }},
        {"split(ti, tio, tii, 4), reorder with r outside the tile, unroll(tii), cache_write(tio): 4x16 register tiles",
         [&](Func &f, Tensor &) {
             f.split(ti, tio, tii, 4).reorder({to, oo, tio, r, tii, oi}).unroll(tii).cache_write(tio);
         }},
    };

    // A fresh pipeline with steps 0..n applied (schedules mutate their Funcs).
    auto build = [&](size_t n) {
        Tensor X("X", {{b, B}, {s, len(b)}, {k, K}});
        Tensor W("W", {{k, K}, {o, O}});
        Func Out("Out", {{b, B}, {s, len(b)}, {o, O}});
        Out.compute([&](Expr bb, Expr ss, Expr oo_) { return sum(r, K, X(bb, ss, r) * W(r, oo_)); });
        for (size_t m = 0; m <= n; m++)
            steps[m].apply(Out, X);
        return std::make_tuple(Out, X, W);
    };
    bool all_ok = true;
    for (size_t n = 0; n < steps.size(); n++) {
        auto [Out, X, W] = build(n);
        Pipeline p({Out}, "projection_step" + std::to_string(n));
        Kernel kern = p.compile();
        std::printf("== step %zu: %s\n%s", n, steps[n].title, loop_nest(kern.lowered()).c_str());
        std::printf("   prover: %s\n", kern.prover_stats().c_str());
        // Check against the reference on small lengths, including 0, 1 and pad +- 1.
        RaggedShape shape;
        std::vector<int32_t> lengths{0, 1, 15, 16, 17, 3};
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer x = Buffer::alloc(X, shape), w = Buffer::alloc(W, shape), out = Buffer::alloc(Out, shape);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        for (int64_t i = 0; i < x.size(); i++)
            x.at(i) = u(rng);
        for (int64_t i = 0; i < w.size(); i++)
            w.at(i) = u(rng);
        kern.run(shape, {{X, x}, {W, w}, {Out, out}});
        auto ref = reference_evaluate(p, shape, {{X, &x}, {W, &w}})[0];
        std::vector<float> got = out.to_padded(Out, shape, {(int64_t)lengths.size(), 17, O});
        apps::ErrorCheck check;
        size_t at = 0;
        for (size_t bi = 0; bi < lengths.size(); bi++)
            for (int32_t si = 0; si < lengths[bi]; si++)
                for (int64_t oi_ = 0; oi_ < O; oi_++)
                    check.add(got[(bi * 17 + si) * O + oi_], ref[at++]);
        bool ok = check.abs_within(1e-3);
        all_ok = all_ok && ok;
        std::printf("   check vs reference: %s (max abs error %.2g%s)\n\n", ok ? "PASS" : "FAIL", check.max_abs(),
                    check.non_finite_note().c_str());
    }

    // Time the first and last schedules on a ragged batch (lengths 1..128, one shape).
    std::mt19937 rng(2022);
    std::vector<int32_t> lengths(batch);
    for (auto &l : lengths)
        l = 1 + (int32_t)(rng() % 128);
    int64_t tokens = 0;
    for (int32_t l : lengths)
        tokens += l;
    double secs[2];
    for (int which = 0; which < 2; which++) {
        size_t n = which == 0 ? 0 : steps.size() - 1;
        auto built = build(n); // (clang 14 cannot capture structured bindings in the lambda below)
        Func &Out = std::get<0>(built);
        Tensor &X = std::get<1>(built), &W = std::get<2>(built);
        Kernel kern = Pipeline({Out}, "projection_step" + std::to_string(n)).compile();
        RaggedShape shape;
        shape.set(B, batch).set(len, lengths);
        Buffer x = Buffer::alloc(X, shape), w = Buffer::alloc(W, shape), out = Buffer::alloc(Out, shape);
        secs[which] = best_seconds(5, [&] { kern.run(shape, {{X, x}, {W, w}, {Out, out}}); });
    }
    double gflop = 2.0 * (double)tokens * (double)K * (double)O * 1e-9;
    std::printf("batch %d, %lld tokens, %lldx%lld projection: default %.2f ms (%.1f GFLOP/s), "
                "scheduled %.2f ms (%.1f GFLOP/s), %.2fx\n",
                (int)batch, (long long)tokens, (long long)K, (long long)O, secs[0] * 1e3, gflop / secs[0],
                secs[1] * 1e3, gflop / secs[1], secs[0] / secs[1]);
    std::printf("%s\n", all_ok ? "ALL CHECKS PASSED" : "SOME CHECKS FAILED");
    return all_ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("packed_projection", [&] { return run(argc, argv); });
}
