// pipeline_shared_panels (lower/PipelineSharedPanels.cpp) alone, on a k-panel loop built by hand;
// the CUDA printer's pipelined loops (a For with pipeline_stages) and the model of cp.async that CUDA on CPU threads
// runs them with: a copy lands in shared memory only when its thread waits for its group, so a kernel that reads a
// stage whose copies are still in flight reads what the stage held before, as it may on a GPU, instead of the new
// panel.
#include <catch2/catch.hpp>

#include "codegen/CodeGen_CUDA.h"
#include "common/cuda_on_cpu_launch.h"
#include "ir/IRPrinter.h"
#include "ir/Module.h"
#include "lower/Passes.h"

#include <vector>

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

namespace {

int count(const std::string &s, const std::string &what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
        n++;
    return n;
}

VarPtr index_var(const char *name) { return make_var(name, VarRole::Index, Int64); }
Expr c(int64_t v) { return IntImm::make(v); }
Expr f(double v) { return FloatImm::make(v, Float32); }

/** One block of 8 threads over 3 panels of 8 floats: in two stages of the shared tile T[16], panel
 * k is copied by 2 lanes of 4 floats (16-byte copies), then thread t stores T's element t of stage
 * `read_stage(k)` to out[8 k + t]. */
struct StagedCopyKernel {
    VarPtr in = make_var("in", VarRole::Buffer, Float32), out = make_var("out", VarRole::Buffer, Float32);
    VarPtr tile = make_var("T", VarRole::Buffer, Float32);
    VarPtr b = index_var("b"), k = index_var("k"), lane = index_var("lane"), v = index_var("v"), t = index_var("t");

    Module module(Expr read_stage) const {
        Expr stage = Mod::make(var_expr(k), c(2));
        Expr at = Add::make(Mul::make(var_expr(lane), c(4)), var_expr(v));
        Stmt copy = For::make(lane, c(0), c(2), ForKind::GpuLanes,
                              For::make(v, c(0), c(4), ForKind::Vectorized,
                                        Store::make(tile, Add::make(Mul::make(stage, c(8)), at),
                                                    Load::make(in, Add::make(Mul::make(var_expr(k), c(8)), at)))));
        Stmt use = For::make(t, c(0), c(8), ForKind::GpuThreadX,
                             Store::make(out, Add::make(Mul::make(var_expr(k), c(8)), var_expr(t)),
                                         Load::make(tile, Add::make(Mul::make(read_stage, c(8)), var_expr(t)))));
        Stmt loop = For::make(k, c(0), c(3), ForKind::Serial, Block::make({copy, use}));
        loop = loop.as<For>()->with([](For &f) { f.pipeline_stages = 2; });
        Stmt body = Allocate::make(tile, c(16), loop, MemoryType::GpuShared);
        Module m;
        m.name = "staged";
        m.functions.push_back(LoweredFunc{FunctionKind::Device,
                                          {},
                                          {},
                                          For::make(b, c(0), c(1), ForKind::GpuBlockX, body),
                                          "cora_staged_k0",
                                          {in, out},
                                          {},
                                          {}});
        return m;
    }
    /** Runs the kernel as CUDA on CPU threads; out[8 k + t] for the 3 panels. */
    static std::vector<float> run(const Module &m, std::vector<float> input) {
        std::vector<float> out(24, -1.0f);
        float *in_ptr = input.data(), *out_ptr = out.data();
        void *params[] = {&in_ptr, &out_ptr};
        testing::launch_on_cpu_threads(m, {1, 1, 1}, {8, 1, 1}, params);
        return out;
    }
};

std::vector<float> panels() {
    std::vector<float> in(24);
    for (int i = 0; i < 24; i++)
        in[(size_t)i] = (float)(100 * (i / 8) + i % 8); // panel p, element e: 100 p + e
    return in;
}

} // namespace

TEST_CASE("a pipelined loop issues its copies a stage ahead and waits before the panel is used", "[codegen][gpu]") {
    StagedCopyKernel kern;
    Module m = kern.module(Mod::make(var_expr(kern.k), c(2)));
    std::string src = codegen_cuda(m);
    INFO(src);
    // Panel 0 before the loop; per iteration k a wait for every group, a barrier, panel k + 1's
    // copies, the use; a barrier after the loop.
    REQUIRE(count(src, "cora_copy16_async(&T_[cora_s0], &in_[cora_g0]);") == 2);
    REQUIRE(count(src, "cora_copy_async_commit();") == 2);
    REQUIRE_THAT(src, Contains("if (k_ + 1 < "));
    REQUIRE(count(src, "cora_copy_async_wait<0>();") == 1);
    REQUIRE(count(src, "__syncthreads();") == 2);
    const std::vector<float> in = panels();
    REQUIRE(StagedCopyKernel::run(m, in) == in);
}

TEST_CASE("CUDA on CPU threads: a stage read before its copies are waited for holds its old panel", "[codegen][gpu]") {
    // Iteration k reads stage (k + 1) % 2, where panel k + 1's copies are still in flight.
    StagedCopyKernel kern;
    Module m = kern.module(Mod::make(Add::make(var_expr(kern.k), c(1)), c(2)));
    const std::vector<float> in = panels(), out = StagedCopyKernel::run(m, in);
    // Iteration 1 reads stage 0, where panel 2's copies, issued after iteration 1's wait, are in
    // flight: thread 0 copied elements 0-3 and reads element 0 before its next wait lands them,
    // so it reads panel 0's value (done at once, the copy would give 200). The others read
    // another thread's copy, which may have landed or not, as on a GPU.
    REQUIRE(out[8] == 0.0f);
    for (int e = 1; e < 8; e++) {
        INFO("element " << e);
        REQUIRE((out[(size_t)(8 + e)] == (float)e || out[(size_t)(8 + e)] == (float)(200 + e)));
    }
    // Iteration 2 reads stage 1: panel 1, complete since iteration 1's wait and barrier.
    for (int e = 0; e < 8; e++)
        REQUIRE(out[(size_t)(16 + e)] == (float)(100 + e));
}

namespace {

/** A block's k-panel loop: for k in [0, K): allocate shared T[64] { lanes: T[l] = src[64 k + l];
 * thread t: out[t] += T[t] } (out a global buffer), with `src` the copy's source. */
struct PanelLoop {
    VarPtr in = make_var("in", VarRole::Buffer, Float32), out = make_var("out", VarRole::Buffer, Float32);
    VarPtr tile = make_var("T", VarRole::Buffer, Float32), K = make_var("K", VarRole::Param, Int64);
    VarPtr b = index_var("b"), k = index_var("k"), l = index_var("l"), t = index_var("t");
    Stmt kernel(const VarPtr &src, int64_t tile_floats = 64) const { return kernel_with(src, tile_floats, {use()}); }
    /** The thread loop that reads the tile. */
    Stmt use() const {
        return For::make(
            t, c(0), c(64), ForKind::GpuThreadX,
            Store::make(out, var_expr(t), Add::make(Load::make(out, var_expr(t)), Load::make(tile, var_expr(t)))));
    }
    /** The kernel with `rest` after the copy in the loop's body. */
    Stmt kernel_with(const VarPtr &src, int64_t tile_floats, std::vector<Stmt> rest) const {
        Stmt copy =
            For::make(l, c(0), c(tile_floats), ForKind::GpuLanes,
                      Store::make(tile, var_expr(l),
                                  Load::make(src, Add::make(Mul::make(var_expr(k), c(tile_floats)), var_expr(l)))));
        rest.insert(rest.begin(), copy);
        Stmt loop = For::make(k, c(0), var_expr(K), ForKind::Serial,
                              Allocate::make(tile, c(tile_floats), Block::make(rest), MemoryType::GpuShared));
        return For::make(b, c(0), c(1), ForKind::GpuBlockX, loop);
    }
};

} // namespace

TEST_CASE("pipeline_shared_panels: a k-panel loop's tile in stages, each iteration offset to its own", "[pass][gpu]") {
    PanelLoop p;
    GpuLimits limits;
    Stmt before = p.kernel(p.in);
    Stmt after = pipeline_shared_panels(before, 3, limits);
    const std::string ir = print(after);
    INFO(ir);
    // The tile leaves the loop with 3 stages; the loop is marked; copy and use both at stage k % 3.
    REQUIRE_THAT(ir, Contains("allocate in shared memory T[float32 * 192]\n  pipelined(3 stages) for k in [0, 0 + K)"));
    REQUIRE_THAT(ir, Contains("T[(l + ((k % 3) * 64))] = in[((k * 64) + l)]"));
    REQUIRE_THAT(ir, Contains("(out[t] + T[(t + ((k % 3) * 64))])"));
    const For *loop = after.as<For>()->body.as<Allocate>()->body.as<For>();
    REQUIRE(loop->pipeline_stages == 3);
    REQUIRE(loop->body.as<Block>()->stmts[0].as<For>()->for_kind == ForKind::GpuLanes);
    // One stage: nothing changes.
    REQUIRE(equal(pipeline_shared_panels(before, 1, limits), before));

    SECTION("a copy that reads what the kernel writes is not issued early") {
        Stmt reads_output = p.kernel(p.out);
        REQUIRE(equal(pipeline_shared_panels(reads_output, 2, limits), reads_output));
    }
    SECTION("a rest that writes the tile, or starts with another gpu_lanes loop, is not pipelined") {
        Stmt overwrite = For::make(p.t, c(0), c(64), ForKind::GpuThreadX, Store::make(p.tile, var_expr(p.t), f(0.0)));
        Stmt writes_tile = p.kernel_with(p.in, 64, {p.use(), overwrite});
        REQUIRE(equal(pipeline_shared_panels(writes_tile, 2, limits), writes_tile));
        // A block-level store to global memory as a lanes loop: issued early, it would run
        // before the iterations before it are done.
        VarPtr lane = index_var("lane");
        Stmt other_lanes = For::make(lane, c(0), c(1), ForKind::GpuLanes, Store::make(p.out, c(0), f(1.0)));
        Stmt lanes_first = p.kernel_with(p.in, 64, {other_lanes, p.use()});
        REQUIRE(equal(pipeline_shared_panels(lanes_first, 2, limits), lanes_first));
    }
    SECTION("stages past the block's shared memory are not taken") {
        Stmt big = p.kernel(p.in, 4096); // 16 KiB: 3 stages fit in 48 KiB, 4 do not
        REQUIRE(print(pipeline_shared_panels(big, 3, limits)).find("pipelined(3 stages)") != std::string::npos);
        REQUIRE(equal(pipeline_shared_panels(big, 4, limits), big));
    }
}
