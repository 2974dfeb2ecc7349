/** \file Pipeline::tune: measured register tiles for the contractions left unscheduled.
 *
 * Why: the default tile (4 rows x 2 or 4 vectors, 256-deep panels) is a rule, and the best tile
 * depends on the CPU (register count, cache sizes) and on the sizes; hand schedules tuned on one
 * CPU lost to OpenBLAS on another (issue 38). As in Triton's autotuner and TorchSparse++, a few
 * candidates per op, measured once per key and stored, recover most of it at a bounded cost.
 * Does: lowers the pipeline once to find the tunable contractions (LoweredModule::tunable), then
 * per contraction, in pipeline order (the others at their current choice): the table's entry when
 * it has the key and the entry still compiles, else each candidate compiled, run on every sample,
 * its outputs checked against the default tile's (a candidate that differs is rejected, never
 * chosen), then the candidates timed in `reps` interleaved rounds (a candidate's time: its fastest
 * round), the fastest kept (the default tile unless another is at least kMinGainOverDefault
 * faster) and written to the table.
 * Once the budget is spent, each remaining contraction measures its default tile only (the best
 * so far wins), and a measurement cut short is used but not recorded (it would keep the other
 * candidates from ever being measured). The table is written only when an entry was recorded or
 * it was corrupt. Tests: tests/correctness/tune.cpp. */
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>

#include "analysis/PipelineOrder.h"
#include "cora/Generator.h"
#include "cora/Tune.h"
#include "driver/KernelCache.h"
#include "driver/Lowering.h"
#include "driver/TuningTable.h"
#include "lower/Scheduling.h"
#include "util/Error.h"
#include "util/Hash.h"

namespace cora {

namespace {

using Clock = std::chrono::steady_clock;

/** How much faster than the default tile a candidate must run to replace it. Repeated timings of
 * one kernel on a shared 2-core machine differ by a few percent: a smaller margin would replace
 * the rule's tile with one that only measured lucky, and lose to the default on other sizes
 * (bench/results/tune.md, held-out lengths, had tuned/default 0.99x before this margin). */
constexpr double kMinGainOverDefault = 0.03;

/** A Tensor handle on a node of the pipeline (an input found by pipeline_order). */
struct NodeTensor : Tensor {
    explicit NodeTensor(std::shared_ptr<ir::TensorNode> n) { node_ = std::move(n); }
};

int vector_bits_of(const CompileOptions &o) {
    return o.vector_bits > 0 ? o.vector_bits : o.vector_bits == 0 ? host_vector_bits() : 0;
}

std::string describe(const ContractionTile &t) {
    if (!t.tiled) return "untiled";
    return std::to_string(t.rows) + "x" + std::to_string(t.vectors) + "v/" + std::to_string(t.panel);
}

/** The candidates for one contraction: the default tile first (the reference the others are
 * checked against), then narrower, taller, wider and shallower/deeper-panel tiles, then the untiled
 * nest; each only where its columns divide the row (a ragged row: any) and its accumulators fit the
 * registers. */
std::vector<ContractionTile> candidates(const ir::TunableContraction &c, int vector_bits) {
    const int lanes = vector_bits / 32, registers = vector_bits >= 512 ? 32 : 16, v0 = c.default_vectors;
    std::vector<ContractionTile> out;
    auto add = [&](int rows, int vectors, int panel) {
        if (vectors < 1 || c.width % (vectors * lanes) != 0 || rows * vectors > registers - 4 ||
            int64_t(panel) * vectors * lanes > ir::kMaxTileElements)
            return;
        ContractionTile t{true, rows, vectors, panel};
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    };
    if (v0) {
        add(4, v0, 256);
        add(4, v0 / 2, 256);
        add(8, v0 / 2, 256);
        add(6, v0, 256);
        add(8, v0, 256);
        add(2, v0 * 2, 256);
        add(4, v0 * 2, 256);
        if (c.has_panels) {
            add(4, v0, 128);
            add(4, v0, 512);
        }
    }
    out.push_back(ContractionTile{false, 4, 0, 256});
    return out;
}

ir::TensorPtr func_named(const Pipeline &p, const std::string &name) {
    std::vector<ir::TensorPtr> outs, inputs;
    for (const Func &f : p.outputs())
        outs.push_back(f.node());
    for (const ir::TensorPtr &t : ir::pipeline_order(outs, &inputs))
        if (t->name == name) return t;
    return nullptr;
}

std::string key_of(const Pipeline &p, const ir::TunableContraction &c, const std::vector<TuneSample> &samples,
                   int vector_bits) {
    ir::TensorPtr node = func_named(p, c.func);
    CORA_CHECK(node, "tune: contraction '" + c.func + "' is not in the pipeline");
    NodeTensor t(std::const_pointer_cast<ir::TensorNode>(node));
    double total = 0;
    for (const TuneSample &s : samples)
        total += double(s.shape.size_of(t));
    const double mean = samples.empty() ? 0 : total / double(samples.size());
    const int bucket = mean < 1 ? 0 : int(std::floor(std::log2(mean))) + 1;
    return c.func + "|" + util::content_hash(c.definition).substr(0, 16) + "|v" + std::to_string(vector_bits) + "|n" +
           std::to_string(bucket);
}

/** The buffers of one sample: the caller's, or every input and output allocated, float inputs
 * filled with values in [-1, 1] from a fixed seed. */
struct SampleRun {
    const TuneSample *sample;
    std::vector<Buffer> owned;
    std::vector<Binding> bindings;
    std::vector<const Buffer *> outputs;
};

std::vector<SampleRun> prepare(const Pipeline &p, const std::vector<TuneSample> &samples) {
    std::vector<ir::TensorPtr> outs, inputs;
    for (const Func &f : p.outputs())
        outs.push_back(f.node());
    (void)ir::pipeline_order(outs, &inputs);
    std::vector<SampleRun> runs(samples.size());
    std::mt19937 rng(20261127);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (size_t i = 0; i < samples.size(); i++) {
        SampleRun &r = runs[i];
        r.sample = &samples[i];
        if (!samples[i].bindings.empty()) {
            r.bindings = samples[i].bindings;
            for (const Binding &b : r.bindings)
                for (const Func &f : p.outputs())
                    if (b.tensor.same_as(f)) r.outputs.push_back(b.buffer);
            continue;
        }
        r.owned.reserve(inputs.size() + p.outputs().size());
        for (const ir::TensorPtr &in : inputs) {
            NodeTensor t(std::const_pointer_cast<ir::TensorNode>(in));
            if (t.type() != Float32)
                throw_runtime_error("tune: input '", t.name(), "' holds ", t.type().str(),
                                    "; the tuner fills only float32 inputs, so give each sample its bindings "
                                    "(TuneSample{shape, bindings})");
            r.owned.push_back(Buffer::alloc(t, samples[i].shape));
            for (int64_t k = 0; k < r.owned.back().size(); k++)
                r.owned.back().at(k) = value(rng);
            r.bindings.emplace_back(t, r.owned.back());
        }
        for (const Func &f : p.outputs()) {
            r.owned.push_back(Buffer::alloc(f, samples[i].shape));
            r.bindings.emplace_back(f, r.owned.back());
            r.outputs.push_back(&r.owned.back());
        }
    }
    return runs;
}

/** Every output element of every sample, as float (the default tile's outputs are the reference). */
std::vector<float> outputs_of(const std::vector<SampleRun> &runs) {
    std::vector<float> v;
    for (const SampleRun &r : runs)
        for (const Buffer *b : r.outputs)
            if (b->type() == Float32) v.insert(v.end(), b->data<float>(), b->data<float>() + b->size());
    return v;
}

/** Max |got - want| / max(max |want|, 1e-30); infinite on NaN or a size mismatch. */
double max_relative_difference(const std::vector<float> &got, const std::vector<float> &want) {
    if (got.size() != want.size()) return INFINITY;
    double scale = 1e-30, diff = 0;
    for (float w : want)
        scale = std::max(scale, double(std::fabs(w)));
    for (size_t i = 0; i < got.size(); i++) {
        double d = std::fabs(double(got[i]) - double(want[i]));
        if (!(d <= diff)) diff = std::isnan(d) ? INFINITY : d;
    }
    return diff / scale;
}

std::string format_ms(double ms) {
    std::ostringstream s;
    s.precision(3);
    s << ms << " ms";
    return s.str();
}

} // namespace

std::string tuning_key(const Pipeline &p, const std::string &func, const std::vector<TuneSample> &samples,
                       const CompileOptions &opts) {
    ir::LoweredModule m = driver::lower_pipeline(p, p.name(), opts);
    for (const ir::TunableContraction &c : m.tunable)
        if (c.func == func) return key_of(p, c, samples, vector_bits_of(opts));
    throw_compile_error("tuning_key: '", func, "' is not a contraction the default tiles apply to in pipeline '",
                        p.name(), "'");
}

TuneResult Pipeline::tune(const std::vector<TuneSample> &samples) const { return tune(samples, TuneOptions{}); }

TuneResult Pipeline::tune(const std::vector<TuneSample> &samples, const TuneOptions &opts) const {
    const Clock::time_point start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    const CompileOptions &base = opts.compile;
    if (!base.backend.empty() && base.backend != "cpu")
        throw_compile_error("tune of pipeline '", name_, "': only the cpu backend is tuned, not '", base.backend, "'");
    if (base.target != Target::Host)
        throw_compile_error("tune of pipeline '", name_, "': only the host target is tuned");
    if (samples.empty()) throw_runtime_error("tune of pipeline '", name_, "': no samples to measure on");
    if (opts.reps < 1) throw_runtime_error("tune of pipeline '", name_, "': reps must be positive, got ", opts.reps);
    if (!(opts.budget_seconds >= 0))
        throw_runtime_error("tune of pipeline '", name_, "': budget_seconds must be >= 0, got ", opts.budget_seconds);
    const int vector_bits = vector_bits_of(base);
    const std::string path =
        !opts.table.empty() ? opts.table
                            : (base.cache_dir.empty() ? driver::default_cache_dir() : base.cache_dir) + "/tuning.txt";

    std::ostringstream report;
    std::string problem;
    driver::TuningTable table = driver::TuningTable::load(path, &problem);
    bool rebuilt = !problem.empty(), changed = false;
    if (rebuilt) report << "tuning table " << path << " is corrupt (" << problem << "): rebuilt, not trusted\n";

    CompileOptions chosen = base;
    ir::LoweredModule plain = driver::lower_pipeline(*this, name_, base);
    std::vector<SampleRun> runs;
    int measured = 0, from_table = 0;
    for (const ir::TunableContraction &c : plain.tunable) {
        if (base.contraction_tiles.count(c.func)) {
            report << c.func << ": the caller's tile " << describe(base.contraction_tiles.at(c.func)) << "\n";
            continue;
        }
        const std::string key = key_of(*this, c, samples, vector_bits);
        if (const driver::TuningEntry *e = table.find(key); e && !opts.retune) {
            CompileOptions with = chosen;
            with.contraction_tiles[c.func] = e->tile;
            try {
                (void)driver::lower_pipeline(*this, name_, with);
                chosen = with;
                from_table++;
                report << c.func << " [" << key << "]: " << describe(e->tile) << " from the table\n";
                continue;
            } catch (const CompileError &err) {
                report << c.func << " [" << key << "]: the table's " << describe(e->tile) << " no longer fits ("
                       << err.what() << "): measured again\n";
            }
        }
        if (runs.empty()) runs = prepare(*this, samples);
        std::vector<float> reference;
        std::optional<ContractionTile> best;
        double best_ms = INFINITY, default_ms = NAN;
        std::ostringstream times;
        bool cut_short = false;
        // Compile each candidate, run it once on every sample (a warm-up, and its outputs checked
        // against the default tile's), then time the survivors in interleaved rounds.
        struct Ready {
            ContractionTile tile;
            Kernel kernel;
            double ms = INFINITY; ///< its fastest round
        };
        std::vector<Ready> ready;
        for (const ContractionTile &cand : candidates(c, vector_bits)) {
            if (!ready.empty() && elapsed() > opts.budget_seconds) { // the default tile is always measured
                cut_short = true;
                break;
            }
            CompileOptions with = chosen;
            with.contraction_tiles[c.func] = cand;
            std::optional<Kernel> k;
            try {
                k = compile(with);
            } catch (const CompileError &err) {
                times << ' ' << describe(cand) << " rejected (" << err.what() << ");";
                continue;
            }
            for (SampleRun &r : runs)
                k->run(r.sample->shape, r.bindings);
            measured++;
            std::vector<float> got = outputs_of(runs);
            if (ready.empty()) {
                reference = got; // the first candidate to run is the default tile
            } else if (double d = max_relative_difference(got, reference); !(d <= 1e-3)) {
                times << ' ' << describe(cand) << " rejected (outputs differ from the default tile's by " << d << ");";
                continue;
            }
            ready.push_back(Ready{cand, *k});
        }
        // Round-robin, a candidate's time is its fastest round (each round: one call per sample):
        // noise from other work on the machine only adds time, and drift over the measurement (a
        // clock that changes, a neighbour that starts) falls on every candidate alike, not on the
        // ones measured last.
        for (int round = 0; round < opts.reps && !ready.empty(); round++) {
            if (round > 0 && elapsed() > opts.budget_seconds) break; // complete, with fewer rounds
            for (Ready &r : ready) {
                double ms = 0;
                for (SampleRun &run : runs) {
                    const Clock::time_point t0 = Clock::now();
                    r.kernel.run(run.sample->shape, run.bindings);
                    ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
                }
                r.ms = std::min(r.ms, ms);
            }
        }
        for (const Ready &r : ready) {
            times << ' ' << describe(r.tile) << ' ' << format_ms(r.ms) << ';';
            if (r.ms < best_ms) {
                best_ms = r.ms;
                best = r.tile;
            }
        }
        if (cut_short) times << " (budget of " << opts.budget_seconds << " s spent)";
        if (!best) {
            report << c.func << " [" << key << "]: no candidate ran:" << times.str() << " the default tile\n";
            continue;
        }
        std::string kept;
        const Ready &default_tile = ready.front();
        default_ms = default_tile.ms;
        if (*best != default_tile.tile && !(best_ms < default_ms * (1 - kMinGainOverDefault))) {
            kept = "; the default tile kept: " + describe(*best) + " was less than " +
                   std::to_string(int(kMinGainOverDefault * 100)) + "% faster";
            best = default_tile.tile;
            best_ms = default_ms;
        }
        chosen.contraction_tiles[c.func] = *best;
        // Only a complete measurement is recorded: a choice cut short by the budget would
        // otherwise keep the other candidates from ever being measured.
        if (!cut_short) {
            table.set(key, driver::TuningEntry{*best, best_ms});
            changed = true;
        }
        report << c.func << " [" << key << "]: measured" << times.str() << " -> " << describe(*best) << " ("
               << format_ms(best_ms) << ", " << (std::isnan(default_ms) ? 1.0 : default_ms / best_ms)
               << "x the default tile" << kept << ")" << (cut_short ? "; not recorded (tune again to finish)" : "")
               << "\n";
    }
    if (plain.tunable.empty()) report << "no contraction left unscheduled: nothing to tune\n";
    if (changed || rebuilt) table.save(path);
    Kernel kernel = compile(chosen);
    const double seconds = elapsed();
    report << "tuned in " << seconds << " s (" << measured << " candidates measured, " << from_table
           << " from the table " << path << ")\n";
    return TuneResult{kernel, chosen, report.str(), seconds, measured, from_table, rebuilt};
}

} // namespace cora
