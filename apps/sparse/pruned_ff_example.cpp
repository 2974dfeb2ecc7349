// The user guide's block-sparse example (docs/user-guide.md, "Block-sparse weights"), built and run by
// the tests so the guide stays true: a pruned feed-forward block over a ragged batch,
// Y = W2 relu(W1 X), W1 and W2 block-sparse, with sparsity propagation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cora/cora.h"

using namespace cora;

int main(int argc, char **argv) {
    if (argc > 1) { // no flags: any argument is a usage error (exit status 2), --help says so
        const bool help = std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h";
        std::fprintf(help ? stdout : stderr,
                     help ? "usage: %s\n(the user guide's block-sparse example; no flags)\n"
                          : "%s: unexpected argument '%s' (it takes none; see --help)\n",
                     argv[0], argc > 1 ? argv[1] : "");
        return help ? 0 : 2;
    }
    const int64_t hidden = 256, ff = 1024, bs = 32; // 32x32 blocks

    // Ragged tokens: batch b, sentence position s(b), features c; packed, bulk-padded to 24 tokens.
    Dim b("b"), s("s"), tok("tok"), c("c");
    Param B("B", 1, 1024);
    LengthArray len("len", B, 0, 512);
    Tensor X("X", {{b, B}, {s, len(b)}, {c, hidden}});
    X.fuse_storage(b, s, tok, 24);

    // The pruned weights, [out, in] like torch.nn.Linear.weight; blocks stored column-major so
    // that a block's rows are contiguous (a vector of outputs per column step).
    BsrMatrix W1("W1", ff, hidden, bs, bs, BlockOrder::ColumnMajor);
    BsrMatrix W2("W2", hidden, ff, bs, bs, BlockOrder::ColumnMajor);

    // H = relu(X W1^T), Y = H W2^T: each sum runs over the present blocks of the output's row.
    Dim n("n"), k("k"), m("m"), k2("k2");
    Func H("H", {{b, B}, {s, len(b)}, {n, ff}});
    H.compute([&](Expr bi, Expr si, Expr ni) {
        return max(W1.row_times(k, ni, [&](Expr kk) { return X(bi, si, kk); }), 0.0f);
    });
    Func Y("Y", {{b, B}, {s, len(b)}, {m, hidden}});
    Y.compute([&](Expr bi, Expr si, Expr mi) { return W2.row_times(k2, mi, [&](Expr kk) { return H(bi, si, kk); }); });

    // Schedule both as GEMM register tiles over the present blocks: all tokens of the batch as one
    // loop in parallel chunks of 24, tiles of tokens x a vector of a block's rows (this CPU's tile
    // from bsr_register_tile: 6 x 32 with AVX-512, 6 x 16 with AVX2; the input's rows are
    // w.cols() floats apart), the row's blocks (ko) and a block's columns (ki) inside the tile.
    auto schedule = [&](Func &f, const Dim &out, const Dim &red, const BsrMatrix &w) {
        const BsrRegisterTile tile = bsr_register_tile(w.block_rows(), w.cols() * 4, 24, host_vector_bits());
        Dim tc("tc"), tt("tt"), to("to"), ti("ti"), nb("nb"), r("r"), ro("ro"), ri("ri"), ko("ko"), ki("ki");
        f.fuse(b, s, tok).pad_loop(tok, 24).fuse_storage(b, s, tok, 24);
        f.split(tok, tc, tt, 24).split(tt, to, ti, tile.tokens).split(out, nb, r, w.block_rows());
        f.split(r, ro, ri, tile.vector_rows);
        f.split(red, ko, ki, w.block_cols()).reorder({tc, nb, ro, to, ko, ki, ti, ri});
        f.cache_write(to).vectorize(ri).unroll(ti).parallel(tc);
    };
    schedule(H, n, k, W1);
    schedule(Y, m, k2, W2);
    Kernel kernel = Pipeline({Y}, "pruned_ff").compile();

    // Weights at run time: BSR arrays (here from a dense matrix and a random block mask; from
    // PyTorch, take crow_indices(), col_indices() and values() of weight.to_sparse_bsr((32, 32))).
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    auto pruned = [&](int64_t rows, int64_t cols, double density, bool empty_quarter) {
        std::vector<float> dense((size_t)(rows * cols));
        for (float &v : dense)
            v = u(rng);
        std::vector<uint8_t> mask((size_t)(rows / bs * (cols / bs))); // [row block, column block]
        for (size_t i = 0; i < mask.size(); i++) {
            bool row_pruned = empty_quarter && (i / (size_t)(cols / bs)) % 4 == 3;
            mask[i] = !row_pruned && u(rng) + 0.1f < 0.2f * density;
        }
        return BsrData::from_block_mask(dense, rows, cols, bs, bs, mask);
    };
    // W1: a quarter of its block rows pruned whole, 40% of the other blocks kept; W2: 50%.
    BsrData w1 = pruned(ff, hidden, 0.4, true), w2 = pruned(hidden, ff, 0.5, false);

    // Sparsity propagation: W2's blocks that read features FF1 always leaves zero (empty block
    // rows of W1; bias-free ReLU) and W1's blocks whose outputs W2 never reads do no useful work.
    SparsityGraph g;
    int h = g.linear("FF1", g.input("X", hidden), w1, /*has_bias=*/false, Activation::ReLU);
    int y = g.linear("FF2", h, w2, /*has_bias=*/false, Activation::None);
    g.output(y);
    g.propagate();
    BsrData p1 = g.pruned_weight(h), p2 = g.pruned_weight(y);
    std::printf("%s", g.report().c_str());

    // One batch: the shape binds the lengths and each weight's block counts (crow).
    RaggedShape shape;
    shape.set(B, 3).set(len, {5, 0, 17});
    p1.bind(shape, W1);
    p2.bind(shape, W2);
    Buffer x = Buffer::alloc(X, shape), out = Buffer::alloc(Y, shape);
    for (int64_t i = 0; i < x.size(); i++)
        x.at(i) = u(rng);
    Buffer c1 = p1.col_buffer(W1, shape), v1 = p1.values_buffer(W1, shape);
    Buffer c2 = p2.col_buffer(W2, shape), v2 = p2.values_buffer(W2, shape);
    kernel.run(shape, {{X, x}, {W1.col, c1}, {W1.values, v1}, {W2.col, c2}, {W2.values, v2}, {Y, out}});

    // Check against the reference evaluator (double precision, straight from the definitions).
    std::vector<double> ref = reference_evaluate(
        Pipeline({Y}), shape, {{X, &x}, {W1.col, &c1}, {W1.values, &v1}, {W2.col, &c2}, {W2.values, &v2}})[0];
    // !(d <= err) also takes a NaN: std::max(err, NaN) is err, and an all-NaN output would pass.
    double err = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const double d = std::abs(out.at((int64_t)i) - ref[i]);
        if (!(d <= err)) err = std::isnan(d) ? INFINITY : d;
    }
    std::printf("22 tokens, max abs error vs reference %.2g\n", err);
    return err < 1e-4 ? 0 : 1;
}
