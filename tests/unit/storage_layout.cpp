// Storage lowering through the dimension graph, against hand computations, and the prelude.
#include "common/ragged_testing.h"

#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "runtime/RaggedShapeImpl.h"

using namespace cora;
using namespace cora::ir;

namespace {
Layout layout_of(const Tensor &t) { return t.node()->storage; }
} // namespace

TEST_CASE("offsets of [batch, seq(b), heads, seq(b)] equal the hand computation", "[storage]") {
    AuxTable table;
    Dim batch("batch"), q("q"), heads("heads"), kv("kv");
    const int64_t H = 4;
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 20);
    Tensor S("S", {{batch, B}, {q, len(batch)}, {heads, H}, {kv, len(batch)}});
    Layout l = layout_of(S);
    REQUIRE(dim_graph(l) == std::vector<std::pair<int, int>>{{0, 1}, {0, 3}});
    FlatLayout flat = flatten_layout(table, l);
    REQUIRE(flat.aux.size() == 1); // one prefix-sum array over batch
    REQUIRE(print(flat.offset).find("prefix_batch(batch)") != std::string::npos);

    for (const auto &lengths : testing::length_cases(20, 8, 3)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(B, (int64_t)lengths.size()).set(len, lengths);
        Interpreter in = shape_impl(shape)->interpreter();
        int64_t base = 0, rank = 0;
        for (int64_t b = 0; b < (int64_t)lengths.size(); b++) {
            int64_t L = lengths[b];
            for (int64_t i = 0; i < L; i++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t j = 0; j < L; j++) {
                        in.ints[batch.node()->var.get()] = b;
                        in.ints[q.node()->var.get()] = i;
                        in.ints[heads.node()->var.get()] = h;
                        in.ints[kv.node()->var.get()] = j;
                        int64_t hand = base + i * H * L + h * L + j;
                        REQUIRE(in.eval_int(flat.offset) == hand);
                        REQUIRE(hand == rank++); // packed, lexicographic, no gaps
                    }
            base += H * L * L;
        }
        REQUIRE(shape.size_of(S) == base);
        REQUIRE(shape_impl(shape)->aux_array(flat.aux[0].get()).size() == lengths.size() + 1);
    }
}

TEST_CASE("dense layouts need no aux arrays; nested raggedness needs nested aux arrays", "[storage]") {
    AuxTable table;
    Dim x("x"), y("y"), z("z");
    Param N("N", 1, 100);
    Tensor D("D", {{x, N}, {y, 7}, {z, 3}});
    FlatLayout dense = flatten_layout(table, layout_of(D));
    REQUIRE(dense.aux.empty());
    REQUIRE(print(dense.offset) == "(((x * 21) + (y * 3)) + z)");
    REQUIRE(print(dense.size) == "(N * 21)");

    // Triangular storage: extent of z depends on y (an outer loop variable, no length array).
    Tensor T("T", {{x, N}, {y, 5}, {z, y + 1}});
    FlatLayout tri = flatten_layout(table, layout_of(T));
    REQUIRE(tri.aux.size() == 1);
    RaggedShape shape;
    shape.set(N, 3);
    REQUIRE(shape.size_of(T) == 3 * 15);

    // Three levels: words(b, s) per sentence s of document b; sentence count per document.
    Dim doc("doc"), sent("sent"), word("word");
    Param D2("D2", 1, 8);
    LengthArray nsent("nsent", D2, 0, 6), width("width", D2, 1, 4);
    Tensor W("W", {{doc, D2}, {sent, nsent(doc)}, {word, sent * width(doc) + 1}});
    FlatLayout nested = flatten_layout(table, layout_of(W));
    // Per-(doc, sent) prefix sums, the per-doc offsets of that 2-D array, and per-doc totals.
    REQUIRE(nested.aux.size() == 3);
    RaggedShape s2;
    std::vector<int32_t> ns{2, 0, 3, 1}, ws{1, 4, 2, 3};
    s2.set(D2, 4).set(nsent, ns).set(width, ws);
    int64_t total = 0;
    Interpreter in = shape_impl(s2)->interpreter();
    for (int64_t d = 0; d < 4; d++)
        for (int64_t s = 0; s < ns[d]; s++)
            for (int64_t w = 0; w < s * ws[d] + 1; w++) {
                in.ints[doc.node()->var.get()] = d;
                in.ints[sent.node()->var.get()] = s;
                in.ints[word.node()->var.get()] = w;
                REQUIRE(in.eval_int(nested.offset) == total++);
            }
    REQUIRE(s2.size_of(W) == total);
}

TEST_CASE("kernels that share raggedness share one prelude array", "[storage][prelude]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 10);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func F1("F1", {{batch, B}, {seq, len(batch)}}), F2("F2", {{batch, B}, {seq, len(batch)}});
    F1.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
    F2.compute([&](Expr b, Expr s) { return A(b, s) * 3; });
    Kernel k1 = Pipeline({F1}, "share1").compile(), k2 = Pipeline({F2}, "share2").compile();
    RaggedShape shape;
    shape.set(B, 3).set(len, {4, 0, 9});
    Buffer a = Buffer::alloc(A, shape), o1 = Buffer::alloc(F1, shape), o2 = Buffer::alloc(F2, shape);
    REQUIRE(shape.aux_array_count() == 1); // built once, when sizing the first buffer
    k1.run(shape, {{A, a}, {F1, o1}});
    k2.run(shape, {{A, a}, {F2, o2}});
    REQUIRE(shape.aux_array_count() == 1);
    // Changing the lengths invalidates the prelude.
    shape.set(len, {1, 1, 1});
    REQUIRE(shape.aux_array_count() == 0);
    REQUIRE(shape.size_of(A) == 3);
}

TEST_CASE("padded <-> packed conversion round-trips", "[storage][buffer]") {
    Dim batch("batch"), seq("seq"), feat("feat");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 6);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {feat, 3}});
    RaggedShape shape;
    std::vector<int32_t> lengths{2, 0, 6, 1};
    shape.set(B, 4).set(len, lengths);
    std::vector<float> padded(4 * 6 * 3);
    for (size_t i = 0; i < padded.size(); i++)
        padded[i] = (float)i;
    Buffer packed = Buffer::from_padded(X, shape, padded, {4, 6, 3});
    REQUIRE(packed.size() == 9 * 3);
    REQUIRE(packed.at(0) == padded[0]);
    REQUIRE(packed.at(6) == padded[2 * 18]); // batch 2 starts after 2 rows of batch 0
    std::vector<float> back = packed.to_padded(X, shape, {4, 6, 3}, -1.0f);
    for (int64_t b = 0; b < 4; b++)
        for (int64_t s = 0; s < 6; s++)
            for (int64_t f = 0; f < 3; f++) {
                size_t at = (size_t)((b * 6 + s) * 3 + f);
                REQUIRE(back[at] == (s < lengths[b] ? padded[at] : -1.0f));
            }
}
