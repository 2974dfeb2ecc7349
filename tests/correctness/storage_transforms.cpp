// Storage split and reorder: blocked layouts of ragged tensors, element placement checked
// exactly, sizes including the split padding, and kernels reading and writing them against
// the reference.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using testing::check_against_reference;

namespace {
int64_t offset_of(const RaggedShape &shape, const Tensor &t, const std::vector<int64_t> &logical) {
    int64_t found = -1;
    shape_impl(shape)->for_each_element(*t.node(), [&](const std::vector<int64_t> &idx, int64_t offset) {
        if (idx == logical) found = offset;
    });
    return found;
}
} // namespace

TEST_CASE("blocked feature storage: split_storage then reorder_storage", "[storage]") {
    Dim batch("batch"), seq("seq"), h("h"), ho("ho"), hi("hi");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {h, 10}});
    // Per row: 3 blocks of 4 features (10 padded to 12), each block holding all tokens.
    A.split_storage(h, ho, hi, 4).reorder_storage({batch, ho, seq, hi});
    RaggedShape shape;
    shape.set(B, 2).set(len, {3, 4});
    REQUIRE(shape.size_of(A) == 12 * (3 + 4));
    // (b=1, s=2, h=5): row 1 starts at 12 * 3; block 1 of row 1 at + 1 * 4 * 4; token 2 at + 2 * 4; + 1.
    REQUIRE(offset_of(shape, A, {1, 2, 5}) == 36 + 16 + 8 + 1);
    REQUIRE(offset_of(shape, A, {0, 0, 9}) == 2 * 3 * 4 + 0 + 1);

    for (int variant = 0; variant < 3; variant++) {
        DYNAMIC_SECTION("variant " << variant) {
            Dim so("so"), si("si");
            Func Out("Out", {{batch, B}, {seq, len(batch)}, {h, 10}});
            Out.compute([&](Expr b, Expr s, Expr hh) { return 2 * A(b, s, hh) + cast(Float32, hh); });
            if (variant == 1) Out.split_storage(seq, so, si, 4); // rows padded to a multiple of 4
            if (variant == 2)
                Out.split_storage(h, ho, hi, 4).reorder_storage({ho, batch, seq}).reorder({h, batch, seq});
            Pipeline p({Out}, "blocked_" + std::to_string(variant));
            Kernel k = p.compile();
            INFO(k.lowered());
            check_against_reference(
                p, k, {A},
                [&](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); }, 30, 4,
                91 + (uint32_t)variant);
            RaggedShape two;
            two.set(B, 2).set(len, {3, 5});
            int64_t row_elems = variant == 1 ? (4 + 8) * 10 : 8 * (variant == 2 ? 12 : 10);
            REQUIRE(two.size_of(Out) == row_elems);
        }
    }
}

TEST_CASE("illegal storage splits and reorders are rejected with clear messages", "[storage][error]") {
    Dim batch("batch"), seq("seq"), h("h"), ho("ho"), hi("hi"), other("other");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}, {h, 10}});
    REQUIRE_THROWS_WITH(A.split_storage(h, ho, hi, 0), Contains("split_storage of 'h' in tensor 'A': factor must be "
                                                                "positive, got 0"));
    REQUIRE_THROWS_WITH(A.split_storage(other, ho, hi, 4), Contains("'other' is not a dim of its storage"));
    REQUIRE_THROWS_WITH(A.split_storage(h, ho, ho, 4), Contains("outer and inner must be different dims"));
    REQUIRE_THROWS_WITH(A.split_storage(h, seq, hi, 4), Contains("dim 'seq' is already a dim of the tensor"));
    REQUIRE_THROWS_WITH(A.reorder_storage({seq, batch}),
                        Contains("reorder_storage of tensor 'A': storage dim 'seq' has extent len(batch), which "
                                 "depends on 'batch'; it must stay inside it"));
    REQUIRE_THROWS_WITH(A.reorder_storage({h, h}), Contains("'h' is listed twice"));
    A.split_storage(h, ho, hi, 4);
    REQUIRE_THROWS_WITH(A.reorder_storage({h, batch}), Contains("'h' is not a dim of its storage"));
    REQUIRE_THROWS_WITH(A.pad_storage(seq, 4), Contains("call it before fuse_storage(), split_storage()"));
}
