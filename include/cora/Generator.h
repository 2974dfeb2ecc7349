/** \file Ahead-of-time compilation: pipelines to shared libraries with a C header, and
 * generators, the programs that define a pipeline for the `cora_add_library` CMake function.
 *
 * A generator is a class with compile-time parameters (GeneratorParam: tile sizes, switches)
 * whose build() defines the Funcs and their schedules and returns the outputs:
 *
 *     class Scale : public cora::Generator {
 *     public:
 *         cora::GeneratorParam factor{this, "factor", 2, "the constant to multiply by"};
 *         std::vector<cora::Func> build() override { ...; return {out}; }
 *     };
 *     CORA_REGISTER_GENERATOR(Scale, "scale")
 *
 * Linked with cora::generator_main, it becomes a command line (see generator_main) that
 * writes lib<fn>.so and <fn>.h. Run-time params, length arrays and the input and output
 * tensors of the pipeline become the arguments of the C function; the library builds its own
 * aux arrays, so callers need nothing but the header and the library. */
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** Where and for which CPUs an ahead-of-time library is built. */
struct AotOptions {
    std::string output_dir = ".";
    /** The C function's name (a C identifier); the files are lib<name>.so and <name>.h. */
    std::string function_name;
    /** Comma-separated targets, one kernel each; at run time the first the CPU supports runs
     * (checked once with __builtin_cpu_supports; a CPU that supports none gets an error, not an
     * illegal instruction). "host" (this CPU: -march=native, alone, unchecked), "x86-64-v4"
     * (AVX-512), "x86-64-v3" (AVX2 + FMA), "x86-64-v2", "x86-64". E.g. "x86-64-v4,x86-64-v3".
     * Or CUDA targets (docs/gpu.md): "cuda-sm_<NN>", one or more (a fatbin with a cubin for each),
     * or "cuda-cpu-threads" alone; the library then takes a context and a stream, tensors in
     * device memory. */
    std::string target = "host";
    /** Lowering options (prover, guards); build_aux_in_kernel is always on. */
    CompileOptions compile;
    /** Also write <name>.cpp (and <name>_k<i>.cpp per target), the generated sources. */
    bool keep_sources = true;
    /** CPU targets: the register tiles of contractions left unscheduled, one map per target of
     * `target`, in order (what Pipeline::tune chose for each: a generator's --tune); empty:
     * compile.contraction_tiles for every target. */
    std::vector<std::map<std::string, ContractionTile>> target_tiles;
    /** Lines written as a comment at the top of <name>.h (a generator's --tune: what was measured). */
    std::string header_notes;
};

/** The files an ahead-of-time compilation wrote. */
struct AotResult {
    std::string library, header;
    std::vector<std::string> sources;
    std::vector<KernelArgInfo> arguments; ///< the C function's arguments, in order
};

/** Lower `pipeline`, generate C++ for every target and compile it into a shared library.
 * CompileError for an illegal pipeline or target; Error when the compiler fails. */
AotResult compile_to_library(const Pipeline &pipeline, const AotOptions &options);
/** The same with one pipeline per target of options.target, in order (a schedule per target:
 * Generator::target() and vector_bits()); every pipeline must define the same function (argument
 * names, kinds, types and storage layouts), since they share one header. */
AotResult compile_to_library(const std::vector<Pipeline> &per_target, const AotOptions &options);

class Generator;

/** A compile-time integer parameter of a generator, set on the command line as name=value
 * (value: an integer, or true/false). Declare it as a member: {this, name, default, help}. */
class GeneratorParam {
public:
    GeneratorParam(Generator *owner, std::string name, int64_t default_value, std::string help = "");
    GeneratorParam(const GeneratorParam &) = delete;
    GeneratorParam &operator=(const GeneratorParam &) = delete;

    int64_t value() const { return value_; }
    operator int64_t() const { return value_; }
    const std::string &name() const { return name_; }
    const std::string &help() const { return help_; }
    int64_t default_value() const { return default_; }
    /** Parse and set; CompileError naming the parameter when `text` is not a value. */
    void set(const std::string &text);

private:
    std::string name_, help_;
    int64_t default_, value_;
};

class Generator {
public:
    virtual ~Generator() = default;
    /** Define the computation and its schedule with the parameters' values; return the outputs. */
    virtual std::vector<Func> build() = 0;

    const std::vector<GeneratorParam *> &params() const { return params_; }
    /** Set parameters from name=value pairs; CompileError for an unknown name (listing the known). */
    void set_params(const std::map<std::string, std::string> &values);

    /** The target this build() is for: the generator runs build() once per target of -t (on a
     * fresh instance each time), so a schedule may depend on it — e.g. register tiles sized to the
     * target's vector registers. "host" when no target was named. */
    const std::string &target() const { return target_; }
    /** The vector width of target(), in bits: 512 (x86-64-v4), 256 (x86-64-v3), 128 (x86-64-v2,
     * x86-64); for "host" that of the CPU the generator runs on. */
    int vector_bits() const;
    void set_target(const std::string &target) { target_ = target; }

private:
    friend class GeneratorParam;
    std::vector<GeneratorParam *> params_;
    std::string target_ = "host";
};

/** The vector width in bits of the CPU this process runs on (512 with AVX-512F, 256 with AVX2,
 * else 128): what a JIT kernel compiled with -march=native can use. */
int host_vector_bits();

using GeneratorFactory = std::function<std::unique_ptr<Generator>()>;

/** Register a generator under `name` (done by CORA_REGISTER_GENERATOR at static init). */
bool register_generator(const std::string &name, GeneratorFactory factory);
/** The registered generators' names, sorted. */
std::vector<std::string> generator_names();
/** A new instance of the named generator; CompileError when there is none. */
std::unique_ptr<Generator> make_generator(const std::string &name);

/** The generator command line:
 *     <gen> -g <generator> -o <dir> [-f <function>] [-t <targets>] [name=value ...]
 *     <gen> --list | --help [-g <generator>]
 * -g may be left out when one generator is registered; -f defaults to the generator's name.
 * Writes lib<function>.so, <function>.h and the sources to <dir>. Returns the exit status and
 * prints errors (with the parameters the generator knows) to stderr. */
int generator_main(int argc, char **argv);

} // namespace cora

#define CORA_GENERATOR_CONCAT_(a, b) a##b
#define CORA_GENERATOR_CONCAT(a, b) CORA_GENERATOR_CONCAT_(a, b)
/** Register `Class` (a cora::Generator with a default constructor) under the string `name`. */
#define CORA_REGISTER_GENERATOR(Class, name)                                                                           \
    static const bool CORA_GENERATOR_CONCAT(cora_registered_generator_, __LINE__) =                                    \
        ::cora::register_generator(name, [] { return std::unique_ptr<::cora::Generator>(new Class()); });
