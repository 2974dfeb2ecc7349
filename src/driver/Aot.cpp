/** \file Ahead-of-time libraries: lower with the aux arrays built in the kernel, generate one
 * kernel per target plus the wrappers (dispatch, typed entry, size query), compile each with its
 * own -march, link lib<fn>.so and write <fn>.h. Files appear atomically (temp + rename), so a
 * build system never sees a half-written library. */
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>

#include "codegen/AotLibrary.h"
#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "cora/Generator.h"
#include "driver/AotCuda.h"
#include "driver/Compiler.h"
#include "driver/LibraryBuild.h"
#include "driver/Lowering.h"
#include "util/Error.h"

namespace cora {

namespace fs = std::filesystem;

namespace {

struct TargetInfo {
    std::string name, march;
    /** The CPU features the target needs (__builtin_cpu_supports names; none: every x86-64 CPU, or
     * the building machine's for "host"): the library checks them before it runs the target, and
     * a generator before it measures it (driver::host_runs_target). */
    std::vector<const char *> features;
    int vector_bits = 0; ///< the vector registers' width (0: the building machine's)

    /** The run-time check as a C expression, empty for "no check". */
    std::string cpu_check() const {
        if (features.empty()) return "";
        std::string s = "(__builtin_cpu_init(), true)";
        for (const char *f : features)
            s += std::string(" && __builtin_cpu_supports(\"") + f + "\")";
        return s;
    }
};

TargetInfo parse_target(const std::string &name) {
    if (name == "host") return {name, "-march=native", {}, 0};
    if (name == "x86-64-v4") return {name, "-march=x86-64-v4", {"avx512f", "avx512bw", "avx512dq", "avx512vl"}, 512};
    if (name == "x86-64-v3") return {name, "-march=x86-64-v3", {"avx2", "fma", "bmi2"}, 256};
    if (name == "x86-64-v2") return {name, "-march=x86-64-v2", {"sse4.2", "popcnt"}, 128};
    if (name == "x86-64") return {name, "-march=x86-64", {}, 128};
    throw_compile_error("unknown target '", name,
                        "'; expected host, x86-64-v4, x86-64-v3, x86-64-v2 or x86-64 (or CUDA targets: cuda-sm_<NN>, "
                        "cuda-cpu-threads)");
}

std::vector<TargetInfo> parse_targets(const std::string &list) {
    std::vector<TargetInfo> v;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) v.push_back(parse_target(item));
    if (v.empty()) throw_compile_error("no target given");
    for (size_t i = 0; i < v.size(); i++)
        if (v[i].name == "host" && v.size() > 1)
            throw_compile_error("target 'host' has no run-time check and cannot be combined with other targets");
    return v;
}

} // namespace

bool driver::host_runs_target(const std::string &target) {
    __builtin_cpu_init();
    for (const char *f : parse_target(target).features) {
        // __builtin_cpu_supports takes only a string literal: the features parse_target names.
        const std::string name = f;
        const bool has = name == "avx512f"    ? __builtin_cpu_supports("avx512f")
                         : name == "avx512bw" ? __builtin_cpu_supports("avx512bw")
                         : name == "avx512dq" ? __builtin_cpu_supports("avx512dq")
                         : name == "avx512vl" ? __builtin_cpu_supports("avx512vl")
                         : name == "avx2"     ? __builtin_cpu_supports("avx2")
                         : name == "fma"      ? __builtin_cpu_supports("fma")
                         : name == "bmi2"     ? __builtin_cpu_supports("bmi2")
                         : name == "sse4.2"   ? __builtin_cpu_supports("sse4.2")
                         : name == "popcnt"   ? __builtin_cpu_supports("popcnt")
                                              : throw InternalError("no host check for CPU feature " + name);
        if (!has) return false;
    }
    return true;
}

int driver::target_vector_bits(const std::string &target) { return parse_target(target).vector_bits; }

void driver::check_target_list(const std::string &targets) {
    if (driver::names_cuda_target(targets))
        driver::check_cuda_target_list(targets);
    else
        parse_targets(targets);
}

AotResult compile_to_library(const Pipeline &pipeline, const AotOptions &options) {
    return compile_to_library(std::vector<Pipeline>{pipeline}, options);
}

AotResult compile_to_library(const std::vector<Pipeline> &per_target, const AotOptions &options) {
    if (per_target.empty()) throw_compile_error("compile_to_library: no pipeline");
    std::string fn = options.function_name.empty() ? per_target[0].name() : options.function_name;
    if (fn.empty() || ir::c_identifier(fn) != fn || std::isdigit((unsigned char)fn[0]))
        throw_compile_error("function name '", fn, "' is not a C identifier");
    if (driver::names_cuda_target(options.target)) {
        if (!options.target_tiles.empty())
            throw_compile_error("compile_to_library: target_tiles are register tiles of CPU targets, not of '",
                                options.target, "'");
        return driver::compile_cuda_library(per_target, fn, options);
    }
    std::vector<TargetInfo> targets = parse_targets(options.target);
    if (per_target.size() != 1 && per_target.size() != targets.size())
        throw_compile_error("compile_to_library: ", per_target.size(), " pipelines for ", targets.size(),
                            " targets; give one pipeline, or one per target");
    if (!options.target_tiles.empty() && options.target_tiles.size() != targets.size())
        throw_compile_error("compile_to_library: contraction tiles for ", options.target_tiles.size(), " targets, but ",
                            targets.size(), " targets");
    CompileOptions co = options.compile;
    co.build_aux_in_kernel = true;
    // One lowering per target, or one per vector width when a single pipeline serves every
    // target: default schedules size their register tiles for the target's vector registers.
    // Tiles given per target (tuned) make each target its own lowering.
    std::vector<ir::LoweredModule> modules;
    std::vector<size_t> module_of(targets.size());
    std::map<std::tuple<size_t, int, size_t>, size_t> lowered; // (pipeline, vector bits, tiles) -> module
    for (size_t i = 0; i < targets.size(); i++) {
        size_t p = per_target.size() == 1 ? 0 : i;
        CompileOptions ti = co;
        if (ti.vector_bits == 0) ti.vector_bits = targets[i].vector_bits;
        if (!options.target_tiles.empty()) ti.contraction_tiles = options.target_tiles[i];
        auto [it, added] =
            lowered.emplace(std::make_tuple(p, ti.vector_bits, options.target_tiles.empty() ? 0 : i), modules.size());
        if (added) modules.push_back(driver::lower_pipeline(per_target[p], fn, ti));
        module_of[i] = it->second;
    }
    std::vector<const ir::Module *> variants;
    std::vector<std::string> checks;
    for (size_t i = 0; i < targets.size(); i++) {
        checks.push_back(targets[i].cpu_check());
        variants.push_back(&modules[module_of[i]]);
    }
    ir::AotSource src = ir::codegen_c_aot(variants, fn, checks);
    const ir::LoweredModule &m = modules[0];

    driver::LibraryBuild lib(options.output_dir, fn);
    std::vector<std::string> cxx = driver::compiler_command(options.compile.cxx);
    std::vector<std::string> common = {"-std=c++17", "-O3", "-fno-math-errno", "-fPIC", "-fopenmp", "-w"}; // as JIT.cpp
    for (const std::string &f : driver::sanitizer_flags())
        common.push_back(f);
    std::vector<std::string> sources, objects; // file names in the work directory
    auto build = [&](const std::string &name, const std::string &text, const std::string &march) {
        fs::path cpp = lib.write(name, text), obj = lib.path(name + ".o");
        std::vector<std::string> args = common;
        for (const std::string &f : driver::target_flags(march))
            args.push_back(f);
        args.insert(args.end(), {"-c", cpp.string(), "-o", obj.string()});
        lib.run(driver::with_args(cxx, args), "building the library");
        sources.push_back(name);
        objects.push_back(obj.string());
    };
    for (size_t i = 0; i < src.kernels.size(); i++)
        build(src.kernels.size() == 1 ? fn + "_kernel.cpp" : fn + "_kernel_" + std::to_string(i) + ".cpp",
              src.kernels[i], targets[i].march);
    // The wrappers run on every CPU the library targets: the baseline ISA unless only the host.
    build(fn + ".cpp", src.wrappers,
          targets.size() == 1 && targets[0].name == "host" ? "-march=native" : "-march=x86-64");
    std::vector<std::string> link = {"-shared", "-fopenmp", "-Wl,-soname,lib" + fn + ".so"};
    for (const std::string &f : driver::sanitizer_flags())
        link.push_back(f);
    link.insert(link.end(), objects.begin(), objects.end());
    link.insert(link.end(), {"-o", lib.path("lib" + fn + ".so").string()});
    lib.run(driver::with_args(cxx, link), "building the library");
    std::string notes;
    if (!options.header_notes.empty()) {
        notes = "/*\n";
        std::stringstream lines(options.header_notes);
        for (std::string l; std::getline(lines, l);) {
            for (size_t at; (at = l.find("*/")) != std::string::npos;) // the comment must not end early
                l.replace(at, 2, "* /");
            notes += " * " + l + "\n";
        }
        notes += " */\n";
    }
    lib.write(fn + ".h", notes + src.header);

    AotResult r;
    r.library = lib.publish("lib" + fn + ".so");
    r.header = lib.publish(fn + ".h");
    if (options.keep_sources)
        for (const std::string &name : sources)
            r.sources.push_back(lib.publish(name));
    r.arguments = driver::argument_info(m);
    return r;
}

} // namespace cora
