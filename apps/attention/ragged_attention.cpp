// Ragged attention scores + softmax: cora on the ragged batch vs the same kernel on the
// padded batch, with a correctness check against a plain masked C++ loop.
#include <cora/cora.h>

#include "common/cli.h"
#include "common/data_files.h"
#include "common/device.h"
#include "common/error_check.h"
#include "common/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace cora;
using cora::apps::best_seconds;

namespace {

// Quantiles (every 5%) of MNLI's training-set token counts, from 0% to 100%. Used when no
// lengths file is available; lengths are drawn by interpolating between them.
const int kMnliQuantiles[21] = {5, 14, 18, 21, 24, 27, 29, 31, 34, 36, 39, 41, 44, 47, 50, 54, 58, 64, 74, 89, 128};

std::vector<int32_t> builtin_lengths(int batch) {
    std::mt19937 rng(2022);
    std::uniform_real_distribution<double> u(0.0, 20.0);
    std::vector<int32_t> l(batch);
    for (auto &x : l) {
        double q = u(rng);
        int k = std::min(19, (int)q);
        x = (int32_t)std::lround(kMnliQuantiles[k] + (q - k) * (kMnliQuantiles[k + 1] - kMnliQuantiles[k]));
    }
    return l;
}

int run(int argc, char **argv) {
    const std::string default_lengths = "../shared/datasets/mnli_train_lengths.txt";
    std::string lengths_file = default_lengths;
    int64_t batch = 32, heads = 8, runs = 5;
    std::string device_name = "cpu";
    const int64_t D = 64, MaxLen = 512;
    apps::CommandLine cli("ragged_attention", "Ragged attention scores + softmax on real sequence lengths, checked "
                                              "against a masked padded reference and timed against padding.");
    cli.text("--lengths", &lengths_file, "FILE",
             "sequence lengths, white-space separated (when the default file is absent: a built-in MNLI profile)")
        .integer("--batch", &batch, 1, 4096, "batch size")
        .integer("--heads", &heads, 1, 64, "attention heads")
        .integer("--runs", &runs, 1, 1000, "timed runs (the best is reported)")
        .text("--device", &device_name, "cpu|cuda|cuda-emulated|cuda-cpu-threads",
              "where cora runs: the CPU, a CUDA GPU, the GPU schedule emulated on the CPU, or its CUDA "
              "source on CPU threads");
    if (!cli.parse(argc, argv)) return 0;
    const Backend &device = apps::parse_device(device_name);
    std::vector<int32_t> lengths;
    std::string source = lengths_file;
    if (cli.given("--lengths") || std::ifstream(lengths_file)) {
        lengths = apps::read_length_file(lengths_file, batch, 0, (int32_t)MaxLen);
    } else {
        lengths = builtin_lengths((int)batch);
        source = "built-in MNLI length profile";
    }
    const int32_t max_len = *std::max_element(lengths.begin(), lengths.end());

    // --- the computation, written once over named dims ---
    Dim b("batch"), q("q"), h("heads"), kv("kv"), d("d"), r("r");
    Param B("B", 1, 4096), H("H", 1, 64);
    LengthArray len("len", B, 0, MaxLen);
    Tensor Q("Q", {{b, B}, {q, len(b)}, {h, H}, {d, D}});
    Tensor K("K", {{b, B}, {kv, len(b)}, {h, H}, {d, D}});
    Shape scores{{b, B}, {q, len(b)}, {h, H}, {kv, len(b)}};
    Shape rows{{b, B}, {q, len(b)}, {h, H}};
    const float scale = 1.0f / std::sqrt((float)D);
    Func S("S", scores), Mx("Mx", rows), E("E", scores), Sum("Sum", rows), P("P", scores);
    S.compute([&](Expr b_, Expr i, Expr h_, Expr j) { return sum(r, D, Q(b_, i, h_, r) * K(b_, j, h_, r)) * scale; });
    Mx.compute([&](Expr b_, Expr i, Expr h_) { return maximum(r, len(b_), S(b_, i, h_, r)); });
    E.compute([&](Expr b_, Expr i, Expr h_, Expr j) { return exp(S(b_, i, h_, j) - Mx(b_, i, h_)); });
    Sum.compute([&](Expr b_, Expr i, Expr h_) { return sum(r, len(b_), E(b_, i, h_, r)); });
    P.compute([&](Expr b_, Expr i, Expr h_, Expr j) { return E(b_, i, h_, j) / Sum(b_, i, h_); });
    Pipeline pipeline({P}, "attention_softmax");
    if (device.runs_gpu_schedules()) {
        // GPU: a block per (head, query row, sentence) — the row axis ragged, launched at the
        // longest sentence. The scores, exponentials and result: a thread per key. The row max and
        // sum: one warp per row, each lane reducing every 32nd key, the lanes combined with warp
        // shuffles (lower/ThreadReductions.cpp, WarpReductions.cpp).
        for (Func *f : {&S, &E, &P})
            f->reorder({b, q, h, kv}).gpu_blocks(h, q, b).gpu_threads(kv);
        Dim ro("ro"), ri("ri");
        for (Func *f : {&Mx, &Sum})
            f->split(r, ro, ri, 32).reorder({b, q, h, ri, ro}).gpu_blocks(h, q, b).gpu_threads(ri);
    }
    Kernel kernel = pipeline.compile(device.name());
    auto run_kernel = [&](const RaggedShape &s, const std::vector<Binding> &bindings) { kernel.run(s, bindings); };
    // Seconds per run: for a GPU schedule the median (on a GPU with the data on the device), for
    // the CPU's the best wall time.
    auto time_kernel = [&](const RaggedShape &s, const std::vector<Binding> &bindings) {
        if (device.runs_gpu_schedules()) return kernel.time_ms(s, bindings, (int)runs) * 1e-3;
        return best_seconds(runs, [&] { kernel.run(s, bindings); });
    };

    // --- ragged run and correctness check against padded data with masks ---
    RaggedShape ragged;
    ragged.set(B, batch).set(H, heads).set(len, lengths);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> qpad((size_t)batch * max_len * heads * D), kpad(qpad.size());
    for (auto &x : qpad)
        x = nd(rng);
    for (auto &x : kpad)
        x = nd(rng);
    std::vector<int64_t> in_dims{batch, max_len, heads, D}, out_dims{batch, max_len, heads, max_len};
    Buffer qb = Buffer::from_padded(Q, ragged, qpad, in_dims), kb = Buffer::from_padded(K, ragged, kpad, in_dims);
    Buffer pb = Buffer::alloc(P, ragged);
    run_kernel(ragged, {{Q, qb}, {K, kb}, {P, pb}});
    std::vector<float> got = pb.to_padded(P, ragged, out_dims);

    apps::ErrorCheck check;
    std::vector<double> row(max_len);
    for (int bb = 0; bb < batch; bb++)
        for (int i = 0; i < lengths[bb]; i++)
            for (int hh = 0; hh < heads; hh++) {
                double mx = -INFINITY, total = 0;
                for (int j = 0; j < lengths[bb]; j++) { // mask: only j < len(b)
                    double acc = 0;
                    for (int dd = 0; dd < D; dd++)
                        acc += (double)qpad[((size_t)(bb * max_len + i) * heads + hh) * D + dd] *
                               kpad[((size_t)(bb * max_len + j) * heads + hh) * D + dd];
                    row[j] = acc * scale;
                    mx = std::max(mx, row[j]);
                }
                for (int j = 0; j < lengths[bb]; j++)
                    total += std::exp(row[j] - mx);
                for (int j = 0; j < lengths[bb]; j++) {
                    double want = std::exp(row[j] - mx) / total;
                    double g = got[((size_t)(bb * max_len + i) * heads + hh) * max_len + j];
                    check.add(g, want);
                }
            }
    const bool ok = check.abs_within(1e-4);

    // --- timing: the same kernel on the ragged batch and on the batch padded to its maximum ---
    RaggedShape padded;
    padded.set(B, batch).set(H, heads).set(len, std::vector<int32_t>(batch, max_len));
    Buffer qp = Buffer::alloc(Q, padded), kp = Buffer::alloc(K, padded), pp = Buffer::alloc(P, padded);
    run_kernel(padded, {{Q, qp}, {K, kp}, {P, pp}}); // warm-up, builds the padded prelude
    double t_ragged = time_kernel(ragged, {{Q, qb}, {K, kb}, {P, pb}});
    double t_padded = time_kernel(padded, {{Q, qp}, {K, kp}, {P, pp}});

    double useful = 0;
    for (int32_t l : lengths)
        useful += (double)l * l;
    std::printf("cora ragged attention scores + softmax (batch %d, heads %d, head dim %lld) on %s\n", (int)batch,
                (int)heads, (long long)D, device.description().c_str());
    std::printf("lengths: %s (min %d, max %d)\n", source.c_str(), *std::min_element(lengths.begin(), lengths.end()),
                max_len);
    std::printf("correctness vs masked padded reference: %s (max abs error %.2e%s)\n", ok ? "PASS" : "FAIL",
                check.max_abs(), check.non_finite_note().c_str());
    std::printf("kernel compile: %s (%.2f s)\n", kernel.from_cache() ? "cached" : "compiled", kernel.compile_seconds());
    std::printf("padded work / useful work (attention): %.2fx\n",
                apps::work_ratio((double)batch * max_len * max_len, useful));
    const char *nt = std::getenv("CORA_NUM_THREADS");
    int threads = nt && std::atoi(nt) > 0 ? std::atoi(nt) : (int)std::thread::hardware_concurrency();
    std::printf("time ragged: %8.3f ms   time padded: %8.3f ms   speed-up: %.2fx  (best of %d, %d threads)\n",
                t_ragged * 1e3, t_padded * 1e3, t_padded / t_ragged, (int)runs, threads);
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    return cora::apps::run_app("ragged_attention", [&] { return run(argc, argv); });
}
