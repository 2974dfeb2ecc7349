// The CUDA printer's barriers between a block's phases (codegen/CudaPhaseBarriers.h): a thread
// loop that reads what an earlier thread loop of the block wrote (at other threads' indices) waits
// at a __syncthreads; a block-level loop whose next iteration's first phases use what its last
// ones wrote or read waits at the end of its body; phases over different buffers, and GEMM-like
// kernels whose panels are copied by lanes loops, get none. Each kernel also runs as CUDA on CPU
// threads, where a missing barrier gives wrong values (a fiber runs until its next barrier).
#include <catch2/catch.hpp>

#include "codegen/CodeGen_CUDA.h"
#include "common/cuda_on_cpu_launch.h"
#include "cora_runtime.h"
#include "ir/Module.h"

#include <functional>
#include <vector>

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

namespace {

VarPtr index_var(const char *name) { return make_var(name, VarRole::Index, Int64); }
Expr c(int64_t v) { return IntImm::make(v); }
Expr f(double v) { return FloatImm::make(v, Float32); }

int count(const std::string &s, const std::string &what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
        n++;
    return n;
}

/** Two blocks of 8 threads over buffers mid[16] and out[16] (element b * 8 + t per thread). */
struct PhaseKernel {
    VarPtr mid = make_var("mid", VarRole::Buffer, Float32), out = make_var("out", VarRole::Buffer, Float32);
    VarPtr b = index_var("b");
    /** A thread loop over t < 8 storing `value(t)` into `buffer` at b * 8 + t. */
    Stmt phase(const VarPtr &buffer, const std::function<Expr(Expr)> &value) const {
        VarPtr t = index_var("t");
        Expr at = Add::make(Mul::make(var_expr(b), c(8)), var_expr(t));
        return For::make(t, c(0), c(8), ForKind::GpuThreadX, Store::make(buffer, at, value(var_expr(t))));
    }
    /** Element (b, 7 - t) of `buffer`: another thread's. */
    Expr mirrored(const VarPtr &buffer, Expr t) const {
        return Load::make(buffer, Add::make(Mul::make(var_expr(b), c(8)), Sub::make(c(7), t)));
    }
    Module module(const Stmt &block_body) const {
        Module m;
        m.name = "phases";
        Stmt kernel = For::make(b, c(0), c(2), ForKind::GpuBlockX, block_body);
        m.functions.push_back(LoweredFunc{FunctionKind::Device, {}, {}, kernel, "cora_phases_k0", {mid, out}, {}, {}});
        return m;
    }
    /** Runs the kernel as CUDA on CPU threads on mid and out (both 16 floats). */
    static void run_on_cpu_threads(const Module &m, std::vector<float> &mid_data, std::vector<float> &out_data) {
        float *mid_ptr = mid_data.data(), *out_ptr = out_data.data();
        void *params[] = {&mid_ptr, &out_ptr};
        testing::launch_on_cpu_threads(m, {2, 1, 1}, {8, 1, 1}, params);
    }
};

} // namespace

TEST_CASE("a phase that reads what an earlier phase of the block wrote waits at a barrier", "[codegen][gpu]") {
    PhaseKernel k;
    // mid[t] = t + 1, then out[t] = mid[7 - t]: thread t reads thread 7 - t's element.
    Stmt write = k.phase(k.mid, [](Expr t) { return Add::make(Cast::make(Float32, t), f(1.0)); });
    Stmt read = k.phase(k.out, [&](Expr t) { return k.mirrored(k.mid, t); });
    Module m = k.module(Block::make({write, read}));
    std::string src = codegen_cuda(m);
    INFO(src);
    REQUIRE(count(src, "__syncthreads(); // the phases before this one") == 1);
    std::vector<float> mid(16, -1.0f), out(16, -1.0f);
    PhaseKernel::run_on_cpu_threads(m, mid, out);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 8; t++)
            REQUIRE(out[(size_t)(b * 8 + t)] == (float)(8 - t));

    SECTION("phases over different buffers need none") {
        Stmt other = k.phase(k.out, [](Expr t) { return Cast::make(Float32, t); });
        REQUIRE(count(codegen_cuda(k.module(Block::make({write, other}))), "__syncthreads") == 0);
    }
    SECTION("a later phase that overwrites what an earlier one read waits too") {
        Stmt read_mid = k.phase(k.out, [&](Expr t) { return k.mirrored(k.mid, t); });
        Stmt overwrite = k.phase(k.mid, [](Expr) { return f(0.0); });
        REQUIRE(count(codegen_cuda(k.module(Block::make({read_mid, overwrite}))), "the phases before this one") == 1);
    }
}

TEST_CASE("a block-level loop whose next iteration uses what this one's phases wrote ends at a barrier",
          "[codegen][gpu]") {
    PhaseKernel k;
    VarPtr it = index_var("it");
    // Three times: mid[t] = out[7 - t] + 1 (out of the last iteration, another thread's), then
    // out[t] = mid[7 - t]. Within an iteration the second phase waits for the first; across
    // iterations the first waits for the second (it reads out, and overwrites mid).
    Stmt first = k.phase(k.mid, [&](Expr t) { return Add::make(k.mirrored(k.out, t), f(1.0)); });
    Stmt second = k.phase(k.out, [&](Expr t) { return k.mirrored(k.mid, t); });
    Module m = k.module(For::make(it, c(0), c(3), ForKind::Serial, Block::make({first, second})));
    std::string src = codegen_cuda(m);
    INFO(src);
    REQUIRE(count(src, "the phases before this one") == 1);
    REQUIRE(count(src, "the next iteration's phases") == 1);
    std::vector<float> mid(16, 0.0f), out(16);
    for (int i = 0; i < 16; i++)
        out[(size_t)i] = (float)(i % 8); // out[t] = t
    // Reference: each iteration out[t] = out[t] + 1 (mirrored twice).
    PhaseKernel::run_on_cpu_threads(m, mid, out);
    for (int i = 0; i < 16; i++)
        REQUIRE(out[(size_t)i] == (float)(i % 8 + 3));

    SECTION("a lanes loop at the head of the body (a barrier) needs no second one") {
        VarPtr lane = index_var("lane");
        Stmt copy = For::make(lane, c(0), c(1), ForKind::GpuLanes, Store::make(k.mid, c(0), f(0.0)));
        Module with_copy = k.module(For::make(it, c(0), c(3), ForKind::Serial, Block::make({copy, first, second})));
        REQUIRE(count(codegen_cuda(with_copy), "the next iteration's phases") == 0);
    }
}
