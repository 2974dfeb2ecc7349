// KernelBatch: many pipelines compiled by one compiler run. Each kernel must behave exactly as the
// same pipeline compiled alone (results, arguments, checks, source), whatever its name, and the
// batch must stay usable after a pipeline it rejected.
#include "common/cuda_on_cpu.h"
#include "common/ragged_testing.h"

#include <filesystem>

#include <unistd.h>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

struct Ops {
    Dim batch{"batch"}, seq{"seq"}, so{"so"}, si{"si"}, r{"r"};
    Param B{"B", 1, 8};
    LengthArray len{"len", B, 0, 33};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> bind =
        [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };

    Func scale(float f, bool split) {
        Func Out("Out", {{batch, B}, {seq, len(batch)}});
        Out.compute([&](Expr b, Expr s) { return f * A(b, s) + 1; });
        if (split) Out.split(seq, so, si, 4).vectorize(si);
        return Out;
    }
    Func row_sum() {
        Func S("S", {{batch, B}});
        S.compute([&](Expr b) { return sum(r, len(b), A(b, r)); });
        return S;
    }
};

} // namespace

TEST_CASE("a batch of kernels matches the same pipelines compiled alone", "[batch]") {
    Ops o;
    // Two pipelines share a name ("same"): their entries must not collide.
    std::vector<Pipeline> pipes = {Pipeline({o.scale(2.0f, false)}, "same"), Pipeline({o.scale(3.0f, true)}, "same"),
                                   Pipeline({o.row_sum()}, "row sum (spaces and all)")};
    KernelBatch batch;
    REQUIRE(batch.size() == 0);
    for (size_t i = 0; i < pipes.size(); i++)
        REQUIRE(batch.add(pipes[i]) == i);
    REQUIRE(batch.size() == 3);
    std::vector<Kernel> kernels = batch.compile();
    REQUIRE(kernels.size() == 3);
    REQUIRE(batch.size() == 0); // emptied: the next compile starts a new batch
    REQUIRE(batch.compile().empty());
    for (size_t i = 0; i < pipes.size(); i++) {
        INFO("pipeline " << i);
        Kernel alone = pipes[i].compile();
        // The kernel's own source, arguments and IR are those of the pipeline compiled alone.
        REQUIRE(kernels[i].source() == alone.source());
        REQUIRE(kernels[i].lowered() == alone.lowered());
        REQUIRE(kernels[i].arguments().size() == alone.arguments().size());
        auto a = testing::check_against_reference(pipes[i], kernels[i], {o.A}, o.bind, 33, 4, 7 + (uint32_t)i);
        auto b = testing::check_against_reference(pipes[i], alone, {o.A}, o.bind, 33, 4, 7 + (uint32_t)i);
        REQUIRE(a == b);
    }
    // The checks of the entry are there: a wrong buffer is a RuntimeError naming the kernel.
    RaggedShape shape;
    shape.set(o.B, 2).set(o.len, {3, 4});
    Buffer small(Float32, 6), out(Float32, 7);
    REQUIRE_THROWS_WITH(kernels[0].run(shape, {{o.A, small}, {pipes[0].outputs()[0], out}}),
                        Contains("buffer for tensor 'A' has 6 elements, expected 7"));
}

TEST_CASE("a batch survives a pipeline it rejects, and is cached as a whole", "[batch]") {
    Ops o;
    const std::filesystem::path cache =
        std::filesystem::temp_directory_path() / ("cora_batch_cache_" + std::to_string(getpid()));
    std::filesystem::remove_all(cache);
    CompileOptions opts;
    opts.cache_dir = cache.string();
    KernelBatch batch(opts);
    batch.add(Pipeline({o.scale(2.0f, false)}, "first"));
    // An illegal schedule (the vloop moved outside the loop its extent reads): CompileError at
    // add(), naming the problem; the batch keeps what it had.
    Func bad = o.scale(1.0f, false);
    bad.reorder({o.seq, o.batch});
    REQUIRE_THROWS_AS(batch.add(Pipeline({bad}, "bad")), CompileError);
    REQUIRE(batch.size() == 1);
    // A GPU target is not a batch's: CompileError, batch unchanged.
    CompileOptions gpu = opts;
    gpu.target = Target::Cuda;
    KernelBatch gpu_batch(gpu);
    REQUIRE_THROWS_WITH(
        gpu_batch.add(Pipeline({o.row_sum()}, "gpu")),
        Contains(
            "a KernelBatch compiles C++ kernels (backends \"cpu\" and \"cuda-emulated\"), not for backend 'cuda'"));
    REQUIRE(gpu_batch.size() == 0);
    batch.add(Pipeline({o.row_sum()}, "second"));
    std::vector<Kernel> first = batch.compile();
    REQUIRE(first.size() == 2);
    REQUIRE_FALSE(first[0].from_cache());
    REQUIRE(first[0].compile_seconds() > 0);

    // The same batch again: one cache hit for all its kernels.
    KernelBatch again(opts);
    again.add(Pipeline({o.scale(2.0f, false)}, "first"));
    Func row_sum = o.row_sum();
    again.add(Pipeline({row_sum}, "second"));
    std::vector<Kernel> second = again.compile();
    REQUIRE(second[0].from_cache());
    REQUIRE(second[1].from_cache());
    REQUIRE(second[1].compile_seconds() == 0);

    // A kernel outlives its batch and its siblings: the library stays loaded while one lives.
    Kernel survivor = second[1];
    second.clear();
    first.clear();
    RaggedShape shape;
    shape.set(o.B, 3).set(o.len, {0, 1, 5});
    Buffer a = Buffer::alloc(o.A, shape), s(Float32, 3);
    for (int64_t i = 0; i < a.size(); i++)
        a.at(i) = (float)(i + 1);
    survivor.run(shape, {{o.A, a}, {row_sum, s}});
    REQUIRE(s.at(0) == 0.0f);
    REQUIRE(s.at(1) == 1.0f);
    REQUIRE(s.at(2) == 2.0f + 3 + 4 + 5 + 6);
    std::filesystem::remove_all(cache);
}
