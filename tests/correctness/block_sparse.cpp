// Block-sparse (BSR) weights: the host format's conversions and validation, and kernels whose work
// follows the present blocks (apps/sparse/bsr_linear.h) against the reference and against a dense
// loop over the matrix with the zero blocks materialised, on the edge cases: no block present,
// all present, one block per row, empty rows, every block shape of the issue, ragged token counts
// 0 and 1, both block orders, JIT and in-kernel (AOT) aux arrays; random patterns x random schedules.
#include "common/block_sparse_testing.h"
#include "common/nvrtc_checks.h"
#include "common/ragged_testing.h"
#include "common/trial_count.h"
#include "sparse/bsr_conv.h"
#include "sparse/bsr_linear.h"

#include <random>

using namespace cora;
using cora::apps::BsrLinear;
using cora::apps::BsrTiling;
using cora::apps::TokenDims;
using namespace cora::testing;

TEST_CASE("BsrData converts dense matrices and block masks and back", "[sparse]") {
    std::mt19937 rng(7);
    for (BlockShape bs : {BlockShape{8, 8}, BlockShape{4, 16}, BlockShape{16, 4}, BlockShape{32, 32}}) {
        int64_t rows = bs.rows * 3, cols = bs.cols * 4;
        for (Pattern p : {Pattern::None, Pattern::All, Pattern::OnePerRow, Pattern::EmptyRows, Pattern::Random}) {
            INFO(pattern_name(p) << ", blocks " << bs.rows << "x" << bs.cols);
            std::vector<uint8_t> mask = block_mask(p, 3, 4, rng);
            std::vector<float> dense = random_dense(rows, cols, rng);
            BsrData d = BsrData::from_block_mask(dense, rows, cols, bs.rows, bs.cols, mask);
            d.validate();
            int64_t present = 0;
            for (uint8_t m : mask)
                present += m;
            REQUIRE(d.nnzb() == present);
            REQUIRE(d.density() == Approx((double)present / 12.0));
            std::vector<float> back = d.to_dense();
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) {
                    bool kept = mask[(size_t)(i / bs.rows * 4 + j / bs.cols)] != 0;
                    REQUIRE(back[(size_t)(i * cols + j)] == (kept ? dense[(size_t)(i * cols + j)] : 0.0f));
                }
            // from_dense keeps exactly the blocks holding a non-zero: the masked matrix round-trips.
            BsrData again = BsrData::from_dense(back, rows, cols, bs.rows, bs.cols);
            REQUIRE(again.crow == d.crow);
            REQUIRE(again.col == d.col);
            REQUIRE(again.values == d.values);
        }
    }
    // A threshold drops blocks whose elements are all small.
    std::vector<float> dense(16 * 16, 0.01f);
    dense[5 * 16 + 12] = 0.5f; // block (0, 1) of 8x8 blocks
    BsrData d = BsrData::from_dense(dense, 16, 16, 8, 8, 0.1f);
    REQUIRE(d.crow == std::vector<int32_t>{0, 1, 1});
    REQUIRE(d.col == std::vector<int32_t>{1});
    REQUIRE(BsrData::from_dense(dense, 16, 16, 8, 8).nnzb() == 4);
}

TEST_CASE("BsrData rejects inconsistent metadata, naming the entry", "[sparse][error]") {
    std::mt19937 rng(3);
    std::vector<float> dense = random_dense(16, 24, rng);
    std::vector<uint8_t> mask = {1, 0, 1, 0, 1, 1}; // 2 x 3 blocks of 8x8
    const BsrData good = BsrData::from_block_mask(dense, 16, 24, 8, 8, mask);
    REQUIRE(good.crow == std::vector<int32_t>{0, 2, 4});
    auto expect = [&](BsrData d, const std::string &message) {
        INFO(message);
        REQUIRE_THROWS_WITH(d.validate(), Catch::Contains(message));
        REQUIRE_THROWS_AS(d.validate(), RuntimeError);
    };
    BsrData d = good;
    d.crow = {0, 3, 2};
    expect(d, "crow is not non-decreasing: crow[2] = 2 < crow[1] = 3");
    d = good;
    d.crow = {1, 2, 4};
    expect(d, "crow[0] is 1, expected 0");
    d = good;
    d.crow = {0, 2};
    expect(d, "crow has 2 entries, expected row blocks + 1 = 3");
    d = good;
    d.col[3] = 3;
    expect(d, "col[3] = 3 (block row 1) is outside [0, 2]");
    d = good;
    d.col[1] = 0;
    expect(d, "col[1] = 0 does not increase after col[0] = 0 within block row 0");
    d = good;
    d.col.push_back(1);
    expect(d, "crow[2] = 4 but col has 5 entries");
    d = good;
    d.values.pop_back();
    expect(d, "values has 255 elements, expected nnzb x block = 4 x 8 x 8 = 256");
    d = good;
    d.block_cols = 7;
    expect(d, "block size 8 x 7 does not divide the matrix 16 x 24");
    d = good;
    d.crow = {0, 4, 4};
    d.col = {0, 1, 2, 2};
    expect(d, "block row 0 has 4 blocks, more than the 3 block columns");

    REQUIRE_THROWS_WITH(BsrData::from_dense(dense, 16, 24, 16, 16),
                        Catch::Contains("does not divide the matrix 16 x 24"));
    REQUIRE_THROWS_WITH(BsrData::from_dense(dense, 16, 25, 8, 8), Catch::Contains("block size 8 x 8 does not divide"));
    REQUIRE_THROWS_WITH(BsrData::from_dense(dense, 8, 24, 8, 8),
                        Catch::Contains("384 elements, expected 8 x 24 = 192"));
    REQUIRE_THROWS_WITH(BsrData::from_block_mask(dense, 16, 24, 8, 8, {1, 0}),
                        Catch::Contains("the mask has 2 entries, expected 2 x 3 = 6"));

    // Binding checks the declared matrix, and leaves the shape unchanged on error.
    BsrMatrix W("W", 16, 24, 8, 8), W2("W2", 16, 24, 4, 8);
    RaggedShape shape;
    REQUIRE_THROWS_WITH(good.bind(shape, W2),
                        Catch::Contains("BSR data for 'W2' is 16 x 24 in blocks of 8 x 8, but the matrix is "
                                        "declared 16 x 24 in blocks of 4 x 8"));
    REQUIRE_THROWS_AS(shape.lengths(W2.blocks_per_row), RuntimeError);
    good.bind(shape, W);
    REQUIRE(shape.offsets(W.blocks_per_row) == std::vector<int64_t>{0, 2, 4});
}

TEST_CASE("BsrMatrix and index_range reject bad declarations", "[sparse][error]") {
    REQUIRE_THROWS_WITH(BsrMatrix("W", 48, 30, 16, 8),
                        Catch::Contains("BsrMatrix 'W': block size 8 does not divide cols 30; pad the matrix with zero "
                                        "cols up to 32"));
    REQUIRE_THROWS_AS(BsrMatrix("W", 48, 30, 16, 8), CompileError);
    REQUIRE_THROWS_WITH(BsrMatrix("W", 0, 32, 16, 8), Catch::Contains("rows 0 and its block size 16 must be positive"));
    REQUIRE_THROWS_WITH(BsrMatrix("W", 32, 32, 16, 8, BlockOrder::RowMajor, Float32),
                        Catch::Contains("BsrMatrix 'W': index type float32; block columns are int32 or int64"));
    Dim i("i");
    Tensor f("f", {{i, 4}}), ints("ints", {{i, 4}}, Int32);
    REQUIRE_THROWS_WITH(f.index_range(0, 3),
                        Catch::Contains("the tensor holds float32; an index tensor holds integers"));
    REQUIRE_THROWS_WITH(ints.index_range(3, 0), Catch::Contains("min_value 3 > max_value 0"));
    Func g("g", {{i, 4}}, Int32);
    REQUIRE_THROWS_WITH(g.index_range(0, 3), Catch::Contains("only an input tensor can declare a value range"));
    // Without a declared range, a read used as an index cannot be bounded: a CompileError.
    Dim j("j");
    Tensor data("data", {{j, 8}});
    Func gather("gather", {{i, 4}});
    gather.compute([&](Expr x) { return data(cast(Int64, ints(x))); });
    REQUIRE_THROWS_AS(Pipeline({gather}, "gather").compile(), CompileError);
    ints.index_range(0, 7);
    REQUIRE_NOTHROW(Pipeline({gather}, "gather").compile());
}

TEST_CASE("block-sparse linear layers over ragged tokens match the reference and the dense product", "[sparse]") {
    const int64_t rows = 64, cols = 64, max_len = 40;
    std::mt19937 rng(2026);
    for (BlockShape bs : {BlockShape{8, 8}, BlockShape{16, 16}, BlockShape{32, 32}, BlockShape{4, 16},
                          BlockShape{16, 4}, BlockShape{64, 64}}) {
        for (BlockOrder order : {BlockOrder::RowMajor, BlockOrder::ColumnMajor}) {
            bool with_bias = order == BlockOrder::ColumnMajor, build_in_kernel = bs.rows == 16 && bs.cols == 4;
            // PyTorch's int64 block columns on some shapes (bound as they are in Python; here widened).
            const Type index_type = bs.rows == 8 || bs.cols == 4 ? Int64 : Int32;
            INFO("blocks " << bs.rows << "x" << bs.cols
                           << (order == BlockOrder::RowMajor ? " row-major" : " column-major")
                           << (with_bias ? ", bias + ReLU" : "") << (build_in_kernel ? ", aux built in kernel" : "")
                           << ", " << index_type.str() << " block columns");
            TokenDims D(max_len);
            BsrTiling tiling;
            tiling.chunk_tokens = 12;
            tiling.tile_tokens = 4;
            tiling.vector_rows = 8;
            Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
            Dim o("o");
            Tensor bias("bias", {{o, rows}});
            BsrMatrix W("W", rows, cols, bs.rows, bs.cols, order, index_type);
            REQUIRE(W.col.type() == index_type);
            BsrLinear lin(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); },
                with_bias ? std::optional<Tensor>(bias) : std::nullopt, with_bias, tiling);
            Pipeline pipe({lin.Y}, "bsr_linear");
            CompileOptions opts;
            opts.build_aux_in_kernel = build_in_kernel;
            Kernel kernel = pipe.compile(opts);
            for (const KernelArgInfo &a : kernel.arguments())
                if (a.name == "W_col")
                    REQUIRE_THAT(a.layout,
                                 Catch::Contains("index tensor: every element in [0, " +
                                                 std::to_string(cols / bs.cols - 1) + "], checked on every call"));
            for (Pattern p : {Pattern::None, Pattern::All, Pattern::OnePerRow, Pattern::EmptyRows, Pattern::Random}) {
                std::vector<float> dense = random_dense(rows, cols, rng);
                BsrData w = BsrData::from_block_mask(dense, rows, cols, bs.rows, bs.cols,
                                                     block_mask(p, rows / bs.rows, cols / bs.cols, rng));
                INFO(pattern_name(p));
                check_bsr_linear(kernel, pipe, D, X, W, lin.Y, w,
                                 with_bias ? std::optional<Tensor>(bias) : std::nullopt, with_bias, (int32_t)max_len,
                                 rng);
            }
        }
    }
}

TEST_CASE("a pruned feed-forward block chains two block-sparse layers", "[sparse]") {
    // H = relu(X W1^T + b1) feeds Y = H W2^T: the second layer reads the first's packed output at
    // the columns its present blocks name.
    const int64_t hidden = 32, ff = 64, max_len = 20;
    TokenDims D(max_len);
    BsrTiling tiling;
    tiling.chunk_tokens = 8;
    tiling.tile_tokens = 4;
    Tensor X = D.tokens("X", hidden, tiling.chunk_tokens);
    Dim o("o");
    Tensor b1("b1", {{o, ff}});
    BsrMatrix W1("W1", ff, hidden, 16, 8, BlockOrder::ColumnMajor), W2("W2", hidden, ff, 8, 16);
    BsrLinear l1(
        "H", D, W1, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, b1, true, tiling);
    BsrLinear l2(
        "Y", D, W2, [&](Expr b, Expr s, Expr k) { return l1.Y(b, s, k); }, std::nullopt, false, tiling);
    Pipeline pipe({l2.Y}, "pruned_ff");
    Kernel kernel = pipe.compile();
    std::mt19937 rng(11);
    BsrData w1 = BsrData::from_block_mask(random_dense(ff, hidden, rng), ff, hidden, 16, 8,
                                          block_mask(Pattern::Random, ff / 16, hidden / 8, rng));
    BsrData w2 = BsrData::from_block_mask(random_dense(hidden, ff, rng), hidden, ff, 8, 16,
                                          block_mask(Pattern::EmptyRows, hidden / 8, ff / 16, rng));
    std::vector<float> bias((size_t)ff);
    for (float &x : bias)
        x = (float)(rng() % 100) / 100.0f - 0.5f;
    for (const auto &lengths : testing::length_cases((int32_t)max_len, 8, 5, 2)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(D.B, (int64_t)lengths.size()).set(D.len, lengths);
        w1.bind(shape, W1);
        w2.bind(shape, W2);
        Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(l2.Y, shape);
        testing::fill_random(x, 99);
        Buffer c1 = w1.col_buffer(W1, shape), v1 = w1.values_buffer(W1, shape);
        Buffer c2 = w2.col_buffer(W2, shape), v2 = w2.values_buffer(W2, shape);
        Buffer bb = Buffer::view(b1, shape, bias.data(), ff);
        kernel.run(shape, {{X, x}, {W1.col, c1}, {W1.values, v1}, {b1, bb}, {W2.col, c2}, {W2.values, v2}, {l2.Y, y}});
        std::vector<double> xv = testing::logical_values(x, X, shape);
        int64_t tokens = (int64_t)xv.size() / hidden;
        std::vector<double> h = dense_linear(xv, tokens, w1.to_dense(), ff, hidden, &bias, true);
        testing::require_close(y, l2.Y, shape, dense_linear(h, tokens, w2.to_dense(), hidden, ff, nullptr, false));
    }
}

TEST_CASE("block-sparse linear layers on the GPU: emulated and as CUDA on CPU threads", "[sparse][gpu]") {
    // BsrTiling::for_gpu(): a block per (block row, 32 tokens), a thread per (row, token) summing
    // over the block row's present blocks. Block rows of 1 (CSR), 8, 16 and 32; 64 (threads over
    // every 32nd row); row- and column-major blocks; lengths up to 40 around the 32-token chunk.
    const int64_t max_len = 40;
    std::mt19937 rng(2027);
    SECTION("block shapes x patterns against the reference and the dense product") {
        for (BlockShape bs :
             {BlockShape{8, 8}, BlockShape{16, 4}, BlockShape{32, 32}, BlockShape{64, 16}, BlockShape{1, 8}}) {
            const int64_t rows = std::max<int64_t>(64, bs.rows), cols = 64;
            const BlockOrder order = bs.rows == 16 ? BlockOrder::RowMajor : BlockOrder::ColumnMajor;
            // Emulated and on CPU threads (kernels 0 and 1), against one reference per batch.
            INFO("blocks " << bs.rows << "x" << bs.cols);
            TokenDims D(max_len);
            BsrTiling tiling = BsrTiling::for_gpu();
            Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
            Dim o("o");
            Tensor bias("bias", {{o, rows}});
            BsrMatrix W("W", rows, cols, bs.rows, bs.cols, order);
            BsrLinear lin(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, bias, true, tiling);
            Pipeline pipe({lin.Y}, "bsr_linear_gpu");
            const Kernel emulated = pipe.compile("cuda-emulated"), on_threads = pipe.compile("cuda-cpu-threads");
            for (Pattern p : {Pattern::None, Pattern::All, Pattern::EmptyRows, Pattern::Random}) {
                INFO(pattern_name(p));
                BsrData w = BsrData::from_block_mask(random_dense(rows, cols, rng), rows, cols, bs.rows, bs.cols,
                                                     block_mask(p, rows / bs.rows, cols / bs.cols, rng));
                check_bsr_linear({&emulated, &on_threads}, pipe, D, X, W, lin.Y, w, bias, true, (int32_t)max_len, rng);
            }
        }
    }
    SECTION("NVRTC compiles it for sm_80 and sm_90") {
        TokenDims D(max_len);
        BsrTiling tiling = BsrTiling::for_gpu();
        Tensor X = D.tokens("X", 64, tiling.chunk_tokens);
        BsrMatrix W("W", 64, 64, 32, 32, BlockOrder::ColumnMajor);
        BsrLinear lin(
            "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
        testing::require_cuda_compiles(Pipeline({lin.Y}, "bsr_linear_gpu_nvrtc"));
    }
    SECTION("on CUDA, block columns are checked where they pass through the host") {
        // The CUDA entry gets device pointers; the runtime checks an index tensor's values on the
        // host buffers of Kernel::run and in DeviceBuffer::upload, and refuses device memory whose
        // values it has not seen (a view) or that were uploaded out of range.
        SmallBsrLayer layer(BsrTiling::for_gpu(), "bsr_gpu_checks", "cuda-cpu-threads", rng);
        Tensor &X = layer.X;
        BsrMatrix &W = layer.W;
        BsrLinear &lin = layer.lin;
        Kernel &kernel = layer.kernel;
        BsrData &w = layer.w;
        RaggedShape &shape = layer.shape;
        Buffer &x = layer.x, &y = layer.y;
        BsrData bad = w;
        bad.col[2] = 4;
        Buffer good_col = w.col_buffer(W, shape), col = bad.col_buffer(W, shape), values = w.values_buffer(W, shape);
        const std::string message = "index tensor 'W_col': element 2 (packed position) is 4, outside its declared "
                                    "range [0, 3]";
        REQUIRE_THROWS_WITH(kernel.run(shape, {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}}),
                            Catch::Contains(message));
        for (int64_t i = 0; i < y.size(); i++)
            REQUIRE(y.at(i) == 42.0f);
        // Device buffers.
        DeviceBuffer dx = kernel.alloc(X, shape), dcol = kernel.alloc(W.col, shape),
                     dvalues = kernel.alloc(W.values, shape), dy = kernel.alloc(lin.Y, shape);
        dx.upload(x);
        dvalues.upload(values);
        REQUIRE_THROWS_WITH(dcol.upload(col), Catch::Contains(message));
        dcol.upload(good_col);
        kernel.run(shape, {{X, dx}, {W.col, dcol}, {W.values, dvalues}, {lin.Y, dy}});
        Buffer from_device = Buffer::alloc(lin.Y, shape), from_host = Buffer::alloc(lin.Y, shape);
        dy.download(from_device);
        kernel.run(shape, {{X, x}, {W.col, good_col}, {W.values, values}, {lin.Y, from_host}});
        for (int64_t i = 0; i < y.size(); i++)
            REQUIRE(from_device.at(i) == from_host.at(i));
        // An index tensor's memory bound as an output of the same run: refused.
        REQUIRE_THROWS_WITH(kernel.run(shape, {{X, dx}, {W.col, dcol}, {W.values, dvalues}, {lin.Y, dcol}}),
                            Catch::Contains("index tensor 'W_col': its device memory is also bound as an output"));
        // A view of device memory: cora never saw its values.
        std::vector<int32_t> device_cols(good_col.data<int32_t>(), good_col.data<int32_t>() + good_col.size());
        DeviceBuffer viewed = kernel.view(W.col, shape, device_cols.data(), (int64_t)device_cols.size());
        REQUIRE_THROWS_WITH(kernel.run(shape, {{X, dx}, {W.col, viewed}, {W.values, dvalues}, {lin.Y, dy}}),
                            Catch::Contains("index tensor 'W_col': cora has not seen the values of its device "
                                            "buffer (a view of device memory, or written on the device)"));
    }
    SECTION("chunks of more than 32 tokens are a compile error") {
        TokenDims D(max_len);
        BsrTiling tiling = BsrTiling::for_gpu();
        tiling.chunk_tokens = 48;
        Tensor X = D.tokens("X", 64, tiling.chunk_tokens);
        BsrMatrix W("W", 64, 64, 32, 32);
        REQUIRE_THROWS_WITH(
            BsrLinear(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling),
            Catch::Contains("BsrLinear GPU schedule: chunk_tokens must be at most 32, got 48"));
    }
}

namespace {
/** A BsrTiling::for_matrix choice (tokens, vector rows, chunk), printed with the matrix it is for
 * when a check fails. */
struct ExpectedTile {
    int64_t rows = 0, cols = 0, br = 0;
    int bits = 0;
    int64_t tokens, vector_rows, chunk;
    ExpectedTile(int64_t rows_, int64_t cols_, int64_t br_, int bits_, int64_t tokens_, int64_t vector_rows_,
                 int64_t chunk_)
        : rows(rows_), cols(cols_), br(br_), bits(bits_), tokens(tokens_), vector_rows(vector_rows_), chunk(chunk_) {}
    ExpectedTile(int64_t tokens_, int64_t vector_rows_, int64_t chunk_)
        : tokens(tokens_), vector_rows(vector_rows_), chunk(chunk_) {}
    bool operator==(const ExpectedTile &o) const {
        return tokens == o.tokens && vector_rows == o.vector_rows && chunk == o.chunk;
    }
};
std::ostream &operator<<(std::ostream &os, const ExpectedTile &t) {
    if (t.rows > 0) os << t.rows << "x" << t.cols << " in " << t.br << "-row blocks, " << t.bits << "-bit vectors: ";
    return os << t.tokens << " tokens x " << t.vector_rows << " rows, chunk " << t.chunk;
}
} // namespace

TEST_CASE("BsrTiling::for_matrix picks the register tile by block rows, vector width and X's row stride; a "
          "chunk that is not a multiple of the tile is a compile error",
          "[sparse][errors]") {
    // cora::bsr_register_tile: up to two registers of a block's rows; 12-token tiles where that
    // vector fills at most one register and X's rows (K floats) are not a multiple of 4 KB apart,
    // in 24-token chunks; else 6 (two registers per token, X rows 4 KB-aliased, weights over 16 MB
    // with their 192-token chunks, element-sparse rows).
    auto tile_of = [](int64_t rows, int64_t cols, int64_t br, int64_t bc, int bits) {
        const BsrTiling t = BsrTiling::for_matrix(BsrMatrix("W", rows, cols, br, bc), bits);
        return ExpectedTile{rows, cols, br, bits, t.tile_tokens, t.vector_rows, t.chunk_tokens};
    };
    REQUIRE(tile_of(768, 768, 8, 8, 512) == ExpectedTile{12, 8, 24});
    REQUIRE(tile_of(768, 3072, 8, 8, 512) == ExpectedTile{6, 8, 24});    // X rows 12 KB apart
    REQUIRE(tile_of(768, 768, 8, 8, 256) == ExpectedTile{12, 8, 24});    // one register, 3 KB rows
    REQUIRE(tile_of(768, 1024, 8, 8, 256) == ExpectedTile{6, 8, 24});    // one register, 4 KB rows
    REQUIRE(tile_of(768, 768, 16, 16, 512) == ExpectedTile{12, 16, 24}); // one register, 3 KB rows
    REQUIRE(tile_of(768, 3072, 16, 16, 512) == ExpectedTile{6, 16, 24}); // one register, 12 KB rows
    REQUIRE(tile_of(768, 768, 16, 16, 256) == ExpectedTile{6, 16, 24});  // two registers
    REQUIRE(tile_of(768, 768, 4, 8, 256) == ExpectedTile{12, 4, 24});
    REQUIRE(tile_of(768, 768, 4, 8, 128) == ExpectedTile{12, 4, 24});
    REQUIRE(tile_of(768, 768, 32, 32, 512) == ExpectedTile{6, 32, 24}); // two registers: the whole block row
    REQUIRE(tile_of(768, 768, 32, 32, 256) == ExpectedTile{6, 16, 24});
    REQUIRE(tile_of(768, 768, 32, 32, 128) == ExpectedTile{6, 8, 24});
    REQUIRE(tile_of(768, 768, 48, 16, 512) == ExpectedTile{12, 16, 24}); // two registers do not divide 48
    REQUIRE(tile_of(768, 768, 24, 8, 512) == ExpectedTile{6, 24, 24});   // 1.5 registers
    REQUIRE(tile_of(4096, 4096, 8, 8, 512) == ExpectedTile{6, 8, 192});
    REQUIRE(tile_of(4096, 4096, 32, 32, 512) == ExpectedTile{6, 32, 192});
    REQUIRE(tile_of(768, 768, 1, 1, 512) == ExpectedTile{6, 1, 24});
    TokenDims D(40);
    BsrMatrix W("W", 64, 64, 8, 8);
    for (auto [chunk, tile] : {std::pair<int64_t, int64_t>{30, 12}, {24, 0}}) {
        BsrTiling tiling = BsrTiling::for_matrix(W, 512);
        tiling.chunk_tokens = chunk;
        tiling.tile_tokens = tile;
        Tensor X = D.tokens("X", 64, std::max<int64_t>(chunk, 1));
        REQUIRE_THROWS_WITH(
            BsrLinear(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling),
            Catch::Contains("BsrLinear schedule: chunk_tokens (" + std::to_string(chunk) +
                            ") must be a multiple of tile_tokens (" + std::to_string(tile) + ")"));
    }
}

TEST_CASE("random block patterns x random schedules agree with the reference", "[sparse][differential]") {
    std::mt19937 rng(77);
    const int64_t max_len = 30;
    for (int round = 0; round < 6; round++) {
        const int64_t br = int64_t{4} << (rng() % 3), bc = int64_t{4} << (rng() % 3); // 4, 8 or 16
        const int64_t rows = br * (1 + rng() % 4), cols = bc * (1 + rng() % 4);
        BsrTiling tiling;
        tiling.tile_tokens = 1 + rng() % 6;
        tiling.chunk_tokens = tiling.tile_tokens * (1 + rng() % 4);
        tiling.vector_rows = int64_t{4} << (rng() % 3);
        tiling.unroll_block_cols = (int)(rng() % 3) - 1;
        bool scheduled = rng() % 4 != 0;
        INFO("round " << round << ": W " << rows << "x" << cols << " in " << br << "x" << bc << " blocks; "
                      << (scheduled ? "" : "default schedule; ") << "tile " << tiling.tile_tokens << " tokens x "
                      << tiling.vector_rows << " rows, chunk " << tiling.chunk_tokens << ", unroll "
                      << tiling.unroll_block_cols);
        TokenDims D(max_len);
        Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
        BsrMatrix W("W", rows, cols, br, bc, rng() % 2 ? BlockOrder::RowMajor : BlockOrder::ColumnMajor);
        std::optional<BsrLinear> lin;
        Func unscheduled("Y", {{D.b, D.B}, {D.s, D.len(D.b)}, {Dim("n"), rows}});
        Pipeline pipe = [&] {
            if (scheduled) {
                lin.emplace(
                    "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
                return Pipeline({lin->Y}, "bsr_random");
            }
            Dim k("k");
            unscheduled.compute(
                [&](Expr b, Expr s, Expr n) { return W.row_times(k, n, [&](Expr kk) { return X(b, s, kk); }); });
            return Pipeline({unscheduled}, "bsr_default");
        }();
        Func Y = scheduled ? lin->Y : unscheduled;
        Kernel kernel = pipe.compile();
        BsrData w = BsrData::from_block_mask(random_dense(rows, cols, rng), rows, cols, br, bc,
                                             block_mask(Pattern::Random, rows / br, cols / bc, rng));
        for (const auto &lengths : testing::length_cases((int32_t)max_len, (int32_t)tiling.chunk_tokens, rng(), 1)) {
            INFO(testing::describe(lengths));
            RaggedShape shape;
            shape.set(D.B, (int64_t)lengths.size()).set(D.len, lengths);
            w.bind(shape, W);
            Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(Y, shape);
            testing::fill_random(x, (uint32_t)rng());
            Buffer col = w.col_buffer(W, shape), values = w.values_buffer(W, shape);
            kernel.run(shape, {{X, x}, {W.col, col}, {W.values, values}, {Y, y}});
            testing::require_close(y, Y, shape,
                                   reference_evaluate(pipe, shape, {{X, &x}, {W.col, &col}, {W.values, &values}})[0]);
        }
    }
}

TEST_CASE("a block-sparse kernel checks its metadata on every call and writes nothing on error", "[sparse][error]") {
    BsrTiling tiling;
    tiling.chunk_tokens = 8;
    tiling.tile_tokens = 4;
    std::mt19937 rng(5);
    SmallBsrLayer layer(tiling, "bsr_checks", "cpu", rng);
    TokenDims &D = layer.D;
    Tensor &X = layer.X;
    BsrMatrix &W = layer.W;
    BsrLinear &lin = layer.lin;
    Kernel &kernel = layer.kernel;
    BsrData &w = layer.w;
    RaggedShape &shape = layer.shape;
    Buffer &x = layer.x, &y = layer.y;
    auto unchanged = [&] {
        for (int64_t i = 0; i < y.size(); i++)
            if (y.at(i) != 42.0f) return false;
        return true;
    };
    // A column index out of range (the kernel would read past X's row).
    BsrData bad = w;
    bad.col[2] = 4;
    Buffer col = bad.col_buffer(W, shape), values = bad.values_buffer(W, shape);
    REQUIRE_THROWS_WITH(kernel.run(shape, {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}}),
                        Catch::Contains("index tensor 'W_col': element 2 (packed position) is 4, outside its declared "
                                        "range [0, 3]"));
    REQUIRE(unchanged());
    // Arrays whose block count disagrees with the shape's (crow says 4 blocks).
    Buffer short_col(Int32, 3);
    REQUIRE_THROWS_WITH(kernel.run(shape, {{X, x}, {W.col, short_col}, {W.values, values}, {lin.Y, y}}),
                        Catch::Contains("buffer for tensor 'W_col' has 3 elements, expected 4"));
    Buffer short_values(Float32, 4 * 64 - 1);
    Buffer good_col = w.col_buffer(W, shape);
    REQUIRE_THROWS_WITH(kernel.run(shape, {{X, x}, {W.col, good_col}, {W.values, short_values}, {lin.Y, y}}),
                        Catch::Contains("buffer for tensor 'W_values' has 255 elements, expected 256"));
    REQUIRE(unchanged());
    // A block count above the block columns (a crow step of 5 with 4 block columns).
    RaggedShape too_many;
    too_many.set(D.B, 2).set(D.len, {5, 9});
    REQUIRE_THROWS_WITH(too_many.set_offsets(W.blocks_per_row, std::vector<int32_t>{0, 5, 5}),
                        Catch::Contains("W_blocks"));
    REQUIRE_THROWS_WITH(too_many.set_offsets(W.blocks_per_row, std::vector<int32_t>{0, 3, 2}),
                        Catch::Contains("W_blocks"));
}

TEST_CASE("decompose_blocks splits a weight into whole blocks plus its other non-zeros", "[sparse][decompose]") {
    std::mt19937 rng(31);
    const int64_t rows = 32, cols = 48, br = 8, bc = 8;
    // Block (r, c) has about (r * 6 + c) % 9 / 8 of its elements non-zero: fills from 0 to 1.
    std::vector<float> dense((size_t)(rows * cols), 0.0f);
    std::vector<int64_t> fill((size_t)(rows / br * (cols / bc)), 0);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t blk = i / br * (cols / bc) + j / bc;
            if ((int64_t)(rng() % 8) < blk * 5 % 9) {
                dense[(size_t)(i * cols + j)] = (float)(rng() % 100) / 50.0f - 1.0f + 0.01f;
                fill[(size_t)blk]++;
            }
        }
    for (double min_fill : {0.0, 0.15, 0.5, 1.0}) {
        INFO("min_fill " << min_fill);
        BsrDecomposition d = decompose_blocks(dense, rows, cols, br, bc, min_fill);
        d.blocks.validate();
        d.elements.validate();
        REQUIRE(d.elements.block_rows == 1);
        REQUIRE(d.elements.block_cols == 1);
        std::vector<float> a = d.blocks.to_dense(), b = d.elements.to_dense();
        for (size_t i = 0; i < dense.size(); i++) {
            REQUIRE(a[i] + b[i] == dense[i]);
            REQUIRE((a[i] == 0.0f || b[i] == 0.0f)); // every non-zero in exactly one part
        }
        int64_t expected_blocks = 0;
        for (int64_t f : fill)
            expected_blocks += f > 0 && (double)f >= min_fill * (double)(br * bc);
        REQUIRE(d.blocks.nnzb() == expected_blocks);
        if (min_fill == 0.0) REQUIRE(d.elements.nnzb() == 0);
    }
    REQUIRE_THROWS_WITH(decompose_blocks(dense, rows, cols, br, bc, 1.5),
                        Catch::Contains("min_fill 1.5 is outside [0, 1]"));
    REQUIRE_THROWS_WITH(decompose_blocks(dense, rows, cols, 7, bc),
                        Catch::Contains("does not divide the matrix 32 x 48"));
}

TEST_CASE("a decomposed weight (blocks + element remainder) computes the whole product", "[sparse][decompose]") {
    const int64_t rows = 32, cols = 48, max_len = 20;
    std::mt19937 rng(8);
    std::vector<float> dense((size_t)(rows * cols), 0.0f);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            bool dense_block = (i / 8 + j / 8) % 3 == 0; // whole blocks, plus scattered elements
            if (dense_block || rng() % 16 == 0) dense[(size_t)(i * cols + j)] = (float)(rng() % 100) / 50.0f - 0.99f;
        }
    BsrDecomposition d = decompose_blocks(dense, rows, cols, 8, 8, 0.5);
    REQUIRE(d.blocks.nnzb() > 0);
    REQUIRE(d.elements.nnzb() > 0);
    TokenDims D(max_len);
    BsrTiling tiling;
    tiling.chunk_tokens = 8;
    tiling.tile_tokens = 4;
    tiling.vector_rows = 8;
    Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
    Dim o("o");
    Tensor bias("bias", {{o, rows}});
    BsrMatrix W("W", rows, cols, 8, 8, BlockOrder::ColumnMajor), E("E", rows, cols, 1, 1);
    BsrLinear lin(
        "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, bias, true, tiling, &E);
    Pipeline pipe({lin.Y}, "bsr_decomposed");
    Kernel kernel = pipe.compile();
    std::vector<float> bias_values((size_t)rows);
    for (float &x : bias_values)
        x = (float)(rng() % 100) / 100.0f - 0.5f;
    for (const auto &lengths : testing::length_cases((int32_t)max_len, 8, 12, 2)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(D.B, (int64_t)lengths.size()).set(D.len, lengths);
        d.blocks.bind(shape, W);
        d.elements.bind(shape, E);
        Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(lin.Y, shape);
        testing::fill_random(x, 4);
        Buffer cw = d.blocks.col_buffer(W, shape), vw = d.blocks.values_buffer(W, shape);
        Buffer ce = d.elements.col_buffer(E, shape), ve = d.elements.values_buffer(E, shape);
        Buffer bb = Buffer::view(bias, shape, bias_values.data(), rows);
        kernel.run(shape, {{X, x}, {W.col, cw}, {W.values, vw}, {E.col, ce}, {E.values, ve}, {bias, bb}, {lin.Y, y}});
        std::vector<double> xv = testing::logical_values(x, X, shape);
        testing::require_close(y, lin.Y, shape,
                               dense_linear(xv, (int64_t)xv.size() / cols, dense, rows, cols, &bias_values, true));
    }
    BsrMatrix wrong("Wrong", rows, cols + 8, 1, 1);
    REQUIRE_THROWS_WITH(
        BsrLinear(
            "Z", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling, &wrong),
        Catch::Contains("the element part 'Wrong' must have the block part's size 32 x 48"));
}

TEST_CASE("a 3x3 convolution with a block-sparse weight matches a dense convolution", "[sparse][conv]") {
    using cora::apps::BsrConv3x3;
    using cora::apps::conv_weight_matrix;
    const int64_t H = 4, Wd = 10, cin = 16, cout = 32;
    std::mt19937 rng(13);
    for (auto [br, bc] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {16, 4}, {32, 16}}) {
        for (Pattern p : {Pattern::None, Pattern::All, Pattern::EmptyRows, Pattern::Random}) {
            INFO("sub-volumes " << br << " x 3 x 3 x " << bc << ", " << pattern_name(p));
            Param N("N", 1, 8);
            Dim n("n"), y("y"), x("x"), c("c");
            Tensor X("X", {{n, N}, {y, H + 2}, {x, Wd + 2}, {c, cin}});
            BsrMatrix Wm("W", cout, 9 * cin, br, 9 * bc, BlockOrder::ColumnMajor);
            BsrConv3x3 conv("Y", X, N, H, Wd, Wm, 5);
            Pipeline pipe({conv.Y}, "bsr_conv");
            Kernel kernel = pipe.compile();
            std::vector<float> w = random_dense(cout, 9 * cin, rng); // [cout, 3, 3, cin]
            BsrData wd = BsrData::from_block_mask(conv_weight_matrix(w, cout, cin, bc), cout, 9 * cin, br, 9 * bc,
                                                  block_mask(p, cout / br, cin / bc, rng));
            std::vector<float> kept = wd.to_dense(); // the matrix layout, zero where no sub-volume
            for (int64_t batch : {1, 2}) {
                RaggedShape shape;
                shape.set(N, batch);
                wd.bind(shape, Wm);
                Buffer xb = Buffer::alloc(X, shape), yb = Buffer::alloc(conv.Y, shape);
                testing::fill_random(xb, (uint32_t)rng());
                Buffer col = wd.col_buffer(Wm, shape), values = wd.values_buffer(Wm, shape);
                kernel.run(shape, {{X, xb}, {Wm.col, col}, {Wm.values, values}, {conv.Y, yb}});
                std::vector<double> ref((size_t)yb.size());
                for (int64_t b = 0; b < batch; b++)
                    for (int64_t i = 0; i < H; i++)
                        for (int64_t j = 0; j < Wd; j++)
                            for (int64_t o = 0; o < cout; o++) {
                                double acc = 0;
                                for (int64_t t = 0; t < 9; t++)
                                    for (int64_t ci = 0; ci < cin; ci++)
                                        acc += (double)xb.at(((b * (H + 2) + i + t / 3) * (Wd + 2) + j + t % 3) * cin +
                                                             ci) *
                                               kept[(size_t)(o * 9 * cin + ci / bc * 9 * bc + t * bc + ci % bc)];
                                ref[(size_t)(((b * H + i) * Wd + j) * cout + o)] = acc;
                            }
                testing::require_close(yb, ref);
            }
        }
    }
    Param N("N", 1, 8);
    Dim n("n"), y("y"), x("x"), c("c");
    Tensor X("X", {{n, N}, {y, 6}, {x, 12}, {c, 16}});
    BsrMatrix bad("Bad", 32, 144, 8, 16);
    REQUIRE_THROWS_WITH(BsrConv3x3("Y", X, N, 4, 10, bad), Catch::Contains("must be 9 x the input-channel block"));
    BsrMatrix good("Good", 32, 144, 8, 72);
    REQUIRE_THROWS_WITH(BsrConv3x3("Y", X, N, 4, 10, good, 3),
                        Catch::Contains("tile_pixels 3 must divide the width 10"));
}

TEST_CASE("default schedule: a block-sparse product left unscheduled gets the recipe's register tiles, "
          "the user's buffers unpadded",
          "[sparse][default_schedule]") {
    // Y = relu(X W^T + bias) written with row_times and no schedule call (the new user's program):
    // column-major blocks get chunks x token tiles x a vector of a block's rows, the register tile
    // of cora::bsr_register_tile (up to two registers of rows; 12 tokens where that vector fills
    // at most one register and X's rows are not a multiple of 4 KB apart, else 6), the token
    // tiles specialised (a copy without the tail's guard); row-major blocks
    // (PyTorch's order: a block's rows strided) 6-token tiles of 16 rows (8 with 128-bit vectors)
    // with the block loop outside them (in groups of 128-256 columns) and each block's rows read
    // by the tile (all 32 with 512-bit vectors) copied into a transposed tile once per 192-token
    // chunk, the tile's sums kept in registers across a group's blocks; blocks of fewer than 4 rows
    // keep the plain nest. The buffers keep their packed size (no pad rows), and every case
    // matches the reference on the edge-case batches and block patterns.
    struct Case {
        int64_t rows, cols, br, bc;
        BlockOrder order;
        int bits;
        std::string vector_loop; ///< empty: no tile expected
        int64_t tile_tokens = 6;
        int64_t pad_cols = 0;       ///< > 0: X's rows padded to a multiple of this (pad_storage)
        bool packed_tokens = false; ///< X's tokens packed (fuse_storage(b, s, tok)): rows as declared
    };
    const BlockOrder CM = BlockOrder::ColumnMajor, RM = BlockOrder::RowMajor;
    const std::vector<Case> cases = {
        {64, 96, 32, 32, CM, 512, "vectorized for n_r in [0, 0 + 32)"},
        {32, 40, 8, 8, CM, 512, "vectorized for n_r in [0, 0 + 8)", 12},
        {64, 96, 32, 32, RM, 512, "vectorized for n_r_i in [0, 0 + 16)"},
        {64, 96, 32, 32, CM, 128, "vectorized for n_r_i in [0, 0 + 8)"},
        {48, 64, 16, 16, CM, 256, "vectorized for n_r in [0, 0 + 16)"},
        {32, 40, 8, 8, RM, 512, "vectorized for n_r in [0, 0 + 8)"},
        {24, 16, 4, 8, CM, 512, "vectorized for n_r in [0, 0 + 4)", 12},
        {24, 16, 4, 8, CM, 256, "vectorized for n_r in [0, 0 + 4)", 12},
        {48, 64, 16, 16, RM, 256, "vectorized for n_r in [0, 0 + 16)"},
        {64, 96, 32, 32, RM, 256, "vectorized for n_r_i in [0, 0 + 16)"},
        {24, 24, 2, 2, CM, 512, ""},
        {24, 24, 2, 2, RM, 512, ""},
        {48, 64, 16, 16, CM, 512, "vectorized for n_r in [0, 0 + 16)", 12}, // one register, X rows 256 B apart
        {32, 1024, 16, 16, CM, 512, "vectorized for n_r in [0, 0 + 16)"},   // one register, X rows 4 KB apart
        {32, 40, 8, 8, CM, 256, "vectorized for n_r in [0, 0 + 8)", 12},
        {16, 2048, 8, 8, CM, 512, "vectorized for n_r in [0, 0 + 8)"},            // X rows 8 KB apart
        {96, 64, 48, 16, CM, 512, "vectorized for n_r_i in [0, 0 + 16)", 12},     // 2 registers do not divide 48
        {48, 64, 24, 16, CM, 512, "vectorized for n_r in [0, 0 + 24)"},           // 1.5 registers
        {16, 1000, 8, 8, CM, 512, "vectorized for n_r in [0, 0 + 8)", 6, 1024},   // 4,000 B rows padded to 4 KB
        {32, 40, 8, 8, CM, 512, "vectorized for n_r in [0, 0 + 8)", 12, 0, true}, // packed tokens, 160 B rows
    };
    std::mt19937 rng(41);
    // Each case is a kernel compiled: the stages that re-run the suite at a share of the cost
    // (CORA_TEST_RANDOM_SCHEDULES) take the first cases, the 512-bit tiles (6- and 12-token) among them.
    const size_t share = (size_t)testing::scaled_trials((int)cases.size());
    for (size_t ci = 0; ci < share; ci++) {
        const Case &c = cases[ci];
        DYNAMIC_SECTION(c.rows << "x" << c.cols << " in " << c.br << "x" << c.bc << " blocks, "
                               << (c.order == CM ? "column" : "row") << "-major, " << c.bits << "-bit vectors"
                               << (c.pad_cols > 0 ? ", X rows padded to " + std::to_string(c.pad_cols) : "")
                               << (c.packed_tokens ? ", X tokens packed" : "")) {
            Dim b("b"), s("s"), f("f"), n("n"), k("k"), tok("tok");
            Param B("B", 1, 64);
            LengthArray len("len", B, 0, 40);
            Tensor X("X", {{b, B}, {s, len(b)}, {f, c.cols}}), bias("bias", {{n, c.rows}});
            if (c.pad_cols > 0) X.pad_storage(f, c.pad_cols);
            if (c.packed_tokens) X.fuse_storage(b, s, tok);
            BsrMatrix W("W", c.rows, c.cols, c.br, c.bc, c.order);
            Func Y("Y", {{b, B}, {s, len(b)}, {n, c.rows}});
            Y.compute([&](Expr bi, Expr si, Expr ni) {
                return max(W.row_times(k, ni, [&](Expr kk) { return X(bi, si, kk); }) + bias(ni), 0.0f);
            });
            Pipeline p({Y}, "bsr_default_tiles");
            CompileOptions o;
            o.vector_bits = c.bits;
            Kernel kernel = p.compile(o);
            const std::string ir = kernel.lowered();
            INFO(ir);
            const bool tiled = !c.vector_loop.empty();
            REQUIRE((testing::count_occurrences(ir, "Y_tile[") > 0) == tiled);
            if (tiled) {
                REQUIRE_THAT(ir, Catch::Contains(c.vector_loop));
                // The tile's three nests (initialise, accumulate, write back), each twice: in the
                // copy for whole tiles and in the guarded one. Row-major blocks: the block loop
                // runs outside the token tiles, so the tile loads its partial sums (three nests),
                // Y is zeroed before the blocks and the epilogue runs after them (two more, twice),
                // and each block's rows read by the tile are copied once per chunk, transposed.
                REQUIRE(testing::count_occurrences(ir, "unrolled for b_s_t_i in") == (c.order == CM ? 6 : 10));
                REQUIRE_THAT(ir,
                             Catch::Contains("unrolled for b_s_t_i in [0, 0 + " + std::to_string(c.tile_tokens) + ")"));
                const size_t copy = ir.find("allocate on stack W_values_cache[");
                REQUIRE((copy != std::string::npos) == (c.order == RM));
                // With 512-bit vectors a 32-row block's two vectors are both in the tile (unrolled).
                REQUIRE((ir.find("unrolled for n_r_o in") != std::string::npos) ==
                        (c.order == RM && c.br == 32 && c.bits == 512));
                if (c.order == RM) {
                    // The copy's innermost loop runs over the block's rows (the tile's unit stride),
                    // in 16 x 16 blocks where the tile has 16 or 32 rows and the block 16 or 32
                    // columns.
                    const size_t store = ir.find("W_values_cache[", copy + 20);
                    const size_t innermost = ir.rfind("for W_values_W_", store);
                    REQUIRE(copy < innermost);
                    REQUIRE(ir.compare(innermost, 18, "for W_values_W_r_c") == 0);
                    REQUIRE((ir.find("for W_values_W_r_ci in") != std::string::npos) == (c.br >= 16));
                    // The blocks are copied in groups (k_o_g: 4 blocks of 32 columns, 16 of 16, 32
                    // of 8), the tile staying in registers across a group's blocks (k_o_j, inside
                    // the tile loop).
                    REQUIRE(ir.find("for k_o_g in") < innermost);
                    const size_t tile_loop = ir.find("for b_s_t_o in", copy);
                    REQUIRE(copy < tile_loop);
                    REQUIRE(ir.find("for k_o_j in", tile_loop) != std::string::npos);
                }
                REQUIRE((ir.find("unrolled for k_i in") != std::string::npos) == (c.bc <= 8));
            }
            for (Pattern pattern : {Pattern::None, Pattern::All, Pattern::EmptyRows, Pattern::Random}) {
                BsrData w = BsrData::from_block_mask(random_dense(c.rows, c.cols, rng), c.rows, c.cols, c.br, c.bc,
                                                     block_mask(pattern, c.rows / c.br, c.cols / c.bc, rng));
                for (const auto &lengths : length_cases(40, 24, (uint32_t)rng(), 1)) {
                    INFO(pattern_name(pattern) << "; " << describe(lengths));
                    RaggedShape shape;
                    shape.set(B, (int64_t)lengths.size()).set(len, lengths);
                    w.bind(shape, W);
                    int64_t tokens = 0;
                    for (int32_t l : lengths)
                        tokens += l;
                    Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(Y, shape), bv = Buffer::alloc(bias, shape);
                    REQUIRE(y.size() == tokens * c.rows); // packed, as declared: no pad rows
                    fill_random(x, (uint32_t)rng());
                    fill_random(bv, (uint32_t)rng());
                    Buffer col = w.col_buffer(W, shape), values = w.values_buffer(W, shape);
                    kernel.run(shape, {{X, x}, {bias, bv}, {W.col, col}, {W.values, values}, {Y, y}});
                    require_close(
                        y, Y, shape,
                        reference_evaluate(p, shape, {{X, &x}, {bias, &bv}, {W.col, &col}, {W.values, &values}})[0]);
                }
            }
        }
    }
}
