// CUDA AOT libraries (compile_to_library with cuda-* targets): the generated library's host path
// (argument checks, aux arrays built on the host, one staged transfer per shape, launches) run on
// CPU threads (cuda-cpu-threads) against the reference; the GPU library for sm_80 + sm_90 built
// with its fatbin and, without a GPU, refusing to create a context with the reason; bad targets.
#include "common/ragged_testing.h"
#include "common/two_gpu_ops.h"
#include "vgemm/vgemm_gpu_def.h"

#include <cora/Cuda.h>
#include <cora/Generator.h>
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cora;
using Catch::Matchers::Contains;

// The libraries' opaque context types, declared as their headers declare them: UBSan checks that a
// function is called through a pointer of its own type.
struct two_ops_context;
struct vgemm_cuda_context;

namespace {

CompileOptions emulated() {
    CompileOptions o;
    o.target = Target::CudaEmulated;
    return o;
}

std::filesystem::path aot_root() {
    return std::filesystem::temp_directory_path() / ("cora-gpu-aot-" + std::to_string(getpid()));
}

std::string aot_dir(const std::string &name) { return (aot_root() / name).string(); }

/** Removes this process's library directories when a test case ends (declared first in each, so
 * that the libraries loaded from there are closed before). */
struct RemoveAotDirs {
    ~RemoveAotDirs() {
        std::error_code ec;
        std::filesystem::remove_all(aot_root(), ec);
    }
};

/** A CUDA AOT library loaded with dlopen, runnable like a Kernel (check_against_reference). The
 * arguments come from a JIT kernel of the same pipeline (the same names and kinds; the library
 * builds its aux arrays itself, so those are left out; the emulated target lowers to the same
 * arguments). With cuda-cpu-threads, "device" pointers
 * are host pointers. */
template <class Context> class CudaLibrary {
public:
    using Create = Context *(*)(int32_t, char *, int32_t);
    using Destroy = void (*)(Context *);
    using Argv = int32_t (*)(Context *, void *, const cora_arg_t *, int32_t, char *, int32_t);
    using Transfers = int64_t (*)(Context *);

    CudaLibrary(const Pipeline &p, const AotResult &r, const std::string &fn)
        : jit_(p.compile(emulated())), info_(r.arguments), handle_(dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        if (!handle_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
        create = sym<Create>(fn + "_create");
        destroy = sym<Destroy>(fn + "_destroy");
        argv = sym<Argv>(fn + "_argv");
        transfers = sym<Transfers>(fn + "_shape_transfers");
    }
    ~CudaLibrary() {
        if (ctx) destroy(ctx);
        dlclose(handle_);
    }
    std::vector<cora_arg_t> args(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
        std::vector<cora_arg_t> all = jit_.make_args(shape, bindings), out;
        for (const KernelArgInfo &a : info_)
            for (size_t i = 0; i < all.size(); i++)
                if (jit_.arguments()[i].name == a.name && jit_.arguments()[i].kind == a.kind) out.push_back(all[i]);
        REQUIRE(out.size() == info_.size());
        return out;
    }
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
        std::vector<cora_arg_t> a = args(shape, bindings);
        char error[512] = {0};
        if (argv(ctx, nullptr, a.data(), (int32_t)a.size(), error, sizeof error) != 0)
            throw RuntimeError(std::string("library: ") + error);
    }

    Create create;
    Destroy destroy;
    Argv argv;
    Transfers transfers;
    Context *ctx = nullptr;

private:
    template <typename F> F sym(const std::string &name) {
        void *s = dlsym(handle_, name.c_str());
        if (!s) throw std::runtime_error("no symbol " + name);
        return reinterpret_cast<F>(s);
    }
    Kernel jit_;
    std::vector<KernelArgInfo> info_;
    void *handle_;
};

std::string read_all(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

} // namespace

TEST_CASE("a CUDA AOT library runs its kernels on CPU threads and matches the reference", "[gpu][aot]") {
    RemoveAotDirs remove_dirs;
    AotOptions o;
    o.target = "cuda-cpu-threads";
    SECTION("two ops, aux arrays built by the library, an intermediate in device memory") {
        testing::TwoGpuOps t;
        Pipeline p = t.pipeline();
        o.output_dir = aot_dir("two_ops");
        AotResult r = compile_to_library(p, o);
        const std::string header = read_all(r.header);
        INFO(header);
        REQUIRE_THAT(header, Contains("typedef struct two_ops_context two_ops_context;"));
        REQUIRE_THAT(header, Contains("int32_t two_ops(two_ops_context *ctx, void *stream, int64_t B, "));
        REQUIRE_THAT(header, Contains("two_ops_context *two_ops_create(int32_t device, char *error"));
        REQUIRE_THAT(header, Contains("tensors are device memory"));
        for (const KernelArgInfo &a : r.arguments)
            REQUIRE(a.kind != KernelArgInfo::Kind::AuxArray); // built by the library
        CudaLibrary<two_ops_context> lib(p, r, "two_ops");
        char error[256] = {0};
        lib.ctx = lib.create(0, error, sizeof error);
        REQUIRE(lib.ctx != nullptr);
        testing::check_against_reference(p, lib, {t.A}, t.bind, 40, 16, 31);
        const int64_t after_cases = lib.transfers(lib.ctx);
        REQUIRE(after_cases >= 1);

        // One transfer per new shape: three runs on one shape, then another shape.
        RaggedShape s1, s2;
        t.bind(s1, {3, 0, 17, 40});
        t.bind(s2, {1});
        Buffer a1 = Buffer::alloc(t.A, s1), o1 = Buffer::alloc(t.S, s1);
        Buffer a2 = Buffer::alloc(t.A, s2), o2 = Buffer::alloc(t.S, s2);
        testing::fill_random(a1, 3);
        testing::fill_random(a2, 4);
        for (int i = 0; i < 3; i++)
            lib.run(s1, {{t.A, a1}, {t.S, o1}});
        REQUIRE(lib.transfers(lib.ctx) == after_cases + 1);
        lib.run(s2, {{t.A, a2}, {t.S, o2}});
        REQUIRE(lib.transfers(lib.ctx) == after_cases + 2);
        testing::require_close(o1, t.S, s1, reference_evaluate(p, s1, {{t.A, &a1}})[0]);
        testing::require_close(o2, t.S, s2, reference_evaluate(p, s2, {{t.A, &a2}})[0]);

        SECTION("bad arguments: the message, nothing written, nothing transferred") {
            std::vector<cora_arg_t> args = lib.args(s1, {{t.A, a1}, {t.S, o1}});
            std::vector<float> before(o1.data<float>(), o1.data<float>() + o1.size());
            for (cora_arg_t &a : args)
                if (std::string(a.name) == "len") a.count = 3; // a batch of 4
            REQUIRE(lib.argv(lib.ctx, nullptr, args.data(), (int32_t)args.size(), error, sizeof error) ==
                    CORA_ERROR_ARGUMENT);
            REQUIRE_THAT(std::string(error), Contains("length array 'len' has 3 elements, expected 4"));
            REQUIRE(std::vector<float>(o1.data<float>(), o1.data<float>() + o1.size()) == before);
            REQUIRE(lib.transfers(lib.ctx) == after_cases + 2);
        }
        SECTION("no context, another device") {
            std::vector<cora_arg_t> args = lib.args(s1, {{t.A, a1}, {t.S, o1}});
            REQUIRE(lib.argv(nullptr, nullptr, args.data(), (int32_t)args.size(), error, sizeof error) != 0);
            REQUIRE_THAT(std::string(error), Contains("two_ops: no context (create one with two_ops_create)"));
            REQUIRE(lib.create(1, error, sizeof error) == nullptr);
            REQUIRE_THAT(std::string(error), Contains("there is no device 1"));
        }
    }
    SECTION("vgemm's GPU schedule: shared k-panels, per-thread accumulators") {
        apps::VgemmGpu v;
        Pipeline p = v.pipeline();
        o.output_dir = aot_dir("vgemm");
        o.function_name = "vgemm_cuda";
        AotResult r = compile_to_library(p, o);
        CudaLibrary<vgemm_cuda_context> lib(p, r, "vgemm_cuda");
        char error[256] = {0};
        lib.ctx = lib.create(0, error, sizeof error);
        REQUIRE(lib.ctx != nullptr);
        for (const auto &shapes : std::vector<std::vector<std::array<int32_t, 3>>>{
                 {{70, 3, 17}, {0, 5, 5}, {64, 64, 64}, {1, 129, 2}}, {{33, 33, 0}}, {{65, 1, 16}}}) {
            RaggedShape s;
            v.bind(s, shapes);
            Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s), c = Buffer::alloc(v.C, s);
            testing::fill_random(x, 5);
            testing::fill_random(y, 6);
            lib.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
            testing::require_close(c, v.C, s, reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0]);
        }
        REQUIRE(lib.transfers(lib.ctx) == 3);
    }
}

TEST_CASE("a CUDA AOT library for sm_80 and sm_90 embeds a fatbin and loads only where a GPU is", "[gpu][aot]") {
    RemoveAotDirs remove_dirs;
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: building a CUDA library needs NVRTC: " << why);
        return;
    }
    testing::TwoGpuOps t;
    Pipeline p = t.pipeline();
    AotOptions o;
    o.target = "cuda-sm_90,cuda-sm_80";
    o.output_dir = aot_dir("two_ops_gpu");
    AotResult r = compile_to_library(p, o);
    const std::string so = read_all(r.library);
    const std::string magic = "\x50\xed\x55\xba"; // a fatbin's header (0xba55ed50, little-endian)
    REQUIRE(so.find(magic) != std::string::npos);
    bool has_cu = false;
    for (const std::string &s : r.sources)
        has_cu = has_cu || (s.size() > 3 && s.substr(s.size() - 3) == ".cu");
    REQUIRE(has_cu); // the device source is kept beside the library
    CudaLibrary<two_ops_context> lib(p, r, "two_ops");
    char error[512] = {0};
    lib.ctx = lib.create(0, error, sizeof error);
    if (!cuda_device_available(&why)) {
        // No GPU here: a clear reason, never a crash.
        REQUIRE(lib.ctx == nullptr);
        REQUIRE_THAT(std::string(error),
                     Contains("libcuda.so.1") || Contains("cuInit") || Contains("there is no CUDA device"));
        return;
    }
    REQUIRE(lib.ctx != nullptr);
    // On a GPU, tensors are device memory: run through a Kernel's buffers of the same shapes.
    Kernel k = p.compile("cuda");
    for (const std::vector<int32_t> &lengths : std::vector<std::vector<int32_t>>{{3, 0, 17, 40}, {1}, {40, 40}}) {
        RaggedShape s;
        t.bind(s, lengths);
        Buffer a = Buffer::alloc(t.A, s), out = Buffer::alloc(t.S, s);
        testing::fill_random(a, 9);
        DeviceBuffer da = k.alloc(t.A, s), dout = k.alloc(t.S, s);
        da.upload(a);
        std::vector<cora_arg_t> args = lib.args(s, {{t.A, a}, {t.S, out}});
        for (cora_arg_t &arg : args) {
            if (std::string(arg.name) == "A") arg.data = da.device_pointer();
            if (std::string(arg.name) == "S") arg.data = dout.device_pointer();
        }
        REQUIRE(lib.argv(lib.ctx, nullptr, args.data(), (int32_t)args.size(), error, sizeof error) == 0);
        dout.download(out);
        testing::require_close(out, t.S, s, reference_evaluate(p, s, {{t.A, &a}})[0]);
    }
    REQUIRE(lib.transfers(lib.ctx) == 3);
}

TEST_CASE("CUDA AOT targets: bad lists are compile errors naming the target", "[gpu][aot][errors]") {
    RemoveAotDirs remove_dirs;
    testing::TwoGpuOps t;
    Pipeline p = t.pipeline();
    AotOptions o;
    o.output_dir = aot_dir("errors");
    auto fails_with = [&](const std::string &targets, const std::string &message) {
        o.target = targets;
        INFO(targets);
        REQUIRE_THROWS_AS(compile_to_library(p, o), CompileError);
        REQUIRE_THROWS_WITH(compile_to_library(p, o), Contains(message));
    };
    fails_with("cuda-sm_90,x86-64-v3", "target 'x86-64-v3' cannot be combined with CUDA targets");
    fails_with("cuda-sm_9x", "unknown CUDA target 'cuda-sm_9x'; expected cuda-sm_<NN>");
    fails_with("cuda-sm_35", "architectures before sm_50 are not supported");
    fails_with("cuda-sm_90,cuda-sm_90", "target 'cuda-sm_90' is named twice");
    fails_with("cuda-cpu-threads,cuda-sm_80", "'cuda-cpu-threads' cannot be combined with other targets");
    fails_with("cuda", "unknown CUDA target 'cuda'");
    REQUIRE(!std::filesystem::exists(std::filesystem::path(o.output_dir) / "libtwo_ops.so"));
}
