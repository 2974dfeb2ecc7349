// 32-bit integer arithmetic in GPU kernels (lower/NarrowIndices.cpp): chosen where the magnitude
// of every integer is bounded by the declared ranges, or through a 32-bit twin the host launches
// when the values of the launch fit; never a wrong result for values that do not fit. The kernels
// run as CUDA on CPU threads (the same source a GPU runs), the host's choice is read from a
// recording device, and the PTX (NVRTC, where installed) shows the 64-bit arithmetic gone.
#include "common/cuda_on_cpu.h"
#include "common/ragged_testing.h"
#include "common/recording_device.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

#include <cmath>
#include <regex>

#include "driver/JIT.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::RecordingDevice;

namespace {

/** Out(i) = A(i) + ((i * P) mod 7): an integer product whose magnitude depends on the param P
 * (declared up to 2^40), so that the kernel is narrowed only when P is small enough. */
struct ScaledIndex {
    Dim i{"i"}, io{"io"}, ii{"ii"};
    Param N{"N", 1, 4096}, P{"P", 1, int64_t(1) << 40};
    Tensor A{"A", {{i, N}}};
    Func Out{"Out", {{i, N}}};
    ScaledIndex() {
        Out.compute([&](Expr x) { return A(x) + cast(Float32, (x * P) % 7); });
        Out.split(i, io, ii, 32).gpu_blocks(io).gpu_threads(ii);
    }
    Pipeline pipeline() const { return Pipeline({Out}, "scaled_index"); }
};

/** The 64-bit integer instructions of one PTX entry that are not parameter loads or address
 * conversions: arithmetic, compares, conversions. */
int ptx_int64_ops(const std::string &ptx, const std::string &entry, int *multiplies) {
    const size_t start = ptx.find(".entry " + entry + "(");
    REQUIRE(start != std::string::npos);
    const size_t end = ptx.find("\n}", start);
    const std::string body = ptx.substr(start, end - start);
    int ops = 0;
    *multiplies = 0;
    static const std::regex int64_op(R"(^\s*(?:@%p\d+\s+)?([a-z]+)\.[a-z.0-9]*\b[su]64\b)");
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, int64_op)) continue;
        const std::string op = m[1];
        if (op == "ld" || op == "cvta" || op == "st" || op == "mov") continue;
        ops++;
        if ((op == "mul" || op == "mad") && line.find("wide") == std::string::npos) (*multiplies)++;
    }
    return ops;
}

} // namespace

TEST_CASE("GPU kernels compute in 32 bits where the declared ranges bound every integer", "[gpu][narrow]") {
    SECTION("trmm: M, N <= 16384, every index fits: one 32-bit kernel") {
        apps::TrmmGpu t;
        CudaProgram cp = compile_cuda(t.pipeline(), {});
        INFO(cp.source);
        REQUIRE(cp.kernels == std::vector<std::string>{"cora_trmm_gpu_k0"});
        REQUIRE_THAT(cp.source, Contains("const int32_t M_ = int32_t(M_wide);"));
        REQUIRE_THAT(cp.source, Contains("for (int32_t "));
        REQUIRE_THAT(cp.host_source, !Contains("cora_kernel"));
    }
    SECTION("vgemm: the matrices' offsets are known at the launch: a 32-bit twin and the host's choice") {
        apps::VgemmGpu v(128);
        CudaProgram cp = compile_cuda(v.pipeline(), {});
        INFO(cp.host_source);
        REQUIRE(cp.kernels == std::vector<std::string>{"cora_vgemm_gpu_k0", "cora_vgemm_gpu_k0_i32"});
        REQUIRE_THAT(cp.lowered,
                     Contains(" or cora_vgemm_gpu_k0_i32 when prefix_batch_magnitude = max |prefix_batch|"));
        REQUIRE_THAT(cp.host_source, Contains("if (cora_fits && !cora_ov) cora_kernel = 1;"));
    }
    SECTION("a param declared up to 2^40 in a product: the twin, chosen at the launch") {
        ScaledIndex s;
        CudaProgram cp = compile_cuda(s.pipeline(), {});
        REQUIRE(cp.kernels.size() == 2);
    }
    SECTION("narrow_gpu_indices = 0: 64 bits everywhere") {
        CompileOptions o;
        o.narrow_gpu_indices = 0;
        apps::VgemmGpu v(64);
        CudaProgram cp = compile_cuda(v.pipeline(), {}, o);
        REQUIRE(cp.kernels.size() == 1);
        REQUIRE_THAT(cp.source, !Contains("for (int32_t "));
        apps::TrmmGpu t;
        REQUIRE_THAT(compile_cuda(t.pipeline(), {}, o).source, !Contains("M_wide"));
    }
}

TEST_CASE("the host launches the 32-bit twin only when the launch's values fit in int32", "[gpu][narrow]") {
    ScaledIndex s;
    Pipeline p = s.pipeline();
    Kernel on_cpu = testing::cuda_on_cpu(p);
    CompileOptions wide;
    wide.narrow_gpu_indices = 0;
    Kernel on_cpu_wide = p.compile("cuda-cpu-threads", wide);
    CudaProgram cp = compile_cuda(p, {});
    driver::JitResult jit = driver::jit_compile(cp.host_source, cp.entry_symbol, driver::JitOptions{});
    auto entry = reinterpret_cast<cora_device_entry_fn>(jit.entry);
    Kernel emu = p.compile(testing::emulated());
    // (n, P, the kernel the host must launch): 0 the 64-bit one, 1 its 32-bit twin. The bound is
    // about (n + 100) * P: well under INT32_MAX the twin runs; at a product i * P past it, the
    // 64-bit kernel, whose products a 32-bit kernel would wrap (the results below would differ).
    const int64_t big = (int64_t(1) << 33) + 5;
    for (auto [n, param, expected] : std::vector<std::tuple<int64_t, int64_t, int32_t>>{{1, 1, 1},
                                                                                        {100, 3, 1},
                                                                                        {4096, 1, 1},
                                                                                        {1, 1 << 20, 1},
                                                                                        {100, big, 0},
                                                                                        {4096, 1 << 20, 0},
                                                                                        {4096, int64_t(1) << 40, 0}}) {
        INFO("n " << n << " P " << param);
        RaggedShape shape;
        shape.set(s.N, n).set(s.P, param);
        Buffer a = Buffer::alloc(s.A, shape), out = Buffer::alloc(s.Out, shape);
        testing::fill_random(a, 7);
        std::vector<cora_arg_t> args = emu.make_args(shape, {{s.A, a}, {s.Out, out}});
        RecordingDevice dev;
        char error[256] = {0};
        REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_OK);
        REQUIRE(dev.launches.size() == 1);
        REQUIRE(dev.launches[0].kernel == expected);
        // The results, from the kernel the host chose, against the reference and the 64-bit kernel.
        const std::vector<double> ref = reference_evaluate(p, shape, {{s.A, &a}})[0];
        for (int64_t x = 0; x < n; x++) // the integer part is exact: (x * P) mod 7 in 64 bits
            REQUIRE((double)(int64_t)std::lround(ref[x] - a.data<float>()[x]) == (double)((x * param) % 7));
        on_cpu.run(shape, {{s.A, a}, {s.Out, out}});
        testing::require_close(out, ref);
        Buffer out_wide = Buffer::alloc(s.Out, shape);
        on_cpu_wide.run(shape, {{s.A, a}, {s.Out, out_wide}});
        for (int64_t x = 0; x < n; x++)
            REQUIRE(out.data<float>()[x] == out_wide.data<float>()[x]);
    }
}

TEST_CASE("vgemm on CPU threads takes its 32-bit twin and matches the 64-bit kernel", "[gpu][narrow]") {
    apps::VgemmGpu v(64);
    Pipeline p = v.pipeline();
    CudaProgram cp = compile_cuda(p, {});
    driver::JitResult jit = driver::jit_compile(cp.host_source, cp.entry_symbol, driver::JitOptions{});
    auto entry = reinterpret_cast<cora_device_entry_fn>(jit.entry);
    Kernel emu = p.compile(testing::emulated());
    Kernel narrow = testing::cuda_on_cpu(p);
    CompileOptions o;
    o.narrow_gpu_indices = 0;
    Kernel wide = p.compile("cuda-cpu-threads", o);
    RaggedShape shape;
    v.bind(shape, {{70, 3, 17}, {0, 5, 5}, {65, 64, 64}, {1, 129, 2}});
    Buffer x = Buffer::alloc(v.X, shape), y = Buffer::alloc(v.Y, shape);
    testing::fill_random(x, 1);
    testing::fill_random(y, 2);
    Buffer c = Buffer::alloc(v.C, shape), c_wide = Buffer::alloc(v.C, shape);
    std::vector<cora_arg_t> args = emu.make_args(shape, {{v.X, x}, {v.Y, y}, {v.C, c}});
    RecordingDevice dev;
    char error[256] = {0};
    REQUIRE(entry(args.data(), (int32_t)args.size(), &dev.device, error, sizeof error) == CORA_OK);
    REQUIRE(dev.launches.size() == 1);
    REQUIRE(dev.launches[0].kernel == 1); // small offsets: the twin
    narrow.run(shape, {{v.X, x}, {v.Y, y}, {v.C, c}});
    wide.run(shape, {{v.X, x}, {v.Y, y}, {v.C, c_wide}});
    testing::require_same_sums(c, c_wide); // up to the host compiler's contraction of the sums
    testing::require_close(c, reference_evaluate(p, shape, {{v.X, &x}, {v.Y, &y}})[0]);
}

TEST_CASE("the 32-bit kernels' PTX has no 64-bit multiplies and a fraction of the 64-bit operations", "[gpu][narrow]") {
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: NVRTC is needed for the PTX: " << why);
        return;
    }
    apps::VgemmGpu v(128);
    CudaProgram cp = compile_cuda(v.pipeline(), {90});
    REQUIRE(cp.binaries.size() == 1);
    int wide_multiplies = 0, narrow_multiplies = 0;
    const int wide = ptx_int64_ops(cp.binaries[0].ptx, "cora_vgemm_gpu_k0", &wide_multiplies);
    const int narrow = ptx_int64_ops(cp.binaries[0].ptx, "cora_vgemm_gpu_k0_i32", &narrow_multiplies);
    INFO("64-bit integer operations: " << wide << " (" << wide_multiplies << " multiplies) in the 64-bit kernel, "
                                       << narrow << " (" << narrow_multiplies << ") in its twin");
    REQUIRE(wide_multiplies > 0);
    REQUIRE(narrow_multiplies == 0);
    REQUIRE(narrow * 2 < wide); // what is left: 64-bit addresses (a wide multiply-add per access)
    apps::TrmmGpu t;
    CudaProgram trmm = compile_cuda(t.pipeline(), {90});
    int trmm_multiplies = 0;
    (void)ptx_int64_ops(trmm.binaries[0].ptx, "cora_trmm_gpu_k0", &trmm_multiplies);
    REQUIRE(trmm_multiplies == 0);
}
