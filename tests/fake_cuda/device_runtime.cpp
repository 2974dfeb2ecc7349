// The GPU side of the device runtime (prelude/cora_device_runtime.h), run on a machine without a
// GPU against the fake driver of fake_cuda_driver.cpp (ctest puts its folder on LD_LIBRARY_PATH):
// the runtime itself (open, limits, module, launch checks, shape staging, failures and their
// messages, nothing leaked), a JIT Kernel on it and a CUDA AOT library's context on it (the
// same runtime, embedded). Kernels do not run on the fake, so results are not checked here; the
// CPU-threads backend and gpu_tests check those.
#include "common/cuda_on_cpu.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "common/two_gpu_ops.h"

#include <cora/Cuda.h>
#include <cora/Generator.h>
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <filesystem>

#include "cora_runtime.h"
// After cora_runtime.h, which it builds on.
#include "cora_device_runtime.h"

using namespace cora;
using Catch::Matchers::Contains;

struct two_ops_context; // the AOT library's context, declared as its header declares it

namespace {

/** The fake driver's inspection and control functions (the same library the runtime loads). */
struct FakeDriver {
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    template <typename F> F sym(const char *name) {
        REQUIRE(handle != nullptr);
        void *s = dlsym(handle, name);
        REQUIRE(s != nullptr);
        return reinterpret_cast<F>(s);
    }
    void (*fail_next)(const char *, int) = sym<void (*)(const char *, int)>("fake_cuda_fail_next");
    int64_t (*launch_count)() = sym<int64_t (*)()>("fake_cuda_launch_count");
    int (*launch)(int64_t, char *, int, unsigned *,
                  unsigned *) = sym<int (*)(int64_t, char *, int, unsigned *, unsigned *)>("fake_cuda_launch");
    int64_t (*uploads)() = sym<int64_t (*)()>("fake_cuda_uploads");
    int64_t (*live_allocations)() = sym<int64_t (*)()>("fake_cuda_live_allocations");
    int64_t (*live_modules)() = sym<int64_t (*)()>("fake_cuda_live_modules");
    int (*retained_contexts)() = sym<int (*)()>("fake_cuda_retained_contexts");
    ~FakeDriver() {
        if (handle) dlclose(handle);
    }
    /** Nothing held: every allocation freed, module unloaded, context released. */
    void require_nothing_held() {
        REQUIRE(live_allocations() == 0);
        REQUIRE(live_modules() == 0);
        REQUIRE(retained_contexts() == 0);
    }
};

constexpr int32_t kErrorSize = 1024;

} // namespace

TEST_CASE("the driver found is the fake one", "[fake-cuda]") {
    FakeDriver fake;
    REQUIRE(fake.handle != nullptr);
    std::string why;
    REQUIRE(cuda_device_available(&why));
    fake.require_nothing_held(); // the probe released what it opened
}

TEST_CASE("GpuDevice: a device's limits are read from it and checked before each launch", "[fake-cuda]") {
    FakeDriver fake;
    char error[kErrorSize] = {0};
    {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(0, error, kErrorSize) == CORA_OK);
        REQUIRE(d.compute_capability() == 90);
        const char *names[] = {"k0", "k1"};
        REQUIRE(d.load_module("IMAGE", "a test image", names, 2, error, kErrorSize) == CORA_OK);
        const int64_t before = fake.launch_count();
        int dummy = 0;
        void *params[] = {&dummy};
        const int64_t grid[3] = {4, 2, 1}, threads[3] = {128, 2, 1};
        REQUIRE(d.launch(1, grid, threads, params, nullptr, error, kErrorSize) == CORA_OK);
        REQUIRE(fake.launch_count() == before + 1);
        char name[64];
        unsigned g[3], b[3];
        REQUIRE(fake.launch(before, name, sizeof name, g, b) == 0);
        REQUIRE(std::string(name) == "k1");
        REQUIRE((g[0] == 4 && g[1] == 2 && g[2] == 1 && b[0] == 128 && b[1] == 2 && b[2] == 1));

        auto refused = [&](int32_t kernel, std::array<int64_t, 3> gr, std::array<int64_t, 3> th,
                           const std::string &message) {
            INFO(message);
            REQUIRE(d.launch(kernel, gr.data(), th.data(), params, nullptr, error, kErrorSize) == CORA_ERROR_DEVICE);
            REQUIRE_THAT(std::string(error), Contains(message));
        };
        refused(0, {1, 1, 1}, {1024, 2, 1},
                "kernel k0: launch of 1 x 1 x 1 blocks of 1024 x 2 x 1 threads exceeds the device's limits (threads "
                "per block; device 0 allows 1024 threads per block, blocks of 1024 x 1024 x 64, grids of 2147483647 "
                "x 65535 x 65535)");
        refused(0, {1, 65536, 1}, {32, 1, 1}, "(grid dimension;");
        refused(1, {1, 1, 1}, {1, 1, 65}, "(block dimension;");
        refused(0, {2147483648LL, 1, 1}, {1, 1, 1}, "(grid dimension;");
        refused(2, {1, 1, 1}, {1, 1, 1}, "launch of kernel 2: the module has 2 kernels");
        refused(-1, {1, 1, 1}, {1, 1, 1}, "launch of kernel -1: the module has 2 kernels");
        REQUIRE(fake.launch_count() == before + 1); // none of them reached the driver

        fake.fail_next("cuLaunchKernel", 719);
        REQUIRE(d.launch(0, grid, threads, params, nullptr, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuLaunchKernel (k0) failed: CUDA_ERROR_LAUNCH_FAILED (719)");
    }
    fake.require_nothing_held();
}

TEST_CASE("GpuDevice: failures name the call, the device and the error, and release what was acquired",
          "[fake-cuda][errors]") {
    FakeDriver fake;
    char error[kErrorSize] = {0};
    SECTION("a device that does not exist") {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(3, error, kErrorSize) == CORA_ERROR_ARGUMENT);
        REQUIRE(std::string(error) == "there is no CUDA device 3 (this machine has 1)");
        REQUIRE(d.open(-1, error, kErrorSize) == CORA_ERROR_ARGUMENT);
    }
    SECTION("cuInit fails") {
        cora_rt::GpuDevice d;
        fake.fail_next("cuInit", 3);
        REQUIRE(d.open(0, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuInit failed: CUDA_ERROR_NOT_INITIALIZED (3)");
    }
    SECTION("the primary context cannot be retained") {
        cora_rt::GpuDevice d;
        fake.fail_next("cuDevicePrimaryCtxRetain", 101);
        REQUIRE(d.open(0, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE_THAT(std::string(error), Contains("cuDevicePrimaryCtxRetain failed: CUDA_ERROR_INVALID_DEVICE"));
    }
    SECTION("an image the device cannot load, a kernel the module lacks") {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(0, error, kErrorSize) == CORA_OK);
        const char *names[] = {"k0", "missing"};
        REQUIRE(d.load_module("BAD IMAGE", "cubins for sm_80", names, 1, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuModuleLoadData (the code holds cubins for sm_80; device 0 is "
                                      "sm_90) failed: CUDA_ERROR_INVALID_IMAGE (200)");
        cora_rt::GpuDevice d2;
        REQUIRE(d2.open(0, error, kErrorSize) == CORA_OK);
        REQUIRE(d2.load_module("IMAGE", "x", names, 2, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuModuleGetFunction (missing) failed: CUDA_ERROR_NOT_FOUND (500)");
    }
    SECTION("out of device memory") {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(0, error, kErrorSize) == CORA_OK);
        fake.fail_next("cuMemAlloc_v2", 2);
        REQUIRE(d.alloc(64, error, kErrorSize) == nullptr);
        REQUIRE(std::string(error) == "CUDA call cuMemAlloc of 64 bytes failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
        void *p = d.alloc(0, error, kErrorSize); // at least one byte, never a zero-byte request
        REQUIRE(p != nullptr);
        d.release(p);
    }
    SECTION("a copy or a wait fails") {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(0, error, kErrorSize) == CORA_OK);
        void *p = d.alloc(16, error, kErrorSize);
        char host[16] = {0};
        fake.fail_next("cuMemcpyHtoD_v2", 1);
        REQUIRE(d.upload(p, host, 16, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuMemcpyHtoD failed: CUDA_ERROR_INVALID_VALUE (1)");
        REQUIRE(d.upload(p, host, 0, error, kErrorSize) == CORA_OK); // nothing to copy: no call
        fake.fail_next("cuMemcpyDtoH_v2", 1);
        REQUIRE(d.download(host, p, 16, error, kErrorSize) == CORA_ERROR_DEVICE);
        fake.fail_next("cuStreamSynchronize", 719);
        REQUIRE(d.synchronize(nullptr, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuStreamSynchronize failed: CUDA_ERROR_LAUNCH_FAILED (719)");
        d.release(p);
    }
    fake.require_nothing_held();
}

TEST_CASE("ShapeCache: a shape's arrays are uploaded once, packed, and kept by contents", "[fake-cuda]") {
    FakeDriver fake;
    char error[kErrorSize] = {0};
    {
        cora_rt::GpuDevice d;
        REQUIRE(d.open(0, error, kErrorSize) == CORA_OK);
        cora_rt::ShapeCache cache;
        const int32_t lengths[3] = {3, 0, 17}, offsets[4] = {0, 3, 3, 20}, other[2] = {5, 5};
        const void *host[2] = {lengths, offsets};
        const int64_t bytes[2] = {sizeof lengths, sizeof offsets};
        size_t at[2] = {0, 0};
        const int64_t uploads = fake.uploads();
        REQUIRE(cache.place(d, 2, host, bytes, at, error, kErrorSize) == CORA_OK);
        REQUIRE(cache.transfers() == 1);
        REQUIRE(fake.uploads() == uploads + 1); // both arrays in one transfer
        REQUIRE(at[0] % 8 == 0);
        REQUIRE(at[1] % 8 == 0);
        int32_t back[4];
        REQUIRE(d.download(back, static_cast<char *>(cache.buffer()) + at[1], sizeof back, error, kErrorSize) == 0);
        REQUIRE(std::equal(back, back + 4, offsets));
        // The same contents again (in other host memory, another order): nothing moves.
        int32_t copy[3] = {3, 0, 17};
        const void *again[2] = {offsets, copy};
        const int64_t again_bytes[2] = {sizeof offsets, sizeof copy};
        size_t at2[2];
        REQUIRE(cache.place(d, 2, again, again_bytes, at2, error, kErrorSize) == CORA_OK);
        REQUIRE(cache.transfers() == 1);
        REQUIRE((at2[0] == at[1] && at2[1] == at[0]));
        // A kernel reading one more array of the same shape: one transfer, the old arrays kept.
        const void *more[2] = {lengths, other};
        const int64_t more_bytes[2] = {sizeof lengths, sizeof other};
        size_t at3[2];
        REQUIRE(cache.place(d, 2, more, more_bytes, at3, error, kErrorSize) == CORA_OK);
        REQUIRE(cache.transfers() == 2);
        REQUIRE(cache.place(d, 2, host, bytes, at2, error, kErrorSize) == CORA_OK);
        REQUIRE(cache.transfers() == 2);
        // A failed upload leaves no copy behind and no device memory held.
        const int64_t held = fake.live_allocations();
        const int32_t fresh[1] = {99};
        const void *f[1] = {fresh};
        const int64_t fb[1] = {sizeof fresh};
        fake.fail_next("cuMemcpyHtoD_v2", 1);
        REQUIRE(cache.place(d, 1, f, fb, at3, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(cache.buffer() == nullptr);
        REQUIRE(fake.live_allocations() == held - 1);
        REQUIRE(cache.place(d, 1, f, fb, at3, error, kErrorSize) == CORA_OK); // and the next call recovers
        REQUIRE(cache.transfers() == 3);
        // A failed wait for the launches reading the old copy stops the replacement.
        fake.fail_next("cuCtxSynchronize", 719);
        REQUIRE(cache.place(d, 2, host, bytes, at2, error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE(std::string(error) == "CUDA call cuCtxSynchronize failed: CUDA_ERROR_LAUNCH_FAILED (719)");
    }
    fake.require_nothing_held();
}

TEST_CASE("a JIT Kernel on the fake GPU: launches, one transfer per shape, errors as RuntimeErrors", "[fake-cuda]") {
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: compiling for a GPU needs NVRTC: " << why);
        return;
    }
    FakeDriver fake;
    {
        testing::TwoGpuOps t;
        Pipeline p = t.pipeline();
        Kernel k = p.compile("cuda");
        REQUIRE(k.backend() == "cuda");
        REQUIRE(k.device() == 0);
        REQUIRE(k.program().binaries.size() == 1);
        REQUIRE(k.program().binaries[0].arch == 90); // the fake's compute capability
        // One launch per kernel, each taking the 32-bit twin (lower/NarrowIndices.cpp) where one was
        // made: this shape's offsets fit in int32.
        const int64_t kernels = (int64_t)testing::launched_kernels(k.program()).size();
        REQUIRE(kernels >= 2);
        RaggedShape s = t.shape({3, 0, 17, 40});
        Buffer a = Buffer::alloc(t.A, s), out = Buffer::alloc(t.S, s);
        const int64_t before = fake.launch_count();
        k.run(s, {{t.A, a}, {t.S, out}});
        k.run(s, {{t.A, a}, {t.S, out}});
        REQUIRE(fake.launch_count() == before + 2 * kernels);
        const std::vector<std::string> &all = k.program().kernels;
        const bool twins = all.size() > (size_t)kernels;
        for (int64_t i = before; i < before + 2 * kernels; i++) {
            char name[128];
            unsigned grid[3], block[3];
            REQUIRE(fake.launch(i, name, sizeof name, grid, block) == 0);
            const std::string launched = name;
            REQUIRE(std::find(all.begin(), all.end(), launched) != all.end());
            if (twins && std::find(all.begin(), all.end(), launched + "_i32") != all.end())
                FAIL("launched " << launched << ", not its 32-bit twin");
        }
        REQUIRE(k.shape_transfers() == 1);
        fake.fail_next("cuLaunchKernel", 719);
        REQUIRE_THROWS_AS(k.run(s, {{t.A, a}, {t.S, out}}), RuntimeError);
        fake.fail_next("cuLaunchKernel", 719);
        REQUIRE_THROWS_WITH(k.run(s, {{t.A, a}, {t.S, out}}),
                            Contains("kernel 'two_ops': CUDA call cuLaunchKernel (") &&
                                Contains("failed: CUDA_ERROR_LAUNCH_FAILED (719)"));
        fake.fail_next("cuMemAlloc_v2", 2);
        REQUIRE_THROWS_WITH(k.alloc(t.A, s),
                            Contains("CUDA call cuMemAlloc of ") && Contains("failed: CUDA_ERROR_OUT_OF_MEMORY (2)"));
        CompileOptions o;
        o.device = 1;
        REQUIRE_THROWS_AS(p.compile("cuda", o), RuntimeError);
        REQUIRE_THROWS_WITH(p.compile("cuda", o), Contains("pipeline 'two_ops': no CUDA device to run on: there "
                                                           "is no CUDA device 1 (this machine has 1)"));
        // Kernels on different devices share no memory.
        Kernel on_cpu = p.compile("cuda-cpu-threads");
        REQUIRE_THROWS_WITH(on_cpu.share_device_with(k), Contains("they have no device memory to share"));
        // The launch limits lowering checks are the device's: one allowing 8 threads per block
        // refuses the 16-thread tiles when compiling (the emulators keep every GPU's 1024).
        setenv("FAKE_CUDA_MAX_THREADS", "8", 1);
        REQUIRE_THROWS_AS(p.compile("cuda"), CompileError);
        REQUIRE_THROWS_WITH(p.compile("cuda"), Contains("16 threads per block, more than the 8 the device allows"));
        unsetenv("FAKE_CUDA_MAX_THREADS");
        REQUIRE(p.compile("cuda").backend() == "cuda");
    }
    fake.require_nothing_held();
}

TEST_CASE("a CUDA AOT library's context on the fake GPU: create, launches, transfers, destroy", "[fake-cuda][aot]") {
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: building a CUDA library needs NVRTC: " << why);
        return;
    }
    FakeDriver fake;
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("cora-fake-cuda-aot-" + std::to_string(getpid()));
    {
        testing::TwoGpuOps t;
        Pipeline p = t.pipeline();
        AotOptions o;
        o.target = "cuda-sm_90";
        o.output_dir = dir.string();
        AotResult r = compile_to_library(p, o);
        void *lib = dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
        REQUIRE(lib != nullptr);
        using Create = two_ops_context *(*)(int32_t, char *, int32_t);
        using Destroy = void (*)(two_ops_context *);
        using Argv = int32_t (*)(two_ops_context *, void *, const cora_arg_t *, int32_t, char *, int32_t);
        using Transfers = int64_t (*)(two_ops_context *);
        auto create = reinterpret_cast<Create>(dlsym(lib, "two_ops_create"));
        auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "two_ops_destroy"));
        auto argv = reinterpret_cast<Argv>(dlsym(lib, "two_ops_argv"));
        auto transfers = reinterpret_cast<Transfers>(dlsym(lib, "two_ops_shape_transfers"));
        REQUIRE((create && destroy && argv && transfers));
        char error[kErrorSize] = {0};
        REQUIRE(create(1, error, kErrorSize) == nullptr);
        REQUIRE(std::string(error) == "two_ops: there is no CUDA device 1 (this machine has 1)");
        two_ops_context *ctx = create(0, error, kErrorSize);
        INFO(error);
        REQUIRE(ctx != nullptr);
        // The library's arguments, made by a JIT kernel of the same pipeline; the fake's device
        // memory is host memory, so host buffers stand for device ones.
        Kernel jit = p.compile(testing::emulated());
        RaggedShape s = t.shape({3, 0, 17, 40});
        Buffer a = Buffer::alloc(t.A, s), out = Buffer::alloc(t.S, s);
        std::vector<cora_arg_t> all = jit.make_args(s, {{t.A, a}, {t.S, out}}), args;
        for (const KernelArgInfo &info : r.arguments)
            for (size_t i = 0; i < all.size(); i++)
                if (jit.arguments()[i].name == info.name && jit.arguments()[i].kind == info.kind)
                    args.push_back(all[i]);
        REQUIRE(args.size() == r.arguments.size());
        const int64_t before = fake.launch_count();
        REQUIRE(argv(ctx, nullptr, args.data(), (int32_t)args.size(), error, kErrorSize) == 0);
        REQUIRE(argv(ctx, nullptr, args.data(), (int32_t)args.size(), error, kErrorSize) == 0);
        REQUIRE(fake.launch_count() > before);
        REQUIRE(transfers(ctx) == 1);
        fake.fail_next("cuLaunchKernel", 719);
        REQUIRE(argv(ctx, nullptr, args.data(), (int32_t)args.size(), error, kErrorSize) == CORA_ERROR_DEVICE);
        REQUIRE_THAT(std::string(error), Contains("failed: CUDA_ERROR_LAUNCH_FAILED (719)"));
        destroy(ctx);
        dlclose(lib);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    fake.require_nothing_held();
}
