// Static sparsity patterns (a BsrMatrix declared with its pattern, LengthArray::constant,
// Tensor::index_values) and dismantled loops (Func::dismantle, lower/DismantleLoops.cpp): the
// specialised kernels against the reference and a dense product with the zero blocks
// materialised, on the edge cases (no block, all blocks, one per row, empty rows, random; 1x1
// element blocks; token counts 0, 1, a chunk and one past, a batch of one); the pattern in the code
// (no column loads in the loops, no code for absent blocks); a pattern other than the compiled one
// rejected at bind and at every call with nothing written; the declaration and schedule errors.
#include "common/block_sparse_testing.h"
#include "common/ragged_testing.h"
#include "driver/Compiler.h"
#include "sparse/bsr_linear.h"

#include <random>

using namespace cora;
using cora::apps::BsrLinear;
using cora::apps::BsrTiling;
using cora::apps::TokenDims;
using namespace cora::testing;

namespace {

/** The generated code after the last argument check: the computation. */
std::string compute_part(const Kernel &k) {
    const std::string &src = k.source();
    size_t at = src.rfind("return 1;");
    return at == std::string::npos ? std::string() : src.substr(at);
}

size_t count(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
        n++;
    return n;
}

/** Small tiles (8-token chunks of 4-token tiles) for the small matrices of these tests. */
BsrTiling small_tiling(bool dismantle) {
    BsrTiling t;
    t.chunk_tokens = 8;
    t.tile_tokens = 4;
    t.dismantle = dismantle;
    return t;
}

} // namespace

TEST_CASE("a static pattern specialises a block-sparse kernel: no index loads, absent blocks leave no code",
          "[sparse][static]") {
    const int64_t rows = 32, cols = 48, max_len = 30;
    std::mt19937 rng(11);
    // A dismantled kernel is long straight-line code (up to 400 KB of C++ here): clang compiles it
    // in 1-2 s, but 30-60x slower with ASan and UBSan instrumentation, so the 19 kernels below
    // would take the sanitizer stage most of an hour. There, one pattern per block shape runs
    // (every block shape and every pattern but All, whose code is the longest, still appear); the
    // compiler passes are sanitized as fully as here, only fewer kernels are built.
    const bool sanitized = !driver::sanitizer_flags().empty();
    auto in_sanitized_subset = [](BlockShape bs, Pattern p) {
        if (bs.rows == 8) return p == Pattern::None || p == Pattern::Random;
        if (bs.rows == 4) return p == Pattern::OnePerRow;
        if (bs.rows == 16) return p == Pattern::EmptyRows;
        return p == Pattern::OnePerRow; // 1x1 elements
    };
    if (sanitized) WARN("sanitizer build: 5 of the 19 pattern and block-shape cases run");
    for (BlockShape bs : {BlockShape{8, 8}, BlockShape{4, 16}, BlockShape{16, 4}, BlockShape{1, 1}}) {
        for (Pattern p : {Pattern::None, Pattern::All, Pattern::OnePerRow, Pattern::EmptyRows, Pattern::Random}) {
            if (bs.rows == 1 && p == Pattern::All) continue; // 1536 element copies: the budget test's job
            if (sanitized && !in_sanitized_subset(bs, p)) continue;
            const bool with_bias = p == Pattern::Random || p == Pattern::EmptyRows;
            const BlockOrder order = bs.rows == 16 ? BlockOrder::RowMajor : BlockOrder::ColumnMajor;
            INFO("blocks " << bs.rows << "x" << bs.cols << ", " << pattern_name(p)
                           << (with_bias ? ", bias + ReLU" : ""));
            std::vector<float> dense = random_dense(rows, cols, rng);
            BsrData w = BsrData::from_block_mask(dense, rows, cols, bs.rows, bs.cols,
                                                 block_mask(p, rows / bs.rows, cols / bs.cols, rng));
            TokenDims D(max_len);
            BsrTiling tiling;
            tiling.chunk_tokens = 12;
            tiling.tile_tokens = 4;
            tiling.vector_rows = 8;
            tiling.dismantle = true;
            Tensor X = D.tokens("X", cols, tiling.chunk_tokens);
            Dim o("o");
            Tensor bias("bias", {{o, rows}});
            BsrMatrix W("W", w, order);
            REQUIRE(W.has_static_pattern());
            BsrLinear lin(
                "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); },
                with_bias ? std::optional<Tensor>(bias) : std::nullopt, with_bias, tiling);
            Pipeline pipe({lin.Y}, "static_bsr");
            Kernel kernel = pipe.compile();
            // The pattern is in the code: the loops read no column index and no block count, and
            // each present block's products appear once (none for an absent block).
            const std::string code = compute_part(kernel);
            REQUIRE(!code.empty());
            CHECK(count(code, "W_col_[") == 0);
            CHECK(count(code, "W_blocks_") == 0);
            if (w.nnzb() == 0)
                CHECK(count(code, "W_values_[") == 0);
            else
                CHECK(count(code, "W_values_[") % (size_t)w.nnzb() == 0);

            check_bsr_linear(kernel, pipe, D, X, W, lin.Y, w, with_bias ? std::optional<Tensor>(bias) : std::nullopt,
                             with_bias, (int32_t)max_len, rng);
        }
    }
}

TEST_CASE("a static pattern without dismantled loops runs the run-time kernel on checked metadata",
          "[sparse][static]") {
    std::mt19937 rng(3);
    BsrData w = BsrData::from_block_mask(random_dense(16, 32, rng), 16, 32, 8, 8, {1, 0, 1, 1, 0, 1, 0, 0});
    TokenDims D(20);
    BsrTiling tiling = small_tiling(false);
    Tensor X = D.tokens("X", 32, tiling.chunk_tokens);
    BsrMatrix W("W", w, BlockOrder::ColumnMajor);
    BsrLinear lin(
        "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
    Pipeline pipe({lin.Y}, "static_not_dismantled");
    Kernel kernel = pipe.compile();
    CHECK(count(compute_part(kernel), "W_col_[") > 0); // the loops read the (checked) indices
    RaggedShape shape;
    shape.set(D.B, 3).set(D.len, {7, 0, 20});
    w.bind(shape, W);
    Buffer x = Buffer::alloc(X, shape), y = Buffer::alloc(lin.Y, shape);
    testing::fill_random(x, 9);
    Buffer col = w.col_buffer(W, shape), values = w.values_buffer(W, shape);
    kernel.run(shape, {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}});
    testing::require_close(y, lin.Y, shape,
                           reference_evaluate(pipe, shape, {{X, &x}, {W.col, &col}, {W.values, &values}})[0]);
}

TEST_CASE("a kernel compiled for a static pattern rejects any other pattern and writes nothing",
          "[sparse][static][error]") {
    std::mt19937 rng(5);
    std::vector<float> dense = random_dense(16, 32, rng);
    BsrData w = BsrData::from_block_mask(dense, 16, 32, 8, 8, {1, 0, 1, 1, 0, 1, 0, 0});
    TokenDims D(16);
    BsrTiling tiling = small_tiling(true);
    Tensor X = D.tokens("X", 32, tiling.chunk_tokens);
    BsrMatrix W("W", w);
    BsrLinear lin(
        "Y", D, W, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
    Kernel kernel = Pipeline({lin.Y}, "static_checks").compile();
    // The arguments' descriptions (AOT headers print them) say the pattern is fixed.
    int described = 0;
    for (const KernelArgInfo &a : kernel.arguments())
        if (a.name == "W_col" || a.name == "W_blocks") {
            REQUIRE_THAT(a.layout, Catch::Contains("values fixed when compiling"));
            described++;
        }
    REQUIRE(described == 2);
    RaggedShape shape;
    shape.set(D.B, 2).set(D.len, {5, 9});
    Buffer x = Buffer::alloc(X, shape);
    testing::fill_random(x, 1);

    // bind() compares the data with the declared pattern, naming the first difference.
    BsrData other_counts = BsrData::from_block_mask(dense, 16, 32, 8, 8, {1, 1, 1, 1, 0, 1, 0, 0});
    RaggedShape s1 = shape;
    REQUIRE_THROWS_MATCHES(other_counts.bind(s1, W), RuntimeError,
                           Catch::Matchers::Message("BSR data for 'W': block row 0 has 4 blocks, but the matrix was "
                                                    "declared with a static pattern of 3 there; bind the pattern the "
                                                    "kernels were compiled for"));
    BsrData other_columns = BsrData::from_block_mask(dense, 16, 32, 8, 8, {1, 1, 0, 1, 0, 1, 0, 0});
    REQUIRE_THROWS_WITH(other_columns.bind(s1, W),
                        Catch::Contains("present block 1 is in block column 1, but the matrix was declared with a "
                                        "static pattern that has 2 there"));

    // The kernel itself checks on every call (a caller may bypass bind()): same counts, other columns.
    w.bind(shape, W);
    Buffer y = Buffer::alloc(lin.Y, shape);
    for (int64_t i = 0; i < y.size(); i++)
        y.at(i) = 42.0f;
    auto unchanged = [&] {
        for (int64_t i = 0; i < y.size(); i++)
            if (y.at(i) != 42.0f) return false;
        return true;
    };
    Buffer values = w.values_buffer(W, shape);
    BsrData moved = w;
    moved.col[1] = 1;
    Buffer moved_col = moved.col_buffer(W, shape);
    REQUIRE_THROWS_MATCHES(
        kernel.run(shape, {{X, x}, {W.col, moved_col}, {W.values, values}, {lin.Y, y}}), RuntimeError,
        Catch::Matchers::Message("kernel 'static_checks': index tensor 'W_col': element 1 is 1, but the kernel "
                                 "was compiled for the constant value 2 (a static pattern: pass the same values, or "
                                 "compile for run-time ones)"));
    REQUIRE(unchanged());
    // Other block counts through the shape (crow 0, 2, 4 instead of 0, 3, 4).
    RaggedShape counts = shape;
    counts.set_offsets(W.blocks_per_row, std::vector<int32_t>{0, 2, 4});
    Buffer col = w.col_buffer(W, counts);
    REQUIRE_THROWS_WITH(kernel.run(counts, {{X, x}, {W.col, col}, {W.values, values}, {lin.Y, y}}),
                        Catch::Contains("length array 'W_blocks': element 0 is 2, but the kernel was compiled for the "
                                        "constant value 3"));
    REQUIRE(unchanged());
}

TEST_CASE("static values and dismantled loops: declaration and schedule errors", "[sparse][static][error]") {
    std::mt19937 rng(7);
    // A constant length array checks its values against its declared range.
    REQUIRE_THROWS_MATCHES(LengthArray::constant("L", {1, 9, 2}, 0, 8), CompileError,
                           Catch::Matchers::Message("LengthArray 'L': constant value 9 at index 1 is outside its "
                                                    "declared range [0, 8]"));
    // index_values needs a declared range, and values inside it.
    Dim i("i");
    Tensor idx("idx", {{i, 3}}, Int32);
    REQUIRE_THROWS_WITH(idx.index_values({0, 1, 2}), Catch::Contains("declare the tensor's index_range first"));
    idx.index_range(0, 3);
    REQUIRE_THROWS_WITH(idx.index_values({0, 4, 2}),
                        Catch::Contains("value 4 at packed position 1 is outside its index_range [0, 3]"));
    // A static pattern that is not valid BSR is rejected when declared, naming the entry.
    BsrData bad = BsrData::from_block_mask(random_dense(16, 32, rng), 16, 32, 8, 8, {1, 0, 1, 1, 0, 1, 0, 0});
    bad.col[1] = 1; // block row 0: columns 0, 1 fine; make it decrease instead
    bad.col[0] = 3;
    REQUIRE_THROWS_MATCHES(BsrMatrix("W", bad), CompileError,
                           Catch::Matchers::Message("BsrMatrix 'W': its static pattern is not valid BSR: BSR data: "
                                                    "col[1] = 1 does not increase after col[0] = 3 within block row 0 "
                                                    "(a block listed twice or unsorted)"));

    // Dismantling a loop whose extent only the run-time pattern knows.
    TokenDims D(16);
    BsrTiling tiling = small_tiling(true);
    Tensor X = D.tokens("X", 32, tiling.chunk_tokens);
    BsrMatrix runtime_w("W", 16, 32, 8, 8);
    BsrLinear lin(
        "Y", D, runtime_w, [&](Expr b, Expr s, Expr k) { return X(b, s, k); }, std::nullopt, false, tiling);
    REQUIRE_THROWS_AS(Pipeline({lin.Y}, "dismantle_runtime").compile(), CompileError);
    REQUIRE_THROWS_WITH(Pipeline({lin.Y}, "dismantle_runtime").compile(),
                        Catch::Matchers::StartsWith("dismantle: loop 'ko' runs over W_blocks(0)") &&
                            Catch::Matchers::Contains("which is not known when compiling"));

    // More copies than the budget: element blocks (1x1) of a fully dense 64 x 64 pattern.
    std::vector<float> dense = random_dense(64, 64, rng);
    BsrData all = BsrData::from_dense(dense, 64, 64, 1, 1);
    TokenDims D2(16);
    Tensor X2 = D2.tokens("X", 64, tiling.chunk_tokens);
    BsrMatrix W2("W", all);
    BsrLinear big(
        "Y", D2, W2, [&](Expr b, Expr s, Expr k) { return X2(b, s, k); }, std::nullopt, false, tiling);
    REQUIRE_THROWS_AS(Pipeline({big.Y}, "dismantle_budget").compile(), CompileError);
    REQUIRE_THROWS_WITH(Pipeline({big.Y}, "dismantle_budget").compile(),
                        Catch::Matchers::Contains("makes more than " + std::to_string(kMaxDismantledCopies) +
                                                  " copies of dismantled bodies"));
}

TEST_CASE("a fixed length profile (LengthArray::constant) with a dismantled batch loop", "[static]") {
    // Out(b, s) = 2 A(b, s) + b over lengths known when compiling: each item's loop has a constant
    // trip count once b is dismantled.
    const std::vector<int32_t> lengths = {5, 0, 17, 1, 16};
    Dim b("b"), s("s");
    LengthArray len = LengthArray::constant("len", lengths, 0, 32);
    REQUIRE(len.static_values() != nullptr);
    REQUIRE(len.static_values()->size() == lengths.size());
    Tensor A("A", {{b, (int64_t)lengths.size()}, {s, len(b)}});
    Func Out("Out", {{b, (int64_t)lengths.size()}, {s, len(b)}});
    Out.compute([&](Expr bi, Expr si) { return 2 * A(bi, si) + cast(Float32, bi); });
    Out.dismantle(b);
    Pipeline pipe({Out}, "fixed_profile");
    Kernel kernel = pipe.compile();
    CHECK(count(compute_part(kernel), "len_[") == 0); // no loop reads a length: only the checks read the array
    CHECK(count(compute_part(kernel), "for (") ==
          3); // items 0, 2 and 4; item 1 (empty) has no code, item 3 one statement
    RaggedShape shape;
    shape.set(len, lengths);
    Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
    testing::fill_random(a, 3);
    kernel.run(shape, {{A, a}, {Out, out}});
    testing::require_close(out, Out, shape, reference_evaluate(pipe, shape, {{A, &a}})[0]);
    // Other lengths: the kernel was compiled for these.
    RaggedShape other;
    other.set(len, {5, 0, 17, 2, 15});
    Buffer a2 = Buffer::alloc(A, other), out2 = Buffer::alloc(Out, other);
    REQUIRE_THROWS_WITH(kernel.run(other, {{A, a2}, {Out, out2}}),
                        Catch::Contains("length array 'len': element 3 is 2, but the kernel was compiled for the "
                                        "constant value 1"));
}
