// The "add a format" recipe of docs/design.md, tried for real: a format that exists only in this
// file, whose builder reads a tensor input bound to the shape (a mask), added without touching
// src/. The format: the list of a 2-D mask's active positions, compacted — entry 0 is their count
// K, entries 1..K their row-major positions r * C + c in order, the rest -1. Kernels read it as
// any aux array; the host prelude builds it from the bound mask (JIT kernels, which check it), and
// a kernel built with build_aux_in_kernel builds it itself from the mask argument (as ahead-of-time
// libraries do). Everything is checked against a definition written here.
#include "common/ragged_testing.h"

#include "analysis/AuxKind.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "runtime/RaggedShapeImpl.h"

using namespace cora;
using namespace cora::ir;

namespace {

/** The toy format's kind: the active-position list of `mask` ([rows][cols], values 0 or 1). */
class ActivePositionList : public AuxKind {
public:
    ActivePositionList(std::shared_ptr<const UFNode> mask) : mask_(std::move(mask)) {}
    const char *name() const override { return "active-position list"; }
    AuxInputs inputs() const override { return AuxInputs{{mask_->count}, {}, {mask_}}; }

    /** count = 0; for each position in row-major order, if active: A[1 + count] = position,
     * count++; then A[s] = -1 for the slots past the list. A[0] is the counter. */
    Stmt build(const AuxArray &a, AuxTable &) const override {
        const Expr rows = mask_->dims[0], cols = mask_->dims[1];
        VarPtr r = make_var("r", VarRole::Index), c = make_var("c", VarRole::Index), s = make_var("s", VarRole::Index);
        Expr count = Load::make(a.buffer, IntImm::make(0));
        Expr active = NE::make(UFCall::make(mask_, {var_expr(r), var_expr(c)}), IntImm::make(0));
        Stmt append = IfThenElse::make(
            active, Block::make({Store::make(a.buffer, Add::make(count, IntImm::make(1)),
                                             Add::make(Mul::make(var_expr(r), cols), var_expr(c))),
                                 Store::make(a.buffer, IntImm::make(0), Add::make(count, IntImm::make(1)))}));
        Stmt scan = For::make(r, IntImm::make(0), rows, ForKind::Serial,
                              For::make(c, IntImm::make(0), cols, ForKind::Serial, append));
        Expr first_free = Add::make(count, IntImm::make(1));
        Stmt rest = For::make(s, first_free, Sub::make(Add::make(mask_->count, IntImm::make(1)), first_free),
                              ForKind::Serial, Store::make(a.buffer, var_expr(s), IntImm::make(-1)));
        return Block::make({Store::make(a.buffer, IntImm::make(0), IntImm::make(0)), scan, rest});
    }

    /** A passed list is rebuilt into scratch memory from the mask and compared entry by entry. */
    Stmt check(const AuxArray &a, AuxTable &table) const override {
        VarPtr scratch = make_var(a.name + "_expected", VarRole::Buffer, Int64);
        VarPtr s = make_var("s", VarRole::Index);
        Expr size = Add::make(mask_->count, IntImm::make(1));
        Expr got = Load::make(a.buffer, var_expr(s)), want = Load::make(scratch, var_expr(s));
        Stmt compare = For::make(s, IntImm::make(0), size, ForKind::Serial,
                                 Assert::make(EQ::make(got, want),
                                              {"aux array '" + a.name + "': entry ", " is ", ", expected ", ""},
                                              {var_expr(s), got, want}));
        return Allocate::make(scratch, size, Block::make({build(AuxArray{a.fn, a.name, scratch}, table), compare}));
    }

private:
    std::shared_ptr<const UFNode> mask_;
};

/** The list's symbol over `slot` (rows * cols + 1 entries): an aux array whose spec holds the kind. */
std::shared_ptr<const UFNode> active_position_list(const ShapeTensor &mask, const Dim &slot) {
    auto spec = std::make_shared<AuxSpec>();
    spec->kind = std::make_shared<const ActivePositionList>(mask.node());
    spec->layout = {LayoutDim{slot.node(), Add::make(mask.count(), IntImm::make(1))}};
    spec->key = "active-position-list#" + std::to_string(mask.node()->id);
    auto u = std::make_shared<UFNode>();
    u->name = "active_" + mask.name();
    u->id = mask.node()->id + (uint64_t(1) << 40);
    u->kind = UFKind::Aux;
    u->arity = 1;
    u->min_value = -1;
    u->max_value = INT32_MAX;
    u->aux = spec;
    return u;
}

/** The definition the format must meet. */
std::vector<float> expected_list(const std::vector<int32_t> &mask) {
    std::vector<float> out(mask.size() + 1, -1.0f);
    int64_t k = 0;
    for (size_t i = 0; i < mask.size(); i++)
        if (mask[i] != 0) out[(size_t)(1 + k++)] = (float)i;
    out[0] = (float)k;
    return out;
}

/** A mask of rows x cols at the given density (0 and 1 give none and all active). */
std::vector<int32_t> random_mask(int64_t rows, int64_t cols, double density, uint32_t seed) {
    std::mt19937 rng(seed);
    std::bernoulli_distribution on(density);
    std::vector<int32_t> m((size_t)(rows * cols));
    for (auto &v : m)
        v = on(rng) ? 1 : 0;
    return m;
}

struct MaskProgram {
    Dim r{"r"}, c{"c"}, slot{"slot"};
    Param R{"R", 1, 64}, C{"C", 1, 64};
    ShapeTensor mask{"mask", {R, C}, 0, 1};
    Tensor X{"X", {{r, R}, {c, C}}};
    std::shared_ptr<const UFNode> list = active_position_list(mask, slot);
    Func out{"out", {{slot, R *C + 1}}}, masked{"masked", {{r, R}, {c, C}}};
    MaskProgram() {
        out.compute([&](Expr s) { return cast(Float32, Expr(UFCall::make(list, {s}))); });
        masked.compute([&](Expr i, Expr j) { return select(mask(i, j) != 0, X(i, j), 0.0f); });
    }
};

} // namespace

TEST_CASE("a format added in the test tree builds from a shape tensor, on the prelude and inside the kernel",
          "[extension][format]") {
    MaskProgram p;
    CompileOptions in_kernel;
    in_kernel.build_aux_in_kernel = true;
    Pipeline pipeline({p.out, p.masked}, "active_positions");
    Kernel prelude_built = pipeline.compile(), kernel_built = pipeline.compile(in_kernel);

    // The mask is an argument of both kernels (the format's declared input), described by its dims.
    bool mask_argument = false;
    for (const KernelArgInfo &a : kernel_built.arguments())
        if (a.name == "mask") {
            mask_argument = a.kind == ArgumentKind::LengthArray && a.layout.find("int32 mask[R][C], row-major") == 0;
        }
    REQUIRE(mask_argument);
    // One kernel takes the list (the prelude's, checked), the other builds it from the mask.
    auto takes_list = [](const Kernel &k) {
        for (const KernelArgInfo &a : k.arguments())
            if (a.name == "active_mask") return a.kind == ArgumentKind::AuxArray;
        return false;
    };
    REQUIRE(takes_list(prelude_built));
    REQUIRE(!takes_list(kernel_built));

    uint32_t seed = 11;
    for (auto [rows, cols] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {9, 1}, {8, 8}, {13, 17}, {64, 64}})
        for (double density : {0.0, 0.1, 0.5, 1.0}) {
            INFO(rows << "x" << cols << " at density " << density);
            std::vector<int32_t> m = random_mask(rows, cols, density, seed++);
            RaggedShape shape;
            shape.set(p.R, rows).set(p.C, cols).set(p.mask, m);
            Buffer x = Buffer::alloc(p.X, shape);
            testing::fill_random(x, seed++);
            std::vector<float> want = expected_list(m);
            for (const Kernel *k : {&prelude_built, &kernel_built}) {
                Buffer out = Buffer::alloc(p.out, shape), masked = Buffer::alloc(p.masked, shape);
                k->run(shape, {{p.X, x}, {p.out, out}, {p.masked, masked}});
                REQUIRE(out.size() == (int64_t)want.size());
                for (int64_t s = 0; s < out.size(); s++)
                    REQUIRE(out.at(s) == want[(size_t)s]);
                for (int64_t i = 0; i < masked.size(); i++)
                    REQUIRE(masked.at(i) == (m[(size_t)i] ? x.at(i) : 0.0f));
                auto ref = reference_evaluate(pipeline, shape, {{p.X, &x}});
                testing::require_close(out, ref[0]);
                testing::require_close(masked, ref[1]);
            }
            // The prelude built the list once, shared by later kernels on the shape.
            REQUIRE(shape_impl(shape)->aux_array(p.list.get()).size() == want.size());
        }
}

TEST_CASE("a shape tensor is checked: its values, its size, a tampered list; nothing is written",
          "[extension][format][errors]") {
    MaskProgram p;
    Pipeline pipeline({p.out, p.masked}, "active_positions");
    Kernel k = pipeline.compile();
    RaggedShape shape;
    shape.set(p.R, 2).set(p.C, 3);

    REQUIRE_THROWS_AS(shape.set(p.mask, std::vector<int32_t>{0, 1, 2, 0, 0, 0}), RuntimeError);
    REQUIRE_THROWS_WITH(shape.set(p.mask, std::vector<int32_t>{0, 1, 2, 0, 0, 0}),
                        "shape tensor 'mask': element 2 (row-major) is 2, expected a value in [0, 1]");

    Buffer x(Float32, 6), out(Float32, 7), masked(Float32, 6);
    for (int64_t i = 0; i < 7; i++)
        out.at(i) = 42.0f;
    shape.set(p.mask, std::vector<int32_t>{1, 0, 1, 1, 0});
    REQUIRE_THROWS_WITH(k.run(shape, {{p.X, x}, {p.out, out}, {p.masked, masked}}),
                        Catch::Matchers::Contains("shape tensor 'mask' has 5 elements, expected 6"));
    for (int64_t i = 0; i < 7; i++)
        REQUIRE(out.at(i) == 42.0f);

    // A list passed by a caller that disagrees with the mask is caught before anything is written.
    const uint8_t bytes[6] = {1, 0, 1, 1, 0, 0};
    shape.set(p.mask, bytes, 6);
    REQUIRE(shape.values(p.mask) == std::vector<int32_t>{1, 0, 1, 1, 0, 0});
    // Bad bytes change nothing: a null pointer, a negative count, a value out of range.
    const uint8_t bad[6] = {1, 0, 3, 1, 0, 0};
    REQUIRE_THROWS_WITH(shape.set(p.mask, nullptr, 6), "shape tensor 'mask': null data");
    REQUIRE_THROWS_WITH(shape.set(p.mask, bytes, -1), "shape tensor 'mask': negative element count -1");
    REQUIRE_THROWS_WITH(shape.set(p.mask, bad, 6),
                        "shape tensor 'mask': element 2 (row-major) is 3, expected a value in [0, 1]");
    REQUIRE(shape.values(p.mask) == std::vector<int32_t>{1, 0, 1, 1, 0, 0});
    std::vector<cora_arg_t> args = k.make_args(shape, {{p.X, x}, {p.out, out}, {p.masked, masked}});
    std::vector<int64_t> tampered;
    for (cora_arg_t &a : args)
        if (std::string(a.name) == "active_mask") {
            tampered.assign((int64_t *)a.data, (int64_t *)a.data + a.count);
            REQUIRE(tampered == std::vector<int64_t>{3, 0, 2, 3, -1, -1, -1});
            tampered[2] = 1;
            a.data = tampered.data();
        }
    REQUIRE(!tampered.empty());
    std::string error;
    REQUIRE(k.run_raw(args, &error) != CORA_OK);
    REQUIRE(error == "aux array 'active_mask': entry 2 is 1, expected 2");
    for (int64_t i = 0; i < 7; i++)
        REQUIRE(out.at(i) == 42.0f);

    // Reads of a shape tensor are proved in range per dim, like reads of a tensor.
    Func past_the_edge("past_the_edge", {{p.r, p.R}, {p.c, p.C}});
    past_the_edge.compute([&](Expr i, Expr j) { return cast(Float32, p.mask(i, j + 1)); });
    REQUIRE_THROWS_AS(Pipeline({past_the_edge}).compile(), CompileError);
    REQUIRE_THROWS_WITH(Pipeline({past_the_edge}).compile(), Catch::Matchers::Contains("shape tensor 'mask' in dim 1"));
    REQUIRE_THROWS_WITH(ShapeTensor("m", {}, 0, 1), "ShapeTensor 'm' needs at least one dim");
    REQUIRE_THROWS_WITH(p.mask(Expr(0)), "ShapeTensor 'mask' has 2 dims, indexed with 1");
}
