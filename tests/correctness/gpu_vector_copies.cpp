// Vector copies into shared memory (lower/SplitHostDevice.cpp: 16 bytes of consecutive elements
// per lane, 4 floats or 8 halves; codegen/CodeGen_CUDA.cpp: one 16-byte load and store where all
// are in bounds, contiguous and aligned, else one by one). The GEMM schedules run as CUDA on CPU threads on shapes
// whose rows are aligned (the 16-byte path) and not (the element path) against the reference and the same kernels
// without vector copies; NVRTC's PTX shows the 128-bit loads and stores.
#include "common/cuda_on_cpu.h"
#include "common/gemm_schedules.h"
#include "common/ragged_testing.h"
#include "trmm/trmm_gpu_def.h"
#include "vgemm/vgemm_gpu_def.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

CompileOptions without_vector_copies() {
    CompileOptions o;
    o.vector_gpu_copies = 0;
    return o;
}
/** The copies in their own phase, as before pipelining (gpu_pipelined_copies.cpp has cp.async). */
CompileOptions not_pipelined(int vector = 1) {
    CompileOptions o;
    o.gpu_copy_stages = 1;
    o.vector_gpu_copies = vector;
    return o;
}

} // namespace

TEST_CASE("vector copies into shared memory: the kernels' source and PTX", "[gpu][vector]") {
    apps::VgemmGpu v(128);
    CudaProgram cp = compile_cuda(v.pipeline(), {}, not_pipelined());
    INFO(cp.source);
    // One 16-byte copy per lane and operand, each behind its run-time check.
    REQUIRE_THAT(cp.source, Contains("cora_copy16(&Y_cache_[cora_s0], &Y_[cora_g0]);"));
    REQUIRE_THAT(cp.source, Contains("cora_copy16(&X_cache_[cora_s0], &X_[cora_g0]);"));
    REQUIRE_THAT(cp.source, Contains("& 15) == 0) {"));
    REQUIRE_THAT(cp.kernel_ir[0], Contains("vectorized for v in [0, 0 + 4)"));
    CudaProgram scalar = compile_cuda(v.pipeline(), {}, not_pipelined(0));
    REQUIRE_THAT(scalar.source, !Contains("cora_copy16(&"));
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: NVRTC is needed for the PTX: " << why);
        return;
    }
    CudaProgram compiled = compile_cuda(v.pipeline(), {90}, not_pipelined());
    REQUIRE(compiled.binaries.size() == 1);
    // 16-byte global loads (ld.global.nc.v4: the operands are const __restrict__) and shared stores.
    REQUIRE_THAT(compiled.binaries[0].ptx, Contains("ld.global.nc.v4.") || Contains("ld.global.v4."));
    REQUIRE_THAT(compiled.binaries[0].ptx, Contains("st.shared.v4."));
    // float16 operands (the tensor-core vgemm): 8 halves per 16-byte copy.
    apps::VgemmTensorCores tc;
    CudaProgram halves = compile_cuda(tc.pipeline(), {90}, not_pipelined());
    INFO(halves.source);
    REQUIRE_THAT(halves.source, Contains("cora_copy16(&X_cache_[cora_s0], &X_[cora_g0]);"));
    REQUIRE_THAT(halves.source, Contains("(cora_s0 & 7) == 0"));
    REQUIRE_THAT(halves.binaries[0].ptx, Contains("ld.global.nc.v4.") || Contains("ld.global.v4."));
    CudaProgram scalar_ptx = compile_cuda(v.pipeline(), {90}, not_pipelined(0));
    REQUIRE_THAT(scalar_ptx.binaries[0].ptx, !Contains("ld.global.nc.v4.") && !Contains("ld.global.v4."));
}

TEST_CASE("vector copies match the element copies and the reference on aligned and ragged rows", "[gpu][vector]") {
    SECTION("vgemm") {
        const int64_t tile = GENERATE(64, 128);
        apps::VgemmGpu v(tile);
        Pipeline p = v.pipeline();
        Kernel vector = testing::cuda_on_cpu(p);
        Kernel scalar = p.compile("cuda-cpu-threads", without_vector_copies());
        // Rows of 64 and 16 floats (every start aligned), of 17, 33 and 3 (most not), a matrix whose
        // offset in the batch leaves the next one misaligned, an empty one.
        for (const auto &shapes :
             std::vector<std::vector<std::array<int32_t, 3>>>{{{64, 64, 64}, {16, 16, 16}},
                                                              {{70, 3, 17}, {0, 5, 5}, {65, 64, 64}, {1, 129, 2}},
                                                              {{5, 33, 31}, {16, 16, 16}, {33, 8, 12}}}) {
            INFO("first shape " << shapes[0][0] << " x " << shapes[0][1] << " x " << shapes[0][2]);
            RaggedShape s;
            v.bind(s, shapes);
            Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s);
            testing::fill_random(x, 11);
            testing::fill_random(y, 12);
            Buffer c = Buffer::alloc(v.C, s), c_scalar = Buffer::alloc(v.C, s);
            vector.run(s, {{v.X, x}, {v.Y, y}, {v.C, c}});
            scalar.run(s, {{v.X, x}, {v.Y, y}, {v.C, c_scalar}});
            testing::require_same_sums(c, c_scalar);
            testing::require_close(c, reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0]);
        }
    }
    SECTION("trmm") {
        apps::TrmmGpu t(64);
        Pipeline p = t.pipeline();
        Kernel vector = testing::cuda_on_cpu(p);
        Kernel scalar = p.compile("cuda-cpu-threads", without_vector_copies());
        for (int64_t size : {1, 17, 64, 68}) {
            INFO("M " << size);
            RaggedShape s;
            s.set(t.M, size).set(t.N, size + 4);
            Buffer l = Buffer::alloc(t.L, s), x = Buffer::alloc(t.X, s);
            testing::fill_random(l, 21);
            testing::fill_random(x, 22);
            Buffer c = Buffer::alloc(t.C, s), c_scalar = Buffer::alloc(t.C, s);
            vector.run(s, {{t.L, l}, {t.X, x}, {t.C, c}});
            scalar.run(s, {{t.L, l}, {t.X, x}, {t.C, c_scalar}});
            testing::require_same_sums(c, c_scalar);
            testing::require_close(c, reference_evaluate(p, s, {{t.L, &l}, {t.X, &x}})[0]);
        }
    }
}

TEST_CASE("a buffer view at an odd address takes the element copies and stays correct", "[gpu][vector]") {
    // The same vgemm on inputs that start 4 bytes past a 16-byte boundary: every 16-byte check
    // fails, so every lane copies its elements one by one.
    apps::VgemmGpu v(64);
    Pipeline p = v.pipeline();
    Kernel vector = testing::cuda_on_cpu(p);
    RaggedShape s;
    v.bind(s, {{64, 64, 64}, {32, 16, 48}});
    Buffer x = Buffer::alloc(v.X, s), y = Buffer::alloc(v.Y, s);
    testing::fill_random(x, 31);
    testing::fill_random(y, 32);
    std::vector<float> xs((size_t)x.size() + 4), ys((size_t)y.size() + 4);
    float *xo = xs.data() + 1, *yo = ys.data() + 1;
    while ((reinterpret_cast<uintptr_t>(xo) & 15) != 4)
        xo++;
    while ((reinterpret_cast<uintptr_t>(yo) & 15) != 4)
        yo++;
    REQUIRE(xo + x.size() <= xs.data() + xs.size());
    REQUIRE(yo + y.size() <= ys.data() + ys.size());
    std::copy(x.data<float>(), x.data<float>() + x.size(), xo);
    std::copy(y.data<float>(), y.data<float>() + y.size(), yo);
    Buffer xv = Buffer::view(v.X, s, xo, x.size()), yv = Buffer::view(v.Y, s, yo, y.size());
    Buffer c = Buffer::alloc(v.C, s);
    vector.run(s, {{v.X, xv}, {v.Y, yv}, {v.C, c}});
    testing::require_close(c, reference_evaluate(p, s, {{v.X, &x}, {v.Y, &y}})[0]);
}
