/** \file Measured schedules: Pipeline::tune times a few register tiles for each contraction left
 * unscheduled on sample shapes, keeps the fastest in a table, and compiles the winner. */
#pragma once

#include <string>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** One shape to measure on, with the buffers to run on (empty: the tuner allocates every input
 * and output and fills float inputs with values in [-1, 1]; a pipeline with integer inputs, such
 * as sparse indices, needs its bindings given). */
struct TuneSample {
    RaggedShape shape;
    std::vector<Binding> bindings;
    TuneSample(RaggedShape s, std::vector<Binding> b = {}) : shape(std::move(s)), bindings(std::move(b)) {}
};

struct TuneOptions {
    /** The options every candidate is compiled with (backend "cpu"; contraction_tiles given here
     * are kept and not tuned). */
    CompileOptions compile;
    /** The tuning table (a text file, written atomically); empty: tuning.txt in the kernel cache
     * directory (compile.cache_dir, else CORA_CACHE_DIR, ...). */
    std::string table;
    /** Seconds of measuring after which the remaining candidates are skipped (the best so far
     * wins; compile time counts). */
    double budget_seconds = 60;
    /** Timed rounds: each round calls every candidate once per sample, the candidates interleaved;
     * a candidate's time is its fastest round (after the budget, no further round starts). */
    int reps = 5;
    /** Measure even where the table has an entry, and replace it. */
    bool retune = false;
};

/** What tune() did, and the compiled winner. */
struct TuneResult {
    Kernel kernel;
    /** The options the winner was compiled with (contraction_tiles filled): compile() with them
     * gives the same kernel without the table. */
    CompileOptions options;
    /** One line per contraction: its table key, where the choice came from (table or measured,
     * with every candidate's time), and the total time. */
    std::string report;
    double seconds = 0;         ///< wall time of tune(), compiling included
    int measured = 0;           ///< candidates compiled and timed
    int from_table = 0;         ///< contractions whose choice the table gave
    bool table_rebuilt = false; ///< the table was unreadable or corrupt and was written anew
};

/** The samples in a text file, for `pipeline`: one shape per line, `name=value` for every param
 * (an integer) and length array (comma-separated integers, e.g. `len=12,40,7`) of the pipeline;
 * `#` starts a comment (a pipeline of constant sizes has one sample, the empty shape, and its file
 * holds only comments). What a generator's `--tune` reads (docs/user-guide.md, "Tuning a
 * library"). RuntimeError naming the file, the line and the name for an unknown or missing name,
 * a value that is not an integer or lies outside its declared range, an array whose count is not
 * its count expression's value, or a file with no sample. */
std::vector<TuneSample> read_tune_samples(const Pipeline &pipeline, const std::string &path);

/** The table key of contraction `func` of `p` on these samples: the Func's name, a hash of its
 * domain and definition, the vector width and the power-of-two bucket of its mean element count
 * over the samples. For tools and tests. */
std::string tuning_key(const Pipeline &p, const std::string &func, const std::vector<TuneSample> &samples,
                       const CompileOptions &opts = {});

} // namespace cora
