/** \file Generators: compile-time parameters, the registry, and the generator command line. */
#include "cora/Generator.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "codegen/CRuntime.h"
#include "cora/Tune.h"
#include "driver/AotCuda.h"
#include "util/Error.h"

namespace cora {

GeneratorParam::GeneratorParam(Generator *owner, std::string name, int64_t default_value, std::string help)
    : name_(std::move(name)), help_(std::move(help)), default_(default_value), value_(default_value) {
    CORA_CHECK(owner != nullptr, "GeneratorParam '", name_, "' has no generator");
    owner->params_.push_back(this);
}

void GeneratorParam::set(const std::string &text) {
    if (text == "true" || text == "false") {
        value_ = text == "true";
        return;
    }
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || errno == ERANGE)
        throw_compile_error("generator parameter '", name_, "': '", text, "' is not an integer or true/false");
    value_ = v;
}

int host_vector_bits() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 512;
    if (__builtin_cpu_supports("avx2")) return 256;
    return 128;
}

int Generator::vector_bits() const {
    if (target_ == "x86-64-v4") return 512;
    if (target_ == "x86-64-v3") return 256;
    if (target_ == "host") return host_vector_bits();
    return 128;
}

void Generator::set_params(const std::map<std::string, std::string> &values) {
    for (auto &entry : values) {
        const std::string &name = entry.first, &text = entry.second; // (clang 14: no lambda capture of bindings)
        auto it = std::find_if(params_.begin(), params_.end(), [&](GeneratorParam *p) { return p->name() == name; });
        if (it == params_.end()) {
            std::string known;
            for (GeneratorParam *p : params_)
                known += (known.empty() ? "" : ", ") + p->name();
            throw_compile_error("unknown generator parameter '", name, "' (known: ", known.empty() ? "none" : known,
                                ")");
        }
        (*it)->set(text);
    }
}

namespace {

std::map<std::string, GeneratorFactory> &registry() {
    static std::map<std::string, GeneratorFactory> r;
    return r;
}

void print_usage(std::ostream &os, const char *prog) {
    os << "usage: " << prog << " [-g generator] -o output_dir [-f function_name] [-t targets] [name=value ...]\n"
       << "           [--tune samples_file [--tune-table file] [--tune-budget seconds] [--retune]]\n"
       << "       " << prog << " --list | --help [-g generator]\n"
       << "Writes lib<function>.so, <function>.h and the generated sources to output_dir.\n"
       << "  -g  the generator (may be left out when only one is linked in)\n"
       << "  -f  the C function's name (default: the generator's name)\n"
       << "  -t  comma-separated targets, tried in order at run time: host (default), x86-64-v4,\n"
       << "      x86-64-v3, x86-64-v2, x86-64; or CUDA: cuda-sm_<NN> (one or more), cuda-cpu-threads\n"
       << "  name=value  a generator parameter (integer or true/false)\n"
       << "  --tune  measure the register tiles of the contractions left unscheduled on the shapes of\n"
       << "      samples_file (one per line: name=value for each param, comma-separated lengths for each\n"
       << "      length array) for each CPU target this machine runs, and build the fastest\n"
       << "  --tune-table  the tuning table to read and extend (default: tuning.txt in the kernel cache)\n"
       << "  --tune-budget  seconds of measuring per target before the best so far wins (default 60)\n"
       << "  --retune  measure again where the table has an entry\n";
}

void print_params(std::ostream &os, const std::string &name, const Generator &g) {
    os << "generator '" << name << "' parameters:" << (g.params().empty() ? " none" : "") << "\n";
    for (const GeneratorParam *p : g.params())
        os << "  " << p->name() << " (default " << p->default_value() << ")" << (p->help().empty() ? "" : ": ")
           << p->help() << "\n";
}

} // namespace

bool register_generator(const std::string &name, GeneratorFactory factory) {
    if (!registry().emplace(name, std::move(factory)).second)
        throw InternalError("two generators are registered as '" + name + "'");
    return true;
}

std::vector<std::string> generator_names() {
    std::vector<std::string> v;
    for (auto &[name, f] : registry())
        v.push_back(name);
    return v;
}

std::unique_ptr<Generator> make_generator(const std::string &name) {
    auto it = registry().find(name);
    if (it == registry().end()) {
        std::string known;
        for (const std::string &n : generator_names())
            known += (known.empty() ? "" : ", ") + n;
        throw_compile_error("no generator '", name, "' (linked in: ", known.empty() ? "none" : known, ")");
    }
    return it->second();
}

namespace {

/** A mistake on the generator's command line: exit status 2 (build errors are 1). */
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** --tune: for each target (one pipeline each), Pipeline::tune on the samples where this CPU runs
 * the target, else the default tiles; fills options.target_tiles and the header's notes, and
 * prints each report. A bad samples file is a UsageError. */
void tune_targets(const std::vector<Pipeline> &pipelines, const std::vector<std::string> &targets,
                  const std::string &samples_path, TuneOptions tune, AotOptions &options) {
    std::ostringstream notes;
    notes << "Register tiles measured at build time (--tune " << samples_path << "):\n";
    for (size_t i = 0; i < targets.size(); i++) {
        std::vector<TuneSample> samples;
        try {
            samples = read_tune_samples(pipelines[i], samples_path);
        } catch (const RuntimeError &e) {
            throw UsageError(e.what());
        }
        if (!driver::host_runs_target(targets[i])) {
            const std::string line = targets[i] + ": not measured (this CPU cannot run it): the default tiles";
            std::cout << "cora: tuning " << options.function_name << ": " << line << "\n";
            notes << line << "\n";
            options.target_tiles.push_back(options.compile.contraction_tiles);
            continue;
        }
        tune.compile = options.compile;
        tune.compile.vector_bits = driver::target_vector_bits(targets[i]);
        TuneResult r = pipelines[i].tune(samples, tune);
        std::cout << "cora: tuning " << options.function_name << " for " << targets[i] << " on " << samples.size()
                  << " samples:\n"
                  << r.report;
        notes << targets[i] << ", " << samples.size() << " samples:\n" << r.report;
        options.target_tiles.push_back(r.options.contraction_tiles);
    }
    options.header_notes = notes.str();
}

} // namespace

int generator_main(int argc, char **argv) {
    const char *prog = argc > 0 ? argv[0] : "generator";
    std::string gen_name, fn, out_dir;
    AotOptions options;
    std::map<std::string, std::string> values;
    bool list = false, help = false;
    std::string tune_samples;
    TuneOptions tune;
    std::vector<std::string> tune_only; // options that mean nothing without --tune
    try {
        std::unique_ptr<Generator> gen;
        try {
            for (int i = 1; i < argc; i++) {
                std::string a = argv[i];
                auto next = [&]() -> std::string {
                    if (i + 1 >= argc || argv[i + 1][0] == '\0') throw UsageError("option " + a + " needs a value");
                    return argv[++i];
                };
                if (a == "-g") {
                    gen_name = next();
                } else if (a == "-o") {
                    out_dir = next();
                } else if (a == "-f") {
                    fn = next();
                } else if (a == "-t") {
                    options.target = next();
                } else if (a == "--tune") {
                    tune_samples = next();
                } else if (a == "--tune-table") {
                    tune.table = next();
                    tune_only.push_back(a);
                } else if (a == "--tune-budget") {
                    const std::string text = next();
                    char *end = nullptr;
                    errno = 0;
                    tune.budget_seconds = std::strtod(text.c_str(), &end);
                    if (*end != '\0' || errno == ERANGE || !(tune.budget_seconds >= 0) || tune.budget_seconds > 1e6)
                        throw UsageError("--tune-budget must be a number of seconds in [0, 1e6], got '" + text + "'");
                    tune_only.push_back(a);
                } else if (a == "--retune") {
                    tune.retune = true;
                    tune_only.push_back(a);
                } else if (a == "--list") {
                    list = true;
                } else if (a == "-h" || a == "--help") {
                    help = true;
                } else if (a.find('=') != std::string::npos && a[0] != '-' && a[0] != '=') {
                    const std::string name = a.substr(0, a.find('='));
                    if (values.count(name)) throw UsageError("generator parameter '" + name + "' is given twice");
                    values[name] = a.substr(a.find('=') + 1);
                } else {
                    throw UsageError("unknown argument '" + a + "' (see --help)");
                }
            }
            if (list) {
                for (const std::string &n : generator_names())
                    std::cout << n << "\n";
                return 0;
            }
            if (gen_name.empty()) {
                std::vector<std::string> names = generator_names();
                if (names.size() != 1)
                    throw UsageError(std::to_string(names.size()) + " generators are linked in; choose one with -g");
                gen_name = names[0];
            }
            gen = make_generator(gen_name);
            if (help) {
                print_usage(std::cout, prog);
                print_params(std::cout, gen_name, *gen);
                return 0;
            }
            if (out_dir.empty()) throw UsageError("no output directory (-o)");
            gen->set_params(values);
            driver::check_target_list(options.target);
            if (tune_samples.empty() && !tune_only.empty())
                throw UsageError(tune_only[0] + " needs --tune (the samples to measure on)");
            if (!tune_samples.empty() && driver::names_cuda_target(options.target))
                throw UsageError("--tune measures CPU targets only, not '" + options.target + "'");
            if (!fn.empty() && (ir::c_identifier(fn) != fn || std::isdigit((unsigned char)fn[0])))
                throw UsageError("function name '" + fn + "' (-f) is not a C identifier");
        } catch (const CompileError &e) {
            // Before anything is built, a CompileError is about the command line: an unknown
            // generator, parameter or target, or a parameter's value (each message names it).
            throw UsageError(e.what());
        }
        options.output_dir = out_dir;
        options.function_name = fn.empty() ? gen_name : fn;
        // build() once per target, each on a fresh instance (builds keep their Funcs alive).
        std::vector<std::unique_ptr<Generator>> builds;
        std::vector<Pipeline> pipelines;
        std::vector<std::string> target_names;
        std::stringstream targets(options.target);
        for (std::string t; std::getline(targets, t, ',');) {
            if (t.empty()) continue;
            builds.push_back(make_generator(gen_name));
            builds.back()->set_params(values);
            builds.back()->set_target(t);
            pipelines.emplace_back(builds.back()->build(), options.function_name);
            target_names.push_back(t);
        }
        if (!tune_samples.empty()) tune_targets(pipelines, target_names, tune_samples, tune, options);
        AotResult r = compile_to_library(pipelines, options);
        std::cout << "cora: wrote " << r.library << " and " << r.header << "\n";
        return 0;
    } catch (const UsageError &e) {
        // One line (the parameter or option named in it), as every command line of cora's.
        std::cerr << prog << ": error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception &e) {
        std::cerr << prog << ": error: " << e.what() << "\n";
        return 1;
    }
}

} // namespace cora
