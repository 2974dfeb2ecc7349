// The encoder's token GEMMs (apps/transformer: the AOT libraries the program links) against
// cblas_sgemm on the same tokens, in one process: the issue's "≥ 0.95x of a fair sgemm on the same
// shapes", per kernel and token count.
//
// Shapes: the default model (hidden 512, 8 heads, feed-forward 2048) or, with --bert, BERT-base
// (768, 12, 3072); tokens: the first batch of --batch sequences of every dataset in
// ../shared/datasets (or --datasets=DIR), in file order as the encoder forms batches. Each kernel
// runs on the batch's ragged lengths (packed tokens, their total padded to the storage's 48); the
// baseline is the same computation on exactly the useful tokens, row-major X [T, in] times
// W [in, out] by cblas_sgemm, then its epilogue in one OpenMP pass over the rows (bias; ReLU for
// FF1; bias + residual + LayerNorm for out_norm and ff2_norm). Columns: cora's ms, sgemm's ms
// without and with the epilogue, and the ratio (sgemm + epilogue) / cora: above 1, cora is faster.
// Each cora result is checked against the baseline's (max |diff| / max |y| above 1e-4: FAIL, exit 1).
// Timing: the best of --runs calls per library, libraries alternated three times with a pause
// between them (apps/common/timing.h: let_thread_pools_sleep), so neither pays for the other's
// spinning threads.
#include <cblas.h>
#include <omp.h>

#include "common/cli.h"
#include "common/data_files.h"
#include "common/error_check.h"
#include "common/heap.h"
#include "common/timing.h"
#include "transformer/encoder_limits.h"
#include "transformer/encoder_model.h"

#include "encoder_ff1.h"
#include "encoder_ff2_norm.h"
#include "encoder_out_norm.h"
#include "encoder_qkv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

extern "C" char *openblas_get_corename(void);

namespace {

using namespace cora::apps;

struct Case {
    const char *name;
    int64_t in, out;
    bool relu = false, norm = false;
};

void fill(std::vector<float> &v, size_t n, float scale, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    v.resize(n);
    for (float &x : v)
        x = u(rng);
}

/** The baseline epilogue on Y [T, out] (useful rows only). */
void epilogue(const Case &c, int64_t T, float *Y, const float *bias, const float *residual, const float *gamma,
              const float *beta) {
    const int64_t N = c.out;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        float *y = Y + t * N;
        for (int64_t n = 0; n < N; n++)
            y[n] += bias[n] + (c.norm ? residual[t * N + n] : 0.0f);
        if (c.relu)
            for (int64_t n = 0; n < N; n++)
                y[n] = std::max(y[n], 0.0f);
        if (!c.norm) continue;
        float mean = 0, var = 0;
        for (int64_t n = 0; n < N; n++)
            mean += y[n];
        mean /= (float)N;
        for (int64_t n = 0; n < N; n++)
            var += (y[n] - mean) * (y[n] - mean);
        const float rstd = 1.0f / std::sqrt(var / (float)N + kLayerNormEps);
        for (int64_t n = 0; n < N; n++)
            y[n] = (y[n] - mean) * rstd * gamma[n] + beta[n];
    }
}

} // namespace

int main(int argc, char **argv) {
    keep_freed_memory(); // as the encoder does: the norm kernels' intermediate Y is reused, not refaulted
    int64_t batch = 32;
    int runs = 5;
    bool bert = false;
    std::string datasets = "../shared/datasets", markdown;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&](const char *flag) { return a.substr(std::string(flag).size()); };
        try {
            if (a.rfind("--batch=", 0) == 0)
                batch = std::stoll(value("--batch="));
            else if (a.rfind("--runs=", 0) == 0)
                runs = std::stoi(value("--runs="));
            else if (a.rfind("--datasets=", 0) == 0)
                datasets = value("--datasets=");
            else if (a.rfind("--markdown=", 0) == 0)
                markdown = value("--markdown=");
            else if (a == "--bert")
                bert = true;
            else
                throw std::invalid_argument(a);
        } catch (const std::exception &) {
            std::fprintf(stderr,
                         "token_gemm: bad flag '%s' (use --batch=N, --runs=N, --datasets=DIR, --markdown=FILE, "
                         "--bert)\n",
                         argv[i]);
            return 2;
        }
    }
    if (batch < 1 || batch > 4096 || runs < 1) {
        std::fprintf(stderr, "token_gemm: --batch must be in [1, 4096] and --runs positive\n");
        return 2;
    }
    const int64_t H = bert ? 768 : 512, F = bert ? 3072 : 2048, NH = H / 64, FB = F / 64;
    const Case cases[] = {
        {"qkv", H, 3 * H}, {"out_norm", H, H, false, true}, {"ff1", H, F, true}, {"ff2_norm", F, H, false, true}};
    std::vector<std::pair<std::string, std::vector<int32_t>>> batches;
    for (const char *d : {"race", "squad", "mnli", "mrpc", "cola"}) {
        std::string path = datasets + "/" + d + "_train_lengths.txt";
        if (!std::filesystem::exists(path)) continue;
        try {
            batches.emplace_back(d, read_length_file(path, batch, 0, kMaxLen));
        } catch (const std::exception &e) {
            std::fprintf(stderr, "token_gemm: %s\n", e.what());
            return 2;
        }
    }
    if (batches.empty()) {
        std::printf("token_gemm: no length files in %s; nothing to measure (SKIPPED)\n", datasets.c_str());
        return 0;
    }
    std::printf("token_gemm: hidden %lld, ff %lld, batch %lld; %d threads; OpenBLAS core %s\n", (long long)H,
                (long long)F, (long long)batch, omp_get_max_threads(), openblas_get_corename());
    std::string table = "| dataset | tokens | kernel | in x out | cora ms | sgemm ms | sgemm + epilogue ms | ratio |\n"
                        "|---|---|---|---|---|---|---|---|\n";
    std::vector<double> ratios;
    bool all_ok = true;
    char err[1024];
    for (auto &[dname, len] : batches) {
        const int64_t T = std::accumulate(len.begin(), len.end(), int64_t(0));
        const int64_t B = (int64_t)len.size();
        int64_t sizes[16];
        if (encoder_ff1_buffer_sizes(B, FB, NH, len.data(), B, sizes, err, sizeof err) != 0) {
            std::fprintf(stderr, "token_gemm: %s\n", err);
            return 1;
        }
        const int64_t rows = sizes[encoder_ff1_size_X] / H; // packed tokens, padded
        for (const Case &c : cases) {
            std::vector<float> X, W, bias, residual, gamma, beta, Y((size_t)(rows * c.out)), Yref((size_t)(T * c.out));
            fill(X, (size_t)(rows * c.in), 1.0f, 1);
            fill(W, (size_t)(c.in * c.out), 1.0f / std::sqrt((float)c.in), 2);
            fill(bias, (size_t)c.out, 0.1f, 3);
            fill(residual, (size_t)(rows * c.out), 1.0f, 4);
            fill(gamma, (size_t)c.out, 1.1f, 5);
            fill(beta, (size_t)c.out, 0.1f, 6);
            const std::vector<float> Wp = weight_panels(W, c.in, c.out);
            auto run_cora = [&] {
                int32_t rc = 0;
                const int64_t nx = (int64_t)X.size(), ny = (int64_t)Y.size(), nw = (int64_t)Wp.size();
                if (c.name[0] == 'q')
                    rc = encoder_qkv(B, NH, len.data(), B, X.data(), nx, Wp.data(), nw, bias.data(), c.out, Y.data(),
                                     ny, err, sizeof err);
                else if (c.relu)
                    rc = encoder_ff1(B, FB, NH, len.data(), B, X.data(), nx, Wp.data(), nw, bias.data(), c.out,
                                     Y.data(), ny, err, sizeof err);
                else if (c.in == H)
                    rc = encoder_out_norm(B, NH, len.data(), B, X.data(), nx, Wp.data(), nw, bias.data(), c.out,
                                          residual.data(), ny, gamma.data(), c.out, beta.data(), c.out, Y.data(), ny,
                                          err, sizeof err);
                else
                    rc = encoder_ff2_norm(B, FB, NH, len.data(), B, X.data(), nx, Wp.data(), nw, bias.data(), c.out,
                                          residual.data(), ny, gamma.data(), c.out, beta.data(), c.out, Y.data(), ny,
                                          err, sizeof err);
                if (rc != 0) {
                    std::fprintf(stderr, "token_gemm: %s: %s\n", c.name, err);
                    std::exit(1);
                }
            };
            auto run_sgemm = [&] {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)c.out, (int)c.in, 1.0f, X.data(),
                            (int)c.in, W.data(), (int)c.out, 0.0f, Yref.data(), (int)c.out);
            };
            double cora_s = 1e30, gemm_s = 1e30, base_s = 1e30;
            for (int round = 0; round < 3; round++) {
                cora_s = std::min(cora_s, best_seconds(runs, run_cora));
                let_thread_pools_sleep();
                gemm_s = std::min(gemm_s, best_seconds(runs, run_sgemm));
                base_s =
                    std::min(base_s, best_seconds(runs, [&] {
                                 run_sgemm();
                                 epilogue(c, T, Yref.data(), bias.data(), residual.data(), gamma.data(), beta.data());
                             }));
                let_thread_pools_sleep();
            }
            ErrorCheck check; // a NaN where the reference is finite fails (common/error_check.h)
            for (int64_t i = 0; i < T * c.out; i++)
                check.add(Y[(size_t)i], Yref[(size_t)i]);
            const bool ok = check.abs_within(1e-4 * std::max(check.scale(), 1.0));
            all_ok = all_ok && ok;
            const double ratio = base_s / cora_s;
            ratios.push_back(ratio);
            char line[512];
            std::snprintf(line, sizeof line, "| %s | %lld | %s | %lldx%lld | %.2f | %.2f | %.2f | %.2fx%s |\n",
                          dname.c_str(), (long long)T, c.name, (long long)c.in, (long long)c.out, cora_s * 1e3,
                          gemm_s * 1e3, base_s * 1e3, ratio, ok ? "" : " FAIL");
            std::fputs(line, stdout);
            std::fflush(stdout);
            table += line;
        }
    }
    double log_sum = 0;
    for (double r : ratios)
        log_sum += std::log(r);
    const double geomean = std::exp(log_sum / (double)ratios.size());
    std::printf("geomean (sgemm + epilogue) / cora over %zu cases: %.3fx; min %.3fx\n", ratios.size(), geomean,
                *std::min_element(ratios.begin(), ratios.end()));
    if (!markdown.empty()) {
        std::ofstream md(markdown);
        md << table << "\nGeomean (sgemm + epilogue) / cora over " << ratios.size() << " cases: " << geomean
           << "x; OpenBLAS core " << openblas_get_corename() << "; " << omp_get_max_threads() << " threads.\n";
    }
    if (!all_ok) std::printf("FAIL: a cora result differs from sgemm's by more than 1e-4 relative\n");
    return all_ok ? 0 : 1;
}
