// narrow_kernel_indices (lower/NarrowIndices.cpp) alone: a device kernel and its launch built by
// hand, the pass run, the kernel's width and the launch's choice read back. Each case moves one
// leaf of the magnitude bound (analysis/IndexMagnitude.h): a param's declared range, an aux
// array's values, a launch size, an integer read from device memory.
#include <catch2/catch.hpp>

#include <climits>

#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Module.h"
#include "ir/Tensor.h"
#include "lower/Passes.h"

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

namespace {

Expr c(int64_t v) { return IntImm::make(v); }

VarPtr param(const char *name, int64_t lo, int64_t hi) {
    auto v = std::make_shared<VarNode>(name, new_symbol_id(), VarRole::Param, Int64);
    v->min_value = lo;
    v->max_value = hi;
    return v;
}

/** out[b * 64 + t * scale + offset] = 1 over 4 blocks x 64 threads, the offset read from an array
 * `offsets` (an aux array with no finite range, or a device buffer), `scale` a param. */
struct OneKernel {
    VarPtr out = make_var("out", VarRole::Buffer, Float32), offsets = make_var("offsets", VarRole::Buffer, Int64);
    VarPtr b = make_var("b", VarRole::Index), t = make_var("t", VarRole::Index);
    VarPtr scale;
    std::shared_ptr<UFNode> uf = std::make_shared<UFNode>();

    explicit OneKernel(int64_t scale_max) : scale(param("scale", 1, scale_max)) {
        uf->name = "offsets";
        uf->kind = UFKind::Aux;
        uf->min_value = 0;
        uf->max_value = INT64_MAX;
    }
    LoweredFunc kernel(bool read_offsets) const {
        Expr index = Add::make(Mul::make(var_expr(b), c(64)), Mul::make(var_expr(t), var_expr(scale)));
        if (read_offsets) index = Add::make(index, Load::make(offsets, var_expr(b)));
        Stmt body = For::make(
            b, c(0), c(4), ForKind::GpuBlockX,
            For::make(t, c(0), c(64), ForKind::GpuThreadX, Store::make(out, index, FloatImm::make(1.0, Float32))));
        LoweredFunc k{FunctionKind::Device, {}, {}, body, "k0", {scale, out, offsets}, {}, {}};
        return k;
    }
    Stmt launch() const {
        return LaunchKernel::make("k0", {c(4), c(1), c(1)}, {c(64), c(1), c(1)}, {scale, out, offsets});
    }
    std::vector<ModuleArg> args(bool offsets_on_host) const {
        std::vector<ModuleArg> a;
        if (offsets_on_host) {
            ModuleArg m{ModuleArg::Kind::AuxArray, "offsets", offsets, {}, {}, uf, {}, {}};
            a.push_back(m);
        }
        return a;
    }
};

const LaunchKernel *launch_of(const Stmt &s) {
    const LaunchKernel *l = nullptr;
    visit_stmts(s, [&](const Stmt &x) {
        if (const LaunchKernel *k = x.as<LaunchKernel>()) l = k;
    });
    return l;
}

} // namespace

TEST_CASE("narrow_kernel_indices: declared ranges that fit make the kernel 32-bit, with no choice", "[pass]") {
    OneKernel k(1000); // b * 64 + t * scale < 4 * 64 + 64 * 1000
    std::vector<LoweredFunc> kernels{k.kernel(false)};
    Stmt entry = narrow_kernel_indices(k.launch(), kernels, k.args(false));
    REQUIRE(kernels.size() == 1);
    REQUIRE(kernels[0].index_bits == 32);
    REQUIRE(launch_of(entry)->narrow.kernel32.empty());
}

TEST_CASE("narrow_kernel_indices: a param whose declared range does not fit gets a twin chosen at the launch",
          "[pass]") {
    OneKernel k(int64_t(1) << 40);
    std::vector<LoweredFunc> kernels{k.kernel(false)};
    Stmt entry = narrow_kernel_indices(k.launch(), kernels, k.args(false));
    REQUIRE(kernels.size() == 2);
    REQUIRE(kernels[0].index_bits == 64);
    REQUIRE(kernels[1].name == "k0_i32");
    REQUIRE(kernels[1].index_bits == 32);
    REQUIRE(equal(kernels[1].body, kernels[0].body));
    const LaunchKernel *l = launch_of(entry);
    REQUIRE(l->kernel == "k0");
    REQUIRE(l->narrow.kernel32 == "k0_i32");
    REQUIRE(l->narrow.arrays.empty());
    // Every bound mentions the param's value at the launch (not its declared maximum).
    REQUIRE(!l->narrow.bounds.empty());
    bool mentions_scale = false;
    for (const Expr &bound : l->narrow.bounds)
        mentions_scale = mentions_scale || uses_var(bound, k.scale.get());
    REQUIRE(mentions_scale);
    REQUIRE_THAT(print(entry), Contains("or k0_i32 when max("));
}

TEST_CASE("narrow_kernel_indices: an aux array on the host enters by its largest value", "[pass]") {
    OneKernel k(1000);
    std::vector<LoweredFunc> kernels{k.kernel(true)};
    Stmt entry = narrow_kernel_indices(k.launch(), kernels, k.args(true));
    REQUIRE(kernels.size() == 2);
    const LaunchKernel *l = launch_of(entry);
    REQUIRE(l->narrow.arrays.size() == 1);
    REQUIRE(l->narrow.arrays[0].array == k.offsets);
    REQUIRE_THAT(print(entry), Contains("offsets_magnitude = max |offsets|"));
}

TEST_CASE("narrow_kernel_indices: an integer read from device memory or a constant bound past INT32_MAX keeps "
          "64 bits",
          "[pass]") {
    SECTION("an offsets array the host does not hold") {
        OneKernel k(1000);
        std::vector<LoweredFunc> kernels{k.kernel(true)};
        Stmt launch = k.launch();
        Stmt entry = narrow_kernel_indices(launch, kernels, k.args(false));
        REQUIRE(kernels.size() == 1);
        REQUIRE(kernels[0].index_bits == 64);
        REQUIRE(entry.get() == launch.get());
    }
    SECTION("a product over INT32_MAX whatever the launch (a constant factor)") {
        OneKernel k(1000);
        LoweredFunc f = k.kernel(false);
        f.body = substitute(f.body, std::map<const VarNode *, Expr>{{k.scale.get(), c(int64_t(1) << 32)}});
        std::vector<LoweredFunc> kernels{f};
        (void)narrow_kernel_indices(k.launch(), kernels, k.args(false));
        REQUIRE(kernels.size() == 1);
        REQUIRE(kernels[0].index_bits == 64);
    }
    SECTION("a launch the entry does not make") {
        OneKernel k(1000);
        std::vector<LoweredFunc> kernels{k.kernel(false)};
        kernels[0].name = "other";
        (void)narrow_kernel_indices(k.launch(), kernels, k.args(false));
        REQUIRE(kernels[0].index_bits == 64);
    }
}
