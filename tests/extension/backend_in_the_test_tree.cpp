// The "add a backend" recipe of docs/design.md, tried for real: a backend that exists only in this
// file, added to a registry the test owns, chosen by name through CompileOptions — no file in src/
// changes. The backend, "cpu-checked", is one a user could want while debugging a schedule: it
// compiles with the built-in CPU backend and checks every run's outputs against the reference
// interpreter (cora/Reference.h), so a wrong schedule fails at the run that shows it.
#include <atomic>

#include "common/ragged_testing.h"

#include "cora/Backend.h"

using namespace cora;

namespace {

/** How many runs the backend checked, shared by its kernels. */
struct CheckCounter {
    std::atomic<int> runs{0};
};

class CheckedKernel : public Kernel::Impl {
public:
    CheckedKernel(const Pipeline &p, Kernel inner, std::shared_ptr<CheckCounter> counter)
        : Kernel::Impl(p.name(), "cpu-checked"), pipeline_(p), inner_(std::move(inner)), counter_(std::move(counter)) {
        arguments = inner_.arguments();
        source = inner_.source();
        lowered = inner_.lowered();
    }

    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const override {
        inner_.run(shape, bindings);
        std::vector<std::pair<Tensor, const Buffer *>> inputs;
        for (const Binding &b : bindings) {
            bool output = false;
            for (const Func &f : pipeline_.outputs())
                output = output || f.node() == b.tensor.node();
            if (!output) inputs.emplace_back(b.tensor, b.buffer);
        }
        std::vector<std::vector<double>> want = reference_evaluate(pipeline_, shape, inputs);
        for (size_t o = 0; o < pipeline_.outputs().size(); o++)
            for (const Binding &b : bindings)
                if (b.tensor.node() == pipeline_.outputs()[o].node()) compare(b, want[o]);
        counter_->runs++;
    }

private:
    void compare(const Binding &b, const std::vector<double> &want) const {
        if (b.buffer->size() != (int64_t)want.size())
            throw RuntimeError("backend 'cpu-checked' compares outputs stored without padding only ('" +
                               b.tensor.name() + "')");
        for (size_t i = 0; i < want.size(); i++) {
            const double got = b.buffer->at((int64_t)i);
            if (!(std::abs(got - want[i]) <= 1e-4 * (1.0 + std::abs(want[i]))))
                throw RuntimeError("kernel '" + name + "': output '" + b.tensor.name() + "' element " +
                                   std::to_string(i) + " is " + std::to_string(got) + ", the reference says " +
                                   std::to_string(want[i]));
        }
    }

    Pipeline pipeline_;
    Kernel inner_;
    std::shared_ptr<CheckCounter> counter_;
};

class CheckedBackend : public Backend {
public:
    explicit CheckedBackend(std::shared_ptr<CheckCounter> counter) : counter_(std::move(counter)) {}
    std::string name() const override { return "cpu-checked"; }
    std::string description() const override { return "the CPU, every run checked against the reference"; }
    bool runs_gpu_schedules() const override { return false; }
    Kernel compile(const Pipeline &p, const CompileOptions &opts) const override {
        CompileOptions cpu = opts;
        cpu.backend = "cpu";
        cpu.backends = nullptr;
        return Kernel(std::make_shared<CheckedKernel>(p, p.compile(cpu), counter_));
    }

private:
    std::shared_ptr<CheckCounter> counter_;
};

} // namespace

TEST_CASE("a backend added in the test tree is chosen by name and runs pipelines", "[extension][backend]") {
    auto counter = std::make_shared<CheckCounter>();
    BackendRegistry backends = BackendRegistry::builtin();
    backends.add(std::make_shared<CheckedBackend>(counter));
    REQUIRE(backends.names() ==
            std::vector<std::string>{"cpu", "cuda", "cuda-emulated", "cuda-cpu-threads", "cpu-checked"});
    // A registry is a value: the built-in one is unchanged.
    REQUIRE(BackendRegistry::builtin().find("cpu-checked") == nullptr);

    // A ragged softmax: two reductions and a division over each row's own length.
    Dim b("b"), s("s"), r("r");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 40);
    Tensor X("X", {{b, B}, {s, len(b)}});
    Func Mx("Mx", {{b, B}}), E("E", {{b, B}, {s, len(b)}}), Sum("Sum", {{b, B}}), Out("Out", {{b, B}, {s, len(b)}});
    Mx.compute([&](Expr i) { return maximum(r, len(i), X(i, r)); });
    E.compute([&](Expr i, Expr j) { return exp(X(i, j) - Mx(i)); });
    Sum.compute([&](Expr i) { return sum(r, len(i), E(i, r)); });
    Out.compute([&](Expr i, Expr j) { return E(i, j) / Sum(i); });
    Out.parallel(b);

    CompileOptions opts;
    opts.backends = &backends;
    opts.backend = "cpu-checked";
    Pipeline p({Out}, "softmax");
    Kernel checked = p.compile(opts), cpu = p.compile("cpu");
    REQUIRE(checked.backend() == "cpu-checked");
    REQUIRE(checked.arguments().size() == cpu.arguments().size());
    REQUIRE(checked.source() == cpu.source());
    uint32_t seed = 3;
    int runs = 0;
    for (const auto &lengths : testing::length_cases(40, 8, 9)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Buffer x = Buffer::alloc(X, shape), out = Buffer::alloc(Out, shape), want = Buffer::alloc(Out, shape);
        testing::fill_random(x, seed++);
        checked.run(shape, {{X, x}, {Out, out}});
        cpu.run(shape, {{X, x}, {Out, want}});
        REQUIRE(++runs == counter->runs);
        for (int64_t i = 0; i < out.size(); i++)
            REQUIRE(out.at(i) == want.at(i));
    }
    // What it lacks, it says; bad input is the CPU kernel's error, before any check.
    RaggedShape shape;
    shape.set(B, 2).set(len, {3, 1});
    REQUIRE_THROWS_WITH(checked.alloc(Out, shape),
                        "kernel 'softmax' runs on backend 'cpu-checked', which has no device memory (device buffers: "
                        "the backends \"cuda\" and \"cuda-cpu-threads\" have them; run it on host Buffers)");
    Buffer small(Float32, 3), out = Buffer::alloc(Out, shape);
    REQUIRE_THROWS_WITH(checked.run(shape, {{X, small}, {Out, out}}),
                        Catch::Matchers::Contains("buffer for tensor 'X' has 3 elements, expected 4"));
    REQUIRE(counter->runs == runs);
}

TEST_CASE("a registry names its backends once and lists them when asked for another", "[extension][backend]") {
    BackendRegistry backends = BackendRegistry::builtin();
    auto counter = std::make_shared<CheckCounter>();
    backends.add(std::make_shared<CheckedBackend>(counter));
    REQUIRE_THROWS_AS(backends.add(std::make_shared<CheckedBackend>(counter)), RuntimeError);
    REQUIRE_THROWS_WITH(backends.add(std::make_shared<CheckedBackend>(counter)),
                        "BackendRegistry::add: there is a backend called 'cpu-checked' already");
    REQUIRE_THROWS_WITH(backends.add(nullptr), "BackendRegistry::add: null backend");
    REQUIRE_THROWS_WITH(backends.get("tpu"), "no backend called 'tpu' (there are 'cpu', 'cuda', 'cuda-emulated', "
                                             "'cuda-cpu-threads', 'cpu-checked')");
    Dim i("i");
    Func F("F", {{i, 8}});
    F.compute([&](Expr x) { return cast(Float32, x); });
    CompileOptions opts;
    opts.backend = "cpu-checked"; // not in the built-in registry
    REQUIRE_THROWS_WITH(Pipeline({F}, "f").compile(opts),
                        "pipeline 'f': no backend called 'cpu-checked' (there are 'cpu', 'cuda', 'cuda-emulated', "
                        "'cuda-cpu-threads')");
    BackendRegistry empty;
    opts.backends = &empty;
    REQUIRE_THROWS_WITH(Pipeline({F}, "f").compile(opts),
                        "pipeline 'f': no backend called 'cpu-checked' (there are none)");
    // The built-in backends describe themselves; the GPU-schedule ones say so.
    for (const std::string &name : BackendRegistry::builtin().names()) {
        const Backend &b = BackendRegistry::builtin().get(name);
        REQUIRE(!b.description().empty());
        REQUIRE(b.runs_gpu_schedules() == (name != "cpu"));
    }
    std::string why;
    REQUIRE(BackendRegistry::builtin().get("cpu").available(&why));
}
