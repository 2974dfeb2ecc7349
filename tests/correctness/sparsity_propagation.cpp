// Sparsity propagation (TeSA) over small layer graphs with the expected zero and unused feature
// sets written out by hand, and a pruned feed-forward pipeline whose output equals the
// unpropagated one.
#include "common/ragged_testing.h"
#include "sparse/bsr_linear.h"

#include <random>

using namespace cora;

namespace {

/** Features [lo, hi) set in a vector of n. */
std::vector<bool> range_set(int64_t n, std::initializer_list<std::pair<int64_t, int64_t>> ranges) {
    std::vector<bool> v((size_t)n, false);
    for (auto [lo, hi] : ranges)
        for (int64_t i = lo; i < hi; i++)
            v[(size_t)i] = true;
    return v;
}

/** A BSR weight of 4x4 blocks with the given (block row, block column) blocks, values 1..n. */
BsrData weight(int64_t rows, int64_t cols, std::vector<std::pair<int, int>> blocks) {
    std::vector<uint8_t> mask((size_t)(rows / 4 * (cols / 4)), 0);
    for (auto [r, c] : blocks)
        mask[(size_t)(r * (cols / 4) + c)] = 1;
    std::vector<float> dense((size_t)(rows * cols));
    for (size_t i = 0; i < dense.size(); i++)
        dense[i] = 1.0f + (float)(i % 13);
    return BsrData::from_block_mask(dense, rows, cols, 4, 4, mask);
}

std::vector<std::pair<int, int>> blocks_of(const BsrData &w) {
    std::vector<std::pair<int, int>> out;
    for (int64_t rb = 0; rb < w.row_blocks(); rb++)
        for (int32_t p = w.crow[(size_t)rb]; p < w.crow[(size_t)rb + 1]; p++)
            out.emplace_back((int)rb, w.col[(size_t)p]);
    return out;
}

} // namespace

TEST_CASE("empty block rows of FF1 zero its features and FF2 drops the blocks reading them", "[sparse][tesa]") {
    // W1 16x16: block rows 1 and 3 empty -> H features 4..7 and 12..15 are zero (bias-free ReLU).
    BsrData w1 = weight(16, 16, {{0, 0}, {0, 2}, {2, 1}, {2, 3}});
    // W2 8x16: the blocks in block columns 1 and 3 read only zeros.
    BsrData w2 = weight(8, 16, {{0, 0}, {0, 1}, {1, 1}, {1, 2}, {1, 3}});
    SparsityGraph g;
    int x = g.input("X", 16);
    int h = g.linear("FF1", x, w1, false, Activation::ReLU);
    int y = g.linear("FF2", h, w2, true, Activation::None);
    g.output(y);
    g.propagate();
    REQUIRE(g.zero_features(h) == range_set(16, {{4, 8}, {12, 16}}));
    REQUIRE(g.unused_features(h) == range_set(16, {{4, 8}, {12, 16}}));
    REQUIRE(g.zero_features(y) == range_set(8, {}));    // FF2 has a bias
    REQUIRE(g.unused_features(x) == range_set(16, {})); // FF1's kept blocks read all of X
    REQUIRE(blocks_of(g.pruned_weight(y)) == std::vector<std::pair<int, int>>{{0, 0}, {1, 2}});
    REQUIRE(blocks_of(g.pruned_weight(h)) == blocks_of(w1));
    REQUIRE_THAT(g.report(), Catch::Contains("FF2: 0 of 8 features known zero, 0 unused; weight blocks 5 -> 2 kept"));
    REQUIRE_THAT(g.report(), Catch::Contains("FF1: 8 of 16 features known zero, 8 unused; weight blocks 4 -> 4 kept"));
}

TEST_CASE("features FF2 never reads drop FF1's blocks, which zeroes them in turn", "[sparse][tesa]") {
    // W2 has no block in block column 2: H features 8..11 are unused, so FF1's block row 2 goes;
    // FF2's block column 0 reads features 0..3, which FF1's block row 0 (block (0,1)) computes.
    BsrData w1 = weight(16, 16, {{0, 1}, {1, 0}, {2, 2}, {2, 3}, {3, 3}});
    BsrData w2 = weight(8, 16, {{0, 0}, {0, 1}, {1, 3}});
    SparsityGraph g;
    int x = g.input("X", 16);
    int h = g.linear("FF1", x, w1, false, Activation::GELU);
    int y = g.linear("FF2", h, w2, false, Activation::None);
    g.output(y);
    g.propagate();
    REQUIRE(g.unused_features(h) == range_set(16, {{8, 12}}));
    REQUIRE(g.zero_features(h) == range_set(16, {{8, 12}})); // its block row is gone, and GELU(0) = 0
    REQUIRE(blocks_of(g.pruned_weight(h)) == std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {3, 3}});
    REQUIRE(blocks_of(g.pruned_weight(y)) == blocks_of(w2));
    // X's block column 2 fed only the dropped row: unused.
    REQUIRE(g.unused_features(x) == range_set(16, {{8, 12}}));
}

TEST_CASE("a bias, a non-zero-preserving activation or a residual stops the zeros", "[sparse][tesa]") {
    BsrData w1 = weight(8, 8, {{0, 0}}); // block row 1 empty
    BsrData w2 = weight(8, 8, {{0, 0}, {0, 1}, {1, 1}});
    for (int variant = 0; variant < 4; variant++) {
        INFO("variant " << variant);
        SparsityGraph g;
        int x = g.input("X", 8, range_set(8, {{0, 2}}));
        int h = g.linear("FF1", x, w1, variant == 1, variant == 2 ? Activation::Sigmoid : Activation::ReLU);
        int scaled = g.elementwise("scale", h, variant != 3);
        int y = g.linear("FF2", scaled, w2, false, Activation::None);
        int out = g.add("residual", y, x);
        g.output(out);
        g.propagate();
        std::vector<bool> expected_h = variant == 0 || variant == 3 ? range_set(8, {{4, 8}}) : range_set(8, {});
        REQUIRE(g.zero_features(h) == expected_h);
        std::vector<bool> expected_scaled = variant == 0 ? range_set(8, {{4, 8}}) : range_set(8, {});
        REQUIRE(g.zero_features(scaled) == expected_scaled);
        // The residual adds X, zero only on features 0..1, where y is not zero: nothing.
        REQUIRE(g.zero_features(out) == range_set(8, {}));
        REQUIRE(g.pruned_weight(y).nnzb() == (variant == 0 ? 1 : 3));
    }
}

TEST_CASE("sparsity graphs reject bad use with messages", "[sparse][tesa][error]") {
    SparsityGraph g;
    int x = g.input("X", 16);
    BsrData w = weight(8, 12, {{0, 0}});
    REQUIRE_THROWS_WITH(g.linear("L", x, w, false, Activation::None),
                        Catch::Contains("the weight has 12 input columns but 'X' has 16 features"));
    REQUIRE_THROWS_WITH(g.linear("L", 5, weight(8, 16, {}), false, Activation::None),
                        Catch::Contains("no tensor 5 (the graph has 1)"));
    REQUIRE_THROWS_WITH(g.input("Z", 4, {true}), Catch::Contains("known_zero has 1 entries, expected 4"));
    REQUIRE_THROWS_WITH(g.propagate(), Catch::Contains("no output marked"));
    int e = g.elementwise("E", x, true);
    g.output(e);
    REQUIRE_THROWS_WITH(g.zero_features(e), Catch::Contains("call propagate() first"));
    g.propagate();
    REQUIRE_THROWS_WITH(g.pruned_weight(e), Catch::Contains("'E' is not a linear layer"));
    REQUIRE_THROWS_AS(g.add("A", x, g.input("Y", 8)), RuntimeError);
}

TEST_CASE("a propagated pruned feed-forward block computes what the unpropagated one does", "[sparse][tesa]") {
    using cora::apps::BsrLinear;
    using cora::apps::BsrTiling;
    using cora::apps::TokenDims;
    const int64_t hidden = 32, ff = 64;
    TokenDims D(24);
    BsrTiling tiling;
    tiling.chunk_tokens = 8;
    tiling.tile_tokens = 4;
    Tensor X = D.tokens("X", hidden, tiling.chunk_tokens);
    BsrMatrix W1("W1", ff, hidden, 8, 8, BlockOrder::ColumnMajor), W2("W2", hidden, ff, 8, 8);
    BsrLinear l1(
        "H", D, W1, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, true, tiling);
    BsrLinear l2(
        "Y", D, W2, [&](Expr b, Expr s, Expr k) { return l1.Y(b, s, k); }, std::nullopt, false, tiling);
    Pipeline pipe({l2.Y}, "ff_tesa");
    Kernel kernel = pipe.compile();
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> d1((size_t)(ff * hidden)), d2((size_t)(hidden * ff));
    for (float &v : d1)
        v = u(rng);
    for (float &v : d2)
        v = u(rng);
    std::vector<uint8_t> m1((size_t)(ff / 8 * (hidden / 8))), m2((size_t)(hidden / 8 * (ff / 8)));
    for (size_t i = 0; i < m1.size(); i++)
        m1[i] = (i / (hidden / 8)) % 4 != 1 && rng() % 2; // block rows 1 and 5 of W1 empty
    for (size_t i = 0; i < m2.size(); i++)
        m2[i] = (i % (ff / 8)) != 6 && rng() % 4 != 0; // block column 6 of W2 empty
    BsrData w1 = BsrData::from_block_mask(d1, ff, hidden, 8, 8, m1);
    BsrData w2 = BsrData::from_block_mask(d2, hidden, ff, 8, 8, m2);
    SparsityGraph g;
    int h = g.linear("FF1", g.input("X", hidden), w1, false, Activation::ReLU);
    int y = g.linear("FF2", h, w2, false, Activation::None);
    g.output(y);
    g.propagate();
    BsrData p1 = g.pruned_weight(h), p2 = g.pruned_weight(y);
    REQUIRE(p1.nnzb() < w1.nnzb()); // block row 6 of W1 feeds only the unused features 48..55
    REQUIRE(p2.nnzb() < w2.nnzb()); // blocks reading H's zero features 8..15 and 40..47
    for (const auto &lengths : testing::length_cases(24, 8, 9, 2)) {
        INFO(testing::describe(lengths));
        auto run = [&](const BsrData &a, const BsrData &b) {
            RaggedShape shape;
            shape.set(D.B, (int64_t)lengths.size()).set(D.len, lengths);
            a.bind(shape, W1);
            b.bind(shape, W2);
            Buffer x = Buffer::alloc(X, shape), out = Buffer::alloc(l2.Y, shape);
            testing::fill_random(x, 3);
            Buffer c1 = a.col_buffer(W1, shape), v1 = a.values_buffer(W1, shape);
            Buffer c2 = b.col_buffer(W2, shape), v2 = b.values_buffer(W2, shape);
            kernel.run(shape, {{X, x}, {W1.col, c1}, {W1.values, v1}, {W2.col, c2}, {W2.values, v2}, {l2.Y, out}});
            return testing::logical_values(out, l2.Y, shape);
        };
        std::vector<double> full = run(w1, w2), pruned = run(p1, p2);
        REQUIRE(full.size() == pruned.size());
        for (size_t i = 0; i < full.size(); i++)
            REQUIRE(pruned[i] == Approx(full[i]).margin(1e-5));
    }
}
