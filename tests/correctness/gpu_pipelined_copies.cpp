// Pipelined copies into shared memory (lower/PipelineSharedPanels.cpp: a k-panel loop's shared
// tiles in S stages; codegen/CodeGen_CUDA.cpp: each panel's copies issued S - 1 iterations ahead
// with cp.async, a wait and a barrier before the panel is used, a barrier before its stage is
// overwritten). The GEMM schedules run as CUDA on CPU threads, whose cp.async lands only when the
// thread waits for it (codegen/CudaOnCpu.cpp), with 1 to 4 stages, against the reference; k-loops
// of 0, 1, 2 and more panels, partial last panels, misaligned rows (element copies mixed with
// 16-byte ones). NVRTC's PTX shows cp.async for sm_80 and sm_90.
#include "common/cuda_on_cpu.h"
#include "common/gemm_schedules.h"
#include "common/ragged_testing.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

#include <cstdlib>
#include <optional>
#include <regex>
#include <string>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

CompileOptions stages(int n) {
    CompileOptions o;
    o.gpu_copy_stages = n;
    return o;
}

int count(const std::string &s, const std::string &what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
        n++;
    return n;
}

/** The element count of shared tile `name` in a kernel's IR, or -1. */
int64_t shared_elements(const std::string &ir, const std::string &name) {
    std::smatch m;
    if (!std::regex_search(ir, m, std::regex("allocate in shared memory " + name + "\\[float32 \\* ([0-9]+)\\]")))
        return -1;
    return std::stoll(m[1]);
}

/** Sets (or, with nullptr, unsets) an environment variable for a scope, then restores it. */
struct ScopedEnv {
    std::string name;
    std::optional<std::string> saved;
    ScopedEnv(const char *n, const char *value) : name(n) {
        if (const char *old = std::getenv(n)) saved = old;
        if (value)
            setenv(n, value, 1);
        else
            unsetenv(n);
    }
    ~ScopedEnv() {
        if (saved)
            setenv(name.c_str(), saved->c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

} // namespace

TEST_CASE("pipelined copies: shared tiles in stages, cp.async issued ahead, a wait and two barriers per panel",
          "[gpu][pipelined]") {
    // Tiles of 128: two panels of 8 KiB, so 2 and 3 stages fit in 48 KiB of shared memory and 4
    // do not (that kernel stays as it was); tiles of 64 take 4.
    const int n = GENERATE(2, 3, 4);
    const int64_t tile = n == 4 ? 64 : 128;
    apps::VgemmGpu v(tile);
    CudaProgram plain = compile_cuda(v.pipeline(), {}, stages(1));
    INFO(plain.kernel_ir[0]);
    const int64_t x_tile = shared_elements(plain.kernel_ir[0], "X_cache");
    const int64_t y_tile = shared_elements(plain.kernel_ir[0], "Y_cache");
    REQUIRE(x_tile == tile * 16);
    REQUIRE(y_tile == 16 * tile);
    REQUIRE_THAT(plain.kernel_ir[0], !Contains("pipelined("));
    REQUIRE_THAT(plain.source, Contains("cora_copy16(&X_cache_[cora_s0], &X_[cora_g0]);"));
    REQUIRE_THAT(plain.source, !Contains("cora_copy16_async(&"));
    // vgemm's kernel and its 32-bit twin (the launch picks one): counts below are per kernel.
    const int kernels = (int)plain.kernels.size();
    REQUIRE(kernels == 2);
    REQUIRE(count(plain.source, "__syncthreads();") == 4 * kernels); // around each of the two copies
    {
        DYNAMIC_SECTION(n << " stages, tiles of " << tile) {
            CudaProgram cp = compile_cuda(v.pipeline(), {}, stages(n));
            INFO(cp.kernel_ir[0]);
            REQUIRE_THAT(cp.kernel_ir[0], Contains("pipelined(" + std::to_string(n) + " stages) for ro in"));
            REQUIRE(shared_elements(cp.kernel_ir[0], "X_cache") == n * x_tile);
            REQUIRE(shared_elements(cp.kernel_ir[0], "Y_cache") == n * y_tile);
            // Iteration ro's panels sit at stage ro % n.
            REQUIRE_THAT(cp.kernel_ir[0], Contains("(ro % " + std::to_string(n) + ")"));
            INFO(cp.source);
            // The 16-byte copies as cp.async; n - 1 iterations' copies before the loop (each its own
            // group), then per iteration a wait that leaves the n - 2 newest in flight and one
            // iteration's copies.
            REQUIRE_THAT(cp.source, Contains("cora_copy16_async(&X_cache_[cora_s0], &X_[cora_g0]);"));
            REQUIRE_THAT(cp.source, Contains("cora_copy16_async(&Y_cache_[cora_s0], &Y_[cora_g0]);"));
            REQUIRE(count(cp.source, "cora_copy16_async(&X_cache_") == n * kernels);
            REQUIRE(count(cp.source, "cora_copy_async_commit();") == n * kernels);
            REQUIRE(count(cp.source, "cora_copy_async_wait<" + std::to_string(n - 2) + ">();") == kernels);
            REQUIRE_THAT(cp.source, Contains("if (ro_ + " + std::to_string(n - 1) + " < "));
            // One barrier per panel, after the wait (not 4: before and after each copy), and one
            // after the loop.
            REQUIRE(count(cp.source, "__syncthreads();") == 2 * kernels);
        }
    }
    if (n == 3) {
        CudaProgram too_many = compile_cuda(v.pipeline(), {}, stages(4)); // 4 x 16 KiB
        REQUIRE_THAT(too_many.kernel_ir[0], !Contains("pipelined("));
        REQUIRE(shared_elements(too_many.kernel_ir[0], "X_cache") == x_tile);
    }
    SECTION("PTX: cp.async for sm_80 and sm_90") {
        std::string why;
        if (!cuda_compiler_available(&why)) {
            WARN("SKIPPED: NVRTC is needed for the PTX: " << why);
            return;
        }
        CudaProgram compiled = compile_cuda(v.pipeline(), {80, 90});
        REQUIRE(compiled.binaries.size() == 2);
        for (const CudaBinary &b : compiled.binaries) {
            INFO("sm_" << b.arch);
            REQUIRE_THAT(b.ptx, Contains("cp.async.cg.shared.global"));
            REQUIRE_THAT(b.ptx, Contains("cp.async.commit_group"));
            REQUIRE_THAT(b.ptx, Contains("cp.async.wait_group 0"));
        }
        CudaProgram not_pipelined = compile_cuda(v.pipeline(), {90}, stages(1));
        REQUIRE_THAT(not_pipelined.binaries[0].ptx, !Contains("cp.async"));
    }
}

TEST_CASE("pipelined copies match the reference and the copies without stages, as CUDA on CPU threads",
          "[gpu][pipelined]") {
    SECTION("a dense GEMM, k-panels of 8: none, one, two, several, a partial last one") {
        Dim i("i"), j("j"), k("k");
        Param M("M", 0, 100), N("N", 0, 100), K("K", 0, 100);
        Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
        Func C("C", {{i, M}, {j, N}});
        C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
        testing::schedule_sliced_gemm(C, A, Bm, i, j, k);
        Pipeline p({C}, "gemm_stages");
        REQUIRE_THAT(compile_cuda(p, {}, stages(3)).kernel_ir[0], Contains("pipelined(3 stages) for ko in"));
        const std::vector<std::tuple<int, int, int>> sizes = {{5, 7, 0},    {1, 1, 1},    {32, 32, 8},  {33, 31, 9},
                                                              {32, 64, 16}, {17, 40, 17}, {64, 33, 24}, {3, 5, 57}};
        testing::check_dense_gemm_kernels(p, M, N, K, A, Bm, C, sizes, p.compile("cuda-cpu-threads", stages(1)),
                                          p.compile("cuda-cpu-threads", stages(2)),
                                          p.compile("cuda-cpu-threads", stages(3)),
                                          p.compile("cuda-cpu-threads", stages(4)));
    }
    SECTION("trmm: a k-loop that depends on the block") {
        apps::TrmmGpu t(64);
        Pipeline p = t.pipeline();
        Kernel plain = p.compile("cuda-cpu-threads", stages(1));
        for (int n : {2, 3}) {
            Kernel staged = p.compile("cuda-cpu-threads", stages(n));
            for (int64_t size : {1, 16, 17, 68}) {
                INFO(n << " stages, M " << size);
                RaggedShape s;
                s.set(t.M, size).set(t.N, size + 3);
                Buffer l = Buffer::alloc(t.L, s), x = Buffer::alloc(t.X, s);
                testing::fill_random(l, 41);
                testing::fill_random(x, 42);
                Buffer c = Buffer::alloc(t.C, s), c_plain = Buffer::alloc(t.C, s);
                staged.run(s, {{t.L, l}, {t.X, x}, {t.C, c}});
                plain.run(s, {{t.L, l}, {t.X, x}, {t.C, c_plain}});
                testing::require_same_sums(c, c_plain);
                testing::require_close(c, reference_evaluate(p, s, {{t.L, &l}, {t.X, &x}})[0]);
            }
        }
    }
    SECTION("vgemm: ragged matrices, rows aligned and not, an empty one") {
        apps::VgemmGpu v(64);
        Pipeline p = v.pipeline();
        Kernel plain = p.compile("cuda-cpu-threads", stages(1)), staged = p.compile("cuda-cpu-threads", stages(2));
        for (const auto &shapes : std::vector<std::vector<std::array<int32_t, 3>>>{
                 {{64, 64, 64}, {16, 16, 48}}, {{70, 3, 17}, {0, 5, 5}, {65, 64, 33}, {1, 129, 2}}}) {
            INFO("first shape " << shapes[0][0] << " x " << shapes[0][1] << " x " << shapes[0][2]);
            RaggedShape s;
            v.bind(s, shapes);
            Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s);
            testing::fill_random(x, 51);
            testing::fill_random(y, 52);
            Buffer c = Buffer::alloc(v.C, s), c_plain = Buffer::alloc(v.C, s);
            staged.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
            plain.run(s, {{v.X, x}, {v.Y, y}, {v.C, c_plain}});
            testing::require_same_sums(c, c_plain);
            testing::require_close(c, reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0]);
        }
    }
}

TEST_CASE("tiles whose stages would not fit in shared memory stay as they are", "[gpu][pipelined]") {
    // A's k-panel is 128 x 64 floats, 32 KiB: two stages would take 64 of the block's 48 KiB.
    Dim i("i"), j("j"), k("k"), io("io"), ii("ii"), jo("jo"), ji("ji"), ko("ko"), ki("ki");
    Param M("M", 0, 300), N("N", 0, 100), K("K", 0, 300);
    Tensor A("A", {{i, M}, {k, K}}), Bm("Bm", {{k, K}, {j, N}});
    Func C("C", {{i, M}, {j, N}});
    C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * Bm(k, y)); });
    C.split(i, io, ii, 128).split(j, jo, ji, 16).split(k, ko, ki, 64);
    C.reorder({io, jo, ko, ii, ji, ki}).gpu_blocks(jo, io).gpu_threads(ji);
    C.cache_read(A, ko);
    Pipeline p({C}, "big_panels");
    CudaProgram cp = compile_cuda(p, {});
    INFO(cp.kernel_ir[0]);
    REQUIRE_THAT(cp.kernel_ir[0], !Contains("pipelined("));
    REQUIRE(shared_elements(cp.kernel_ir[0], "A_cache") == 128 * 64);
    testing::check_dense_gemm(p, p.compile("cuda-cpu-threads"), M, N, K, A, Bm, C, {{130, 17, 65}, {1, 3, 0}});
}

TEST_CASE("the stage count: a CompileError outside 1 .. 4, from the option or the environment", "[gpu][pipelined]") {
    apps::TrmmGpu t(64);
    Pipeline p = t.pipeline();
    for (int bad : {-1, 5}) {
        INFO(bad);
        REQUIRE_THROWS_AS(p.compile("cuda-cpu-threads", stages(bad)), CompileError);
        REQUIRE_THROWS_WITH(p.compile("cuda-cpu-threads", stages(bad)),
                            Contains("CompileOptions::gpu_copy_stages is " + std::to_string(bad) +
                                     "; it takes 1 (copies not pipelined) to 4"));
    }
    {
        ScopedEnv env("CORA_GPU_COPY_STAGES", "9");
        REQUIRE_THROWS_AS(p.compile("cuda-cpu-threads"), CompileError);
        REQUIRE_THROWS_WITH(p.compile("cuda-cpu-threads"),
                            Contains("CORA_GPU_COPY_STAGES is '9'; it takes 1 (copies not pipelined) to 4"));
        // The option wins over the environment.
        REQUIRE_THAT(compile_cuda(p, {}, stages(2)).kernel_ir[0], Contains("pipelined(2 stages)"));
    }
    {
        ScopedEnv env("CORA_GPU_COPY_STAGES", "3");
        REQUIRE_THAT(compile_cuda(p, {}).kernel_ir[0], Contains("pipelined(3 stages)"));
    }
    ScopedEnv unset("CORA_GPU_COPY_STAGES", nullptr);
    REQUIRE_THAT(compile_cuda(p, {}).kernel_ir[0], Contains("pipelined(2 stages)")); // the default
}
