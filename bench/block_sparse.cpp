// Block-sparse linear layers (apps/sparse/bsr_linear.h) against dense GEMM baselines in one
// process: Y[t, :] = X[t, :] W^T over a ragged batch of packed tokens, W [out, in] pruned to blocks.
//
// Shapes: BERT-like weights (768x768, FF1 3072x768, FF2 768x3072) over a ragged batch of 24
// sentences (lengths from std::mt19937 seed 2026, uniform in [16, 240]: 3430 tokens), and 4096^3
// (one 4096-token item). Blocks 32x32 and 8x8; densities 50%, 25%, 10%, 5% (exactly that share of
// the blocks, chosen at random, seed per case). Baselines on the same packed tokens and the same
// weight with its zero blocks materialised:
//   sgemm   cblas_sgemm (OpenBLAS, row-major X [T, K] times W^T)
//   onednn  oneDNN's matmul primitive (when built with libdnnl-dev), weights in [K, N] "ba" layout
// The "cora default" columns: the same product written with no schedule call, over X as declared
// (packed, no pad rows): the default schedule's block-sparse tiles, against the faster dense baseline;
// once with column-major blocks and once with row-major blocks (PyTorch's values() as they are).
// Then sparsity propagation (SparsityGraph): a bias-free FF 768 -> 3072 -> 768 with ReLU, W1 at 50%
// block density with 25% of its block rows empty, W2 with every block, run as one cora pipeline
// with the weights as given and with the propagated (pruned) weights.
// Then SparTA's decomposition (decompose_blocks): a weight of whole blocks plus scattered elements,
// as a pure block pattern against blocks + a 1x1-block remainder summed into one output.
// Then a 3x3 convolution (bsr_conv.h) whose weight is block-sparse over channels, against im2col +
// cblas_sgemm.
// Each timed call is one Kernel::run (argument checks included) or one baseline call; the best of
// --runs is kept. A shape's dense baselines do the same work for every block size and density, so its
// ratios use the best dense time over all of that shape's timings (8 per baseline); the table after
// the first one lists each shape's best and worst, the machine's noise on that work. Every cora result is checked
// against sgemm's (max |diff| / max |y|; above 1e-4 the program reports FAIL and exits 1). --markdown=FILE writes the
// tables; --quick runs only the 768x3072 shape of the first section;
// --only=linear|propagation|decomposition|conv|static runs one section. Last, static patterns: the layer compiled for a
// run-time pattern against the same layer specialised to its pattern (BsrMatrix from BsrData, dismantled block loops,
// 6-token tiles), with each one's compile time.
#include <cblas.h>
#include <omp.h>

#include "common/error_check.h"
#include "common/timing.h"
#include "sparse/bsr_conv.h"
#include "sparse/bsr_linear.h"

#include <cora/SparsityPropagation.h>

#ifdef CORA_BENCH_ONEDNN
#include <dnnl.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" char *openblas_get_corename(void);

namespace {

using namespace cora;
using cora::apps::BsrLinear;
using cora::apps::BsrTiling;
using cora::apps::TokenDims;

struct Case {
    std::string what;
    int64_t out, in;
    std::vector<int32_t> lengths;
};

/** A block mask of `count` entries with exactly round(density * count) set, chosen at random. */
std::vector<uint8_t> exact_mask(size_t count, double density, uint32_t seed) {
    std::vector<uint8_t> m(count, 0);
    std::fill(m.begin(), m.begin() + (ptrdiff_t)std::llround(density * (double)count), 1);
    std::mt19937 rng(seed);
    std::shuffle(m.begin(), m.end(), rng);
    return m;
}

#ifdef CORA_BENCH_ONEDNN
/** Y [T, N] = X [T, K] W^T with W [N, K] row-major (oneDNN weights {K, N} in layout "ba"). */
struct OneDnnMatmul {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    dnnl::memory src, wei, dst;
    dnnl::matmul prim;
    OneDnnMatmul(int64_t T, int64_t K, int64_t N, float *x, float *w, float *y) {
        using tag = dnnl::memory::format_tag;
        using dt = dnnl::memory::data_type;
        dnnl::memory::desc sd({T, K}, dt::f32, tag::ab), wd({K, N}, dt::f32, tag::ba), dd({T, N}, dt::f32, tag::ab);
        src = dnnl::memory(sd, eng, x);
        wei = dnnl::memory(wd, eng, w);
        dst = dnnl::memory(dd, eng, y);
        prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(sd, wd, dd), eng));
    }
    void run() {
        prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
        strm.wait();
    }
};
#endif

int run(int argc, char **argv) {
    std::string markdown;
    int runs = 3;
    bool quick = false;
    std::string only; // one section: linear, propagation, decomposition, conv or static
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("--markdown=", 0) == 0)
            markdown = a.substr(11);
        else if (a.rfind("--runs=", 0) == 0)
            runs = std::max(1, std::atoi(a.c_str() + 7));
        else if (a == "--quick")
            quick = true;
        else if (a.rfind("--only=", 0) == 0)
            only = a.substr(7);
        else {
            std::fprintf(stderr,
                         "block_sparse: unknown flag '%s' (use --markdown=FILE, --runs=N, --quick, --only=SECTION)\n",
                         a.c_str());
            return 2;
        }
    }
    std::mt19937 len_rng(2026);
    std::uniform_int_distribution<int32_t> u(16, 240);
    std::vector<int32_t> bert(24);
    for (int32_t &l : bert)
        l = u(len_rng);
    std::vector<Case> cases;
    auto section = [&](const char *name) { return only.empty() || only == name; };
    if (!section("linear") && !section("propagation") && !section("decomposition") && !section("conv") &&
        !section("static")) {
        std::fprintf(stderr, "block_sparse: --only=%s: expected linear, propagation, decomposition, conv or static\n",
                     only.c_str());
        return 2;
    }
    if (section("linear")) {
        if (!quick) cases.push_back({"BERT attention out 768x768", 768, 768, bert});
        if (!quick) cases.push_back({"BERT FF1 3072x768", 3072, 768, bert});
        cases.push_back({"BERT FF2 768x3072", 768, 3072, bert});
        if (!quick) cases.push_back({"4096^3", 4096, 4096, {4096}});
    }
    const double densities[] = {0.5, 0.25, 0.1, 0.05};
    struct Target {
        int64_t block;
        double at[4];
    };
    const Target targets[] = {{32, {1.6, 3.0, 6.0, 0.0}}, {8, {1.3, 2.3, 4.5, 0.0}}};

    std::printf("block_sparse: %d threads, OpenBLAS core %s\n", omp_get_max_threads(), openblas_get_corename());
    std::string table = "| shape | tokens | block | density | cora ms | sgemm ms | oneDNN ms | vs sgemm | vs oneDNN | "
                        "target (vs dense) | GFLOP/s useful | cora default ms | default vs dense | "
                        "default, row-major blocks ms | row-major default vs dense |\n"
                        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    // The dense baselines do the same work for every block size and density of a shape, so each
    // ratio uses the shape's best dense time over all its timings (the stricter baseline: on a noisy
    // machine one best-of-3 sgemm ran anywhere from 85 to 173 ms on the same FF1 shape, 2026-11-28);
    // the spread of those timings is reported in a table of its own.
    std::string dense_table = "\n| shape | sgemm best ms | sgemm worst ms | oneDNN best ms | oneDNN worst ms | "
                              "timings per baseline |\n|---|---|---|---|---|---|\n";
    bool all_ok = true;
    for (const Case &c : cases) {
        int64_t tokens = 0;
        for (int32_t l : c.lengths)
            tokens += l;
        struct Row {
            const Target *target;
            int di; // index into densities
            double actual_density, cora_s, default_s, rows_s, sgemm_s, dnnl_s, useful;
            bool ok;
        };
        std::vector<Row> shape_rows;
        for (const Target &target : targets) {
            const int64_t bs = target.block;
            TokenDims D(4096);
            BsrMatrix W("W", c.out, c.in, bs, bs, BlockOrder::ColumnMajor);
            BsrTiling tiling = BsrTiling::for_matrix(W);
            Tensor X = D.tokens("X", c.in, tiling.chunk_tokens);
            BsrLinear lin(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
            Kernel kernel = Pipeline({lin.Y}, "bsr_bench").compile();
            // The same product written with no schedule call over X as declared (packed, no pad
            // rows): the default schedule's block-sparse tiles (lower/DefaultBlockSparseTiles.cpp).
            Dim n("n"), k("k");
            Tensor X_packed("X_packed", {{D.b, D.B}, {D.s, D.len(D.b)}, {D.c, c.in}});
            Func Y_default("Y_default", {{D.b, D.B}, {D.s, D.len(D.b)}, {n, c.out}});
            Y_default.compute(
                [&](Expr b, Expr s, Expr o) { return W.row_times(k, o, [&](Expr kk) { return X_packed(b, s, kk); }); });
            Kernel default_kernel = Pipeline({Y_default}, "bsr_bench_default").compile();
            // The same with the blocks in PyTorch's order (row-major: values() passed as they are),
            // which the default copies block by block into a transposed tile.
            BsrMatrix W_rows("W_rows", c.out, c.in, bs, bs, BlockOrder::RowMajor);
            Func Y_rows("Y_rows", {{D.b, D.B}, {D.s, D.len(D.b)}, {n, c.out}});
            Y_rows.compute([&](Expr b, Expr s, Expr o) {
                return W_rows.row_times(k, o, [&](Expr kk) { return X_packed(b, s, kk); });
            });
            Kernel rows_kernel = Pipeline({Y_rows}, "bsr_bench_rows").compile();
            RaggedShape base;
            base.set(D.B, (int64_t)c.lengths.size()).set(D.len, c.lengths);
            Buffer x = Buffer::alloc(X, base);
            std::mt19937 rng(7);
            std::uniform_real_distribution<float> val(-1.0f, 1.0f);
            for (int64_t i = 0; i < x.size(); i++)
                x.at(i) = i < tokens * c.in ? val(rng) : 0.0f;
            Buffer x_packed = Buffer::alloc(X_packed, base);
            std::copy(x.data<float>(), x.data<float>() + x_packed.size(), x_packed.data<float>());
            std::vector<float> dense_w((size_t)(c.out * c.in));
            for (float &w : dense_w)
                w = val(rng);
            std::vector<float> y_ref((size_t)(tokens * c.out)), y_dnnl(y_ref.size());
            for (int di = 0; di < 4; di++) {
                const double density = densities[di];
                std::vector<uint8_t> mask =
                    exact_mask((size_t)(c.out / bs * (c.in / bs)), density, (uint32_t)(1000 * density) + (uint32_t)bs);
                BsrData w = BsrData::from_block_mask(dense_w, c.out, c.in, bs, bs, mask);
                std::vector<float> wd = w.to_dense();
                RaggedShape shape;
                shape.set(D.B, (int64_t)c.lengths.size()).set(D.len, c.lengths);
                w.bind(shape, W);
                w.bind(shape, W_rows);
                Buffer y = Buffer::alloc(lin.Y, shape), y_default = Buffer::alloc(Y_default, shape),
                       y_rows = Buffer::alloc(Y_rows, shape);
                Buffer col = w.col_buffer(W, shape), values = w.values_buffer(W, shape);
                Buffer col_rows = w.col_buffer(W_rows, shape), values_rows = w.values_buffer(W_rows, shape);
                auto run_cora = [&] { kernel.run(shape, {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}}); };
                auto run_sgemm = [&] {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tokens, (int)c.out, (int)c.in, 1.0f,
                                x.data<float>(), (int)c.in, wd.data(), (int)c.in, 0.0f, y_ref.data(), (int)c.out);
                };
                auto run_default = [&] {
                    default_kernel.run(
                        shape, {{X_packed, x_packed}, {W.col, col}, {W.values, values}, {Y_default, y_default}});
                };
                auto run_rows = [&] {
                    rows_kernel.run(
                        shape,
                        {{X_packed, x_packed}, {W_rows.col, col_rows}, {W_rows.values, values_rows}, {Y_rows, y_rows}});
                };
                // The cora kernels first: OpenBLAS's threads keep spinning for a while after a
                // call, and a short kernel timed right after sgemm ran up to 2x slower (10% density).
                double cora_s = cora::apps::best_seconds_warm(runs, run_cora),
                       default_s = cora::apps::best_seconds_warm(runs, run_default),
                       rows_s = cora::apps::best_seconds_warm(runs, run_rows),
                       sgemm_s = cora::apps::best_seconds_warm(runs, run_sgemm);
                apps::ErrorCheck check, default_check, rows_check; // a NaN where the reference is finite fails
                for (int64_t i = 0; i < tokens * c.out; i++) {
                    check.add(y.at(i), y_ref[(size_t)i]);
                    default_check.add(y_default.at(i), y_ref[(size_t)i]);
                    rows_check.add(y_rows.at(i), y_ref[(size_t)i]);
                }
                bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0)) &&
                          default_check.abs_within(1e-4 * std::max(default_check.scale(), 1.0)) &&
                          rows_check.abs_within(1e-4 * std::max(rows_check.scale(), 1.0));
                all_ok &= ok;
                double dnnl_s = 0;
#ifdef CORA_BENCH_ONEDNN
                OneDnnMatmul mm(tokens, c.in, c.out, x.data<float>(), wd.data(), y_dnnl.data());
                dnnl_s = cora::apps::best_seconds_warm(runs, [&] { mm.run(); });
#endif
                double useful = 2.0 * (double)tokens * (double)c.out * (double)c.in * w.density();
                shape_rows.push_back(
                    {&target, di, w.density(), cora_s, default_s, rows_s, sgemm_s, dnnl_s, useful, ok});
            }
        }
        double sgemm_best = 1e30, sgemm_worst = 0, dnnl_best = 1e30, dnnl_worst = 0;
        for (const Row &r : shape_rows) {
            sgemm_best = std::min(sgemm_best, r.sgemm_s);
            sgemm_worst = std::max(sgemm_worst, r.sgemm_s);
            if (r.dnnl_s > 0) {
                dnnl_best = std::min(dnnl_best, r.dnnl_s);
                dnnl_worst = std::max(dnnl_worst, r.dnnl_s);
            }
        }
        const bool have_dnnl = dnnl_worst > 0;
        const double best_dense = have_dnnl ? std::min(sgemm_best, dnnl_best) : sgemm_best;
        char dnnl_best_ms[32] = "n/a", dnnl_worst_ms[32] = "n/a", dense_line[256];
        if (have_dnnl) {
            std::snprintf(dnnl_best_ms, sizeof dnnl_best_ms, "%.2f", dnnl_best * 1e3);
            std::snprintf(dnnl_worst_ms, sizeof dnnl_worst_ms, "%.2f", dnnl_worst * 1e3);
        }
        std::snprintf(dense_line, sizeof dense_line, "| %s | %.2f | %.2f | %s | %s | %zu |\n", c.what.c_str(),
                      sgemm_best * 1e3, sgemm_worst * 1e3, dnnl_best_ms, dnnl_worst_ms, shape_rows.size());
        dense_table += dense_line;
        std::printf("%s: dense baselines over %zu timings each: sgemm %.2f-%.2f ms, oneDNN %s-%s ms\n", c.what.c_str(),
                    shape_rows.size(), sgemm_best * 1e3, sgemm_worst * 1e3, dnnl_best_ms, dnnl_worst_ms);
        for (const Row &r : shape_rows) {
            const Target &target = *r.target;
            const int64_t bs = target.block;
            char dnnl_ms[32] = "n/a", vs_dnnl[32] = "n/a", tgt[48] = "-";
            if (have_dnnl) {
                std::snprintf(dnnl_ms, sizeof dnnl_ms, "%.2f", dnnl_best * 1e3);
                std::snprintf(vs_dnnl, sizeof vs_dnnl, "%.2fx", dnnl_best / r.cora_s);
            }
            if (target.at[r.di] > 0)
                std::snprintf(tgt, sizeof tgt, ">= %.1fx: %s (%.2fx)", target.at[r.di],
                              best_dense / r.cora_s >= target.at[r.di] ? "met" : "MISSED", best_dense / r.cora_s);
            char line[512];
            std::snprintf(
                line, sizeof line,
                "| %s | %lld | %lldx%lld | %.0f%% (%.1f%%) | %.2f | %.2f | %s | %.2fx | %s | %s | %.1f | %.2f | "
                "%.2fx | %.2f | %.2fx |%s\n",
                c.what.c_str(), (long long)tokens, (long long)bs, (long long)bs, densities[r.di] * 100,
                r.actual_density * 100, r.cora_s * 1e3, sgemm_best * 1e3, dnnl_ms, sgemm_best / r.cora_s, vs_dnnl, tgt,
                r.useful / r.cora_s * 1e-9, r.default_s * 1e3, best_dense / r.default_s, r.rows_s * 1e3,
                best_dense / r.rows_s, r.ok ? "" : " **FAIL**");
            std::fputs(line, stdout);
            table += line;
        }
        std::fflush(stdout);
    }
    // Propagation: FF2(ReLU(FF1(X))), bias-free, W1 3072x768 at 50% block density with 25% of its
    // block rows (FF1's output features) empty, W2 768x3072 with every block present. Without
    // propagation FF2 multiplies all of W2; with it, W2's blocks reading FF1's zero features go.
    std::string prop_table;
    if (!quick && section("propagation")) {
        const int64_t hidden = 768, ff = 3072, bs = 32;
        int64_t tokens = 0;
        for (int32_t l : bert)
            tokens += l;
        TokenDims D(4096);
        BsrTiling tiling;
        Tensor X = D.tokens("X", hidden, tiling.chunk_tokens);
        BsrMatrix W1("W1", ff, hidden, bs, bs, BlockOrder::ColumnMajor),
            W2("W2", hidden, ff, bs, bs, BlockOrder::ColumnMajor);
        BsrLinear l1(
            "H", D, W1, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, true, tiling);
        BsrLinear l2(
            "Y", D, W2, [&](Expr b, Expr s, Expr k) { return l1.Y(b, s, k); }, std::nullopt, false, tiling);
        Kernel kernel = Pipeline({l2.Y}, "ff_bench").compile();
        std::mt19937 rng(17);
        std::uniform_real_distribution<float> val(-1.0f, 1.0f), coin(0.0f, 1.0f);
        std::vector<float> d1((size_t)(ff * hidden)), d2((size_t)(hidden * ff));
        for (float &v : d1)
            v = val(rng);
        for (float &v : d2)
            v = val(rng);
        const int64_t kb1 = hidden / bs, mb1 = ff / bs;
        std::vector<uint8_t> m1((size_t)(mb1 * kb1)), m2((size_t)(hidden / bs * (ff / bs)), 1);
        for (int64_t rb = 0; rb < mb1; rb++)
            for (int64_t cb = 0; cb < kb1; cb++)
                m1[(size_t)(rb * kb1 + cb)] = rb % 4 != 3 && coin(rng) < 2.0f / 3.0f; // 75% rows x 2/3 = 50%
        BsrData w1 = BsrData::from_block_mask(d1, ff, hidden, bs, bs, m1);
        BsrData w2 = BsrData::from_block_mask(d2, hidden, ff, bs, bs, m2);
        SparsityGraph g;
        int h = g.linear("FF1", g.input("X", hidden), w1, false, Activation::ReLU);
        int y = g.linear("FF2", h, w2, false, Activation::None);
        g.output(y);
        g.propagate();
        BsrData p1 = g.pruned_weight(h), p2 = g.pruned_weight(y);
        RaggedShape base;
        base.set(D.B, (int64_t)bert.size()).set(D.len, bert);
        Buffer x = Buffer::alloc(X, base);
        for (int64_t i = 0; i < tokens * hidden; i++)
            x.at(i) = val(rng);
        auto time_ff = [&](const BsrData &a, const BsrData &b, std::vector<double> *out) {
            RaggedShape shape;
            shape.set(D.B, (int64_t)bert.size()).set(D.len, bert);
            a.bind(shape, W1);
            b.bind(shape, W2);
            Buffer yb = Buffer::alloc(l2.Y, shape);
            Buffer c1 = a.col_buffer(W1, shape), v1 = a.values_buffer(W1, shape);
            Buffer c2 = b.col_buffer(W2, shape), v2 = b.values_buffer(W2, shape);
            double s = cora::apps::best_seconds_warm(runs, [&] {
                kernel.run(shape, {{X, x}, {W1.col, c1}, {W1.values, v1}, {W2.col, c2}, {W2.values, v2}, {l2.Y, yb}});
            });
            out->assign(yb.data<float>(), yb.data<float>() + tokens * hidden);
            return s;
        };
        std::vector<double> y_full, y_prop;
        double full_s = time_ff(w1, w2, &y_full), prop_s = time_ff(p1, p2, &y_prop);
        apps::ErrorCheck check; // a NaN where the reference is finite fails (common/error_check.h)
        for (size_t i = 0; i < y_full.size(); i++) {
            check.add(y_prop[i], y_full[i]);
        }
        bool ok = check.abs_within(1e-5 * std::max(check.scale(), 1.0));
        all_ok &= ok;
        char line[512];
        std::snprintf(
            line, sizeof line,
            "| FF 768 -> 3072 -> 768, %lld tokens, 32x32 | W1 %.1f%%, W2 %.1f%% | W1 %.1f%%, W2 %.1f%% | %.2f | "
            "%.2f | %.2fx (target >= 1.2x: %s) |%s\n",
            (long long)tokens, w1.density() * 100, w2.density() * 100, p1.density() * 100, p2.density() * 100,
            full_s * 1e3, prop_s * 1e3, full_s / prop_s, full_s / prop_s >= 1.2 ? "met" : "MISSED",
            ok ? "" : " **FAIL**");
        std::fputs(line, stdout);
        prop_table = "\n| pipeline | blocks without | blocks with propagation | without ms | with ms | speed-up |\n"
                     "|---|---|---|---|---|---|\n" +
                     std::string(line);
    }
    // SparTA's decomposition: a 768x3072 weight whose non-zeros are 25% of its 32x32 blocks, whole,
    // plus 0.5% of all elements scattered. A pure block pattern must keep every block holding a
    // non-zero (nearly all of them); decompose_blocks keeps the full blocks whole and runs the
    // scattered elements through 1x1 blocks, summed into one output.
    std::string dec_table;
    if (!quick && section("decomposition")) {
        const int64_t out_f = 768, in_f = 3072, bs = 32;
        int64_t tokens = 0;
        for (int32_t l : bert)
            tokens += l;
        std::mt19937 rng(23);
        std::uniform_real_distribution<float> val(-1.0f, 1.0f), coin(0.0f, 1.0f);
        std::vector<float> dense((size_t)(out_f * in_f), 0.0f);
        for (int64_t i = 0; i < out_f; i++)
            for (int64_t j = 0; j < in_f; j++) {
                uint32_t h = (uint32_t)((i / bs) * 7919 + (j / bs) * 104729) % 100u;
                if (h < 25 || coin(rng) < 0.005f) dense[(size_t)(i * in_f + j)] = val(rng);
            }
        BsrData pure = BsrData::from_dense(dense, out_f, in_f, bs, bs);
        BsrDecomposition dec = decompose_blocks(dense, out_f, in_f, bs, bs);
        TokenDims D(4096);
        BsrMatrix W("W", out_f, in_f, bs, bs, BlockOrder::ColumnMajor), E("E", out_f, in_f, 1, 1);
        BsrTiling tiling = BsrTiling::for_matrix(W);
        Tensor X = D.tokens("X", in_f, tiling.chunk_tokens);
        auto read = [&](Expr b, Expr s, Expr k) { return X(b, s, k); };
        BsrLinear blocks_only("Yb", D, W, read, std::nullopt, false, tiling);
        BsrLinear elements_only("Ye", D, E, read, std::nullopt, false, tiling);
        BsrLinear both("Y", D, W, read, std::nullopt, false, tiling, &E);
        Kernel kb = Pipeline({blocks_only.Y}, "bsr_blocks").compile();
        Kernel ke = Pipeline({elements_only.Y}, "bsr_elements").compile();
        Kernel kd = Pipeline({both.Y}, "bsr_decomposed").compile();
        RaggedShape shape;
        shape.set(D.B, (int64_t)bert.size()).set(D.len, bert);
        Buffer x = Buffer::alloc(X, shape);
        for (int64_t i = 0; i < tokens * in_f; i++)
            x.at(i) = val(rng);
        std::vector<float> y_ref((size_t)(tokens * out_f));
        double sgemm_s = cora::apps::best_seconds_warm(runs, [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tokens, (int)out_f, (int)in_f, 1.0f,
                        x.data<float>(), (int)in_f, dense.data(), (int)in_f, 0.0f, y_ref.data(), (int)out_f);
        });
        auto time_one = [&](Kernel &k, Func &y, const BsrData &d, const BsrMatrix &m) {
            RaggedShape sh;
            sh.set(D.B, (int64_t)bert.size()).set(D.len, bert);
            d.bind(sh, m);
            Buffer yb = Buffer::alloc(y, sh), c = d.col_buffer(m, sh), v = d.values_buffer(m, sh);
            return cora::apps::best_seconds_warm(runs, [&] {
                k.run(sh, {{X, x}, {m.col, c}, {m.values, v}, {y, yb}});
            });
        };
        double pure_s = time_one(kb, blocks_only.Y, pure, W);
        double blocks_s = time_one(kb, blocks_only.Y, dec.blocks, W);
        double elements_s = time_one(ke, elements_only.Y, dec.elements, E);
        RaggedShape sh;
        sh.set(D.B, (int64_t)bert.size()).set(D.len, bert);
        dec.blocks.bind(sh, W);
        dec.elements.bind(sh, E);
        Buffer yd = Buffer::alloc(both.Y, sh);
        Buffer cw = dec.blocks.col_buffer(W, sh), vw = dec.blocks.values_buffer(W, sh);
        Buffer ce = dec.elements.col_buffer(E, sh), ve = dec.elements.values_buffer(E, sh);
        double dec_s = cora::apps::best_seconds_warm(runs, [&] {
            kd.run(sh, {{X, x}, {W.col, cw}, {W.values, vw}, {E.col, ce}, {E.values, ve}, {both.Y, yd}});
        });
        apps::ErrorCheck check; // a NaN where the reference is finite fails (common/error_check.h)
        for (int64_t i = 0; i < tokens * out_f; i++) {
            check.add(yd.at(i), y_ref[(size_t)i]);
        }
        bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0));
        all_ok &= ok;
        // Time per multiply-add (per token) of each part: their ratio is the cost rule's threshold.
        double block_mac = blocks_s / (double)(dec.blocks.nnzb() * bs * bs);
        double element_mac = elements_s / (double)std::max<int64_t>(dec.elements.nnzb(), 1);
        char line[768];
        std::snprintf(
            line, sizeof line,
            "| 768x3072, 25%% whole 32x32 blocks + 0.5%% scattered, %lld tokens | %.2f | %.2f (%.1f%% of blocks) "
            "| %.2f = blocks %.2f + elements %.2f (%lld elements) | %.2fx | %.2fx | %.3f |%s\n",
            (long long)tokens, sgemm_s * 1e3, pure_s * 1e3, pure.density() * 100, dec_s * 1e3, blocks_s * 1e3,
            elements_s * 1e3, (long long)dec.elements.nnzb(), sgemm_s / dec_s, pure_s / dec_s, block_mac / element_mac,
            ok ? "" : " **FAIL**");
        std::fputs(line, stdout);
        dec_table = "\n| weight | dense sgemm ms | pure block pattern ms | decomposed ms | vs sgemm | vs pure blocks | "
                    "block / element time per multiply-add |\n|---|---|---|---|---|---|---|\n" +
                    std::string(line);
    }
    // Convolution: 3x3, 256 -> 256 channels, 40x40 pixels (NHWC, batch 1), the weight block-sparse
    // over (C_out, C_in) with every tap inside a block; dense baseline im2col + cblas_sgemm (the
    // im2col copy timed too, as a framework's conv does it; the sgemm alone beside it).
    std::string conv_table;
    if (!quick && section("conv")) {
        const int64_t C = 256, H = 40, Wd = 40, pixels = H * Wd;
        Param N("N", 1, 64);
        Dim n("n"), yd("y"), xd("x"), cd("c");
        Tensor X("X", {{n, N}, {yd, H + 2}, {xd, Wd + 2}, {cd, C}});
        RaggedShape base;
        base.set(N, 1);
        Buffer x = Buffer::alloc(X, base);
        std::mt19937 rng(29);
        std::uniform_real_distribution<float> val(-1.0f, 1.0f);
        for (int64_t i = 0; i < H + 2; i++) // zero border, random interior
            for (int64_t j = 0; j < Wd + 2; j++)
                for (int64_t c = 0; c < C; c++)
                    x.at((i * (Wd + 2) + j) * C + c) = i == 0 || j == 0 || i == H + 1 || j == Wd + 1 ? 0.0f : val(rng);
        std::vector<float> w((size_t)(C * 9 * C));
        for (float &v : w)
            v = val(rng);
        std::vector<float> cols((size_t)(pixels * 9 * C)), y_ref((size_t)(pixels * C));
        for (int64_t bs : {8, 32}) {
            BsrMatrix Wm("W", C, 9 * C, bs, 9 * bs, BlockOrder::ColumnMajor);
            apps::BsrConv3x3 conv("Y", X, N, H, Wd, Wm, 5);
            Kernel kernel = Pipeline({conv.Y}, "bsr_conv_bench").compile();
            std::vector<float> matrix = apps::conv_weight_matrix(w, C, C, bs);
            for (double density : {0.5, 0.25}) {
                std::vector<uint8_t> mask = exact_mask((size_t)(C / bs * (C / bs)), density, (uint32_t)rng());
                BsrData wd = BsrData::from_block_mask(matrix, C, 9 * C, bs, 9 * bs, mask);
                std::vector<float> dense_m = wd.to_dense();
                RaggedShape shape;
                shape.set(N, 1);
                wd.bind(shape, Wm);
                Buffer yb = Buffer::alloc(conv.Y, shape), col = wd.col_buffer(Wm, shape),
                       values = wd.values_buffer(Wm, shape);
                double cora_s = cora::apps::best_seconds_warm(runs, [&] {
                    kernel.run(shape, {{X, x}, {Wm.col, col}, {Wm.values, values}, {conv.Y, yb}});
                });
                auto im2col = [&] { // column cb*9*bs + t*bs + c of pixel p: tap t of channel cb*bs + c
#pragma omp parallel for
                    for (int64_t p = 0; p < pixels; p++)
                        for (int64_t cb = 0; cb < C / bs; cb++)
                            for (int64_t t = 0; t < 9; t++)
                                std::memcpy(&cols[(size_t)(p * 9 * C + cb * 9 * bs + t * bs)],
                                            &x.at(((p / Wd + t / 3) * (Wd + 2) + p % Wd + t % 3) * C + cb * bs),
                                            sizeof(float) * (size_t)bs);
                };
                auto sgemm = [&] {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)pixels, (int)C, (int)(9 * C), 1.0f,
                                cols.data(), (int)(9 * C), dense_m.data(), (int)(9 * C), 0.0f, y_ref.data(), (int)C);
                };
                double dense_s = cora::apps::best_seconds_warm(runs, [&] {
                    im2col();
                    sgemm();
                });
                double sgemm_s = cora::apps::best_seconds_warm(runs, sgemm);
                apps::ErrorCheck check; // a NaN where the reference is finite fails (common/error_check.h)
                for (int64_t i = 0; i < pixels * C; i++) {
                    check.add(yb.at(i), y_ref[(size_t)i]);
                }
                bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0));
                all_ok &= ok;
                char tgt[64] = "-";
                if (density == 0.5)
                    std::snprintf(tgt, sizeof tgt, ">= 1.5x: %s", dense_s / cora_s >= 1.5 ? "met" : "MISSED");
                char line[512];
                std::snprintf(line, sizeof line,
                              "| %lldx3x3x%lld | %.0f%% (%.1f%%) | %.2f | %.2f | %.2f | %.2fx | %.2fx | %s |%s\n",
                              (long long)bs, (long long)bs, density * 100, wd.density() * 100, cora_s * 1e3,
                              dense_s * 1e3, sgemm_s * 1e3, dense_s / cora_s, sgemm_s / cora_s, tgt,
                              ok ? "" : " **FAIL**");
                std::fputs(line, stdout);
                conv_table += line;
            }
        }
        conv_table =
            "\n| conv 3x3, 256 -> 256, 40x40: sub-volume | density | cora ms | im2col + sgemm ms | sgemm alone ms | "
            "vs im2col + sgemm | vs sgemm alone | target |\n|---|---|---|---|---|---|---|---|\n" +
            conv_table;
    }
    // Static patterns (BsrMatrix declared with its BsrData, Func::dismantle on the block rows and
    // each row's blocks): the same layer compiled for the run-time pattern and specialised to it,
    // timed alternately (best of 3 x --runs each). Each kernel is compiled into a fresh cache
    // directory, so the compile time is the C compiler's real cost; the dismantled code grows with
    // the pattern, so only patterns within kMaxDismantledCopies are listed.
    std::string static_table;
    if (!quick && section("static")) {
        struct StaticCase {
            const char *what;
            int64_t out, in, block;
            double density;
        };
        const StaticCase static_cases[] = {{"768x768", 768, 768, 32, 0.10},    {"768x768", 768, 768, 32, 0.25},
                                           {"768x768", 768, 768, 8, 0.02},     {"768x768", 768, 768, 8, 0.05},
                                           {"768x3072", 768, 3072, 1, 0.0002}, {"768x3072", 768, 3072, 1, 0.0005}};
        int64_t tokens = 0;
        for (int32_t l : bert)
            tokens += l;
        std::mt19937 rng(31);
        std::uniform_real_distribution<float> val(-1.0f, 1.0f);
        char dir_template[] = "/tmp/cora_static_bench_XXXXXX";
        const std::string scratch = mkdtemp(dir_template) ? dir_template : "";
        if (scratch.empty()) throw std::runtime_error("cannot make a scratch directory under /tmp");
        int fresh = 0;
        for (const StaticCase &sc : static_cases) {
            std::vector<float> dense((size_t)(sc.out * sc.in));
            for (float &v : dense)
                v = val(rng);
            std::vector<uint8_t> mask =
                exact_mask((size_t)(sc.out / sc.block * (sc.in / sc.block)), sc.density, (uint32_t)rng());
            BsrData w = BsrData::from_block_mask(dense, sc.out, sc.in, sc.block, sc.block, mask);
            std::vector<float> wd = w.to_dense();
            TokenDims D(4096);
            BsrMatrix Wr("W", sc.out, sc.in, sc.block, sc.block, BlockOrder::ColumnMajor);
            BsrMatrix Ws("W", w, BlockOrder::ColumnMajor);
            BsrTiling tiling = BsrTiling::for_matrix(Wr), specialised = tiling;
            specialised.dismantle = true;
            specialised.tile_tokens = 6; // dismantled code grows with the tile (BsrTiling::dismantle)
            Tensor X = D.tokens("X", sc.in, tiling.chunk_tokens);
            auto read = [&](Expr b, Expr s, Expr k) { return X(b, s, k); };
            BsrLinear lr("Y", D, Wr, read, std::nullopt, false, tiling);
            BsrLinear ls("Y", D, Ws, read, std::nullopt, false, specialised);
            auto compile = [&](Func &y, double *seconds) {
                CompileOptions o;
                o.cache_dir = scratch + "/" + std::to_string(fresh++);
                auto t0 = std::chrono::steady_clock::now();
                Kernel k = Pipeline({y}, "bsr_static_bench").compile(o);
                *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                return k;
            };
            double compile_r = 0, compile_s = 0;
            Kernel kr = compile(lr.Y, &compile_r), ks = compile(ls.Y, &compile_s);
            RaggedShape shape;
            shape.set(D.B, (int64_t)bert.size()).set(D.len, bert);
            w.bind(shape, Wr);
            w.bind(shape, Ws);
            Buffer x = Buffer::alloc(X, shape), yr = Buffer::alloc(lr.Y, shape), ys = Buffer::alloc(ls.Y, shape);
            for (int64_t i = 0; i < tokens * sc.in; i++)
                x.at(i) = val(rng);
            Buffer col = w.col_buffer(Ws, shape), values = w.values_buffer(Ws, shape);
            auto run_r = [&] { kr.run(shape, {{X, x}, {Wr.col, col}, {Wr.values, values}, {lr.Y, yr}}); };
            auto run_s = [&] { ks.run(shape, {{X, x}, {Ws.col, col}, {Ws.values, values}, {ls.Y, ys}}); };
            double best_r = 1e30, best_s = 1e30;
            for (int round = 0; round < 3; round++) { // alternate, so drifting machine load hits both
                best_r = std::min(best_r, cora::apps::best_seconds_warm(runs, run_r));
                best_s = std::min(best_s, cora::apps::best_seconds_warm(runs, run_s));
            }
            std::vector<float> y_ref((size_t)(tokens * sc.out));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tokens, (int)sc.out, (int)sc.in, 1.0f,
                        x.data<float>(), (int)sc.in, wd.data(), (int)sc.in, 0.0f, y_ref.data(), (int)sc.out);
            apps::ErrorCheck check; // a NaN where the reference is finite fails (common/error_check.h)
            for (int64_t i = 0; i < tokens * sc.out; i++) {
                check.add(ys.at(i), y_ref[(size_t)i]);
                check.add(yr.at(i), y_ref[(size_t)i]);
            }
            bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0));
            all_ok &= ok;
            char line[512];
            std::snprintf(line, sizeof line,
                          "| %s | %lldx%lld | %.2f%% (%lld blocks) | %lld | %.2f | %.2f | %.2fx | %.2f / %.1f | %.0f / "
                          "%.0f |%s\n",
                          sc.what, (long long)sc.block, (long long)sc.block, w.density() * 100, (long long)w.nnzb(),
                          (long long)tokens, best_r * 1e3, best_s * 1e3, best_r / best_s, compile_r, compile_s,
                          (double)kr.source().size() / 1024.0, (double)ks.source().size() / 1024.0,
                          ok ? "" : " **FAIL**");
            std::fputs(line, stdout);
            std::fflush(stdout);
            static_table += line;
        }
        std::filesystem::remove_all(scratch);
        static_table = "\n| static pattern: weight | block | density | tokens | run-time pattern ms | specialised ms | "
                       "speed-up | compile s (run-time / specialised) | source KB (run-time / specialised) |\n"
                       "|---|---|---|---|---|---|---|---|---|\n" +
                       static_table;
    }
    if (!markdown.empty()) {
        std::ofstream out(markdown, std::ios::app);
        out << table << (cases.empty() ? std::string() : dense_table) << prop_table << dec_table << conv_table
            << static_table;
        if (!out) {
            std::fprintf(stderr, "block_sparse: cannot write %s\n", markdown.c_str());
            return 2;
        }
    }
    std::printf("check vs sgemm: %s\n", all_ok ? "PASS" : "FAIL");
    return all_ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "block_sparse: error: %s\n", e.what());
        return 1;
    }
}
