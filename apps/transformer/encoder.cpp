// The transformer encoder over ragged batches: N post-LN layers, each five AOT kernels generated
// by cora (encoder_def.h), run on packed tokens and — in the same process, with the same kernels —
// on the batch padded to its longest item, with a check against a double-precision reference.
// With --device (cuda, cuda-emulated, cuda-cpu-threads) the same five kernels with their GPU
// schedules, compiled just in time for that backend (encoder_device.h).
#include "common/cli.h"
#include "common/data_files.h"
#include "common/device.h"
#include "common/error_check.h"
#include "common/heap.h"
#include "common/length_profile.h"
#include "common/timing.h"
#include "encoder_device.h"
#include "encoder_model.h"

#include <encoder_attention.h>
#include <encoder_attention_causal.h>
#include <encoder_attention_masked.h>
#include <encoder_ff1.h>
#include <encoder_ff1_gelu.h>
#include <encoder_ff2_norm.h>
#include <encoder_out_norm.h>
#include <encoder_qkv.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace cora::apps;

namespace {

/** A cora kernel's status: its message as an exception. */
void ok(int32_t status, const char *kernel, const char *error) {
    if (status != 0) throw std::runtime_error(std::string(kernel) + ": " + error);
}

/** The encoder on one batch shape with the CPU's AOT kernels: buffers sized by the kernels' size
 * queries, reused across runs. */
class Encoder : public EncoderRun {
public:
    /** `w`: the weights in the kernels' layout (kernel_weights). `mask_full`: causal attention
     * computed as full attention with a mask (the baseline). */
    Encoder(const EncoderConfig &c, const std::vector<LayerWeights> &w, std::vector<int32_t> lengths,
            bool mask_full = false)
        : c_(c), w_(w), len_(std::move(lengths)), mask_full_(mask_full) {
        B_ = (int64_t)len_.size();
        NH_ = c.heads;
        FB_ = c.ff / 64;
        int64_t sizes[encoder_ff1_tensor_count];
        ok(encoder_ff1_buffer_sizes(B_, FB_, NH_, len_.data(), B_, sizes, err_, sizeof err_), "encoder_ff1", err_);
        tokens_count_ = sizes[encoder_ff1_size_X];
        x_.resize((size_t)tokens_count_);
        x1_.resize((size_t)tokens_count_);
        a_.resize((size_t)tokens_count_);
        f_.resize((size_t)sizes[encoder_ff1_size_F]);
        int64_t qsizes[encoder_qkv_tensor_count];
        ok(encoder_qkv_buffer_sizes(B_, NH_, len_.data(), B_, qsizes, err_, sizeof err_), "encoder_qkv", err_);
        qkv_.resize((size_t)qsizes[encoder_qkv_size_QKV]);
    }
    int64_t token_floats() const override { return tokens_count_; }
    void set_input(const std::vector<float> &tokens) override { x_ = tokens; }
    std::vector<float> output() override { return x_; }

    void run() override {
        const int32_t *len = len_.data();
        const int64_t H = c_.hidden, F = c_.ff, n = tokens_count_;
        if (profile) profiled_runs++;
        auto t = std::chrono::steady_clock::now();
        for (const LayerWeights &l : w_) {
            ok(encoder_qkv(B_, NH_, len, B_, x_.data(), n, l.wqkv.data(), H * 3 * H, l.bqkv.data(), 3 * H, qkv_.data(),
                           (int64_t)qkv_.size(), err_, sizeof err_),
               "encoder_qkv", err_);
            lap(t, 0);
            auto attention =
                !c_.causal ? encoder_attention : (mask_full_ ? encoder_attention_masked : encoder_attention_causal);
            ok(attention(B_, NH_, len, B_, qkv_.data(), (int64_t)qkv_.size(), a_.data(), n, err_, sizeof err_),
               "encoder_attention", err_);
            lap(t, 1);
            ok(encoder_out_norm(B_, NH_, len, B_, a_.data(), n, l.wo.data(), H * H, l.bo.data(), H, x_.data(), n,
                                l.ln1_gamma.data(), H, l.ln1_beta.data(), H, x1_.data(), n, err_, sizeof err_),
               "encoder_out_norm", err_);
            lap(t, 2);
            auto ff1 = c_.gelu ? encoder_ff1_gelu : encoder_ff1;
            ok(ff1(B_, FB_, NH_, len, B_, x1_.data(), n, l.w1.data(), H * F, l.b1.data(), F, f_.data(),
                   (int64_t)f_.size(), err_, sizeof err_),
               "encoder_ff1", err_);
            lap(t, 3);
            ok(encoder_ff2_norm(B_, FB_, NH_, len, B_, f_.data(), (int64_t)f_.size(), l.w2.data(), F * H, l.b2.data(),
                                H, x1_.data(), n, l.ln2_gamma.data(), H, l.ln2_beta.data(), H, x_.data(), n, err_,
                                sizeof err_),
               "encoder_ff2_norm", err_);
            lap(t, 4);
        }
    }
    /** Seconds of the kernels' own shape work per batch (argument checks and aux arrays, which
     * each AOT kernel builds itself): the size queries run the same checks and builders. */
    double prelude_seconds(int runs) {
        int64_t s[encoder_ff2_norm_tensor_count];
        const int32_t *len = len_.data();
        return best_seconds(runs, [&] {
            for (size_t l = 0; l < w_.size(); l++) {
                ok(encoder_qkv_buffer_sizes(B_, NH_, len, B_, s, err_, sizeof err_), "sizes", err_);
                ok((c_.causal ? encoder_attention_causal_buffer_sizes
                              : encoder_attention_buffer_sizes)(B_, NH_, len, B_, s, err_, sizeof err_),
                   "sizes", err_);
                ok(encoder_out_norm_buffer_sizes(B_, NH_, len, B_, s, err_, sizeof err_), "sizes", err_);
                ok(encoder_ff1_buffer_sizes(B_, FB_, NH_, len, B_, s, err_, sizeof err_), "sizes", err_);
                ok(encoder_ff2_norm_buffer_sizes(B_, FB_, NH_, len, B_, s, err_, sizeof err_), "sizes", err_);
            }
        });
    }

private:
    EncoderConfig c_;
    const std::vector<LayerWeights> &w_;
    std::vector<int32_t> len_;
    bool mask_full_ = false;
    int64_t B_ = 0, NH_ = 0, FB_ = 0, tokens_count_ = 0;
    std::vector<float> x_, x1_, a_, f_, qkv_;
    char err_[512] = {0};
};

/** Multiply-adds of one layer per item of length n: projections and FF per token, attention per
 * (query, key) pair. */
double layer_macs(const EncoderConfig &c, int64_t n) {
    const double H = (double)c.hidden, F = (double)c.ff, tokens = (double)n;
    double pairs = c.causal ? tokens * (tokens + 1) / 2 : tokens * tokens;
    return tokens * (4 * H * H + 2 * H * F) + 2 * pairs * H;
}

int run(int argc, char **argv) {
    EncoderConfig cfg;
    int64_t batch = 32, batches = 3, runs = 3, threads = 0;
    std::string lengths_file, weights_file, input_file, dump_file, device_name = "cpu";
    bool no_check = false, bert_base = false, profile = false, fp16 = false;
    CommandLine cli("transformer_encoder",
                    "A post-LN transformer encoder over ragged batches, written in cora and built ahead of time: "
                    "checked against a reference, timed against the same kernels on the padded batch.");
    cli.integer("--layers", &cfg.layers, 1, 64, "encoder layers")
        .integer("--heads", &cfg.heads, 1, 32, "attention heads of 64 features (hidden = 64 x heads)")
        .integer("--ff", &cfg.ff, 64, 16384, "feed-forward width, a multiple of 64")
        .toggle("--gelu", &cfg.gelu, "GELU instead of ReLU in the feed-forward layer")
        .toggle("--bert-base", &bert_base, "BERT-base sizes: 12 heads (hidden 768), ff 3072, GELU")
        .toggle("--causal", &cfg.causal, "masked (causal) self-attention: each token attends to itself and before")
        .integer("--batch", &batch, 1, 4096, "sequences per batch")
        .integer("--batches", &batches, 1, 100000, "batches (consecutive lengths, in file order)")
        .text("--lengths", &lengths_file, "FILE",
              "sequence lengths, white-space separated (default: built-in MNLI profile)")
        .text("--weights", &weights_file, "FILE", "weights written by export_weights.py (default: random, seed 1)")
        .text("--input", &input_file, "FILE", "float32 input tokens of the first batch, packed [tokens, hidden]")
        .text("--dump", &dump_file, "FILE", "write the first batch's output tokens there, packed float32")
        .toggle("--no-check", &no_check, "skip the check of the first batch against the reference")
        .toggle("--profile", &profile, "print each kernel's time, ragged and padded, beside its work ratio")
        .integer("--runs", &runs, 1, 1000, "timed runs per batch (the best is reported)")
        .integer("--threads", &threads, 0, 1024, "threads (0: all cores)")
        .text("--device", &device_name, "cpu|cuda|cuda-emulated|cuda-cpu-threads",
              "where the kernels run: the CPU (ahead-of-time kernels), a CUDA GPU, the GPU schedules emulated on "
              "the CPU, or their CUDA source on CPU threads (the last three compiled just in time)")
        .toggle("--fp16", &fp16,
                "with a GPU --device: float16 token tensors and weight matrices, token GEMMs on tensor cores "
                "(float32 sums); checked within 2e-2 relative instead of 1e-4");
    if (!cli.parse(argc, argv)) return 0;
    const cora::Backend &device = parse_device(device_name);
    const bool on_gpu = device.runs_gpu_schedules();
    if (fp16 && !on_gpu) throw UsageError("--fp16 needs a GPU --device (cuda, cuda-emulated or cuda-cpu-threads)");
    const bool check = !no_check;
    if (bert_base) {
        if (cli.given("--heads") || cli.given("--ff") || cli.given("--gelu"))
            throw UsageError("--bert-base sets --heads, --ff and --gelu; give either");
        cfg.heads = 12;
        cfg.ff = 3072;
        cfg.gelu = true;
    }
    if (cfg.ff % 64 != 0) throw UsageError("--ff must be a multiple of 64, got " + std::to_string(cfg.ff));
    cfg.hidden = cfg.heads * 64;
    if (threads > 0) setenv("CORA_NUM_THREADS", std::to_string(threads).c_str(), 1); // read by the kernels once

    std::vector<LayerWeights> weights;
    if (!weights_file.empty()) {
        EncoderConfig from_file = cfg;
        weights = read_weights(weights_file, from_file);
        for (const char *flag : {"--heads", "--ff", "--gelu", "--bert-base"})
            if (cli.given(flag) &&
                (from_file.heads != cfg.heads || from_file.ff != cfg.ff || from_file.gelu != cfg.gelu))
                throw UsageError(std::string(flag) + " disagrees with the model in " + weights_file);
        if (cli.given("--layers") && from_file.layers != cfg.layers)
            throw UsageError("--layers disagrees with the " + std::to_string(from_file.layers) + " layers in " +
                             weights_file);
        cfg = from_file;
    } else {
        weights = random_weights(cfg, 1);
    }
    const std::vector<LayerWeights> panels = kernel_weights(cfg, weights); // the kernels' layout
    // GPU schedules: the kernels compiled for the device once, the weights copied there once.
    std::unique_ptr<DeviceEncoderKernels> device_kernels, device_kernels_masked;
    if (on_gpu) {
        device_kernels = std::make_unique<DeviceEncoderKernels>(device, cfg, panels, false, fp16);
        if (cfg.causal) device_kernels_masked = std::make_unique<DeviceEncoderKernels>(device, cfg, panels, true, fp16);
    }
    auto make_encoder = [&](const std::vector<int32_t> &lengths, bool mask_full) -> std::unique_ptr<EncoderRun> {
        if (on_gpu)
            return std::make_unique<DeviceEncoder>(mask_full ? *device_kernels_masked : *device_kernels, lengths);
        return std::make_unique<Encoder>(cfg, panels, lengths, mask_full);
    };
    std::vector<int32_t> all_lengths;
    std::string source = "built-in MNLI length profile";
    if (!lengths_file.empty()) {
        all_lengths = read_length_file(lengths_file, batch * batches, 0, kMaxLen);
        source = lengths_file;
    } else {
        all_lengths = builtin_lengths(batch * batches);
    }

    const int hw = (int)std::thread::hardware_concurrency();
    std::printf("cora transformer encoder: %lld layers, hidden %lld, %lld heads, feed-forward %lld, %s, %s attention\n",
                (long long)cfg.layers, (long long)cfg.hidden, (long long)cfg.heads, (long long)cfg.ff,
                cfg.gelu ? "GELU" : "ReLU", cfg.causal ? "causal" : "full");
    std::printf("lengths: %s; %lld batches of %lld; weights: %s; %d threads\n", source.c_str(), (long long)batches,
                (long long)batch, weights_file.empty() ? "random (seed 1)" : weights_file.c_str(),
                threads > 0 ? (int)threads : hw);
    if (on_gpu)
        std::printf("device: '%s' (%s), GPU schedules, %s\n", device.name().c_str(), device.description().c_str(),
                    fp16 ? "float16 tokens and weights, tensor-core GEMMs" : "float32");

    // Relative to max(1, |reference|). float16 storage rounds every token tensor and weight to 11
    // significant bits (2^-11 = 4.9e-4 each) through every layer.
    const double tolerance = fp16 ? 2e-2 : 1e-4;
    double total_ragged = 0, total_padded = 0, total_prelude = 0, useful_macs = 0, padded_macs = 0;
    int64_t total_tokens = 0;
    bool all_ok = true;
    for (int64_t bi = 0; bi < batches; bi++) {
        std::vector<int32_t> len(all_lengths.begin() + bi * batch, all_lengths.begin() + (bi + 1) * batch);
        const int32_t max_len = *std::max_element(len.begin(), len.end());
        const int64_t tokens = std::accumulate(len.begin(), len.end(), int64_t(0));
        std::unique_ptr<EncoderRun> ragged_run = make_encoder(len, false),
                                    padded_run = make_encoder(std::vector<int32_t>(len.size(), max_len), false);
        EncoderRun &ragged = *ragged_run, &padded = *padded_run;

        // Input tokens: the file's for the first batch, else deterministic random embeddings.
        std::vector<float> input((size_t)ragged.token_floats());
        if (bi == 0 && !input_file.empty()) {
            std::ifstream f(input_file, std::ios::binary);
            if (!f) throw UsageError("cannot open input file '" + input_file + "'");
            const int64_t want = tokens * cfg.hidden;
            f.read(reinterpret_cast<char *>(input.data()), (std::streamsize)(want * 4));
            if (f.gcount() != want * 4 || f.peek() != std::char_traits<char>::eof())
                throw UsageError("input file '" + input_file + "' must hold " + std::to_string(want) +
                                 " floats (tokens x hidden of the first batch)");
        } else {
            std::mt19937 rng(100 + (uint32_t)bi);
            std::normal_distribution<float> nd(0.0f, 1.0f);
            for (int64_t k = 0; k < tokens * cfg.hidden; k++)
                input[(size_t)k] = nd(rng);
        }
        // The padded batch: item b's tokens at rows [b * max_len, b * max_len + len(b)), zeros after.
        std::vector<float> padded_input((size_t)padded.token_floats(), 0.0f);
        for (int64_t b = 0, from = 0; b < (int64_t)len.size(); from += len[(size_t)b], b++)
            std::copy(input.begin() + from * cfg.hidden, input.begin() + (from + len[(size_t)b]) * cfg.hidden,
                      padded_input.begin() + b * max_len * cfg.hidden);

        // On a device: the shape's arrays copied there by the first run and by the timed runs.
        auto shape_transfers = [&] { return on_gpu ? static_cast<DeviceEncoder &>(ragged).shape_transfers() : 0; };
        const int64_t transfers_before = shape_transfers();
        ragged.set_input(input);
        ragged.run();
        const int64_t transfers_first = shape_transfers() - transfers_before;
        std::vector<float> output = ragged.output();
        if (bi == 0 && !dump_file.empty()) {
            std::ofstream f(dump_file, std::ios::binary);
            f.write(reinterpret_cast<const char *>(output.data()), (std::streamsize)(tokens * cfg.hidden * 4));
            if (!f) throw UsageError("cannot write '" + dump_file + "'");
        }
        if (bi == 0 && check) {
            // Items are independent: check the shortest, the longest and the first through every
            // layer (a double-precision reference of the whole batch would take minutes).
            std::vector<int64_t> items = {0, std::min_element(len.begin(), len.end()) - len.begin(),
                                          std::max_element(len.begin(), len.end()) - len.begin()};
            std::sort(items.begin(), items.end());
            items.erase(std::unique(items.begin(), items.end()), items.end());
            ErrorCheck errors;
            for (int64_t b : items) {
                int64_t from = std::accumulate(len.begin(), len.begin() + b, int64_t(0)) * cfg.hidden;
                std::vector<double> want = reference_item(cfg, weights, input.data() + from, len[(size_t)b]);
                for (size_t k = 0; k < want.size(); k++)
                    errors.add(output[(size_t)from + k], want[k]);
            }
            bool pass = errors.rel_within(tolerance);
            all_ok = all_ok && pass;
            std::printf("check vs double-precision reference (items");
            for (int64_t b : items)
                std::printf(" %lld (length %d)", (long long)b, len[(size_t)b]);
            std::printf(", all layers): %s (max relative error %.2e%s)\n", pass ? "PASS" : "FAIL", errors.max_rel(),
                        errors.non_finite_note().c_str());
        }

        ragged.profile = padded.profile = profile;
        // Timed: the layers over tokens already in place (each run continues from the last one's
        // output; the work does not depend on the values).
        double t_ragged = best_seconds((int)runs, [&] { ragged.run(); });
        const int64_t transfers_timed = shape_transfers() - transfers_before - transfers_first;
        let_thread_pools_sleep();
        padded.set_input(padded_input);
        double t_padded = best_seconds((int)runs, [&] { padded.run(); });
        double t_prelude = on_gpu ? 0.0 : static_cast<Encoder &>(ragged).prelude_seconds((int)runs);
        if (on_gpu && static_cast<DeviceEncoder &>(ragged).on_device())
            std::printf("  the batch's shape arrays copied to the device: %lld time(s) in the first run, %lld in the "
                        "%lld timed runs (%lld kernels each)\n",
                        (long long)transfers_first, (long long)transfers_timed, (long long)runs,
                        (long long)(5 * cfg.layers));
        if (cfg.causal) {
            // The same model with causal attention computed as full attention and a mask.
            std::unique_ptr<EncoderRun> masked_run = make_encoder(len, true);
            EncoderRun &masked = *masked_run;
            masked.set_input(input);
            masked.run();
            const std::vector<float> masked_output = masked.output();
            ErrorCheck agreement;
            for (int64_t k = 0; k < tokens * cfg.hidden; k++)
                agreement.add(masked_output[(size_t)k], output[(size_t)k]);
            const double diff = agreement.mismatches() ? INFINITY : agreement.max_rel();
            let_thread_pools_sleep();
            double t_masked = best_seconds((int)runs, [&] { masked.run(); });
            const bool agree = diff <= tolerance;
            std::printf("  causal attention over the triangle: %.2f ms; full attention with a mask: %.2f ms; %.2fx "
                        "(outputs differ by %.1e relative: %s)\n",
                        t_ragged * 1e3, t_masked * 1e3, t_masked / t_ragged, diff, agree ? "PASS" : "FAIL");
            if (!agree) all_ok = false;
        }
        double useful = 0;
        for (int32_t l : len)
            useful += layer_macs(cfg, l);
        double batch_work_ratio = work_ratio(layer_macs(cfg, max_len) * (double)len.size(), useful);
        std::printf(
            "batch %lld: %lld tokens (max length %d), padded/useful work %.2fx; ragged %.2f ms (%.0f tokens/s), "
            "padded %.2f ms, speed-up %.2fx\n",
            (long long)bi, (long long)tokens, max_len, batch_work_ratio, t_ragged * 1e3,
            per_second((double)tokens, t_ragged), t_padded * 1e3, t_padded / t_ragged);
        if (profile) {
            // Per kernel: ragged and padded milliseconds per run (mean over the runs) and their
            // ratio, beside the work ratio it should track (token-linear kernels save the padded
            // tokens; attention saves the squares of the lengths).
            const char *names[5] = {"qkv", "attention", "out_norm", "ff1", "ff2_norm"};
            double all = 0, sq_useful = 0;
            for (double x : ragged.kernel_seconds)
                all += x;
            for (int32_t l : len)
                sq_useful += (double)l * l;
            const double token_ratio = (double)max_len * (double)len.size() / std::max<double>((double)tokens, 1);
            const double square_ratio = (double)max_len * max_len * (double)len.size() / std::max(sq_useful, 1.0);
            std::printf("  kernels, ms per run ragged / padded (padded/ragged; work ratio):\n");
            for (size_t k = 0; k < 5; k++) {
                const double r = ragged.kernel_seconds[k] / (double)std::max<int64_t>(ragged.profiled_runs, 1),
                             p = padded.kernel_seconds[k] / (double)std::max<int64_t>(padded.profiled_runs, 1);
                std::printf("    %-9s %8.2f / %8.2f ms (%.2fx; %.2fx)  %.1f%% of the ragged time\n", names[k], r * 1e3,
                            p * 1e3, p / std::max(r, 1e-12), k == 1 ? square_ratio : token_ratio,
                            100.0 * ragged.kernel_seconds[k] / all);
            }
        }
        total_ragged += t_ragged;
        total_padded += t_padded;
        total_prelude += t_prelude;
        total_tokens += tokens;
        useful_macs += useful * (double)cfg.layers;
        padded_macs += layer_macs(cfg, max_len) * (double)len.size() * (double)cfg.layers;
    }
    std::printf("total: %lld tokens; ragged %.2f ms (%.0f tokens/s, %.1f GFLOP/s useful), padded %.2f ms; "
                "padded/useful work %.2fx; speed-up %.2fx\n",
                (long long)total_tokens, total_ragged * 1e3, per_second((double)total_tokens, total_ragged),
                per_second(2 * useful_macs, total_ragged) * 1e-9, total_padded * 1e3,
                work_ratio(padded_macs, useful_macs), total_padded / total_ragged);
    if (!on_gpu)
        std::printf("shape work (argument checks + aux arrays, built inside each AOT kernel; timed through the size "
                    "queries): %.1f us, %.3f%% of the ragged time\n",
                    total_prelude * 1e6, 100.0 * total_prelude / total_ragged);
    return all_ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    cora::apps::keep_freed_memory();
    return run_app("transformer_encoder", [&] { return run(argc, argv); });
}
