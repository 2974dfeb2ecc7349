// slice_thread_tiles (lower/SliceThreadTiles.cpp): a block-level stack tile becomes a per-thread
// slice only when the threads provably touch disjoint parts; and the CUDA-on-CPU runner
// (codegen_cuda_on_cpu) reports a barrier that only some threads of a block reach.
#include <catch2/catch.hpp>

#include "codegen/CodeGen_CUDA.h"
#include "cora_runtime.h"
#include "driver/JIT.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Module.h"
#include "lower/Passes.h"

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

namespace {

VarPtr index_var(const char *name) { return make_var(name, VarRole::Index, Int64); }
Expr c(int64_t v) { return IntImm::make(v); }

/** tile[size] allocated in a block loop; `body(t, r)` is the statement inside the thread loop t
 * (gpu_threads.x, extent 8) and the serial loop r (extent 8). */
struct TileKernel {
    VarPtr tile = make_var("tile", VarRole::Buffer, Float32), out = make_var("out", VarRole::Buffer, Float32);
    VarPtr b = index_var("b"), t = index_var("t"), r = index_var("r");

    Stmt make(int64_t size, const std::function<Expr(Expr, Expr)> &tile_index, bool access_outside_threads = false) {
        Expr ti = var_expr(t), ri = var_expr(r);
        Expr at = tile_index(ti, ri);
        Stmt init = Store::make(tile, at, FloatImm::make(0.0, Float32));
        Stmt update = Store::make(tile, at, Add::make(Load::make(tile, at), FloatImm::make(1.0, Float32)));
        Stmt write = Store::make(out, Add::make(Mul::make(var_expr(b), c(64)), Add::make(Mul::make(ti, c(8)), ri)),
                                 Load::make(tile, at));
        auto nest = [&](Stmt s) {
            return For::make(t, c(0), c(8), ForKind::GpuThreadX, For::make(r, c(0), c(8), ForKind::Serial, s));
        };
        std::vector<Stmt> body = {nest(init), nest(update), nest(write)};
        if (access_outside_threads) body.push_back(Store::make(tile, c(0), FloatImm::make(2.0, Float32)));
        return For::make(b, c(0), c(4), ForKind::GpuBlockX,
                         Allocate::make(tile, c(size), Block::make(body), MemoryType::Stack));
    }
};

/** The size of the tile's allocation after the pass, and whether an access still names t. */
std::pair<int64_t, bool> sliced(const Stmt &s, const TileKernel &k) {
    int64_t size = -1;
    bool names_thread = false;
    visit_stmts(s, [&](const Stmt &x) {
        if (const Allocate *a = x.as<Allocate>())
            if (a->buffer == k.tile) size = *as_const_int(a->size);
        if (const Store *st = x.as<Store>())
            if (st->buffer == k.tile) names_thread = names_thread || uses_var(st->index, k.t.get());
    });
    return {size, names_thread};
}

} // namespace

TEST_CASE("a block-level tile whose threads touch disjoint parts becomes a per-thread slice", "[lower][gpu]") {
    TileKernel k;
    SECTION("stride 8 per thread, 8 elements each: sliced to 8") {
        Stmt s = slice_thread_tiles(k.make(64, [](Expr t, Expr r) { return Add::make(Mul::make(t, c(8)), r); }));
        INFO(print(s));
        REQUIRE(sliced(s, k) == std::make_pair<int64_t, bool>(8, false));
    }
    SECTION("the thread stride larger than the part: sliced to the stride") {
        Stmt s = slice_thread_tiles(k.make(128, [](Expr t, Expr r) { return Add::make(Mul::make(t, c(16)), r); }));
        REQUIRE(sliced(s, k) == std::make_pair<int64_t, bool>(16, false));
    }
    SECTION("parts that overlap (stride 4, 8 elements each): kept whole") {
        Stmt s = slice_thread_tiles(k.make(64, [](Expr t, Expr r) { return Add::make(Mul::make(t, c(4)), r); }));
        REQUIRE(sliced(s, k) == std::make_pair<int64_t, bool>(64, true));
    }
    SECTION("the thread index not linear (t * t): kept whole") {
        Stmt s = slice_thread_tiles(
            k.make(512, [](Expr t, Expr r) { return Add::make(Mul::make(Mul::make(t, t), c(8)), r); }));
        REQUIRE(sliced(s, k) == std::make_pair<int64_t, bool>(512, true));
    }
    SECTION("threads interleaved (r * 8 + t): kept whole") {
        Stmt s = slice_thread_tiles(k.make(64, [](Expr t, Expr r) { return Add::make(Mul::make(r, c(8)), t); }));
        REQUIRE(sliced(s, k).first == 64);
    }
    SECTION("an access outside the thread loops (every thread would run it): kept whole") {
        Stmt s = slice_thread_tiles(k.make(
            64, [](Expr t, Expr r) { return Add::make(Mul::make(t, c(8)), r); }, /*outside=*/true));
        REQUIRE(sliced(s, k).first == 64);
    }
}

TEST_CASE("CUDA on CPU threads reports a __syncthreads() only some threads of a block reach", "[codegen][gpu]") {
    // Kernel: threads t < 4 copy into a shared tile (a lanes loop: a barrier before and after);
    // threads 4..7 skip it. Legal lowering never produces this (the copy sits outside the thread
    // loops); the runner must say so rather than hang.
    VarPtr out = make_var("out", VarRole::Buffer, Float32), shared = make_var("sh", VarRole::Buffer, Float32);
    VarPtr b = index_var("b"), t = index_var("t"), lane = index_var("lane");
    Stmt copy = For::make(lane, c(0), c(8), ForKind::GpuLanes,
                          Store::make(shared, var_expr(lane), FloatImm::make(1.0, Float32)));
    Stmt divergent = IfThenElse::make(LT::make(var_expr(t), c(4)), copy, Stmt());
    Stmt write =
        Store::make(out, Add::make(Mul::make(var_expr(b), c(8)), var_expr(t)), Load::make(shared, var_expr(t)));
    for (bool diverge : {false, true}) {
        Stmt body = For::make(t, c(0), c(8), ForKind::GpuThreadX, diverge ? Block::make({divergent, write}) : write);
        if (!diverge) body = Block::make({copy, body});
        Stmt kernel_body =
            For::make(b, c(0), c(2), ForKind::GpuBlockX, Allocate::make(shared, c(8), body, MemoryType::GpuShared));
        Module m;
        m.name = "diverge";
        m.functions.push_back(LoweredFunc{FunctionKind::Device, {}, {}, kernel_body, "cora_diverge_k0", {out}, {}, {}});
        std::string src = codegen_cuda_on_cpu(m);
        INFO(src);
        driver::JitResult jit = driver::jit_compile(src, "cora_cuda_on_cpu_launch", driver::JitOptions{"", "", 0});
        auto launch =
            reinterpret_cast<int (*)(int, const long long *, const long long *, void **, char *, int)>(jit.entry);
        std::vector<float> data(16, 0.0f);
        float *ptr = data.data();
        void *params[] = {&ptr};
        const long long grid[3] = {2, 1, 1}, threads[3] = {8, 1, 1};
        char error[256] = {0};
        int rc = launch(0, grid, threads, params, error, sizeof error);
        if (diverge) {
            REQUIRE(rc == 3);
            REQUIRE_THAT(std::string(error),
                         Contains("a __syncthreads() that some threads of a block reach and others do not"));
        } else {
            INFO(error);
            REQUIRE(rc == 0);
            REQUIRE(data == std::vector<float>(16, 1.0f));
        }
        REQUIRE(launch(1, grid, threads, params, error, sizeof error) == 3);
        REQUIRE_THAT(std::string(error), Contains("no kernel number 1"));
    }
}
