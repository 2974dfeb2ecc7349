// pruned_ff: a transformer feed-forward block with block-pruned weights over a ragged batch of
// sentences, Y = W2 act(W1 X + b1) + b2, as one cora pipeline of two block-sparse layers
// (bsr_linear.h) over packed tokens — the work follows the present blocks and the real tokens,
// so the two savings multiply. Sparsity propagation (SparsityGraph) first drops the blocks of W2
// that read features FF1 always leaves zero (bias-free FF1: the block rows pruned whole) and the
// blocks of W1 whose outputs W2 never reads. Checked against a dense double-precision reference
// of the same pruned weights, and timed against dense cblas_sgemm on the packed tokens and on the
// batch padded to its longest sentence. --device runs the layers' GPU schedule (BsrTiling::for_gpu)
// on a CUDA GPU, emulated, or as CUDA source on CPU threads.
#include <cblas.h>
#include <omp.h>

#include <cora/SparsityPropagation.h>

#include "bsr_linear.h"
#include "bsr_weights_file.h"
#include "common/cli.h"
#include "common/data_files.h"
#include "common/device.h"
#include "common/error_check.h"
#include "common/length_profile.h"
#include "common/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

namespace {

using namespace cora;
using namespace cora::apps;

constexpr int64_t kMaxLen = 4096;

/** Y [tokens, out] = act(X [tokens, in] W^T + b) with OpenBLAS (b may be empty). */
void dense_layer(const float *x, int64_t tokens, const std::vector<float> &w, int64_t out, int64_t in,
                 const std::vector<float> &b, bool relu, float *y) {
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t n = 0; n < out; n++)
            y[t * out + n] = b.empty() ? 0.0f : b[(size_t)n];
    if (tokens > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)tokens, (int)out, (int)in, 1.0f, x, (int)in, w.data(),
                    (int)in, 1.0f, y, (int)out);
    if (relu)
        for (int64_t i = 0; i < tokens * out; i++)
            y[i] = std::max(y[i], 0.0f);
}

int run(int argc, char **argv) {
    int64_t hidden = 768, ff = 3072, block = 32, density = 25, empty_rows = 25, batch = 32, runs = 3;
    std::string lengths_file, weights_file, input_file, dump_file, device_name = "cpu";
    bool no_bias = false;
    CommandLine cli("pruned_ff", "A feed-forward block with block-pruned weights over a ragged batch: cora's "
                                 "block-sparse kernels against dense sgemm on packed and on padded tokens.");
    cli.integer("--hidden", &hidden, 1, 8192, "model width (a multiple of --block)")
        .integer("--ff", &ff, 1, 32768, "feed-forward width (a multiple of --block)")
        .integer("--block", &block, 1, 256, "square block size of the pruned weights")
        .integer("--density", &density, 1, 100, "percent of W1's and W2's blocks kept")
        .integer("--empty-rows", &empty_rows, 0, 100,
                 "percent of W1's block rows (FF1's output features) pruned whole; with --no-bias, "
                 "propagation then drops W2's blocks reading them")
        .toggle("--no-bias", &no_bias, "bias-free layers (zeros propagate through FF1)")
        .integer("--batch", &batch, 1, 4096, "sentences in the batch")
        .text("--lengths", &lengths_file, "FILE", "sequence lengths (default: built-in MNLI profile)")
        .integer("--runs", &runs, 1, 1000, "timed runs (the best is reported)")
        .text("--weights", &weights_file, "FILE",
              "W1, W2 (BSR) and biases from a file written by export_bsr.py (instead of random ones)")
        .text("--input", &input_file, "FILE", "the packed tokens, float32 [tokens, hidden] (default: random)")
        .text("--dump", &dump_file, "FILE", "write the output, float32 [tokens, hidden]")
        .text("--device", &device_name, "cpu|cuda|cuda-emulated|cuda-cpu-threads",
              "where cora runs: the CPU, a CUDA GPU, the GPU schedule emulated on the CPU, or its CUDA "
              "source on CPU threads (the dense baselines run on the CPU either way)");
    if (!cli.parse(argc, argv)) return 0;
    const Backend &device = parse_device(device_name);
    const bool on_gpu = device.runs_gpu_schedules();
    PrunedFFWeights loaded;
    if (!weights_file.empty()) {
        for (const char *flag : {"--hidden", "--ff", "--block", "--density", "--empty-rows", "--no-bias"})
            if (cli.given(flag))
                throw UsageError(std::string(flag) + " does not apply with --weights (the file sets the model)");
        loaded = read_bsr_weights(weights_file);
        hidden = loaded.hidden, ff = loaded.ff, block = loaded.block, no_bias = !loaded.has_bias;
    }
    if (hidden % block != 0 || ff % block != 0)
        throw UsageError("--block " + std::to_string(block) + " must divide --hidden " + std::to_string(hidden) +
                         " and --ff " + std::to_string(ff));
    std::vector<int32_t> lengths =
        lengths_file.empty() ? builtin_lengths(batch) : read_length_file(lengths_file, batch, 0, (int32_t)kMaxLen);
    int64_t tokens = 0, longest = 0;
    for (int32_t l : lengths) {
        tokens += l;
        longest = std::max<int64_t>(longest, l);
    }

    // Weights: random values, blocks kept at random at --density, W1's empty block rows on top.
    std::mt19937 rng(2026);
    std::uniform_real_distribution<float> val(-0.1f, 0.1f), coin(0.0f, 1.0f);
    auto pruned = [&](int64_t rows, int64_t cols, double row_empty) {
        std::vector<float> dense((size_t)(rows * cols));
        for (float &v : dense)
            v = val(rng);
        std::vector<uint8_t> mask((size_t)(rows / block * (cols / block)));
        for (int64_t rb = 0; rb < rows / block; rb++) {
            bool empty = coin(rng) < row_empty;
            for (int64_t cb = 0; cb < cols / block; cb++)
                mask[(size_t)(rb * (cols / block) + cb)] = !empty && coin(rng) * 100 < density;
        }
        return BsrData::from_block_mask(dense, rows, cols, block, block, mask);
    };
    BsrData w1 = weights_file.empty() ? pruned(ff, hidden, empty_rows / 100.0) : loaded.w1;
    BsrData w2 = weights_file.empty() ? pruned(hidden, ff, 0.0) : loaded.w2;
    std::vector<float> b1 = loaded.b1, b2 = loaded.b2;
    if (!no_bias && weights_file.empty()) {
        b1.resize((size_t)ff);
        b2.resize((size_t)hidden);
        for (float &v : b1)
            v = val(rng);
        for (float &v : b2)
            v = val(rng);
    }
    SparsityGraph graph;
    int h = graph.linear("FF1", graph.input("X", hidden), w1, !no_bias, Activation::ReLU);
    int y = graph.linear("FF2", h, w2, !no_bias, Activation::None);
    graph.output(y);
    graph.propagate();
    BsrData p1 = graph.pruned_weight(h), p2 = graph.pruned_weight(y);

    // The pipeline: both layers over packed tokens, one kernel call.
    TokenDims D(kMaxLen);
    Dim o("o");
    Tensor B1("b1", {{o, ff}}), B2("b2", {{o, hidden}});
    BsrMatrix W1("W1", ff, hidden, block, block, BlockOrder::ColumnMajor),
        W2("W2", hidden, ff, block, block, BlockOrder::ColumnMajor);
    // One chunk size for both layers: X and H share the token storage's bulk padding.
    BsrTiling tiling = on_gpu ? BsrTiling::for_gpu() : BsrTiling::for_matrix(W1);
    Tensor X = D.tokens("X", hidden, tiling.chunk_tokens);
    BsrLinear l1(
        "H", D, W1, [&](Expr b, Expr s, Expr k) { return X(b, s, k); },
        no_bias ? std::nullopt : std::optional<Tensor>(B1), true, tiling);
    BsrLinear l2(
        "Y", D, W2, [&](Expr b, Expr s, Expr k) { return l1.Y(b, s, k); },
        no_bias ? std::nullopt : std::optional<Tensor>(B2), false, tiling);
    Pipeline pipeline({l2.Y}, "pruned_ff");
    Kernel kernel = pipeline.compile(device.name());

    RaggedShape shape;
    shape.set(D.B, batch).set(D.len, lengths);
    p1.bind(shape, W1);
    p2.bind(shape, W2);
    Buffer x = Buffer::alloc(X, shape), out = Buffer::alloc(l2.Y, shape);
    if (input_file.empty()) {
        for (int64_t i = 0; i < tokens * hidden; i++)
            x.at(i) = val(rng) * 10.0f;
    } else {
        std::ifstream in(input_file, std::ios::binary | std::ios::ate);
        if (!in) throw UsageError("cannot open input file '" + input_file + "'");
        if ((int64_t)in.tellg() != tokens * hidden * 4)
            throw UsageError("input file '" + input_file + "' has " + std::to_string((int64_t)in.tellg()) +
                             " bytes, expected tokens x hidden x 4 = " + std::to_string(tokens * hidden * 4));
        in.seekg(0);
        in.read(reinterpret_cast<char *>(x.data<float>()), (std::streamsize)(tokens * hidden * 4));
    }
    Buffer c1 = p1.col_buffer(W1, shape), v1 = p1.values_buffer(W1, shape);
    Buffer c2 = p2.col_buffer(W2, shape), v2 = p2.values_buffer(W2, shape);
    std::vector<Binding> bindings = {{X, x}, {W1.col, c1}, {W1.values, v1}, {W2.col, c2}, {W2.values, v2}, {l2.Y, out}};
    Buffer bb1, bb2;
    if (!no_bias) {
        bb1 = Buffer::view(B1, shape, b1.data(), ff);
        bb2 = Buffer::view(B2, shape, b2.data(), hidden);
        bindings.push_back({B1, bb1});
        bindings.push_back({B2, bb2});
    }
    auto run_cora = [&] { kernel.run(shape, bindings); };

    // Dense baselines: the same (unpropagated) weights with their zero blocks materialised.
    std::vector<float> d1 = w1.to_dense(), d2 = w2.to_dense();
    std::vector<float> hidden_act((size_t)(tokens * ff)), y_dense((size_t)(tokens * hidden));
    auto run_dense = [&] {
        dense_layer(x.data<float>(), tokens, d1, ff, hidden, b1, true, hidden_act.data());
        dense_layer(hidden_act.data(), tokens, d2, hidden, ff, b2, false, y_dense.data());
    };
    const int64_t padded_tokens = longest * batch;
    std::vector<float> x_pad((size_t)(padded_tokens * hidden), 0.0f), h_pad((size_t)(padded_tokens * ff)),
        y_pad((size_t)(padded_tokens * hidden));
    auto run_padded = [&] {
        dense_layer(x_pad.data(), padded_tokens, d1, ff, hidden, b1, true, h_pad.data());
        dense_layer(h_pad.data(), padded_tokens, d2, hidden, ff, b2, false, y_pad.data());
    };

    // Check: cora (propagated weights) against the dense product of the original weights.
    run_cora();
    run_dense();
    apps::ErrorCheck check;
    for (int64_t i = 0; i < tokens * hidden; i++)
        check.add(out.at(i), y_dense[(size_t)i]);
    bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0));
    if (!dump_file.empty()) {
        std::ofstream o(dump_file, std::ios::binary);
        o.write(reinterpret_cast<const char *>(out.data<float>()), (std::streamsize)(tokens * hidden * 4));
        if (!o) throw UsageError("cannot write output file '" + dump_file + "'");
    }
    // On a GPU backend: the median of `runs` calls with the data on the device (Kernel::time_ms).
    double cora_s = on_gpu ? kernel.time_ms(shape, bindings, (int)runs) * 1e-3 : best_seconds(runs, run_cora),
           dense_s = best_seconds(runs, run_dense), padded_s = best_seconds(runs, run_padded);
    std::printf("pruned_ff: hidden %lld, ff %lld, %lldx%lld blocks, %s, weights %s; %lld sentences (%s), %lld tokens, "
                "padded/useful %.2f; %d threads\n",
                (long long)hidden, (long long)ff, (long long)block, (long long)block,
                no_bias ? "bias-free" : "with biases", weights_file.empty() ? "random" : weights_file.c_str(),
                (long long)batch, lengths_file.empty() ? "built-in MNLI profile" : lengths_file.c_str(),
                (long long)tokens, tokens > 0 ? (double)padded_tokens / (double)tokens : 1.0, omp_get_max_threads());
    std::printf("blocks kept: W1 %.1f%% -> %.1f%%, W2 %.1f%% -> %.1f%% after propagation\n", w1.density() * 100,
                p1.density() * 100, w2.density() * 100, p2.density() * 100);
    std::printf("check vs dense sgemm of the unpropagated weights: %s (max abs error %.3g%s)\n", ok ? "PASS" : "FAIL",
                check.max_abs(), check.non_finite_note().c_str());
    if (on_gpu) {
        // Against the CPU's sgemm, a GPU time says little: the dense GPU baseline (cuBLAS) is
        // cora_gpu_bench's.
        std::printf("cora block-sparse on '%s' (%s), packed tokens  %9.2f ms\n", device.name().c_str(),
                    device.description().c_str(), cora_s * 1e3);
        std::printf("dense sgemm on the CPU: packed tokens %.2f ms, padded batch %.2f ms\n", dense_s * 1e3,
                    padded_s * 1e3);
        return ok ? 0 : 1;
    }
    std::printf("cora block-sparse, packed tokens  %9.2f ms\n", cora_s * 1e3);
    std::printf("dense sgemm, packed tokens        %9.2f ms  (cora %.2fx faster)\n", dense_s * 1e3, dense_s / cora_s);
    std::printf("dense sgemm, padded batch         %9.2f ms  (cora %.2fx faster)\n", padded_s * 1e3, padded_s / cora_s);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return run_app("pruned_ff", [&] { return run(argc, argv); });
}
