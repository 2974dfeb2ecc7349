/** \file CUDA AOT libraries (AotCuda.h): lower for Target::Cuda with the aux arrays built by the
 * host entry, compile the device code for each architecture with NVRTC (cached as for the JIT),
 * pack cubins and PTX into a fatbin with the toolkit's fatbinary, then compile the host side
 * (codegen_cuda_aot) with the host compiler and link lib<fn>.so. The library links no CUDA
 * library: it loads libcuda.so.1 when a context is created. */
#include "driver/AotCuda.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "codegen/AotLibrary.h"
#include "codegen/CodeGen_C.h"
#include "driver/Compiler.h"
#include "driver/LibraryBuild.h"
#include "driver/Lowering.h"
#include "driver/Nvrtc.h"
#include "util/Error.h"

namespace cora::driver {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_targets(const std::string &list) {
    std::vector<std::string> v;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) v.push_back(item);
    return v;
}

/** sm_<NN> of "cuda-sm_<NN>"; -1 for "cuda-cpu-threads"; CompileError otherwise. */
int parse_cuda_target(const std::string &t) {
    if (t == "cuda-cpu-threads") return -1;
    const std::string prefix = "cuda-sm_";
    bool digits = t.size() > prefix.size() && t.size() <= prefix.size() + 3 && t.compare(0, prefix.size(), prefix) == 0;
    for (size_t i = prefix.size(); digits && i < t.size(); i++)
        digits = t[i] >= '0' && t[i] <= '9';
    if (!digits)
        throw_compile_error("unknown CUDA target '", t,
                            "'; expected cuda-sm_<NN> (e.g. cuda-sm_90 for H100, cuda-sm_80 for A100) or "
                            "cuda-cpu-threads");
    int arch = std::atoi(t.c_str() + prefix.size());
    if (arch < 50) throw_compile_error("CUDA target '", t, "': architectures before sm_50 are not supported");
    return arch;
}

/** The toolkit's fatbinary: next to CORA_CUDA_BIN_DIR (the toolkit cora was built with), in
 * $CUDA_HOME/bin or $CUDA_PATH/bin, beside NVRTC (<root>/lib64 -> <root>/bin), in /usr/local/cuda/bin,
 * or on PATH. */
std::string find_fatbinary(const std::string &nvrtc_path) {
    std::vector<fs::path> dirs;
#ifdef CORA_CUDA_BIN_DIR
    dirs.emplace_back(CORA_CUDA_BIN_DIR);
#endif
    for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
        if (const char *v = std::getenv(env); v && *v) dirs.push_back(fs::path(v) / "bin");
    if (!nvrtc_path.empty()) dirs.push_back(fs::path(nvrtc_path).parent_path().parent_path() / "bin");
    dirs.emplace_back("/usr/local/cuda/bin");
    if (const char *path = std::getenv("PATH")) {
        std::stringstream ss(path);
        for (std::string d; std::getline(ss, d, ':');)
            if (!d.empty()) dirs.emplace_back(d);
    }
    std::string looked;
    for (const fs::path &d : dirs) {
        std::error_code ec;
        fs::path f = d / "fatbinary";
        if (fs::is_regular_file(f, ec)) return f.string();
        looked += (looked.empty() ? "" : ", ") + d.string();
    }
    throw_runtime_error("cannot build a CUDA library: the CUDA toolkit's fatbinary was not found (looked in ", looked,
                        ")");
}

std::string read_file(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (!f) throw Error("cora: cannot read '" + p.string() + "'");
    return ss.str();
}

} // namespace

bool names_cuda_target(const std::string &targets) {
    for (const std::string &t : split_targets(targets))
        if (t.compare(0, 4, "cuda") == 0) return true;
    return false;
}

std::vector<int> check_cuda_target_list(const std::string &targets, bool *on_cpu_threads) {
    std::vector<std::string> names = split_targets(targets);
    std::vector<int> archs;
    bool on_cpu = false;
    std::set<std::string> seen;
    for (const std::string &t : names) {
        if (t.compare(0, 4, "cuda") != 0)
            throw_compile_error("target '", t,
                                "' cannot be combined with CUDA targets: a library is for CPUs or for "
                                "CUDA devices");
        if (!seen.insert(t).second) throw_compile_error("target '", t, "' is named twice");
        int arch = parse_cuda_target(t);
        if (arch < 0)
            on_cpu = true;
        else
            archs.push_back(arch);
    }
    if (on_cpu && names.size() > 1)
        throw_compile_error("target 'cuda-cpu-threads' cannot be combined with other targets");
    if (on_cpu_threads) *on_cpu_threads = on_cpu;
    return archs;
}

AotResult compile_cuda_library(const std::vector<Pipeline> &per_target, const std::string &fn,
                               const AotOptions &options) {
    std::vector<std::string> names = split_targets(options.target);
    bool on_cpu = false;
    std::vector<int> archs = check_cuda_target_list(options.target, &on_cpu);
    if (per_target.size() != 1 && per_target.size() != names.size())
        throw_compile_error("compile_to_library: ", per_target.size(), " pipelines for ", names.size(),
                            " targets; give one pipeline, or one per target");
    CompileOptions co = options.compile;
    co.build_aux_in_kernel = true;
    co.target = Target::Cuda;
    ir::LoweredModule m = lower_pipeline(per_target[0], fn, co);
    for (const ir::ModuleArg &a : m.entry().args)
        if (a.tensor && a.tensor->has_value_range)
            throw_compile_error("pipeline '", per_target[0].name(), "': index tensor '", a.name,
                                "': a CUDA library's entry gets tensors in device memory, where nothing would check "
                                "its values; index tensors run on CUDA through the JIT runtime (Pipeline::compile"
                                "(\"cuda\")), which checks them where they pass through the host");

    LibraryBuild lib(options.output_dir, fn);
    std::vector<std::string> sources; // file names in the work directory
    std::string fatbin;
    if (!on_cpu) {
        CudaProgram program = cuda_program(m, archs, co);
        std::string why;
        std::shared_ptr<Nvrtc> nvrtc = Nvrtc::load(&why);
        std::vector<std::string> cmd = {find_fatbinary(nvrtc ? nvrtc->path() : ""), "--64",
                                        "--create=" + lib.path(fn + ".fatbin").string()};
        int oldest = 0;
        for (size_t i = 0; i < program.binaries.size(); i++) {
            const CudaBinary &b = program.binaries[i];
            std::string sm = std::to_string(b.arch);
            fs::path cubin = lib.write(fn + "_sm_" + sm + ".cubin", b.cubin);
            cmd.push_back("--image3=kind=elf,sm=" + sm + ",file=" + cubin.string());
            if (b.arch < program.binaries[(size_t)oldest].arch) oldest = (int)i;
        }
        // PTX of the oldest architecture: newer GPUs than any cubin run it, compiled by their driver.
        const CudaBinary &ptx = program.binaries[(size_t)oldest];
        fs::path ptx_file = lib.write(fn + ".ptx", ptx.ptx);
        cmd.push_back("--image3=kind=ptx,sm=" + std::to_string(ptx.arch) + ",file=" + ptx_file.string());
        lib.run(cmd, "packing the fatbin");
        fatbin = read_file(lib.path(fn + ".fatbin"));
        lib.write(fn + ".cu", program.source);
        sources.push_back(fn + ".cu");
    }
    ir::CudaAotSource src =
        ir::codegen_cuda_aot(m, fn, on_cpu ? ir::CudaDeviceKind::CpuThreads : ir::CudaDeviceKind::Gpu, fatbin, archs);

    std::vector<std::string> cxx = compiler_command(options.compile.cxx);
    // Hidden by default: only the functions of <fn>.h are exported, so libraries of several
    // functions (each with its own runtime) can be linked into one program.
    std::vector<std::string> common = {"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread", "-w"};
    for (const std::string &f : sanitizer_flags())
        common.push_back(f);
    std::vector<std::string> objects;
    auto build = [&](const std::string &name, const std::string &text) {
        fs::path cpp = lib.write(name, text), obj = lib.path(name + ".o");
        std::vector<std::string> args = common;
        args.insert(args.end(), {"-c", cpp.string(), "-o", obj.string()});
        lib.run(with_args(cxx, args), "building the library");
        sources.push_back(name);
        objects.push_back(obj.string());
    };
    build(fn + ".cpp", src.wrappers);
    if (on_cpu) build(fn + "_on_cpu.cpp", src.on_cpu);
    std::vector<std::string> link = {"-shared", "-pthread", "-Wl,-soname,lib" + fn + ".so"};
    for (const std::string &f : sanitizer_flags())
        link.push_back(f);
    link.insert(link.end(), objects.begin(), objects.end());
    link.insert(link.end(), {"-ldl", "-o", lib.path("lib" + fn + ".so").string()});
    lib.run(with_args(cxx, link), "building the library");
    lib.write(fn + ".h", src.header);

    AotResult r;
    r.library = lib.publish("lib" + fn + ".so");
    r.header = lib.publish(fn + ".h");
    if (options.keep_sources)
        for (const std::string &name : sources)
            r.sources.push_back(lib.publish(name));
    r.arguments = argument_info(m);
    return r;
}

} // namespace cora::driver
