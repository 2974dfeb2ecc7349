// cora against its baselines, all in this process (Google Benchmark). Groups (name before the
// last '/'): trmm/M, vgemm_<data>_b<batch>, dense/2048 and jit. Variants named cora* are cora
// (vgemm has two inner-tile strategies; the faster is kept); at the end each baseline's time is
// printed as a ratio "baseline time / fastest cora time" (above 1: cora is faster). --benchmark_out=<file> writes JSON;
// bench/run.sh runs this with 1 and 2 threads and makes the table and plot in bench/results/.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include "common/timing.h"
#include "trmm/trmm_def.h"
#include "vgemm/vgemm_problem.h"
#ifdef CORA_BENCH_HALIDE
#include "halide_matmul.h"
#endif

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace cora;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
    std::vector<float> v((size_t)n);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float &x : v)
        x = u(rng);
    return v;
}

void set_flops(benchmark::State &state, double flop) {
    state.counters["GFLOPS"] = benchmark::Counter(flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/** Runs before each benchmark (see apps::let_thread_pools_sleep). */
void pause_before(const benchmark::State &) { apps::let_thread_pools_sleep(); }

#ifdef CORA_BENCH_HALIDE
bench::HalideMatmul &halide() {
    static bench::HalideMatmul h;
    return h;
}
#endif

// --- trmm: cora (JIT) vs cblas_strmm vs padded sgemm (and Halide's padded dense matmul) ---

struct TrmmData {
    apps::Trmm def{apps::trmm_blocking_for(host_vector_bits())};
    Kernel kernel;
    RaggedShape shape;
    Buffer l, b, c;
    std::vector<float> scratch;
    int64_t m;
    explicit TrmmData(int64_t size) : kernel(Pipeline({def.C}, "trmm").compile()), m(size) {
        shape.set(def.M, m).set(def.N, m);
        l = Buffer::alloc(def.L, shape), b = Buffer::alloc(def.B, shape), c = Buffer::alloc(def.C, shape);
        std::vector<float> lv = random_floats(l.size(), 1), bv = random_floats(b.size(), 2);
        std::copy(lv.begin(), lv.end(), l.data<float>());
        std::copy(bv.begin(), bv.end(), b.data<float>());
        scratch.resize((size_t)b.size());
    }
    double flop() const { return (double)m * (double)(m + 1) * (double)m; }
};

TrmmData &trmm_data(int64_t m) {
    static std::map<int64_t, std::unique_ptr<TrmmData>> cache;
    auto &p = cache[m];
    if (!p) p = std::make_unique<TrmmData>(m);
    return *p;
}

void register_trmm(int64_t m) {
    std::string g = "trmm/" + std::to_string(m) + "/";
    benchmark::RegisterBenchmark((g + "cora").c_str(), [m](benchmark::State &s) {
        TrmmData &d = trmm_data(m);
        for (auto _ : s)
            d.kernel.run(d.shape, {{d.def.L, d.l}, {d.def.B, d.b}, {d.def.C, d.c}});
        set_flops(s, d.flop());
    })->Setup(pause_before);
    benchmark::RegisterBenchmark((g + "cblas_strmm").c_str(), [m](benchmark::State &s) {
        TrmmData &d = trmm_data(m);
        for (auto _ : s) {
            s.PauseTiming(); // strmm works in place: a fresh copy of B each time, not timed
            std::copy(d.b.data<float>(), d.b.data<float>() + d.b.size(), d.scratch.begin());
            s.ResumeTiming();
            cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, (int)m, 1.0f,
                        d.l.data<float>(), (int)m, d.scratch.data(), (int)m);
        }
        set_flops(s, d.flop());
    })->Setup(pause_before);
    benchmark::RegisterBenchmark((g + "padded_sgemm").c_str(), [m](benchmark::State &s) {
        TrmmData &d = trmm_data(m);
        for (auto _ : s)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f, d.l.data<float>(),
                        (int)m, d.b.data<float>(), (int)m, 0.0f, d.scratch.data(), (int)m);
        set_flops(s, d.flop());
    })->Setup(pause_before);
#ifdef CORA_BENCH_HALIDE
    benchmark::RegisterBenchmark((g + "halide_padded").c_str(), [m](benchmark::State &s) {
        TrmmData &d = trmm_data(m);
        halide();
        for (auto _ : s)
            halide().run(d.l.data<float>(), d.b.data<float>(), d.scratch.data(), 1, (int)m, (int)m, (int)m);
        set_flops(s, d.flop());
    })->Setup(pause_before);
#endif
}

// --- vgemm: cora (AOT, both inner-tile strategies) vs the per-matrix loop and padded batched ---

std::vector<apps::GemmShape> vgemm_shapes(const std::string &file, int64_t batch, int32_t step, int32_t lo,
                                          int32_t hi) {
    bool from_file = false; // absent dataset: the same distribution
    return apps::load_gemm_shapes(std::string(CORA_SHARED_DIR) + "/datasets/" + file, batch, 0, step, lo, hi,
                                  &from_file);
}

/** The variants of one vgemm group; the problem is built on first use (not for filtered-out runs). */
void register_vgemm(const std::string &group, std::function<std::vector<apps::GemmShape>()> shapes) {
    struct Data {
        apps::VGemmProblem problem;
        std::vector<float> c;
        explicit Data(const std::vector<apps::GemmShape> &s) : problem(s), c((size_t)problem.c_size()) {}
    };
    auto data = std::make_shared<std::unique_ptr<Data>>();
    auto get = [data, shapes]() -> Data & {
        if (!*data) *data = std::make_unique<Data>(shapes());
        return **data;
    };
    auto reg = [&](const std::string &variant, void (*fn)(Data &)) {
        benchmark::RegisterBenchmark((group + "/" + variant).c_str(), [get, fn](benchmark::State &s) {
            Data &d = get();
            for (auto _ : s)
                fn(d);
            set_flops(s, d.problem.flop);
        })->Setup(pause_before);
    };
    reg("cora_micro_kernel", [](Data &d) { d.problem.cora(d.c.data()); });
    reg("cora_sgemm_tiles", [](Data &d) { d.problem.sgemm_tiles(d.c.data()); });
    reg("per_matrix_loop", [](Data &d) { d.problem.per_matrix_loop(d.c.data()); });
    reg("padded_batched", [](Data &d) { d.problem.padded_batched(); });
#ifdef CORA_BENCH_HALIDE
    reg("halide_padded", [](Data &d) {
        apps::VGemmProblem &p = d.problem;
        halide().run(p.padded_a(), p.padded_w(), p.padded_c(), (int)p.batch, p.max_m, p.max_n, p.max_k);
    });
#endif
}

// --- JIT: compile one op cold (empty cache directory) and load it again (cached) ---

Pipeline jit_op() {
    static Dim batch("batch"), seq("seq"), h("h");
    static Param B("B", 1, 1024);
    static LengthArray len("len", B, 0, 4096);
    static Tensor X("X", {{batch, B}, {seq, len(batch)}, {h, 64}});
    Func Y("Y", {{batch, B}, {seq, len(batch)}, {h, 64}});
    Y.compute([&](Expr b, Expr s, Expr hh) { return X(b, s, hh) * 2.0f + 1.0f; });
    return Pipeline({Y}, "jit_bench_scale");
}

void register_jit() {
    static int counter = 0;
    benchmark::RegisterBenchmark(
        "jit/cold_compile",
        [](benchmark::State &s) {
            for (auto _ : s) {
                s.PauseTiming();
                CompileOptions o;
                o.cache_dir = (std::filesystem::temp_directory_path() /
                               ("cora-bench-cold-" + std::to_string(getpid()) + "-" + std::to_string(counter++)))
                                  .string();
                Pipeline p = jit_op();
                s.ResumeTiming();
                Kernel k = p.compile(o);
                s.PauseTiming();
                std::filesystem::remove_all(o.cache_dir);
                s.ResumeTiming();
            }
        })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
    benchmark::RegisterBenchmark(
        "jit/cached_load",
        [](benchmark::State &s) {
            CompileOptions o;
            o.cache_dir =
                (std::filesystem::temp_directory_path() / ("cora-bench-cached-" + std::to_string(getpid()))).string();
            jit_op().compile(o); // fill the cache
            for (auto _ : s) {
                s.PauseTiming();
                Pipeline p = jit_op();
                s.ResumeTiming();
                Kernel k = p.compile(o);
            }
            std::filesystem::remove_all(o.cache_dir);
        })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(10);
}

/** Collects real time per benchmark, to print the ratio table at the end: the median over
 * repetitions when there are several (--benchmark_repetitions), else the one run. */
class RatioReporter : public benchmark::ConsoleReporter {
public:
    std::vector<std::pair<std::string, double>> times;
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const Run &r : runs) {
            if (r.error_occurred) continue;
            std::string name = r.run_name.str();
            name = name.substr(0, name.find("/iterations:")); // fixed iteration counts (jit)
            if (r.run_type == Run::RT_Iteration && r.repetitions <= 1)
                times.emplace_back(name, r.GetAdjustedRealTime());
            if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median")
                times.emplace_back(name, r.GetAdjustedRealTime());
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void print_ratios() const {
        std::printf("\nratios (baseline time / cora time; above 1: cora is faster), %d threads:\n",
                    omp_get_max_threads());
        std::map<std::string, double> best; // cora's fastest variant per group
        for (auto &[name, t] : times)
            if (name.substr(name.rfind('/') + 1).rfind("cora", 0) == 0) {
                std::string group = name.substr(0, name.rfind('/'));
                best[group] = best.count(group) ? std::min(best[group], t) : t;
            }
        for (auto &[name, t] : times) {
            std::string group = name.substr(0, name.rfind('/')), variant = name.substr(name.rfind('/') + 1);
            if (group == "jit") {
                std::printf("  %-28s %-22s %10.2f ms\n", group.c_str(), variant.c_str(), t);
            } else if (variant.rfind("cora", 0) != 0 && best.count(group)) {
                std::printf("  %-28s %-22s %6.2fx\n", group.c_str(), variant.c_str(), t / best[group]);
            }
        }
    }
};

} // namespace

int main(int argc, char **argv) {
    for (int64_t m : {1024, 2048, 4096})
        register_trmm(m);
    for (int64_t b : {16, 64})
        register_vgemm("vgemm_large_b" + std::to_string(b),
                       [b] { return vgemm_shapes("vbatch_gemm_data.txt", b, 128, 512, 1408); });
    register_vgemm("vgemm_small_b64", [] { return vgemm_shapes("vbatch_gemm_data_small.txt", 64, 64, 64, 384); });
    // The dense-tile path: one 2048^3 item through the same generated micro-kernel.
    register_vgemm("dense_2048", [] { return std::vector<apps::GemmShape>{{2048, 2048, 2048}}; });
    register_jit();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2; // bad input: exit status 2, as every app
#ifdef CORA_BENCH_HALIDE
    halide(); // JIT-compile the Halide pipeline before any timing
#endif
    RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.print_ratios();
    benchmark::Shutdown();
    return 0;
}
