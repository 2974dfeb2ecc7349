// The default schedule and the recipes of docs/user-guide.md ("Recipes: from the default schedule
// to a fast one") against naive C++ loops, on ragged batches (Google Benchmark).
//
// Per op: `naive` (the loop a user writes over packed data: plain nested loops, `#pragma omp
// parallel for` over tokens, or over sentences with dynamic scheduling; -O3 -march=native),
// `old_nest` (cora with `.parallel(b)` on every Func: the nest before the default schedule),
// `default` (cora, no schedule call; `tuned`: the default with the register tiles Pipeline::tune
// measured on the op's own shape, for the contractions; `default_stored`, `default_untiled` and `default_unfused`: the
// default before it inlined single-use elementwise Funcs, tiled contractions and computed a ragged
// row's reductions at the row), then the recipe's steps (`r1_...`, `r2_...`: each a
// complete schedule a user writes, described where it is added). Every cora variant's output is checked against `naive`
// before timing: max over elements of |got - naive| / max(|naive|, 1% of max |naive|); above 1e-3 the variant is
// reported as an error and the program exits with 1. Kernels are compiled, buffers allocated and RaggedShapes built
// once, outside the timed loop; a timed iteration is one Kernel::run (argument checks included) or one call of the
// naive loop.
//
// Data (lengths from std::mt19937 seeds 2026 / 2027 / 2028, uniform in [16, 256]):
//   tokenwise   32 sentences (4910 tokens) x 512 features: Y = max(X + bias, 0) + R
//   layernorm   32 sentences x 512 features
//   softmax     32 sentences, 4 heads: P[b, h, i, :] = softmax(S[b, h, i, :len(b)])
//   jagged_softmax  4096 rows of lengths uniform in [0, 100] (seed 2029; FBGEMM's jagged softmax):
//               Y[r, :] = softmax(X[r, :len(r)])
//   jagged_dense    the same rows: Y[r, j] = X[r, j] * W[r] + D[r, j], D dense [rows, 128]
//               (FBGEMM's jagged_dense_elementwise_add with a per-row scale)
//   qkt         32 sentences, 2 heads of 64: S[b, h, i, j] = Q[b, i, h, :] . K[b, j, h, :] / 8
//   attnv       32 sentences, 2 heads of 64: A[b, i, h, :] = sum_j P[b, h, i, j] V[b, j, h, :]
//   gemm        8 sentences (the first 8 lengths, 1352 tokens) x 512 -> 512: Y = X W (a Linear layer)
//   linear      the same with W [out, in] as nn.Linear stores it: Y = X W^T
//   vgemm       32 GEMMs, M, N, K each in [16, 256]: C[b] = A[b] W[b]
//
// Flags (besides Google Benchmark's): --markdown=FILE appends one table per op (median time,
// ratio vs naive, error) to FILE; --ops=a,b builds and runs only those ops; --dump=op/variant
// prints that variant's lowered IR and generated source and exits; --list prints the variants.
// bench/default_schedules.sh runs it.
#include <benchmark/benchmark.h>

#include <cora/Generator.h>
#include <cora/cora.h>

#include "common/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace cora;

constexpr int64_t kFeatures = 512, kHeadDim = 64;
constexpr int kBatch = 32, kGemmBatch = 8, kSoftmaxHeads = 4, kAttentionHeads = 2;

std::vector<int32_t> draw_lengths(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> u(16, 256);
    std::vector<int32_t> l((size_t)n);
    for (int32_t &x : l)
        x = u(rng);
    return l;
}

std::vector<int64_t> prefix(const std::vector<int32_t> &l, int64_t (*size)(int64_t)) {
    std::vector<int64_t> p{0};
    for (int32_t x : l)
        p.push_back(p.back() + size(x));
    return p;
}

/** Every dim, param and length array the ops use (Dims link by identity, so ops may share them). */
struct Names {
    Dim b{"b"}, s{"s"}, c{"c"}, r{"r"}, h{"h"}, i{"i"}, j{"j"}, d{"d"}, o{"o"}, m{"m"}, n{"n"};
    Dim tok{"tok"}, co{"co"}, ci{"ci"}, to{"to"}, ti{"ti"}, tb{"tb"}, tt{"tt"}, oo{"oo"}, oi{"oi"}, ko{"ko"}, ki{"ki"},
        jo{"jo"}, ji{"ji"}, row{"row"}, no{"no"}, ni{"ni"}, mo{"mo"}, mi{"mi"}, panel{"panel"};
    Param B{"B", 1, 64}, H{"H", 1, 16};
    LengthArray len{"len", B, 0, 256};
    Param rows{"rows", 1, 8192}; ///< jagged_softmax: many short rows
    LengthArray row_len{"row_len", rows, 0, 128};
    LengthArray M{"M", B, 0, 256}, N{"N", B, 0, 256}, K{"K", B, 0, 256};
};
Names &names() {
    static Names n;
    return n;
}

/** Columns of a GEMM register tile: 4 x 16 floats (8 ymm accumulators) with AVX2, 4 x 64 with
 * AVX-512 (apps/transformer's schedule_token_gemm). */
int64_t tile_cols() { return host_vector_bits() >= 512 ? 64 : 16; }

// ---------------------------------------------------------------------------------------------
// The framework: an op holds its data (padded, for cora's from_padded; packed, for the naive
// loops), the naive output, and its variants, each a function run once per timed iteration.

struct Variant {
    std::string name;
    std::function<void()> run;
    double err = 0;
    std::string error;        ///< non-empty: check failed (or compile error); not timed
    std::string lowered, src; ///< cora variants: for --dump
};

struct Input {
    Tensor plain; ///< the logical tensor with packed storage (what the naive loop reads)
    std::vector<int64_t> dims;
    std::vector<float> padded;
    Buffer packed;
};

struct Op {
    std::string name, description;
    RaggedShape shape;
    std::vector<Input> inputs;       ///< in the order the op's Defs::inputs() lists them
    std::optional<Tensor> out_plain; ///< the output with packed storage (what the naive loop writes)
    std::vector<int64_t> out_dims;
    std::vector<float> want; ///< naive output, padded to out_dims
    std::vector<std::unique_ptr<Variant>> variants;

    void add_input(const Tensor &t, const std::vector<int64_t> &dims, uint32_t seed, float lo, float hi) {
        Input in{t, dims, {}, {}};
        int64_t n = 1;
        for (int64_t x : dims)
            n *= x;
        in.padded.resize((size_t)n);
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(lo, hi);
        for (float &x : in.padded)
            x = u(rng);
        in.packed = Buffer::from_padded(t, shape, in.padded, dims);
        inputs.push_back(std::move(in));
    }
    const float *in(size_t k) const { return inputs[k].packed.data<float>(); }

    /** The reference: a naive loop writing packed output into `out` (sized here). */
    void add_naive(const std::string &variant, std::function<void(float *)> loop) {
        auto out = std::make_shared<Buffer>(Buffer::alloc(*out_plain, shape));
        auto v = std::make_unique<Variant>();
        v->name = variant;
        v->run = [loop, out] { loop(out->data<float>()); };
        v->run();
        std::vector<float> got = out->to_padded(*out_plain, shape, out_dims);
        if (want.empty())
            want = got;
        else
            check(*v, got);
        variants.push_back(std::move(v));
    }

    /** A cora variant: a fresh definition (Defs), scheduled by `schedule`, compiled once. */
    template <typename Defs>
    void add_cora(const std::string &variant, std::function<void(Defs &)> schedule, const CompileOptions &opts = {}) {
        add_kernel<Defs>(variant, std::move(schedule), [opts](const Pipeline &p) { return p.compile(opts); });
    }

    /** The default schedule with the register tiles Pipeline::tune measures on this op's own shape,
     * from a fresh table (every candidate measured here, for this thread count); its report, with
     * the seconds it took, goes to stderr. */
    template <typename Defs> void add_tuned(const std::string &variant) {
        add_kernel<Defs>(
            variant, [](Defs &) {},
            [this, variant](const Pipeline &p) {
                const std::filesystem::path table =
                    std::filesystem::temp_directory_path() / ("cora-bench-tune-" + std::to_string(::getpid()) + ".txt");
                std::filesystem::remove(table);
                TuneOptions o;
                o.table = table.string();
                TuneResult r = p.tune({TuneSample(shape)}, o);
                std::filesystem::remove(table);
                std::fprintf(stderr, "%s/%s: %s", name.c_str(), variant.c_str(), r.report.c_str());
                return r.kernel;
            });
    }

    /** A cora variant whose kernel `make` compiles from the scheduled definition's pipeline. */
    template <typename Defs>
    void add_kernel(const std::string &variant, std::function<void(Defs &)> schedule,
                    const std::function<Kernel(const Pipeline &)> &make) {
        auto v = std::make_unique<Variant>();
        v->name = variant;
        try {
            auto defs = std::make_shared<Defs>();
            schedule(*defs);
            Kernel k = make(Pipeline({defs->out}, name + "_" + variant));
            v->lowered = k.lowered();
            v->src = k.source();
            std::vector<Tensor> ts = defs->inputs();
            auto bufs = std::make_shared<std::vector<Buffer>>();
            bufs->reserve(ts.size() + 1);
            for (size_t x = 0; x < ts.size(); x++)
                bufs->push_back(Buffer::from_padded(ts[x], shape, inputs[x].padded, inputs[x].dims));
            bufs->push_back(Buffer::alloc(defs->out, shape));
            std::vector<Binding> bindings;
            for (size_t x = 0; x < ts.size(); x++)
                bindings.emplace_back(ts[x], (*bufs)[x]);
            bindings.emplace_back(defs->out, bufs->back());
            const RaggedShape *sh = &shape;
            v->run = [defs, bufs, k, bindings, sh] { k.run(*sh, bindings); };
            v->run();
            if constexpr (requires { defs->padded_output(bufs->back(), shape, out_dims); })
                check(*v, defs->padded_output(bufs->back(), shape, out_dims));
            else
                check(*v, bufs->back().to_padded(defs->out, shape, out_dims));
        } catch (const Error &e) {
            v->error = e.what();
        }
        if (!v->error.empty()) std::fprintf(stderr, "%s/%s: %s\n", name.c_str(), variant.c_str(), v->error.c_str());
        variants.push_back(std::move(v));
    }

    void check(Variant &v, const std::vector<float> &got) const {
        double scale = 0;
        for (float w : want)
            scale = std::max(scale, (double)std::fabs(w));
        // A value that is not finite where the naive result is (or the reverse) fails: std::max(err,
        // NaN) is err, so a NaN output would otherwise pass (apps/common/error_check.h).
        double err = 0;
        for (size_t x = 0; x < want.size(); x++) {
            const bool same_non_finite = (std::isnan(got[x]) && std::isnan(want[x])) ||
                                         (std::isinf(got[x]) && (double)got[x] == (double)want[x]);
            if (same_non_finite) continue;
            const double d = std::fabs((double)got[x] - want[x]) / std::max((double)std::fabs(want[x]), 0.01 * scale);
            err = std::isfinite(d) ? std::max(err, d) : INFINITY;
        }
        v.err = err;
        if (!(err <= 1e-3)) v.error = "max relative error " + std::to_string(err) + " against naive (limit 1e-3)";
    }
};

/** An op over one ragged batch: its name and shape (B, the lengths, and H when `heads` > 0). */
std::unique_ptr<Op> ragged_op(const char *name, const std::vector<int32_t> &len, int64_t heads = 0) {
    Names &N = names();
    auto op = std::make_unique<Op>();
    op->name = name;
    op->shape.set(N.B, (int64_t)len.size()).set(N.len, len);
    if (heads > 0) op->shape.set(N.H, heads);
    return op;
}

int32_t longest(const std::vector<int32_t> &len) { return *std::max_element(len.begin(), len.end()); }
int64_t tokens(const std::vector<int32_t> &len) {
    return prefix(len, [](int64_t x) { return x; }).back();
}

// --- token-wise map: Y = max(X + bias, 0) + R, written as two Funcs (bias, then ReLU + residual)

struct TokenwiseDefs {
    Names &N = names();
    Tensor X{"X", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    Tensor bias{"bias", {{N.c, kFeatures}}};
    Tensor R{"R", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    Func Biased{"Biased", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    Func out{"Y", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    TokenwiseDefs() {
        Biased.compute([&](Expr b, Expr s, Expr c) { return X(b, s, c) + bias(c); });
        out.compute([&](Expr b, Expr s, Expr c) { return max(Biased(b, s, c), 0.0f) + R(b, s, c); });
    }
    std::vector<Tensor> inputs() const { return {X, bias, R}; }
};

std::unique_ptr<Op> tokenwise_op() {
    Names &N = names();
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    auto op = ragged_op("tokenwise", len);
    const int32_t L = longest(len);
    const int64_t T = tokens(len);
    op->description = std::to_string(kBatch) + " sentences, " + std::to_string(T) + " tokens x " +
                      std::to_string(kFeatures) + " features: Y = max(X + bias, 0) + R";
    TokenwiseDefs plain;
    op->add_input(plain.X, {kBatch, L, kFeatures}, 11, -1, 1);
    op->add_input(plain.bias, {kFeatures}, 12, -1, 1);
    op->add_input(plain.R, {kBatch, L, kFeatures}, 13, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, L, kFeatures};
    const float *x = op->in(0), *bias = op->in(1), *res = op->in(2);
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < kFeatures; c++)
                y[t * kFeatures + c] = std::max(x[t * kFeatures + c] + bias[c], 0.0f) + res[t * kFeatures + c];
    });
    op->add_cora<TokenwiseDefs>("old_nest", [&](TokenwiseDefs &d) {
        d.Biased.parallel(N.b);
        d.out.parallel(N.b);
    });
    op->add_cora<TokenwiseDefs>("default", [](TokenwiseDefs &) {});
    // The default before elementwise Funcs read once were inlined by default: Biased stored.
    op->add_cora<TokenwiseDefs>("default_stored", [](TokenwiseDefs &d) { d.Biased.compute_root(); });
    // Step 1: no intermediate: Biased is computed inside Y's loop (Y keeps the default schedule).
    op->add_cora<TokenwiseDefs>("r1_inline", [](TokenwiseDefs &d) { d.Biased.compute_inline(); });
    // Step 2: Y's default written out (one parallel token loop, the whole 512-feature row as the
    // vector loop): the starting point for scheduling it further.
    op->add_cora<TokenwiseDefs>("r2_inline_vec512", [&](TokenwiseDefs &d) {
        d.Biased.compute_inline();
        d.out.fuse(N.b, N.s, N.tok).parallel(N.tok).vectorize(N.c);
    });
    return op;
}

// --- LayerNorm over 512 features: Mean, Rstd, Out as three Funcs (apps/transformer's layer_norm)

struct LayerNormDefs {
    Names &N = names();
    Tensor X{"X", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    Tensor gamma{"gamma", {{N.c, kFeatures}}}, beta{"beta", {{N.c, kFeatures}}};
    Func Mean{"Mean", {{N.b, N.B}, {N.s, N.len(N.b)}}}, Rstd{"Rstd", {{N.b, N.B}, {N.s, N.len(N.b)}}};
    Func out{"Out", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.c, kFeatures}}};
    LayerNormDefs() {
        const float inv = 1.0f / (float)kFeatures;
        Mean.compute([&](Expr b, Expr s) { return sum(N.r, kFeatures, X(b, s, N.r)) * inv; });
        Rstd.compute([&](Expr b, Expr s) {
            Expr centered = X(b, s, N.r) - Mean(b, s);
            return 1.0f / sqrt(sum(N.r, kFeatures, centered * centered) * inv + 1e-5f);
        });
        out.compute(
            [&](Expr b, Expr s, Expr c) { return (X(b, s, c) - Mean(b, s)) * Rstd(b, s) * gamma(c) + beta(c); });
    }
    std::vector<Tensor> inputs() const { return {X, gamma, beta}; }
};

std::unique_ptr<Op> layernorm_op() {
    Names &N = names();
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    auto op = ragged_op("layernorm", len);
    const int32_t L = longest(len);
    const int64_t T = tokens(len);
    op->description = std::to_string(kBatch) + " sentences, " + std::to_string(T) + " tokens x " +
                      std::to_string(kFeatures) + " features";
    LayerNormDefs plain;
    op->add_input(plain.X, {kBatch, L, kFeatures}, 21, -2, 3);
    op->add_input(plain.gamma, {kFeatures}, 22, 0.5f, 1.5f);
    op->add_input(plain.beta, {kFeatures}, 23, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, L, kFeatures};
    const float *x = op->in(0), *gamma = op->in(1), *beta = op->in(2);
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * kFeatures;
            float mean = 0, var = 0;
            for (int64_t c = 0; c < kFeatures; c++)
                mean += xt[c];
            mean /= kFeatures;
            for (int64_t c = 0; c < kFeatures; c++)
                var += (xt[c] - mean) * (xt[c] - mean);
            float rstd = 1.0f / std::sqrt(var / kFeatures + 1e-5f);
            for (int64_t c = 0; c < kFeatures; c++)
                y[t * kFeatures + c] = (xt[c] - mean) * rstd * gamma[c] + beta[c];
        }
    });
    op->add_cora<LayerNormDefs>("old_nest", [&](LayerNormDefs &d) {
        d.Mean.parallel(N.b);
        d.Rstd.parallel(N.b);
        d.out.parallel(N.b);
    });
    op->add_cora<LayerNormDefs>("default", [](LayerNormDefs &) {});
    // Step 1: the two row statistics computed per token inside Out's token loop (one pass over
    // the tokens instead of three); Out keeps a vector loop over its features. compute_at needs
    // Out's loops b and s unfused, so Out's parallel loop is over sentences.
    op->add_cora<LayerNormDefs>("r1_compute_at", [&](LayerNormDefs &d) {
        d.out.split(N.c, N.co, N.ci, 16).vectorize(N.ci);
        d.Mean.compute_at(d.out, N.s);
        d.Rstd.compute_at(d.out, N.s);
    });
    return op;
}

// --- row softmax over per-sentence attention scores [b, h, i < len, j < len] (guide §1)

struct SoftmaxDefs {
    Names &N = names();
    Tensor S{"S", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}, {N.j, N.len(N.b)}}};
    Func Mx{"Mx", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}}};
    Func E{"E", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}, {N.j, N.len(N.b)}}};
    Func Z{"Z", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}}};
    Func out{"P", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}, {N.j, N.len(N.b)}}};
    SoftmaxDefs() {
        Mx.compute([&](Expr b, Expr h, Expr i) { return maximum(N.r, N.len(b), S(b, h, i, N.r)); });
        E.compute([&](Expr b, Expr h, Expr i, Expr j) { return exp(S(b, h, i, j) - Mx(b, h, i)); });
        Z.compute([&](Expr b, Expr h, Expr i) { return sum(N.r, N.len(b), E(b, h, i, N.r)); });
        out.compute([&](Expr b, Expr h, Expr i, Expr j) { return E(b, h, i, j) / Z(b, h, i); });
    }
    std::vector<Tensor> inputs() const { return {S}; }
};

std::unique_ptr<Op> softmax_op() {
    Names &N = names();
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    const int64_t H = kSoftmaxHeads;
    auto op = ragged_op("softmax", len, H);
    const int32_t L = longest(len);
    std::vector<int64_t> soff = prefix(len, [](int64_t x) { return kSoftmaxHeads * x * x; });
    op->description = std::to_string(kBatch) + " sentences, " + std::to_string(H) + " heads, " +
                      std::to_string(soff.back()) + " scores";
    SoftmaxDefs plain;
    op->add_input(plain.S, {kBatch, H, L, L}, 31, -4, 4);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, H, L, L};
    const float *sc = op->in(0);
    auto lens = std::make_shared<std::vector<int32_t>>(len);
    auto offs = std::make_shared<std::vector<int64_t>>(soff);
    op->add_naive("naive", [=](float *p) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 0; b < kBatch; b++) {
            const int64_t n = (*lens)[b];
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < n; i++) {
                    const float *row = sc + (*offs)[b] + (h * n + i) * n;
                    float *out = p + (*offs)[b] + (h * n + i) * n;
                    float mx = -INFINITY, z = 0;
                    for (int64_t j = 0; j < n; j++)
                        mx = std::max(mx, row[j]);
                    for (int64_t j = 0; j < n; j++) {
                        out[j] = std::exp(row[j] - mx);
                        z += out[j];
                    }
                    for (int64_t j = 0; j < n; j++)
                        out[j] = out[j] / z;
                }
        }
    });
    op->add_cora<SoftmaxDefs>("old_nest", [&](SoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z, &d.out})
            f->parallel(N.b);
    });
    op->add_cora<SoftmaxDefs>("default", [](SoftmaxDefs &) {});
    // The default before a row's max, exponentials and sum were computed at the row.
    op->add_cora<SoftmaxDefs>("default_unfused", [](SoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z})
            f->compute_root();
    });
    // Step 1: max, exponentials and sum of a row computed next to the row (compute_at at P's
    // row loop i); P keeps its nest (compute_at needs P's loops unfused), parallel over sentences.
    op->add_cora<SoftmaxDefs>("r1_compute_at", [&](SoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z})
            f->compute_at(d.out, N.i);
    });
    return op;
}

// --- jagged softmax: many short rows [r, j < row_len(r)] (FBGEMM's jagged_softmax), rows of 0 too

struct JaggedSoftmaxDefs {
    Names &N = names();
    Tensor X{"X", {{N.row, N.rows}, {N.j, N.row_len(N.row)}}};
    Func Mx{"Mx", {{N.row, N.rows}}};
    Func E{"E", {{N.row, N.rows}, {N.j, N.row_len(N.row)}}};
    Func Z{"Z", {{N.row, N.rows}}};
    Func out{"Y", {{N.row, N.rows}, {N.j, N.row_len(N.row)}}};
    JaggedSoftmaxDefs() {
        Mx.compute([&](Expr r) { return maximum(N.r, N.row_len(r), X(r, N.r)); });
        E.compute([&](Expr r, Expr j) { return exp(X(r, j) - Mx(r)); });
        Z.compute([&](Expr r) { return sum(N.r, N.row_len(r), E(r, N.r)); });
        out.compute([&](Expr r, Expr j) { return E(r, j) / Z(r); });
    }
    std::vector<Tensor> inputs() const { return {X}; }
};

/** The jagged ops' rows: `rows` lengths uniform in [0, 100] (seed 2029). */
std::vector<int32_t> jagged_row_lengths(int rows) {
    std::mt19937 rng(2029);
    std::uniform_int_distribution<int32_t> u(0, 100);
    std::vector<int32_t> len(rows);
    for (int32_t &x : len)
        x = u(rng);
    return len;
}

std::unique_ptr<Op> jagged_softmax_op() {
    Names &N = names();
    constexpr int kRows = 4096;
    const std::vector<int32_t> len = jagged_row_lengths(kRows);
    auto op = std::make_unique<Op>();
    op->name = "jagged_softmax";
    op->shape.set(N.rows, kRows).set(N.row_len, len);
    const std::vector<int64_t> off = prefix(len, [](int64_t x) { return x; });
    op->description = std::to_string(kRows) + " rows of 0-100, " + std::to_string(off.back()) + " elements";
    JaggedSoftmaxDefs plain;
    op->add_input(plain.X, {kRows, longest(len)}, 37, -4, 4);
    op->out_plain = plain.out;
    op->out_dims = {kRows, longest(len)};
    const float *x = op->in(0);
    auto offs = std::make_shared<std::vector<int64_t>>(off);
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for schedule(dynamic, 64)
        for (int r = 0; r < kRows; r++) {
            const int64_t lo = (*offs)[r], hi = (*offs)[r + 1];
            float mx = -INFINITY, z = 0;
            for (int64_t j = lo; j < hi; j++)
                mx = std::max(mx, x[j]);
            for (int64_t j = lo; j < hi; j++) {
                y[j] = std::exp(x[j] - mx);
                z += y[j];
            }
            for (int64_t j = lo; j < hi; j++)
                y[j] = y[j] / z;
        }
    });
    op->add_cora<JaggedSoftmaxDefs>("old_nest", [&](JaggedSoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z, &d.out})
            f->parallel(N.row);
    });
    op->add_cora<JaggedSoftmaxDefs>("default", [](JaggedSoftmaxDefs &) {});
    // The default before a row's max, exponentials and sum were computed at the row by default:
    // each Func in its own nest over all rows (compute_root keeps them there).
    op->add_cora<JaggedSoftmaxDefs>("default_unfused", [](JaggedSoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z})
            f->compute_root();
    });
    // The new user's hand schedule (issue 38): the exponentials inlined into the sum and the output.
    op->add_cora<JaggedSoftmaxDefs>("r1_compute_inline", [](JaggedSoftmaxDefs &d) { d.E.compute_inline(); });
    // Step 2: everything of a row at the row, written out (what the default now chooses).
    op->add_cora<JaggedSoftmaxDefs>("r2_compute_at", [&](JaggedSoftmaxDefs &d) {
        for (Func *f : {&d.Mx, &d.E, &d.Z})
            f->compute_at(d.out, N.row);
        d.out.parallel(N.row);
    });
    return op;
}

// --- jagged + dense: FBGEMM's jagged_dense_elementwise_add with a per-row scale, over the same
// rows: Y[r, j] = X[r, j] * W[r] + D[r, j], D dense [rows, 128]

struct JaggedDenseDefs {
    Names &N = names();
    Tensor X{"X", {{N.row, N.rows}, {N.j, N.row_len(N.row)}}};
    Tensor W{"W", {{N.row, N.rows}}};
    Tensor D{"D", {{N.row, N.rows}, {N.j, 128}}};
    Func out{"Y", {{N.row, N.rows}, {N.j, N.row_len(N.row)}}};
    JaggedDenseDefs() {
        out.compute([&](Expr r, Expr j) { return X(r, j) * W(r) + D(r, j); });
    }
    std::vector<Tensor> inputs() const { return {X, W, D}; }
};

std::unique_ptr<Op> jagged_dense_op() {
    Names &N = names();
    constexpr int kRows = 4096, kWidth = 128;
    const std::vector<int32_t> len = jagged_row_lengths(kRows); // the jagged softmax's rows
    auto op = std::make_unique<Op>();
    op->name = "jagged_dense";
    op->shape.set(N.rows, kRows).set(N.row_len, len);
    const std::vector<int64_t> off = prefix(len, [](int64_t x) { return x; });
    op->description = std::to_string(kRows) + " rows of 0-100, " + std::to_string(off.back()) +
                      " elements: Y = X * W[row] + D, D dense [rows, 128]";
    JaggedDenseDefs plain;
    op->add_input(plain.X, {kRows, longest(len)}, 41, -4, 4);
    op->add_input(plain.W, {kRows}, 42, -1, 1);
    op->add_input(plain.D, {kRows, kWidth}, 43, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kRows, longest(len)};
    const float *x = op->in(0), *w = op->in(1), *d = op->in(2);
    auto offs = std::make_shared<std::vector<int64_t>>(off);
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for schedule(dynamic, 64)
        for (int r = 0; r < kRows; r++) {
            const int64_t lo = (*offs)[r], hi = (*offs)[r + 1];
            for (int64_t j = lo; j < hi; j++)
                y[j] = x[j] * w[r] + d[(int64_t)r * kWidth + (j - lo)];
        }
    });
    op->add_cora<JaggedDenseDefs>("default", [](JaggedDenseDefs &) {});
    // The default before it fused a ragged row with its rows only where the fusion maps cancel:
    // one loop over every element, reading W and D through maps with an entry per element.
    op->add_cora<JaggedDenseDefs>("fused_elements",
                                  [&](JaggedDenseDefs &dd) { dd.out.fuse(N.row, N.j, N.tok).parallel(N.tok); });
    return op;
}

// --- QK^T per sentence and head: Q, K packed tokens [b, s, h, 64]; S[b, h, i, j < len(b)]

struct QktDefs {
    Names &N = names();
    Tensor Q{"Q", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.h, N.H}, {N.d, kHeadDim}}};
    Tensor K{"K", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.h, N.H}, {N.d, kHeadDim}}};
    /** K transposed per sentence and head (only read by the recipe's schedule). */
    Func KT{"KT", {{N.b, N.B}, {N.h, N.H}, {N.d, kHeadDim}, {N.j, N.len(N.b)}}};
    Func out{"S", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}, {N.j, N.len(N.b)}}};
    explicit QktDefs(bool transposed = false) {
        const float scale = 0.125f; // 1 / sqrt(64)
        if (!transposed) {
            out.compute([&](Expr b, Expr h, Expr i, Expr j) {
                return sum(N.r, kHeadDim, Q(b, i, h, N.r) * K(b, j, h, N.r)) * scale;
            });
            return;
        }
        KT.compute([&](Expr b, Expr h, Expr d, Expr j) { return K(b, j, h, d); });
        out.compute([&](Expr b, Expr h, Expr i, Expr j) {
            return sum(N.r, kHeadDim, Q(b, i, h, N.r) * KT(b, h, N.r, j)) * scale;
        });
    }
    std::vector<Tensor> inputs() const { return {Q, K}; }
};
struct QktTransposedDefs : QktDefs {
    QktTransposedDefs() : QktDefs(true) {}
};

std::unique_ptr<Op> qkt_op() {
    Names &N = names();
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    const int64_t H = kAttentionHeads, HD = kAttentionHeads * kHeadDim;
    auto op = ragged_op("qkt", len, H);
    const int32_t L = longest(len);
    std::vector<int64_t> soff = prefix(len, [](int64_t x) { return kAttentionHeads * x * x; });
    std::vector<int64_t> toff = prefix(len, [](int64_t x) { return x; });
    op->description = std::to_string(kBatch) + " sentences, " + std::to_string(H) + " heads of 64, " +
                      std::to_string(soff.back()) + " scores";
    QktDefs plain;
    op->add_input(plain.Q, {kBatch, L, H, kHeadDim}, 41, -1, 1);
    op->add_input(plain.K, {kBatch, L, H, kHeadDim}, 42, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, H, L, L};
    const float *q = op->in(0), *k = op->in(1);
    auto lens = std::make_shared<std::vector<int32_t>>(len);
    auto so = std::make_shared<std::vector<int64_t>>(soff), to = std::make_shared<std::vector<int64_t>>(toff);
    op->add_naive("naive", [=](float *s) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 0; b < kBatch; b++) {
            const int64_t n = (*lens)[b];
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++) {
                        const float *qi = q + ((*to)[b] + i) * HD + h * kHeadDim;
                        const float *kj = k + ((*to)[b] + j) * HD + h * kHeadDim;
                        float acc = 0;
                        for (int64_t d = 0; d < kHeadDim; d++)
                            acc += qi[d] * kj[d];
                        s[(*so)[b] + (h * n + i) * n + j] = acc * 0.125f;
                    }
        }
    });
    op->add_cora<QktDefs>("old_nest", [&](QktDefs &d) { d.out.parallel(N.b); });
    op->add_cora<QktDefs>("default", [](QktDefs &) {});
    op->add_tuned<QktDefs>("tuned");
    {
        // The default without register tiles (CompileOptions::vector_bits < 0): what it was before
        // ragged rows were tiled.
        CompileOptions untiled;
        untiled.vector_bits = -1;
        op->add_cora<QktDefs>(
            "default_untiled", [](QktDefs &) {}, untiled);
    }
    // Step 1 (apps/transformer's attention): K transposed per head (KT, default schedule), then
    // per query row tiles of 16 keys accumulate over the 64 features in vector registers; rows
    // padded to 16 keys in storage and loop, so the tile needs no guard.
    op->add_cora<QktTransposedDefs>("r1_kt_key_tiles", [&](QktTransposedDefs &d) {
        d.KT.pad_storage(N.j, 16);
        d.out.pad_storage(N.j, 16)
            .pad_loop(N.j, 16)
            .split(N.j, N.jo, N.ji, 16)
            .reorder({N.b, N.h, N.i, N.jo, N.r, N.ji})
            .vectorize(N.ji)
            .cache_write(N.jo);
    });
    // Step 2: the same, KT copied by a loop nest over its own dims (parallel over sentences)
    // instead of its default (one fused loop over every element through per-element fusion
    // maps, since KT's padded storage does not cancel them).
    op->add_cora<QktTransposedDefs>("r2_kt_nest", [&](QktTransposedDefs &d) {
        d.KT.pad_storage(N.j, 16).parallel(N.b);
        d.out.pad_storage(N.j, 16)
            .pad_loop(N.j, 16)
            .split(N.j, N.jo, N.ji, 16)
            .reorder({N.b, N.h, N.i, N.jo, N.r, N.ji})
            .vectorize(N.ji)
            .cache_write(N.jo);
    });
    // Step 3: tiles of 4 query rows x 16 keys (8 independent vector accumulators instead of 2)
    // for the rows up to the last multiple of 4 (an operation split); the 0-3 rows left keep
    // step 1's tiles.
    op->add_cora<QktTransposedDefs>("r3_4x16_tiles", [&](QktTransposedDefs &d) {
        d.KT.pad_storage(N.j, 16).parallel(N.b);
        d.out.pad_storage(N.j, 16);
        Func rows_left = d.out.split_op(N.i, floor_mult(N.len(N.b.var()), 4));
        d.out.pad_loop(N.j, 16)
            .split(N.i, N.mo, N.mi, 4)
            .split(N.j, N.jo, N.ji, 16)
            .reorder({N.b, N.h, N.mo, N.jo, N.r, N.mi, N.ji})
            .unroll(N.mi)
            .vectorize(N.ji)
            .cache_write(N.jo);
        rows_left.pad_loop(N.j, 16)
            .split(N.j, N.jo, N.ji, 16)
            .reorder({N.b, N.h, N.i, N.jo, N.r, N.ji})
            .vectorize(N.ji)
            .cache_write(N.jo);
    });
    return op;
}

// --- AttnV: A[b, i, h, :] = sum_j P[b, h, i, j] V[b, j, h, :]

struct AttnVDefs {
    Names &N = names();
    Tensor P{"P", {{N.b, N.B}, {N.h, N.H}, {N.i, N.len(N.b)}, {N.j, N.len(N.b)}}};
    Tensor V{"V", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.h, N.H}, {N.d, kHeadDim}}};
    Func out{"A", {{N.b, N.B}, {N.i, N.len(N.b)}, {N.h, N.H}, {N.d, kHeadDim}}};
    AttnVDefs() {
        out.compute(
            [&](Expr b, Expr i, Expr h, Expr d) { return sum(N.r, N.len(b), P(b, h, i, N.r) * V(b, N.r, h, d)); });
    }
    std::vector<Tensor> inputs() const { return {P, V}; }
};

std::unique_ptr<Op> attnv_op() {
    Names &N = names();
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    const int64_t H = kAttentionHeads, HD = kAttentionHeads * kHeadDim;
    auto op = ragged_op("attnv", len, H);
    const int32_t L = longest(len);
    std::vector<int64_t> soff = prefix(len, [](int64_t x) { return kAttentionHeads * x * x; });
    std::vector<int64_t> toff = prefix(len, [](int64_t x) { return x; });
    op->description = std::to_string(kBatch) + " sentences, " + std::to_string(H) + " heads of 64, " +
                      std::to_string(toff.back()) + " tokens";
    AttnVDefs plain;
    op->add_input(plain.P, {kBatch, H, L, L}, 51, 0, 1.0f / 64);
    op->add_input(plain.V, {kBatch, L, H, kHeadDim}, 52, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, L, H, kHeadDim};
    const float *p = op->in(0), *v = op->in(1);
    auto lens = std::make_shared<std::vector<int32_t>>(len);
    auto so = std::make_shared<std::vector<int64_t>>(soff), to = std::make_shared<std::vector<int64_t>>(toff);
    op->add_naive("naive", [=](float *a) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 0; b < kBatch; b++) {
            const int64_t n = (*lens)[b];
            for (int64_t i = 0; i < n; i++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t d = 0; d < kHeadDim; d++) {
                        const float *prow = p + (*so)[b] + (h * n + i) * n;
                        float acc = 0;
                        for (int64_t j = 0; j < n; j++)
                            acc += prow[j] * v[((*to)[b] + j) * HD + h * kHeadDim + d];
                        a[((*to)[b] + i) * HD + h * kHeadDim + d] = acc;
                    }
        }
    });
    op->add_cora<AttnVDefs>("old_nest", [&](AttnVDefs &d) { d.out.parallel(N.b); });
    op->add_cora<AttnVDefs>("default", [](AttnVDefs &) {});
    op->add_tuned<AttnVDefs>("tuned");
    // Step 1 (apps/transformer's attention): one parallel loop over the tokens; per (token,
    // head) the 64 outputs are a register tile that accumulates over the keys.
    op->add_cora<AttnVDefs>("r1_feature_tile", [&](AttnVDefs &d) {
        d.out.fuse(N.b, N.i, N.tok).parallel(N.tok).reorder({N.tok, N.h, N.r, N.d}).vectorize(N.d).cache_write(N.h);
    });
    return op;
}

// --- token GEMM (a Linear layer): Y[b, s, o] = sum_r X[b, s, r] W[r, o], 512 x 512

struct GemmDefs {
    Names &N = names();
    Tensor X{"X", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.r, kFeatures}}};
    Tensor W{"W", {{N.r, kFeatures}, {N.o, kFeatures}}};
    Func out{"Y", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.o, kFeatures}}};
    GemmDefs() {
        out.compute([&](Expr b, Expr s, Expr o) { return sum(N.r, kFeatures, X(b, s, N.r) * W(N.r, o)); });
    }
    std::vector<Tensor> inputs() const { return {X, W}; }
};

/** The token GEMM ops' lengths: the first kGemmBatch sentences of the shared draw. */
std::vector<int32_t> gemm_lengths() {
    std::vector<int32_t> len = draw_lengths(kBatch, 2026);
    len.resize(kGemmBatch);
    return len;
}

/** The shared part of the token GEMM ops (gemm, linear): the sentences' tokens x 512 -> 512, X and
 * W (in the layout `Defs` declares) as inputs. */
template <typename Defs> std::unique_ptr<Op> token_gemm_op(const char *name, const std::string &layout) {
    const std::vector<int32_t> len = gemm_lengths();
    auto op = ragged_op(name, len);
    const int32_t L = longest(len);
    const int64_t T = tokens(len), F = kFeatures;
    op->description = std::to_string(kGemmBatch) + " sentences, " + std::to_string(T) + " tokens x " +
                      std::to_string(F) + " -> " + std::to_string(F) + " (" +
                      std::to_string(2.0 * T * F * F * 1e-9).substr(0, 4) + " GFLOP" + layout + ")";
    Defs plain;
    op->add_input(plain.X, {kGemmBatch, L, F}, 61, -1, 1);
    op->add_input(plain.W, {F, F}, 62, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kGemmBatch, L, F};
    return op;
}

/** The cora variants every token GEMM op has (after its naive loops, the reference): the old
 * nest, the default, the default without register tiles (CompileOptions::vector_bits < 0). */
template <typename Defs> void add_default_variants(Op &op) {
    Names &N = names();
    op.add_cora<Defs>("old_nest", [&](Defs &d) { d.out.parallel(N.b); });
    op.add_cora<Defs>("default", [](Defs &) {});
    op.add_tuned<Defs>("tuned");
    CompileOptions untiled;
    untiled.vector_bits = -1;
    op.add_cora<Defs>(
        "default_untiled", [](Defs &) {}, untiled);
}

/** Step 3 of the GEMM recipe: blocks of 64 tokens outside the column panels, 256-deep k-panels of
 * W packed once per panel (cache_read; `w_tile_order` gives the panel's order for W stored
 * [o, r]): apps/transformer's schedule_token_gemm with smaller blocks. */
template <typename Defs>
void add_blocks_packed_w(Op &op, const std::string &variant, const std::vector<Dim> &w_tile_order) {
    Names &N = names();
    const int64_t cols = tile_cols();
    op.add_cora<Defs>(variant, [&N, cols, w_tile_order](Defs &d) {
        d.X.fuse_storage(N.b, N.s, N.tok, 16);
        d.out.fuse(N.b, N.s, N.tok).pad_loop(N.tok, 16).fuse_storage(N.b, N.s, N.tok, 16);
        d.out.split(N.tok, N.tb, N.tt, 64)
            .split(N.tt, N.to, N.ti, 4)
            .split(N.o, N.oo, N.oi, cols)
            .split(N.r, N.ko, N.ki, 256)
            .reorder({N.tb, N.oo, N.ko, N.to, N.ki, N.ti, N.oi})
            .parallel(N.tb)
            .unroll(N.ti)
            .vectorize(N.oi)
            .cache_read(d.W, N.ko, w_tile_order)
            .cache_write(N.to);
    });
}

std::unique_ptr<Op> gemm_op() {
    Names &N = names();
    auto op = token_gemm_op<GemmDefs>("gemm", "");
    const int64_t T = tokens(gemm_lengths()), F = kFeatures;
    const float *x = op->in(0), *w = op->in(1);
    // The textbook loop (the definition's order), then the one with the reduction outside the
    // columns (contiguous rows of W; vectorized by the compiler).
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < F; o++) {
                float acc = 0;
                for (int64_t r = 0; r < F; r++)
                    acc += x[t * F + r] * w[r * F + o];
                y[t * F + o] = acc;
            }
    });
    op->add_naive("naive_ikj", [=](float *y) {
#pragma omp parallel for
        for (int64_t t = 0; t < T; t++) {
            float *yt = y + t * F;
            for (int64_t o = 0; o < F; o++)
                yt[o] = 0;
            for (int64_t r = 0; r < F; r++) {
                const float xv = x[t * F + r];
                for (int64_t o = 0; o < F; o++)
                    yt[o] += xv * w[r * F + o];
            }
        }
    });
    add_default_variants<GemmDefs>(*op);
    // Step 1: the reduction outside the columns (naive_ikj's order): per token, Y's row is
    // updated once per r with a contiguous row of W.
    op->add_cora<GemmDefs>("r1_reduction_outside", [&](GemmDefs &d) {
        d.out.fuse(N.b, N.s, N.tok)
            .parallel(N.tok)
            .split(N.o, N.oo, N.oi, 16)
            .reorder({N.tok, N.r, N.oo, N.oi})
            .vectorize(N.oi);
    });
    const int64_t cols = tile_cols();
    // Step 2 (instead of step 1): register tiles of 4 tokens x `cols` columns (tokens padded to
    // 16 in loop and storage: no guard), accumulated over all of r in registers.
    op->add_cora<GemmDefs>("r2_register_tile", [&, cols](GemmDefs &d) {
        d.X.fuse_storage(N.b, N.s, N.tok, 16);
        d.out.fuse(N.b, N.s, N.tok).pad_loop(N.tok, 16).fuse_storage(N.b, N.s, N.tok, 16);
        d.out.split(N.tok, N.to, N.ti, 4)
            .split(N.o, N.oo, N.oi, cols)
            .reorder({N.to, N.oo, N.r, N.ti, N.oi})
            .parallel(N.to)
            .unroll(N.ti)
            .vectorize(N.oi)
            .cache_write(N.oo);
    });
    add_blocks_packed_w<GemmDefs>(*op, "r3_blocks_packed_w", {});
    return op;
}

// --- linear: the same token GEMM with nn.Linear's weight layout, W[o, r] (PyTorch's weight as it is)

struct LinearDefs {
    Names &N = names();
    Tensor X{"X", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.r, kFeatures}}};
    Tensor W{"W", {{N.o, kFeatures}, {N.r, kFeatures}}};
    Func out{"Y", {{N.b, N.B}, {N.s, N.len(N.b)}, {N.o, kFeatures}}};
    LinearDefs() {
        out.compute([&](Expr b, Expr s, Expr o) { return sum(N.r, kFeatures, X(b, s, N.r) * W(o, N.r)); });
    }
    std::vector<Tensor> inputs() const { return {X, W}; }
};

std::unique_ptr<Op> linear_op() {
    Names &N = names();
    auto op = token_gemm_op<LinearDefs>("linear", ", W [out, in] as nn.Linear stores it");
    const int64_t T = tokens(gemm_lengths()), F = kFeatures;
    const float *x = op->in(0), *w = op->in(1);
    // The loop a user writes for this layout: one dot product per output (contiguous along r in
    // both operands; vectorized by the compiler).
    op->add_naive("naive", [=](float *y) {
#pragma omp parallel for
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < F; o++) {
                float acc = 0;
                for (int64_t r = 0; r < F; r++)
                    acc += x[t * F + r] * w[o * F + r];
                y[t * F + o] = acc;
            }
    });
    add_default_variants<LinearDefs>(*op);
    // gemm's step 3 with W's 256-deep panels copied transposed (cache_read's tile order {r, o}).
    add_blocks_packed_w<LinearDefs>(*op, "r3_blocks_packed_wt", {N.r, N.o});
    return op;
}

// --- vgemm: C[b] = A[b] W[b], M, N, K per item (apps/vgemm)

struct VgemmDefs {
    Names &N = names();
    Tensor A{"A", {{N.b, N.B}, {N.m, N.M(N.b)}, {N.r, N.K(N.b)}}};
    Tensor W{"W", {{N.b, N.B}, {N.r, N.K(N.b)}, {N.n, N.N(N.b)}}};
    Func out{"C", {{N.b, N.B}, {N.m, N.M(N.b)}, {N.n, N.N(N.b)}}};
    VgemmDefs() {
        out.compute([&](Expr b, Expr m, Expr n) { return sum(N.r, N.K(b), A(b, m, N.r) * W(b, N.r, n)); });
    }
    std::vector<Tensor> inputs() const { return {A, W}; }
};
/** apps/vgemm's definition: the loop domain lists n before m (so that an item's column panels
 * can be fused with the batch loop); the storage stays row-major (reorder_storage). */
struct VgemmPanelDefs {
    Names &N = names();
    Tensor A{"A", {{N.b, N.B}, {N.m, N.M(N.b)}, {N.r, N.K(N.b)}}};
    Tensor W{"W", {{N.b, N.B}, {N.r, N.K(N.b)}, {N.n, N.N(N.b)}}};
    Func out{"C", {{N.b, N.B}, {N.n, N.N(N.b)}, {N.m, N.M(N.b)}}};
    VgemmPanelDefs() {
        out.compute([&](Expr b, Expr n, Expr m) { return sum(N.r, N.K(b), A(b, m, N.r) * W(b, N.r, n)); });
        out.reorder_storage({N.b, N.m, N.n});
    }
    std::vector<Tensor> inputs() const { return {A, W}; }
    /** The output padded as [b, m, n] (to_padded follows the domain's order, [b, n, m]). */
    std::vector<float> padded_output(const Buffer &c, const RaggedShape &shape,
                                     const std::vector<int64_t> &dims) const {
        std::vector<float> bnm = c.to_padded(out, shape, {dims[0], dims[2], dims[1]}), bmn(bnm.size());
        for (int64_t b = 0; b < dims[0]; b++)
            for (int64_t m = 0; m < dims[1]; m++)
                for (int64_t n = 0; n < dims[2]; n++)
                    bmn[(b * dims[1] + m) * dims[2] + n] = bnm[(b * dims[2] + n) * dims[1] + m];
        return bmn;
    }
};

std::unique_ptr<Op> vgemm_op() {
    Names &N = names();
    auto op = std::make_unique<Op>();
    op->name = "vgemm";
    std::vector<int32_t> Ms = draw_lengths(kBatch, 2026), Ns = draw_lengths(kBatch, 2027),
                         Ks = draw_lengths(kBatch, 2028);
    op->shape.set(N.B, kBatch).set(N.M, Ms).set(N.N, Ns).set(N.K, Ks);
    auto mx = [](const std::vector<int32_t> &v) { return (int64_t)*std::max_element(v.begin(), v.end()); };
    std::vector<int64_t> ao{0}, wo{0}, co{0};
    double flop = 0;
    for (int b = 0; b < kBatch; b++) {
        ao.push_back(ao.back() + (int64_t)Ms[b] * Ks[b]);
        wo.push_back(wo.back() + (int64_t)Ks[b] * Ns[b]);
        co.push_back(co.back() + (int64_t)Ms[b] * Ns[b]);
        flop += 2.0 * Ms[b] * Ns[b] * Ks[b];
    }
    op->description = std::to_string(kBatch) + " GEMMs, M, N, K in [16, 256] (" +
                      std::to_string(flop * 1e-9).substr(0, 4) + " GFLOP)";
    VgemmDefs plain;
    op->add_input(plain.A, {kBatch, mx(Ms), mx(Ks)}, 71, -1, 1);
    op->add_input(plain.W, {kBatch, mx(Ks), mx(Ns)}, 72, -1, 1);
    op->out_plain = plain.out;
    op->out_dims = {kBatch, mx(Ms), mx(Ns)};
    const float *a = op->in(0), *w = op->in(1);
    struct Sizes {
        std::vector<int32_t> m, n, k;
        std::vector<int64_t> ao, wo, co;
    };
    auto sz = std::make_shared<Sizes>(Sizes{Ms, Ns, Ks, ao, wo, co});
    op->add_naive("naive", [=](float *c) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 0; b < kBatch; b++) {
            const int64_t M = sz->m[b], Nn = sz->n[b], K = sz->k[b];
            const float *ab = a + sz->ao[b], *wb = w + sz->wo[b];
            float *cb = c + sz->co[b];
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < Nn; j++) {
                    float acc = 0;
                    for (int64_t r = 0; r < K; r++)
                        acc += ab[i * K + r] * wb[r * Nn + j];
                    cb[i * Nn + j] = acc;
                }
        }
    });
    op->add_naive("naive_ikj", [=](float *c) {
#pragma omp parallel for schedule(dynamic)
        for (int b = 0; b < kBatch; b++) {
            const int64_t M = sz->m[b], Nn = sz->n[b], K = sz->k[b];
            const float *ab = a + sz->ao[b], *wb = w + sz->wo[b];
            float *cb = c + sz->co[b];
            for (int64_t i = 0; i < M; i++) {
                for (int64_t j = 0; j < Nn; j++)
                    cb[i * Nn + j] = 0;
                for (int64_t r = 0; r < K; r++) {
                    const float av = ab[i * K + r];
                    for (int64_t j = 0; j < Nn; j++)
                        cb[i * Nn + j] += av * wb[r * Nn + j];
                }
            }
        }
    });
    op->add_cora<VgemmDefs>("old_nest", [&](VgemmDefs &d) { d.out.parallel(N.b); });
    op->add_cora<VgemmDefs>("default", [](VgemmDefs &) {});
    op->add_tuned<VgemmDefs>("tuned");
    {
        // The default without register tiles (CompileOptions::vector_bits < 0): what it was before
        // ragged rows were tiled.
        CompileOptions untiled;
        untiled.vector_bits = -1;
        op->add_cora<VgemmDefs>(
            "default_untiled", [](VgemmDefs &) {}, untiled);
    }
    // Step 1: the reduction outside the columns (naive_ikj's order), one parallel loop over the
    // rows of every item.
    op->add_cora<VgemmDefs>("r1_reduction_outside", [&](VgemmDefs &d) {
        d.out.fuse(N.b, N.m, N.row).parallel(N.row).reorder({N.row, N.r, N.n});
    });
    // Step 2: apps/vgemm's schedule (4 x `cols` register tiles over packed 256-deep panels of W,
    // work units = (item, column panel) pairs, op splits for the edges).
    const int64_t cols = tile_cols();
    op->add_cora<VgemmPanelDefs>("r2_vgemm_tiles", [&, cols](VgemmPanelDefs &d) {
        const int64_t kRows = 4, kCols = cols, kNarrow = std::max<int64_t>(cols / 4, 1), kPanel = 256;
        Expr rows = N.M(N.b.var()), cs = N.N(N.b.var());
        Func rows_tail = d.out.split_op(N.m, floor_mult(rows, kRows));
        Func cols_tail = d.out.split_op(N.n, floor_mult(cs, kCols));
        Func cols_last = cols_tail.split_op(N.n, floor_mult(cs - floor_mult(cs, kCols), kNarrow));
        d.out.split(N.n, N.no, N.ni, kCols)
            .fuse(N.b, N.no, N.panel)
            .split(N.m, N.mo, N.mi, kRows)
            .split(N.r, N.ko, N.ki, kPanel)
            .reorder({N.panel, N.ko, N.mo, N.ki, N.mi, N.ni})
            .parallel(N.panel)
            .unroll(N.mi)
            .vectorize(N.ni)
            .cache_read(d.W, N.ko)
            .cache_write(N.mo);
        rows_tail.split(N.n, N.no, N.ni, kCols).reorder({N.b, N.m, N.no, N.r, N.ni}).vectorize(N.ni).cache_write(N.no);
        cols_tail.split(N.m, N.mo, N.mi, kRows)
            .split(N.n, N.no, N.ni, kNarrow)
            .reorder({N.b, N.mo, N.no, N.r, N.mi, N.ni})
            .unroll(N.mi)
            .vectorize(N.ni)
            .cache_write(N.no);
        cols_last.reorder({N.b, N.m, N.r, N.n});
    });
    return op;
}

// ---------------------------------------------------------------------------------------------

std::vector<std::unique_ptr<Op>> &ops() {
    static std::vector<std::unique_ptr<Op>> v;
    return v;
}

/** Median real time (ms) per "op/variant", from the aggregates (or the single run). */
class TableReporter : public benchmark::ConsoleReporter {
public:
    std::map<std::string, double> ms;
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const Run &r : runs) {
            if (r.error_occurred) continue;
            const double t = r.GetAdjustedRealTime(); // in the benchmark's unit: ms
            std::string name = r.run_name.str();
            name = name.substr(0, name.find("/real_time"));
            if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median") ms[name] = t;
            if (r.run_type == Run::RT_Iteration && r.repetitions <= 1) ms[name] = t;
        }
        ConsoleReporter::ReportRuns(runs);
    }
};

void write_markdown(const std::string &file, const TableReporter &rep) {
    FILE *f = std::fopen(file.c_str(), "a");
    if (!f) {
        std::fprintf(stderr, "cannot write %s\n", file.c_str());
        return;
    }
    for (auto &op : ops()) {
        auto base = rep.ms.find(op->name + "/naive");
        if (base == rep.ms.end()) continue;
        std::fprintf(f, "**%s** (%s)\n\n| variant | time (ms) | vs naive | max rel. error |\n|---|---:|---:|---:|\n",
                     op->name.c_str(), op->description.c_str());
        for (auto &v : op->variants) {
            auto it = rep.ms.find(op->name + "/" + v->name);
            if (!v->error.empty()) {
                std::fprintf(f, "| %s | error: %s | | |\n", v->name.c_str(), v->error.c_str());
                continue;
            }
            if (it == rep.ms.end()) continue;
            std::fprintf(f, "| %s | %.3f | %.2fx | %.1e |\n", v->name.c_str(), it->second, base->second / it->second,
                         v->err);
        }
        std::fprintf(f, "\n");
    }
    std::fclose(f);
}

} // namespace

int main(int argc, char **argv) {
    std::string markdown, dump, only;
    bool list = false;
    std::vector<char *> rest;
    for (int a = 0; a < argc; a++) {
        if (std::strncmp(argv[a], "--markdown=", 11) == 0)
            markdown = argv[a] + 11;
        else if (std::strncmp(argv[a], "--dump=", 7) == 0)
            dump = argv[a] + 7;
        else if (std::strncmp(argv[a], "--ops=", 6) == 0)
            only = std::string(",") + (argv[a] + 6) + ",";
        else if (std::strcmp(argv[a], "--list") == 0)
            list = true;
        else
            rest.push_back(argv[a]);
    }
    int rest_argc = (int)rest.size();
    benchmark::Initialize(&rest_argc, rest.data());
    if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;
    try {
        const std::vector<std::pair<const char *, std::unique_ptr<Op> (*)()>> all = {
            {"tokenwise", tokenwise_op},
            {"layernorm", layernorm_op},
            {"softmax", softmax_op},
            {"jagged_softmax", jagged_softmax_op},
            {"jagged_dense", jagged_dense_op},
            {"qkt", qkt_op},
            {"attnv", attnv_op},
            {"gemm", gemm_op},
            {"linear", linear_op},
            {"vgemm", vgemm_op}};
        for (auto &[op_name, make] : all)
            if (only.empty() || only.find(std::string(",") + op_name + ",") != std::string::npos)
                ops().push_back(make());
    } catch (const Error &e) {
        std::fprintf(stderr, "cora: %s\n", e.what());
        return 1;
    }
    bool failed = false;
    for (auto &op : ops())
        for (auto &v : op->variants) {
            const std::string name = op->name + "/" + v->name;
            if (list) std::printf("%s\n", name.c_str());
            if (name == dump) {
                std::printf("== %s: lowered IR\n%s\n== generated source\n%s\n", name.c_str(), v->lowered.c_str(),
                            v->src.c_str());
                return 0;
            }
            std::printf("check %-32s %s\n", name.c_str(),
                        v->error.empty() ? ("max relative error " + std::to_string(v->err)).c_str()
                                         : ("ERROR " + v->error).c_str());
            failed = failed || !v->error.empty();
            Variant *vp = v.get();
            benchmark::RegisterBenchmark(name.c_str(),
                                         [vp](benchmark::State &s) {
                                             if (!vp->error.empty()) {
                                                 s.SkipWithError(vp->error.c_str());
                                                 return;
                                             }
                                             for (auto _ : s)
                                                 vp->run();
                                         })
                ->Setup([](const benchmark::State &) { apps::let_thread_pools_sleep(); })
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
        }
    if (list || !dump.empty()) return dump.empty() ? 0 : 2;
    TableReporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    if (!markdown.empty()) write_markdown(markdown, rep);
    benchmark::Shutdown();
    return failed ? 1 : 0;
}
