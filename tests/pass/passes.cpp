// Lowering passes one at a time, IR in and IR out (as TVM tests its transforms): a small input
// statement written here, one pass, and its output checked — its structure, and where the IR is
// integer, what the interpreter computes with it (the reference semantics of the IR). The chain
// test at the end runs the passes that make a kernel's entry (storage lowering, argument
// inference, aux-array building, UF materialization, load hoisting) on one ragged op and
// interprets the result. The lowering of whole pipelines is covered by tests/correctness.
#include <catch2/catch.hpp>
#include <cora/cora.h>

#include "analysis/Interpreter.h"
#include "analysis/Simplify.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

namespace {

Expr c(int64_t v) { return IntImm::make(v); }
VarPtr index_var(const char *name) { return make_var(name, VarRole::Index, Int64); }
VarPtr buffer(const char *name, Type t = Int64) { return make_var(name, VarRole::Buffer, t); }
Stmt loop(const VarPtr &v, Expr extent, ForKind kind, Stmt body) {
    return For::make(v, c(0), std::move(extent), kind, std::move(body));
}

/** How many nodes of each kind `s` holds, by a predicate. */
int count_stmts(const Stmt &s, const std::function<bool(const Stmt &)> &f) {
    int n = 0;
    visit_stmts(s, [&](const Stmt &x) { n += f(x) ? 1 : 0; });
    return n;
}
int count_exprs(const Stmt &s, const std::function<bool(const Expr &)> &f) {
    int n = 0;
    visit_exprs(s, [&](const Expr &x) { n += f(x) ? 1 : 0; });
    return n;
}
template <typename T> int count_stmts_of(const Stmt &s) {
    return count_stmts(s, [](const Stmt &x) { return x.as<T>() != nullptr; });
}
template <typename T> int count_exprs_of(const Stmt &s) {
    return count_exprs(s, [](const Expr &x) { return x.as<T>() != nullptr; });
}
int loops_of_kind(const Stmt &s, ForKind k) {
    return count_stmts(s, [&](const Stmt &x) {
        const For *f = x.as<For>();
        return f && f->for_kind == k;
    });
}
bool has_shared_memory(const Stmt &s) {
    return count_stmts(s, [](const Stmt &x) {
               const Allocate *a = x.as<Allocate>();
               return a && a->memory == MemoryType::GpuShared;
           }) > 0;
}

/** A block per row, a thread per element of the row, summing the row into X[bx]: the form a
 * schedule binding a reduction loop to threads reaches lower_thread_reductions in. */
struct RowSums {
    VarPtr bx = index_var("bx"), t = index_var("t");
    VarPtr X = buffer("X", Float32), A = buffer("A", Float32);
    Stmt stmt(int64_t threads, bool with_init = true) const {
        Expr row = var_expr(bx);
        Stmt update = Store::make(
            X, row, Add::make(Load::make(X, row), Load::make(A, Add::make(Mul::make(row, c(threads)), var_expr(t)))));
        std::vector<Stmt> body;
        if (with_init) body.push_back(Store::make(X, row, FloatImm::make(0.0)));
        body.push_back(loop(t, c(threads), ForKind::GpuThreadX, update));
        return loop(bx, c(4), ForKind::GpuBlockX, Block::make(body));
    }
};

/** One batch of ragged rows: B rows of len(b) elements. */
struct RaggedRows {
    Dim batch{"batch"}, seq{"seq"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 40};
    const VarNode *B_var() const { return B.expr().as<VarNode>(); }
};

} // namespace

TEST_CASE("select_inlined: inlined Funcs leave the computed list, producers stay first", "[pass]") {
    Dim i("i");
    Tensor A("A", {{i, 16}});
    Func F("F", {{i, 16}}), G("G", {{i, 16}}), H("H", {{i, 16}});
    F.compute([&](Expr x) { return A(x) * 2.0f; });
    G.compute([&](Expr x) { return F(x) + 1.0f; });
    H.compute([&](Expr x) { return G(x) * F(x); });
    F.compute_inline();
    G.compute_root(); // read once, elementwise: it would be inlined by default
    LoweringContext ctx;
    ctx.funcs = {F.node(), G.node(), H.node()};
    ctx.outputs = {H.node()};
    InlineSelection sel = select_inlined(ctx);
    REQUIRE(sel.computed == std::vector<TensorPtr>{G.node(), H.node()});
    REQUIRE(sel.inlined == std::vector<TensorPtr>{F.node()});
    REQUIRE(ctx.funcs.size() == 3); // the context is the caller's to update
    // An output cannot be inlined: it must be stored.
    H.compute_inline();
    REQUIRE_THROWS_AS(select_inlined(ctx), CompileError);
    REQUIRE_THROWS_WITH(select_inlined(ctx), Contains("compute_inline of Func 'H': it is an output of the pipeline"));
}

TEST_CASE("select_inlined: an elementwise Func read once at its reader's indices is inlined by default",
          "[pass][inline]") {
    Dim i("i"), j("j"), r("r");
    Tensor A("A", {{i, 16}, {j, 8}});
    auto selected = [](std::vector<Func> funcs, const Func &out) {
        LoweringContext ctx;
        for (const Func &f : funcs)
            ctx.funcs.push_back(f.node());
        ctx.outputs = {out.node()};
        return select_inlined(ctx);
    };
    auto is_inlined = [](const InlineSelection &s, const Func &f) {
        return std::find(s.inlined.begin(), s.inlined.end(), f.node()) != s.inlined.end();
    };
    SECTION("read once, at the reader's own indices (also transposed): inlined, producers first") {
        Func P("P", {{i, 16}, {j, 8}}), Q("Q", {{j, 8}, {i, 16}}), C("C", {{i, 16}, {j, 8}});
        P.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        Q.compute([&](Expr y, Expr x) { return P(x, y) * 2.0f; });
        C.compute([&](Expr x, Expr y) { return max(Q(y, x), 0.0f); });
        InlineSelection s = selected({P, Q, C}, C);
        REQUIRE(s.inlined == std::vector<TensorPtr>{P.node(), Q.node()});
        REQUIRE(s.computed == std::vector<TensorPtr>{C.node()});
    }
    SECTION("compute_root keeps it stored, and conflicts with compute_inline") {
        Func P("P", {{i, 16}, {j, 8}}), C("C", {{i, 16}, {j, 8}});
        P.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        C.compute([&](Expr x, Expr y) { return P(x, y) * 2.0f; });
        P.compute_root();
        REQUIRE_FALSE(is_inlined(selected({P, C}, C), P));
        REQUIRE_THROWS_AS(P.compute_inline(), CompileError);
        REQUIRE_THROWS_WITH(P.compute_inline(), Contains("compute_inline of 'P': it is marked compute_root"));
        Func Q("Q", {{i, 16}});
        Q.compute([&](Expr x) { return A(x, 0) * 1.0f; });
        Q.compute_inline();
        REQUIRE_THROWS_WITH(Q.compute_root(), Contains("compute_root of 'Q': it is marked compute_inline"));
    }
    SECTION("read twice, inside a reduction, shifted, broadcast, by two Funcs, or reducing: stored") {
        Func P("P", {{i, 16}, {j, 8}});
        P.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        Func Twice("Twice", {{i, 16}, {j, 8}});
        Twice.compute([&](Expr x, Expr y) { return P(x, y) * P(x, y); });
        REQUIRE_FALSE(is_inlined(selected({P, Twice}, Twice), P));
        Func InSum("InSum", {{i, 16}});
        InSum.compute([&](Expr x) { return sum(r, 8, P(x, r)); });
        REQUIRE_FALSE(is_inlined(selected({P, InSum}, InSum), P));
        Func Shifted("Shifted", {{i, 15}, {j, 8}});
        Shifted.compute([&](Expr x, Expr y) { return P(x + 1, y); });
        REQUIRE_FALSE(is_inlined(selected({P, Shifted}, Shifted), P));
        Func Row("Row", {{i, 16}}), Bcast("Bcast", {{i, 16}, {j, 8}});
        Row.compute([&](Expr x) { return A(x, 0) * 3.0f; });
        Bcast.compute([&](Expr x, Expr y) { return A(x, y) - Row(x); });
        REQUIRE_FALSE(is_inlined(selected({Row, Bcast}, Bcast), Row));
        Func C1("C1", {{i, 16}, {j, 8}}), C2("C2", {{i, 16}, {j, 8}});
        C1.compute([&](Expr x, Expr y) { return P(x, y) * 2.0f; });
        C2.compute([&](Expr x, Expr y) { return C1(x, y) + P(x, y); });
        InlineSelection two = selected({P, C1, C2}, C2);
        REQUIRE_FALSE(is_inlined(two, P));
        REQUIRE(is_inlined(two, C1)); // read once by C2, at its indices
        Func Sum("Sum", {{i, 16}}), Out("Out", {{i, 16}});
        Sum.compute([&](Expr x) { return sum(r, 8, A(x, r)); });
        Out.compute([&](Expr x) { return Sum(x) * 2.0f; });
        REQUIRE_FALSE(is_inlined(selected({Sum, Out}, Out), Sum));
    }
    SECTION("scheduled, cached by its reader, or an output: stored") {
        Func P("P", {{i, 16}, {j, 8}}), C("C", {{i, 16}, {j, 8}});
        P.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        C.compute([&](Expr x, Expr y) { return P(x, y) * 2.0f; });
        REQUIRE_FALSE(is_inlined(selected({P, C}, P), P)); // P is the output
        P.parallel(i);
        REQUIRE_FALSE(is_inlined(selected({P, C}, C), P));
        Func P2("P2", {{i, 16}, {j, 8}}), C2("C2", {{i, 16}, {j, 8}});
        P2.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        C2.compute([&](Expr x, Expr y) { return P2(x, y) * 2.0f; });
        C2.cache_read(P2, i);
        REQUIRE_FALSE(is_inlined(selected({P2, C2}, C2), P2));
    }
}

TEST_CASE("choose_default_schedules: a schedule for each op left unscheduled, none for the others", "[pass]") {
    Dim i("i"), j("j");
    Tensor A("A", {{i, 16}, {j, 64}});
    Func F("F", {{i, 16}, {j, 64}}), G("G", {{i, 16}, {j, 64}});
    F.compute([&](Expr x, Expr y) { return A(x, y) * 2.0f; });
    G.compute([&](Expr x, Expr y) { return F(x, y) + 1.0f; });
    G.parallel(i);
    ScheduleMap chosen =
        choose_default_schedules({F.node(), G.node()}, DefaultScheduleTarget{Target::Host, 256}).schedules;
    REQUIRE(chosen.size() == 1);
    REQUIRE(chosen.count(F.node().get()) == 1);
    const front::Schedule &s = chosen.at(F.node().get());
    REQUIRE(!s.empty());
    bool vectorized = false;
    for (const auto &[dim, kind] : s.annotations)
        vectorized = vectorized || kind == ForKind::Vectorized;
    REQUIRE(vectorized);                            // the whole constant-extent innermost row
    REQUIRE(front::schedule_of(*F.node()).empty()); // the user's schedule is not touched
}

TEST_CASE("lower_reductions: a reduction becomes an accumulator loop, nested ones inside it", "[pass]") {
    VarPtr i = index_var("i"), k = index_var("k"), j = index_var("j"), A = buffer("A");
    Dim d("d");
    Func S("S", {{d, 4}}, Int64);
    Expr row = Mul::make(var_expr(i), c(8));
    Stmt in = loop(i, c(4), ForKind::Serial,
                   Provide::make(S.node(), {var_expr(i)},
                                 Add::make(c(1), Reduce::make(ReduceOp::Sum, k, c(8),
                                                              Load::make(A, Add::make(row, var_expr(k)))))));
    Stmt out = lower_reductions(in);
    INFO(print(out));
    REQUIRE(count_exprs_of<Reduce>(out) == 0);
    REQUIRE(count_stmts_of<LocalVar>(out) == 1);
    REQUIRE(count_stmts_of<For>(out) == 2);
    REQUIRE_THAT(print(out), Contains("S[i] = (1 + acc_k)"));
    // A reduction inside a reduction's body: its loop runs inside the outer one's.
    Stmt nested = loop(i, c(4), ForKind::Serial,
                       Provide::make(S.node(), {var_expr(i)},
                                     Reduce::make(ReduceOp::Max, k, c(8),
                                                  Reduce::make(ReduceOp::Sum, j, var_expr(k),
                                                               Load::make(A, Add::make(row, var_expr(j)))))));
    Stmt lowered = lower_reductions(nested);
    INFO(print(lowered));
    REQUIRE(count_exprs_of<Reduce>(lowered) == 0);
    const For *outer = lowered.as<For>();
    REQUIRE(outer != nullptr);
    int inner_in_k = 0;
    visit_stmts(lowered, [&](const Stmt &x) {
        const For *f = x.as<For>();
        if (f && f->var == k)
            inner_in_k = count_stmts(f->body, [&](const Stmt &y) {
                const For *g = y.as<For>();
                return g && g->var == j;
            });
    });
    REQUIRE(inner_in_k == 1);
    // Nothing to lower: the statement comes back equal.
    Stmt plain = loop(i, c(4), ForKind::Serial, Provide::make(S.node(), {var_expr(i)}, c(3)));
    REQUIRE(equal(lower_reductions(plain), plain));
}

TEST_CASE("lower_thread_reductions: per-thread parts in shared memory, combined by one lane", "[pass][gpu]") {
    RowSums r;
    Stmt out = lower_thread_reductions(r.stmt(32), Target::Cuda);
    INFO(print(out));
    REQUIRE(has_shared_memory(out));
    REQUIRE(loops_of_kind(out, ForKind::GpuLanes) == 1);
    REQUIRE_THAT(print(out), Contains("X_part[t] = X_acc[0]"));
    REQUIRE_THAT(print(out), Contains("X[bx] = (X[bx] + X_part[part])"));
    // Emulated GPU schedules take the same rewrite; the host target none.
    REQUIRE(print(lower_thread_reductions(r.stmt(32), Target::CudaEmulated)) == print(out));
    Stmt host = r.stmt(32);
    REQUIRE(lower_thread_reductions(host, Target::Host).same_as(host));
    // Every thread updating X[bx] with no init before the loop: a race, refused.
    REQUIRE_THROWS_AS(lower_thread_reductions(r.stmt(32, false), Target::Cuda), CompileError);
}

TEST_CASE("split_host_device: block loops become a kernel and a launch of its sizes", "[pass][gpu]") {
    RowSums r;
    Stmt in = lower_thread_reductions(r.stmt(32), Target::Cuda);
    std::vector<LoweredFunc> kernels;
    Stmt host = split_host_device(in, "cora_t", Target::Cuda, GpuLimits{}, true, kernels);
    INFO(print(host));
    REQUIRE(kernels.size() == 1);
    const LoweredFunc &k = kernels[0];
    REQUIRE(k.name == "cora_t_k0");
    REQUIRE(k.kind == FunctionKind::Device);
    REQUIRE(k.params.size() == 2); // A and X, the host scope's buffers it uses
    REQUIRE(k.exact_bindings.size() == 2);
    const LaunchKernel *launch = host.as<LaunchKernel>();
    REQUIRE(launch != nullptr);
    REQUIRE(launch->kernel == "cora_t_k0");
    REQUIRE(print(launch->grid[0]) == "4");
    REQUIRE(print(launch->threads[0]) == "32");
    REQUIRE(loops_of_kind(host, ForKind::GpuBlockX) == 0);
    REQUIRE(loops_of_kind(k.body, ForKind::GpuBlockX) == 1);
    // On the host target nothing moves.
    std::vector<LoweredFunc> none;
    Stmt cpu = loop(r.bx, c(4), ForKind::Parallel, Store::make(r.X, var_expr(r.bx), FloatImm::make(1.0)));
    REQUIRE(split_host_device(cpu, "cora_t", Target::Host, GpuLimits{}, true, none).same_as(cpu));
    REQUIRE(none.empty());
    // More threads per block than CUDA allows, known when compiling: a CompileError.
    Stmt wide = loop(r.bx, c(4), ForKind::GpuBlockX,
                     loop(r.t, c(2048), ForKind::GpuThreadX, Store::make(r.X, var_expr(r.t), FloatImm::make(1.0))));
    REQUIRE_THROWS_AS(split_host_device(wide, "cora_t", Target::Cuda, GpuLimits{}, true, none), CompileError);
    // The limits are the device's (the backend reads them): a device allowing 16 threads per block,
    // or 2 in x, refuses the 32 of the row sums, naming the limit.
    GpuLimits small;
    small.max_threads_per_block = 16;
    REQUIRE_THROWS_WITH(split_host_device(in, "cora_t", Target::Cuda, small, true, none),
                        Catch::Matchers::Contains("32 threads per block, more than the 16 the device allows"));
    small = GpuLimits{};
    small.max_block[0] = 2;
    REQUIRE_THROWS_WITH(split_host_device(in, "cora_t", Target::Cuda, small, true, none),
                        Catch::Matchers::Contains("32 threads in x, more than the 2 the device allows"));
    // In a kernel with thread loops, a store outside them that every thread would run: refused.
    Stmt racy = loop(
        r.bx, c(4), ForKind::GpuBlockX,
        Block::make({Store::make(r.X, var_expr(r.bx), FloatImm::make(1.0)),
                     loop(r.t, c(32), ForKind::GpuThreadX, Store::make(r.A, var_expr(r.t), FloatImm::make(2.0)))}));
    REQUIRE_THROWS_AS(split_host_device(racy, "cora_t", Target::Cuda, GpuLimits{}, true, none), CompileError);
}

TEST_CASE("split_host_device: a copy into shared memory takes 4 consecutive elements per lane in CUDA", "[pass][gpu]") {
    // tile[r * C + c] = A[b * 2C + r * C + c] for r < 2, c < C at the block, read by 16 threads.
    auto kernel = [](int64_t columns, Type t) {
        VarPtr b = index_var("b"), r = index_var("r"), col = index_var("col"), th = index_var("th");
        VarPtr a = buffer("A", t), out = buffer("out", t), tile = buffer("tile", t);
        Expr at = Add::make(Mul::make(var_expr(r), c(columns)), var_expr(col));
        Stmt copy =
            loop(r, c(2), ForKind::Serial,
                 loop(col, c(columns), ForKind::Serial,
                      Store::make(tile, at, Load::make(a, Add::make(Mul::make(var_expr(b), c(2 * columns)), at)))));
        Stmt use = loop(
            th, c(16), ForKind::GpuThreadX,
            Store::make(out, Add::make(Mul::make(var_expr(b), c(16)), var_expr(th)), Load::make(tile, var_expr(th))));
        return loop(b, c(4), ForKind::GpuBlockX,
                    Allocate::make(tile, c(2 * columns), Block::make({copy, use}), MemoryType::Stack));
    };
    auto lanes = [](const Stmt &body) {
        const For *found = nullptr;
        visit_stmts(body, [&](const Stmt &x) {
            if (const For *f = x.as<For>())
                if (f->for_kind == ForKind::GpuLanes) found = f;
        });
        REQUIRE(found != nullptr);
        return found;
    };
    std::vector<LoweredFunc> kernels;
    (void)split_host_device(kernel(8, Float32), "cora_v", Target::Cuda, GpuLimits{}, true, kernels);
    INFO(print(kernels.at(0).body));
    const For *l = lanes(kernels.at(0).body);
    REQUIRE(is_const(l->extent, 4)); // 16 elements, 4 per lane
    const For *v = l->body.as<For>();
    REQUIRE(v != nullptr);
    REQUIRE(v->for_kind == ForKind::Vectorized);
    REQUIRE(is_const(v->extent, 4));
    // float16 storage: 8 halves (16 bytes) per lane.
    std::vector<LoweredFunc> halves;
    (void)split_host_device(kernel(8, Float16), "cora_h", Target::Cuda, GpuLimits{}, true, halves);
    const For *h = lanes(halves.at(0).body);
    REQUIRE(is_const(h->extent, 2));
    REQUIRE(h->body.as<For>() != nullptr);
    REQUIRE(is_const(h->body.as<For>()->extent, 8));
    // Not vectorized: switched off, an extent that is not a multiple of 4 (of 8 for halves), 8-byte
    // elements, the emulated target (its kernels run as host code).
    for (auto [columns, type, on, target] :
         std::vector<std::tuple<int64_t, Type, bool, Target>>{{8, Float32, false, Target::Cuda},
                                                              {6, Float32, true, Target::Cuda},
                                                              {12, Float16, true, Target::Cuda},
                                                              {8, Int64, true, Target::Cuda},
                                                              {8, Float32, true, Target::CudaEmulated}}) {
        std::vector<LoweredFunc> other;
        (void)split_host_device(kernel(columns, type), "cora_s", target, GpuLimits{}, on, other);
        INFO(print(other.at(0).body));
        REQUIRE(is_const(lanes(other.at(0).body)->extent, 2 * columns));
        REQUIRE(loops_of_kind(other.at(0).body, ForKind::Vectorized) == 0);
    }
}

TEST_CASE("warp_reductions: a one-warp block combines its parts with shuffles, not shared memory", "[pass][gpu]") {
    RowSums r;
    std::vector<LoweredFunc> kernels;
    split_host_device(lower_thread_reductions(r.stmt(32), Target::Cuda), "cora_t", Target::Cuda, GpuLimits{}, true,
                      kernels);
    const LoweredFunc &k = kernels.at(0);
    Stmt out = warp_reductions(k.body, k.exact_bindings);
    INFO(print(out));
    REQUIRE(!has_shared_memory(out));
    REQUIRE(loops_of_kind(out, ForKind::GpuLanes) == 0);
    REQUIRE(count_exprs(out, [](const Expr &e) {
                const Call *call = e.as<Call>();
                return call && call->name == "cora_warp_sum";
            }) == 1);
    REQUIRE_THAT(print(out), Contains("if (t == 0)"));
    // Without exact bindings (the launch may exceed the loop) the shared-memory form stays.
    REQUIRE(warp_reductions(k.body, {}).same_as(k.body));
    // A block of 64 threads: two levels, the warps' values through shared memory of 2 elements.
    std::vector<LoweredFunc> wide;
    split_host_device(lower_thread_reductions(r.stmt(64), Target::Cuda), "cora_w", Target::Cuda, GpuLimits{}, true,
                      wide);
    Stmt two_level = warp_reductions(wide.at(0).body, wide.at(0).exact_bindings);
    INFO(print(two_level));
    REQUIRE(has_shared_memory(two_level));
    REQUIRE_THAT(print(two_level), Contains("cora_warp_sum"));
    REQUIRE_THAT(print(two_level), Contains("X_part[float32 * 2]"));
}

TEST_CASE("dismantle_loops: one copy of the body per iteration, the index a constant", "[pass]") {
    VarPtr i = index_var("i"), out = buffer("out");
    const StorageMap no_tensors;
    Stmt in = loop(i, c(3), ForKind::Dismantled, Store::make(out, var_expr(i), Mul::make(var_expr(i), c(10))));
    Stmt d = dismantle_loops(in, no_tensors);
    INFO(print(d));
    REQUIRE(count_stmts_of<For>(d) == 0);
    REQUIRE(count_stmts_of<Store>(d) == 3);
    // The same values as the loop, in the interpreter.
    std::vector<int64_t> a(3, -1), b(3, -1);
    Interpreter run;
    run.int_buffers[out.get()] = &a;
    run.exec(in);
    run.int_buffers[out.get()] = &b;
    run.exec(d);
    REQUIRE(a == std::vector<int64_t>{0, 10, 20});
    REQUIRE(b == a);
    // No dismantled loop: the statement comes back as it is.
    Stmt serial = loop(i, c(3), ForKind::Serial, Store::make(out, var_expr(i), c(1)));
    REQUIRE(dismantle_loops(serial, no_tensors).same_as(serial));
    // An extent not known when compiling: a CompileError naming the loop.
    VarPtr n = make_var("n", VarRole::Param);
    Stmt runtime = loop(i, var_expr(n), ForKind::Dismantled, Store::make(out, var_expr(i), c(1)));
    REQUIRE_THROWS_AS(dismantle_loops(runtime, no_tensors), CompileError);
    REQUIRE_THROWS_WITH(dismantle_loops(runtime, no_tensors), Contains("dismantle: loop 'i' runs over n"));
}

TEST_CASE("allocate_intermediates: every Func but the outputs, producers outermost", "[pass]") {
    LoweringContext ctx;
    Dim d("d");
    Func F("F", {{d, 4}}, Int64), G("G", {{d, 4}}, Int64), H("H", {{d, 4}}, Int64);
    ctx.funcs = {F.node(), G.node(), H.node()};
    ctx.outputs = {H.node()};
    StorageMap storage;
    for (const TensorPtr &t : ctx.funcs)
        storage[t.get()] = TensorStorage{
            make_var(t->name, VarRole::Buffer, Int64), t->storage, flatten_layout(ctx.aux, t->storage), {}, {}};
    Stmt body = Store::make(storage[H.node().get()].buffer, c(0), c(1));
    Stmt out = allocate_intermediates(body, ctx, storage);
    INFO(print(out));
    const Allocate *outer = out.as<Allocate>();
    REQUIRE(outer != nullptr);
    REQUIRE(outer->buffer == storage[F.node().get()].buffer);
    REQUIRE(print(outer->size) == "4");
    const Allocate *inner = outer->body.as<Allocate>();
    REQUIRE(inner != nullptr);
    REQUIRE(inner->buffer == storage[G.node().get()].buffer);
    REQUIRE(inner->body.same_as(body)); // the output is the caller's
}

TEST_CASE("storage_lowering, infer_arguments, build_aux_arrays, materialize_ufs, hoist_loads: one ragged op, "
          "interpreted",
          "[pass]") {
    RaggedRows r;
    Tensor A("A", {{r.batch, r.B}, {r.seq, r.len(r.batch)}}, Int64);
    Func S("S", {{r.batch, r.B}, {r.seq, r.len(r.batch)}}, Int64);
    VarPtr b = index_var("b"), t = index_var("t");
    LoweringContext ctx;
    ctx.prover = std::make_unique<ProverChain>(false);
    ctx.build_aux_in_kernel = true;
    ctx.funcs = {S.node()};
    ctx.inputs = {A.node()};
    ctx.outputs = {S.node()};
    Stmt in = loop(b, r.B.expr(), ForKind::Serial,
                   loop(t, r.len(var_expr(b)), ForKind::Serial,
                        Provide::make(S.node(), {var_expr(b), var_expr(t)},
                                      Add::make(Mul::make(Access::make(A.node(), {var_expr(b), var_expr(t)}), c(2)),
                                                r.len(var_expr(b))))));

    // storage_lowering: Provide and Access become Store and Load at packed offsets, through the
    // prefix sum of the lengths.
    StorageLowered lowered = storage_lowering(in, ctx);
    const Stmt &stored = lowered.body;
    StorageMap &storage = lowered.storage;
    INFO(print(stored));
    REQUIRE(count_stmts_of<Provide>(stored) == 0);
    REQUIRE(count_exprs_of<Access>(stored) == 0);
    REQUIRE(storage.size() == 2);
    REQUIRE(storage.count(S.node().get()) == 1);
    REQUIRE(storage.count(A.node().get()) == 1);
    const VarPtr S_buf = storage[S.node().get()].buffer, A_buf = storage[A.node().get()].buffer;
    REQUIRE(count_exprs(stored, [](const Expr &e) {
                const UFCall *u = e.as<UFCall>();
                return u && u->fn->kind == UFKind::Aux;
            }) >= 1);

    // infer_arguments: params, length arrays, aux arrays, inputs, outputs, in that order.
    std::vector<ModuleArg> args = infer_arguments(stored, ctx, storage);
    std::vector<ModuleArg::Kind> kinds;
    for (const ModuleArg &a : args)
        kinds.push_back(a.kind);
    using K = ModuleArg::Kind;
    REQUIRE(kinds == std::vector<K>{K::Param, K::LengthArray, K::AuxArray, K::Input, K::Output});
    REQUIRE(args[0].name == "B");
    REQUIRE(args[1].name == "len");
    REQUIRE(args[3].var == A_buf);
    REQUIRE(args[4].var == S_buf);

    // build_aux_arrays, then materialize_ufs: the prefix sum built in place, every UF call a load.
    Stmt built = build_aux_arrays(stored, args, ctx);
    REQUIRE(count_stmts_of<Allocate>(built) == 1);
    Stmt materialized = materialize_ufs(built, args, ctx);
    INFO(print(materialized));
    REQUIRE(count_exprs_of<UFCall>(materialized) == 0);

    // hoist_loads: the row's length and offset are read once per row, not per element.
    Stmt hoisted = hoist_loads(simplify(materialized), args, ctx);
    INFO(print(hoisted));
    const VarPtr &len_buf = args[1].var;
    int len_loads_in_t = 0;
    visit_stmts(hoisted, [&](const Stmt &x) {
        const For *f = x.as<For>();
        if (f && f->var == t)
            len_loads_in_t += count_exprs(f->body, [&](const Expr &e) {
                const Load *l = e.as<Load>();
                return l && l->buffer == len_buf;
            });
    });
    REQUIRE(len_loads_in_t == 0);

    // Both forms compute S = 2 A + len per element, at the packed offsets.
    for (const std::vector<int64_t> &lengths :
         std::vector<std::vector<int64_t>>{{3, 0, 5}, {1}, {0, 0}, {7, 1, 2, 9}}) {
        int64_t total = 0;
        for (int64_t l : lengths)
            total += l;
        std::vector<int64_t> lens = lengths, a((size_t)total), want((size_t)total);
        for (size_t e = 0, row = 0, at = 0; row < lengths.size(); row++)
            for (int64_t x = 0; x < lengths[row]; x++, e++, at++) {
                a[e] = (int64_t)(e * 3 + 1);
                want[e] = 2 * a[e] + lengths[row];
            }
        for (const Stmt &s : {materialized, hoisted}) {
            std::vector<int64_t> out((size_t)total, -1), a_copy = a;
            Interpreter run;
            run.ints[r.B_var()] = (int64_t)lengths.size();
            run.int_buffers[len_buf.get()] = &lens;
            run.int_buffers[A_buf.get()] = &a_copy;
            run.int_buffers[S_buf.get()] = &out;
            run.exec(s);
            REQUIRE(out == want);
        }
    }
}

TEST_CASE("hoist_loads leaves a read of an array the loop writes (an in-kernel build) inside the loop", "[pass]") {
    // count[0] = 0; for g < 5: count[0] = count[0] + bits[g]: hoisting count[0] out of the loop
    // would add only the last bit (found building an active-tile count inside a kernel).
    VarPtr g = index_var("g"), count = buffer("count"), bits = buffer("bits");
    LoweringContext ctx;
    ctx.prover = std::make_unique<ProverChain>(false);
    auto arg = [](const VarPtr &v, int64_t n) {
        ModuleArg a;
        a.kind = ModuleArg::Kind::AuxArray;
        a.name = v->name;
        a.var = v;
        a.expected_count = c(n);
        return a;
    };
    std::vector<ModuleArg> args{arg(count, 1), arg(bits, 5)};
    Stmt in = Block::make(
        {Store::make(count, c(0), c(0)),
         loop(g, c(5), ForKind::Serial,
              Store::make(count, c(0), Add::make(Load::make(count, c(0)), Load::make(bits, var_expr(g)))))});
    Stmt out = hoist_loads(in, args, ctx);
    INFO(print(out));
    std::vector<int64_t> cv{7}, bv{1, 0, 1, 1, 0};
    Interpreter interp;
    interp.int_buffers[count.get()] = &cv;
    interp.int_buffers[bits.get()] = &bv;
    interp.exec(out);
    REQUIRE(cv[0] == 3);
}

TEST_CASE("specialize_interior: the loop's body runs without the checks that hold, exactly where they do", "[pass]") {
    // for t in [0, T): for i in [0, 4):
    //   out(t * 4 + i) = select(i < 2 && t * 4 + i - 1 >= 0 && t * 4 + i + 1 < N,
    //                           A(min(max(t * 4 + i - 1, 0), N - 1)), 0)
    Dim d("d");
    Param N{"N", 1, 1000};
    Tensor A("A", {{d, N}});
    Func out("out", {{d, N}});
    VarPtr t = index_var("t"), i = index_var("i");
    Expr n = Expr(N), pos = Add::make(Mul::make(var_expr(t), c(4)), var_expr(i));
    Expr left = Sub::make(pos, c(1));
    Expr clamped = Min::make(Max::make(left, c(0)), Sub::make(n, c(1)));
    Expr cond =
        And::make(And::make(LT::make(var_expr(i), c(2)), GE::make(left, c(0))), LT::make(Add::make(pos, c(1)), n));
    Expr value = Select::make(cond, Access::make(A.node(), {clamped}), FloatImm::make(0.0));
    Stmt inner = loop(i, c(4), ForKind::Unrolled, Provide::make(out.node(), {pos}, value));
    Stmt nest = loop(t, c(8), ForKind::Serial, inner);

    bool found = false;
    Stmt s = specialize_interior_loop(nest, t.get(), found);
    REQUIRE(found);
    const For *f = s.as<For>();
    REQUIRE(f);
    const IfThenElse *split = f->body.as<IfThenElse>();
    REQUIRE(split);
    REQUIRE(equal(split->else_case, inner)); // the border iterations run the body as it was
    // The copy: no clamp, and of the condition only what moves inside the loop (i < 2) is left.
    REQUIRE(count_exprs_of<Min>(split->then_case) == 0);
    REQUIRE(count_exprs_of<Max>(split->then_case) == 0);
    REQUIRE(count_exprs_of<Select>(split->then_case) == 1);
    REQUIRE(count_exprs_of<GE>(split->then_case) == 0);
    REQUIRE(count_exprs(split->then_case, [](const Expr &e) { return e.as<LT>() != nullptr; }) == 1);
    // The copy runs exactly when every removed check holds for i = 0 .. 3: t * 4 - 1 >= 0 and
    // t * 4 + 4 < N (the clamp's t * 4 + 2 <= N - 1 follows).
    for (int64_t nv : {1, 4, 5, 9, 10, 13, 32}) {
        for (int64_t tv = 0; tv < 8; tv++) {
            Interpreter run;
            run.ints[Expr(N).as<VarNode>()] = nv;
            run.ints[t.get()] = tv;
            INFO("N = " << nv << ", t = " << tv);
            REQUIRE(run.eval_bool(split->cond) == (tv * 4 - 1 >= 0 && tv * 4 + 4 < nv));
        }
    }
    // A sum not yet a loop binds its variable inside the loop too: the condition never names it.
    VarPtr k = index_var("k");
    Expr shifted = Sub::make(Add::make(Mul::make(var_expr(t), c(4)), var_expr(k)), c(1));
    Expr summed = Reduce::make(
        ReduceOp::Sum, k, c(3),
        Select::make(GE::make(shifted, c(0)), Access::make(A.node(), {Max::make(shifted, c(0))}), FloatImm::make(0.0)));
    Stmt reduced = loop(t, c(8), ForKind::Serial, Provide::make(out.node(), {var_expr(t)}, summed));
    found = false;
    Stmt specialized = specialize_interior_loop(reduced, t.get(), found);
    const IfThenElse *by_sum = specialized.as<For>()->body.as<IfThenElse>();
    REQUIRE(by_sum);
    REQUIRE(!uses_var(by_sum->cond, k.get()));
    REQUIRE(count_exprs_of<Select>(by_sum->then_case) == 0);
    for (int64_t tv = 0; tv < 8; tv++) {
        Interpreter run;
        run.ints[t.get()] = tv;
        REQUIRE(run.eval_bool(by_sum->cond) == (tv * 4 - 1 >= 0));
    }
    // A loop whose body has nothing to remove is left as it is; an absent loop is reported.
    Stmt plain = loop(t, c(8), ForKind::Serial,
                      loop(i, c(4), ForKind::Serial, Provide::make(out.node(), {pos}, Access::make(A.node(), {pos}))));
    found = false;
    REQUIRE(specialize_interior_loop(plain, t.get(), found).same_as(plain));
    REQUIRE(found);
    found = false;
    (void)specialize_interior_loop(plain, index_var("elsewhere").get(), found);
    REQUIRE(!found);
}

TEST_CASE("specialize_interior: a split tail's guard is left out of the copy for whole tiles", "[pass]") {
    // for t in [0, 8): for i in [0, 6) unrolled: if (t * 6 + i < N) out(t * 6 + i) = A(t * 6 + i)
    // (the guard of a 6-token tile over N tokens, as a register tile's rows have it).
    Dim d("d");
    Param N{"N", 0, 48};
    Tensor A("A", {{d, N}});
    Func out("out", {{d, N}});
    VarPtr t = index_var("t"), i = index_var("i");
    Expr pos = Add::make(Mul::make(var_expr(t), c(6)), var_expr(i));
    Stmt guarded =
        IfThenElse::make(LT::make(pos, Expr(N)), Provide::make(out.node(), {pos}, Access::make(A.node(), {pos})));
    Stmt inner = loop(i, c(6), ForKind::Unrolled, guarded);
    Stmt nest = loop(t, c(8), ForKind::Serial, inner);
    bool found = false;
    Stmt s = specialize_interior_loop(nest, t.get(), found);
    REQUIRE(found);
    const IfThenElse *split = s.as<For>()->body.as<IfThenElse>();
    REQUIRE(split);
    REQUIRE(equal(split->else_case, inner));
    REQUIRE(count_stmts_of<IfThenElse>(split->then_case) == 0);
    // Exactly the tiles whose six rows are all below N.
    for (int64_t nv : {0, 1, 5, 6, 7, 12, 47, 48})
        for (int64_t tv = 0; tv < 8; tv++) {
            Interpreter run;
            run.ints[Expr(N).as<VarNode>()] = nv;
            run.ints[t.get()] = tv;
            INFO("N = " << nv << ", t = " << tv);
            REQUIRE(run.eval_bool(split->cond) == (tv * 6 + 6 <= nv));
        }
    // A guard that moves with the inner loop alone (i < 2) stays in the copy.
    Stmt inner_only = loop(
        i, c(6), ForKind::Unrolled,
        IfThenElse::make(LT::make(var_expr(i), c(2)), Provide::make(out.node(), {pos}, Access::make(A.node(), {pos}))));
    found = false;
    Stmt kept = loop(t, c(8), ForKind::Serial, inner_only);
    REQUIRE(specialize_interior_loop(kept, t.get(), found).same_as(kept));
}
