/** Each tensor argument's layout, as Kernel::arguments() and AOT headers state it: the offset
 * formula of every element, the storage order, padding and the element count. The formulas are
 * checked against the packing the runtime does (Buffer::from_padded) on a batch. */
#include <catch2/catch.hpp>

#include "common/ragged_testing.h"
#include "cora/cora.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

const KernelArgInfo &arg(const Kernel &k, const std::string &name) {
    for (const KernelArgInfo &a : k.arguments())
        if (a.name == name) return a;
    FAIL("no argument " << name);
    throw;
}

} // namespace

TEST_CASE("kernel arguments state each tensor's layout: offsets, storage order, padding, element count",
          "[layout][aot]") {
    // K is declared [batch][j][k] but stored [batch][k][j] (the trap: a caller passing it row-major
    // in its declared order gets wrong results); Q's rows are padded to a multiple of 4.
    Dim batch("batch"), i("i"), j("j"), k("k");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 20);
    Tensor Q("Q", {{batch, B}, {i, len(batch)}, {k, 16}}), K("K", {{batch, B}, {j, len(batch)}, {k, 16}});
    K.reorder_storage({batch, k, j});
    Q.pad_storage(i, 4);
    Func S("S", {{batch, B}, {i, len(batch)}, {j, len(batch)}});
    Dim r("r");
    S.compute([&](Expr b, Expr x, Expr y) { return sum(r, 16, Q(b, x, r) * K(b, y, r)); });
    Kernel kern = Pipeline({S}, "layout_scores").compile();

    const std::string kl = arg(kern, "K").layout, ql = arg(kern, "Q").layout, sl = arg(kern, "S").layout;
    INFO(kl << ql << sl);
    CHECK_THAT(kl, Contains("float32 K[batch < B][j < len(batch)][k < 16]"));
    CHECK_THAT(kl, Contains("element K(batch, j, k) at offset: (((sum(batch' < batch: len(batch')) * 16) + "
                            "(k * len(batch))) + j)"));
    CHECK_THAT(kl, Contains("stored as [batch < B][k < 16][j < len(batch)]"));
    CHECK_THAT(kl, Contains("element count: (sum(batch' < B: len(batch')) * 16)"));
    CHECK_THAT(ql, Contains("dim i padded to (((len(batch) + 3) / 4) * 4)"));
    CHECK_THAT(ql, Contains("element Q(batch, i, k) at offset: (((sum(batch' < batch: ((len(batch') + 3) / 4)) * 64) "
                            "+ (i * 16)) + k)"));
    CHECK_THAT(ql, Contains("element count: (sum(batch' < B: ((len(batch') + 3) / 4)) * 64)"));
    CHECK_THAT(sl, Contains("element S(batch, i, j) at offset: ((sum(batch' < batch: (len(batch') * len(batch'))) + "
                            "(i * len(batch))) + j)"));
    CHECK(arg(kern, "len").layout == "int32 len[B]\n");
    CHECK(arg(kern, "B").layout.empty());

    // The stated offset of K, evaluated by hand for lengths {3, 5}, matches where the runtime
    // packs each element.
    RaggedShape shape;
    shape.set(B, 2).set(len, {3, 5});
    std::vector<float> padded(2 * 5 * 16);
    for (size_t x = 0; x < padded.size(); x++)
        padded[x] = (float)x;
    Buffer kb = Buffer::from_padded(K, shape, padded, {2, 5, 16});
    const int lens[2] = {3, 5};
    int64_t base = 0;
    for (int b = 0; b < 2; b++) {
        for (int y = 0; y < lens[b]; y++)
            for (int c = 0; c < 16; c++)
                REQUIRE(kb.at(base + c * lens[b] + y) == padded[(size_t)((b * 5 + y) * 16 + c)]);
        base += lens[b] * 16;
    }
    REQUIRE(kb.size() == base);
}
