// StaticValues (analysis/StaticValues.h): reads of values known when compiling at constant
// indices fold to the values — a constant length array's element, a prefix sum over it (against
// a sum written out here, at every index including 0 and the total), an index tensor's element at
// a constant offset — and nothing else folds: run-time arrays, non-constant indices, indices out of
// range.
#include <catch2/catch.hpp>

#include <numeric>

#include "analysis/StaticValues.h"
#include "formats/ragged/StorageLayout.h"
#include "cora/cora.h"
#include "ir/IRPrinter.h"

using namespace cora;
using namespace cora::ir;

TEST_CASE("values known when compiling fold at constant indices, and only there", "[unit][static]") {
    const std::vector<int32_t> counts = {3, 0, 7, 1, 0, 2};
    LengthArray fixed = LengthArray::constant("blocks", counts, 0, 8);
    Param B("B", 1, 16);
    LengthArray runtime("len", B, 0, 8);
    Dim rb("rb");
    AuxTable table;
    auto prefix = prefix_sum_aux(table, {LayoutDim{rb.node(), Expr((int64_t)counts.size() + 1)}}, fixed(rb));
    auto runtime_prefix = prefix_sum_aux(table, {LayoutDim{rb.node(), Expr(B) + 1}}, runtime(rb));

    StaticValues values;
    for (int64_t i = 0; i < (int64_t)counts.size(); i++) {
        REQUIRE(print(values.fold(fixed(Expr(i)))) == std::to_string(counts[(size_t)i]));
        // Folded through arithmetic the simplifier resolves: fixed(2 * i - i).
        REQUIRE(print(values.fold(fixed(Expr(2 * i) - Expr(i)))) == std::to_string(counts[(size_t)i]));
    }
    for (int64_t x = 0; x <= (int64_t)counts.size(); x++) {
        int64_t expected = std::accumulate(counts.begin(), counts.begin() + x, int64_t{0});
        REQUIRE(print(values.fold(UFCall::make(prefix, {Expr(x)}))) == std::to_string(expected));
        REQUIRE(values.uf_value(*prefix, {x}) == expected);
    }
    // An expression mixing them: the offset of block j = 1 of block row 3 times a block of 64.
    REQUIRE(print(values.fold((UFCall::make(prefix, {Expr(3)}) + 1) * 64)) == std::to_string((3 + 0 + 7 + 1) * 64));

    // What does not fold stays as it was.
    Dim i("i");
    Expr symbolic = fixed(i.var());
    REQUIRE(print(values.fold(symbolic)) == print(symbolic));
    REQUIRE(print(values.fold(runtime(Expr(2)))) == print(runtime(Expr(2))));
    REQUIRE(!values.uf_value(*runtime_prefix, {2}).has_value());
    REQUIRE(!values.uf_value(*fixed.node(), {(int64_t)counts.size()}).has_value()); // out of range
    REQUIRE(!values.uf_value(*fixed.node(), {-1}).has_value());

    // An index tensor's elements, read through its buffer at a constant offset.
    const std::vector<int64_t> columns = {4, 1, 0, 5};
    VarPtr buffer = make_var("col", VarRole::Buffer, Int32), other = make_var("x", VarRole::Buffer, Int32);
    StaticValues with_tensor({{buffer.get(), &columns}});
    REQUIRE(print(with_tensor.fold(Load::make(buffer, Expr(2) + Expr(1)))) == "5");
    REQUIRE(print(with_tensor.fold(Load::make(other, Expr(1)))) == print(Load::make(other, Expr(1))));
    REQUIRE(print(with_tensor.fold(Load::make(buffer, Expr(4)))) == print(Load::make(buffer, Expr(4))));
    Expr at_i = Load::make(buffer, i.var());
    REQUIRE(print(with_tensor.fold(at_i)) == print(at_i));
}
