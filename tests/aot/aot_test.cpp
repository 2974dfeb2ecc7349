// Ahead-of-time libraries built by cora_add_library at build time (tests/CMakeLists.txt): the
// generated C functions, called with plain pointers, must match the reference evaluator on the
// edge-case batches, report the buffer sizes the runtime computes, and reject bad arguments
// with a message and without writing.
#include "common/ragged_testing.h"

#include "aot_bsr.h"
#include "aot_bsr_static.h"
#include "aot_projection.h"
#include "aot_projection_cuda.h"
#include "aot_projection_cuda_f16.h"
#ifdef CORA_TEST_CUDA_SM_LIBRARY
#include "aot_projection_sm.h"
#endif
#include "aot_scores.h"
#include "aot_tuned_gemm.h"
#include "cora/Cuda.h"
#include "cora_runtime.h"
#include "definitions.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

std::vector<int64_t> sizes_of_projection(const std::vector<int32_t> &len) {
    std::vector<int64_t> sizes(aot_projection_tensor_count, -1);
    char error[256];
    REQUIRE(aot_projection_buffer_sizes((int64_t)len.size(), len.data(), (int64_t)len.size(), sizes.data(), error,
                                        sizeof error) == 0);
    return sizes;
}

} // namespace

TEST_CASE("AOT packed projection (prefix sums, fusion maps, bulk padding) matches the reference", "[aot]") {
    cora_aot_test::PackedProjection def(16, 8);
    Pipeline pipe({def.Out}, "aot_projection_reference");
    for (const auto &lengths : testing::length_cases(40, 8, 3)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer x = Buffer::alloc(def.X, shape), w = Buffer::alloc(def.W, shape), out = Buffer::alloc(def.Out, shape);
        testing::fill_random(x, 1);
        testing::fill_random(w, 2);
        std::vector<int64_t> sizes = sizes_of_projection(lengths);
        REQUIRE(sizes[aot_projection_size_X] == x.size());
        REQUIRE(sizes[aot_projection_size_W] == w.size());
        REQUIRE(sizes[aot_projection_size_Out] == out.size());
        REQUIRE(sizes[aot_projection_size_len] == (int64_t)lengths.size()); // length arrays are counted too
        REQUIRE(aot_projection_size_count == aot_projection_tensor_count);
        char error[256] = "";
        int32_t status =
            aot_projection((int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(), x.data<float>(), x.size(),
                           w.data<float>(), w.size(), out.data<float>(), out.size(), error, sizeof error);
        INFO(error);
        REQUIRE(status == 0);
        testing::require_close(out, def.Out, shape, reference_evaluate(pipe, shape, {{def.X, &x}, {def.W, &w}})[0]);
    }
}

TEST_CASE("AOT ragged scores (nested raggedness, longest first, CPU dispatch) match the reference", "[aot]") {
    cora_aot_test::RaggedScores def(true, 0.125f);
    Pipeline pipe({def.S}, "aot_scores_reference");
    for (const auto &lengths : testing::length_cases(64, 8, 5)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer q = Buffer::alloc(def.Q, shape), k = Buffer::alloc(def.K, shape), s = Buffer::alloc(def.S, shape);
        testing::fill_random(q, 3);
        testing::fill_random(k, 4);
        int64_t sizes[aot_scores_tensor_count];
        char error[256] = "";
        REQUIRE(aot_scores_buffer_sizes((int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(), sizes, error,
                                        sizeof error) == 0);
        REQUIRE(sizes[aot_scores_size_S] == s.size());
        int32_t status =
            aot_scores((int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(), q.data<float>(), q.size(),
                       k.data<float>(), k.size(), s.data<float>(), s.size(), error, sizeof error);
        INFO(error);
        REQUIRE(status == 0);
        testing::require_close(s, def.S, shape, reference_evaluate(pipe, shape, {{def.Q, &q}, {def.K, &k}})[0]);

        // The generic entry (cora_runtime.h) takes the same arguments.
        std::vector<cora_arg_t> args(5);
        args[0] = {"B", CORA_TYPE_INT64, 1, (int64_t)lengths.size(), nullptr, 0};
        args[1] = {"len", CORA_TYPE_INT32, 0, 0, const_cast<int32_t *>(lengths.data()), (int64_t)lengths.size()};
        args[2] = {"Q", CORA_TYPE_FLOAT32, 0, 0, q.raw(), q.size()};
        args[3] = {"K", CORA_TYPE_FLOAT32, 0, 0, k.raw(), k.size()};
        Buffer s2 = Buffer::alloc(def.S, shape);
        args[4] = {"S", CORA_TYPE_FLOAT32, 0, 0, s2.raw(), s2.size()};
        REQUIRE(aot_scores_argv(args.data(), 5, error, sizeof error) == 0);
        for (int64_t i = 0; i < s.size(); i++)
            REQUIRE(s2.at(i) == s.at(i));
    }
}

TEST_CASE("an AOT library tuned as it is built (cora_add_library TUNE_SAMPLES) matches the reference", "[aot][tune]") {
    cora_aot_test::TokenGemm def;
    Pipeline pipe({def.Y}, "aot_tuned_gemm_reference");
    for (const auto &lengths : testing::length_cases(128, 8, 7)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer x = Buffer::alloc(def.X, shape), w = Buffer::alloc(def.W, shape), y = Buffer::alloc(def.Y, shape);
        testing::fill_random(x, 5);
        testing::fill_random(w, 6);
        char error[256] = "";
        int32_t status =
            aot_tuned_gemm((int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(), x.data<float>(), x.size(),
                           w.data<float>(), w.size(), y.data<float>(), y.size(), error, sizeof error);
        INFO(error);
        REQUIRE(status == 0);
        testing::require_close(y, def.Y, shape, reference_evaluate(pipe, shape, {{def.X, &x}, {def.W, &w}})[0]);
    }
}

TEST_CASE("AOT functions reject bad arguments with a message and write nothing", "[aot][error]") {
    std::vector<int32_t> len = {3, 0, 17};
    std::vector<int64_t> sizes = sizes_of_projection(len);
    std::vector<float> x((size_t)sizes[aot_projection_size_X], 1.0f), w((size_t)sizes[aot_projection_size_W], 1.0f);
    std::vector<float> out((size_t)sizes[aot_projection_size_Out], -7.0f);
    char error[256] = "";
    auto call = [&](int64_t b, const std::vector<int32_t> &l, int64_t out_count, char *err, int32_t err_size) {
        return aot_projection(b, l.data(), (int64_t)l.size(), x.data(), (int64_t)x.size(), w.data(), (int64_t)w.size(),
                              out.data(), out_count, err, err_size);
    };
    auto untouched = [&] {
        for (float v : out)
            REQUIRE(v == -7.0f);
    };
    SECTION("an output buffer of the wrong size") {
        REQUIRE(call(3, len, (int64_t)out.size() - 1, error, sizeof error) != 0);
        REQUIRE_THAT(std::string(error), Contains("buffer for tensor 'Out' has") && Contains("expected"));
        untouched();
    }
    SECTION("a length outside its declared range") {
        REQUIRE(call(3, {3, -1, 17}, (int64_t)out.size(), error, sizeof error) != 0);
        REQUIRE_THAT(std::string(error), Contains("length array 'len': element 1 is -1, expected a value in [0, 100]"));
        untouched();
    }
    SECTION("a length count that disagrees with the param") {
        REQUIRE(call(2, len, (int64_t)out.size(), error, sizeof error) != 0);
        REQUIRE_THAT(std::string(error), Contains("length array 'len' has 3 elements, expected 2"));
        untouched();
    }
    SECTION("a param outside its range, with no error buffer") {
        REQUIRE(call(0, {}, (int64_t)out.size(), nullptr, 0) != 0);
        untouched();
    }
    SECTION("the size query checks the shape too") {
        int64_t s[aot_projection_tensor_count];
        std::vector<int32_t> bad = {1, 101};
        REQUIRE(aot_projection_buffer_sizes(2, bad.data(), 2, s, error, sizeof error) != 0);
        REQUIRE_THAT(std::string(error), Contains("element 1 is 101"));
    }
}

TEST_CASE("AOT entry points reject NULL arrays and need no error buffer", "[aot][error][reliability]") {
    std::vector<int32_t> len = {3, 0, 17};
    char error[256] = "";
    // The size query with no output array.
    REQUIRE(aot_projection_buffer_sizes(3, len.data(), 3, nullptr, error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("the output array 'sizes' is NULL"));
    REQUIRE(aot_projection_buffer_sizes(3, len.data(), 3, nullptr, nullptr, 0) != 0);
    REQUIRE(aot_projection_buffer_sizes(3, len.data(), 3, nullptr, nullptr, 64) != 0);
    // The generic entry with no argument array, with and without a message buffer; with a
    // single target and with CPU dispatch.
    REQUIRE(aot_projection_argv(nullptr, 5, error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("the argument array is NULL"));
    REQUIRE(aot_scores_argv(nullptr, 5, error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("the argument array is NULL"));
    REQUIRE(aot_scores_argv(nullptr, 5, nullptr, 0) != 0);
    REQUIRE(aot_scores_argv(nullptr, 5, nullptr, 100) != 0);
    REQUIRE(aot_projection_argv(nullptr, 5, nullptr, 64) != 0);
    REQUIRE(aot_projection_argv(nullptr, -1, error, -5) != 0);
    // A good call with a NULL message buffer of non-zero size still runs.
    std::vector<int64_t> sizes = sizes_of_projection(len);
    std::vector<float> x((size_t)sizes[aot_projection_size_X], 1.0f), w((size_t)sizes[aot_projection_size_W], 1.0f);
    std::vector<float> out((size_t)sizes[aot_projection_size_Out], -7.0f);
    REQUIRE(aot_projection(3, len.data(), 3, x.data(), (int64_t)x.size(), w.data(), (int64_t)w.size(), out.data(),
                           (int64_t)out.size(), nullptr, 64) == 0);
}

TEST_CASE("AOT functions reject an output that shares memory with an input", "[aot][error][reliability]") {
    std::vector<int32_t> len = {3, 0, 17};
    std::vector<int64_t> sizes = sizes_of_projection(len);
    std::vector<float> w((size_t)sizes[aot_projection_size_W], 1.0f);
    std::vector<float> both((size_t)std::max(sizes[aot_projection_size_X], sizes[aot_projection_size_Out]), 0.5f);
    std::vector<float> before = both;
    char error[256] = "";
    REQUIRE(aot_projection(3, len.data(), 3, both.data(), sizes[aot_projection_size_X], w.data(), (int64_t)w.size(),
                           both.data(), sizes[aot_projection_size_Out], error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error),
                 Contains("output argument") && Contains("('Out') overlaps argument") && Contains("('X') in memory"));
    REQUIRE(both == before);
}

TEST_CASE("AOT block-sparse product (block counts in, crow built, column indices checked) matches the reference",
          "[aot][sparse]") {
    cora_aot_test::BsrProduct def;
    Pipeline pipe({def.Y}, "aot_bsr_reference");
    std::mt19937 rng(21);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> dense(32 * 48);
    for (float &v : dense)
        v = u(rng);
    const std::vector<std::vector<uint8_t>> masks = {std::vector<uint8_t>(12, 0),
                                                     std::vector<uint8_t>(12, 1),
                                                     {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0},
                                                     {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1}};
    for (const auto &mask : masks) {
        BsrData w = BsrData::from_block_mask(dense, 32, 48, 8, 16, mask);
        std::vector<int32_t> counts(4);
        for (size_t i = 0; i < 4; i++)
            counts[i] = w.crow[i + 1] - w.crow[i];
        for (int64_t tokens : {0, 1, 3, 4, 5, 33}) {
            INFO("blocks " << w.nnzb() << ", tokens " << tokens);
            RaggedShape shape;
            shape.set(def.T, tokens);
            w.bind(shape, def.W);
            Buffer x = Buffer::alloc(def.X, shape), y = Buffer::alloc(def.Y, shape);
            testing::fill_random(x, (uint32_t)tokens);
            Buffer col = w.col_buffer(def.W, shape), values = w.values_buffer(def.W, shape);
            int64_t sizes[aot_bsr_size_count];
            char error[256] = "";
            REQUIRE(aot_bsr_buffer_sizes(tokens, counts.data(), 4, sizes, error, sizeof error) == 0);
            REQUIRE(sizes[aot_bsr_size_W_col] == w.nnzb());
            REQUIRE(sizes[aot_bsr_size_W_values] == values.size());
            REQUIRE(sizes[aot_bsr_size_Y] == y.size());
            int32_t status =
                aot_bsr(tokens, counts.data(), 4, x.data<float>(), x.size(), col.data<int32_t>(), col.size(),
                        values.data<float>(), values.size(), y.data<float>(), y.size(), error, sizeof error);
            INFO(error);
            REQUIRE(status == 0);
            testing::require_close(
                y, def.Y, shape,
                reference_evaluate(pipe, shape, {{def.X, &x}, {def.W.col, &col}, {def.W.values, &values}})[0]);
        }
    }
    // Bad metadata: a column index out of range, a block count above the block columns; nothing written.
    BsrData w = BsrData::from_block_mask(dense, 32, 48, 8, 16, masks[3]);
    std::vector<int32_t> counts = {1, 1, 1, 1};
    std::vector<float> x(5 * 48, 1.0f), y(5 * 32, 7.0f);
    std::vector<int32_t> bad_col = {2, 0, 1, 3};
    std::vector<float> values(4 * 128, 1.0f);
    char error[256] = "";
    REQUIRE(aot_bsr(5, counts.data(), 4, x.data(), (int64_t)x.size(), bad_col.data(), 4, values.data(),
                    (int64_t)values.size(), y.data(), (int64_t)y.size(), error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("index tensor 'W_col': element 3 (packed position) is 3, outside its "
                                              "declared range [0, 2]"));
    std::vector<int32_t> too_many = {4, 0, 0, 0};
    REQUIRE(aot_bsr(5, too_many.data(), 4, x.data(), (int64_t)x.size(), bad_col.data(), 4, values.data(),
                    (int64_t)values.size(), y.data(), (int64_t)y.size(), error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("length array 'W_blocks': element 0 is 4, expected a value in [0, 3]"));
    for (float v : y)
        REQUIRE(v == 7.0f);
}

TEST_CASE("an AOT block-sparse library specialised to a static pattern matches the reference and checks the pattern",
          "[aot][sparse][static]") {
    cora_aot_test::BsrProduct def(true);
    Pipeline pipe({def.Y}, "aot_bsr_static_reference");
    std::mt19937 rng(22);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> dense(32 * 48);
    for (float &v : dense)
        v = u(rng);
    BsrData w = BsrData::from_block_mask(dense, 32, 48, 8, 16, cora_aot_test::kBsrStaticMask);
    std::vector<int32_t> counts(4);
    for (size_t i = 0; i < 4; i++)
        counts[i] = w.crow[i + 1] - w.crow[i];
    for (int64_t tokens : {0, 1, 4, 5, 33}) {
        INFO("tokens " << tokens);
        RaggedShape shape;
        shape.set(def.T, tokens);
        w.bind(shape, def.W);
        Buffer x = Buffer::alloc(def.X, shape), y = Buffer::alloc(def.Y, shape);
        testing::fill_random(x, (uint32_t)tokens + 3);
        Buffer col = w.col_buffer(def.W, shape), values = w.values_buffer(def.W, shape);
        int64_t sizes[aot_bsr_static_size_count];
        char error[256] = "";
        REQUIRE(aot_bsr_static_buffer_sizes(tokens, counts.data(), 4, sizes, error, sizeof error) == 0);
        REQUIRE(sizes[aot_bsr_static_size_W_col] == w.nnzb());
        int32_t status =
            aot_bsr_static(tokens, counts.data(), 4, x.data<float>(), x.size(), col.data<int32_t>(), col.size(),
                           values.data<float>(), values.size(), y.data<float>(), y.size(), error, sizeof error);
        INFO(error);
        REQUIRE(status == 0);
        testing::require_close(
            y, def.Y, shape,
            reference_evaluate(pipe, shape, {{def.X, &x}, {def.W.col, &col}, {def.W.values, &values}})[0]);
    }
    // Another pattern: other block counts (the size query says so too), or other columns; nothing written.
    std::vector<float> x(5 * 48, 1.0f), y(5 * 32, 7.0f), values(4 * 128, 1.0f);
    std::vector<int32_t> other_counts = {1, 1, 1, 1}, col = {1, 0, 0, 2}, moved_col = {1, 0, 1, 2};
    int64_t sizes[aot_bsr_static_size_count];
    char error[256] = "";
    REQUIRE(aot_bsr_static_buffer_sizes(5, other_counts.data(), 4, sizes, error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("length array 'W_blocks': element 2 is 1, but the kernel was compiled "
                                              "for the constant value 0"));
    REQUIRE(aot_bsr_static(5, counts.data(), 4, x.data(), (int64_t)x.size(), moved_col.data(), 4, values.data(),
                           (int64_t)values.size(), y.data(), (int64_t)y.size(), error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("index tensor 'W_col': element 2 is 1, but the kernel was compiled for "
                                              "the constant value 0"));
    for (float v : y)
        REQUIRE(v == 7.0f);
    REQUIRE(aot_bsr_static(5, counts.data(), 4, x.data(), (int64_t)x.size(), col.data(), 4, values.data(),
                           (int64_t)values.size(), y.data(), (int64_t)y.size(), error, sizeof error) == 0);
    REQUIRE(y[0] != 7.0f);
}

TEST_CASE("a CUDA AOT library from cora_add_library (kernels on CPU threads) matches the reference", "[aot][gpu]") {
    // TARGETS cuda-cpu-threads: the library's whole host path (checks, aux arrays built on the
    // host and staged once per shape, launches through its context) with the CUDA kernels run by
    // CPU threads, so "device" pointers are host pointers here.
    cora_aot_test::PackedProjectionGpu def;
    Pipeline pipe({def.Out}, "aot_projection_cuda_reference");
    char error[256] = "";
    aot_projection_cuda_context *ctx = aot_projection_cuda_create(0, error, sizeof error);
    INFO(error);
    REQUIRE(ctx != nullptr);
    int64_t cases = 0;
    for (const auto &lengths : testing::length_cases(40, 8, 5)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer x = Buffer::alloc(def.X, shape), w = Buffer::alloc(def.W, shape), out = Buffer::alloc(def.Out, shape);
        testing::fill_random(x, 1);
        testing::fill_random(w, 2);
        int64_t sizes[aot_projection_cuda_size_count];
        REQUIRE(aot_projection_cuda_buffer_sizes((int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(),
                                                 sizes, error, sizeof error) == 0);
        REQUIRE(sizes[aot_projection_cuda_size_Out] == out.size());
        for (int rep = 0; rep < 2; rep++) // the second run finds the shape's arrays on the device
            REQUIRE(aot_projection_cuda(ctx, nullptr, (int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(),
                                        x.data<float>(), x.size(), w.data<float>(), w.size(), out.data<float>(),
                                        out.size(), error, sizeof error) == 0);
        cases++;
        REQUIRE(aot_projection_cuda_shape_transfers(ctx) <= cases);
        testing::require_close(out, def.Out, shape, reference_evaluate(pipe, shape, {{def.X, &x}, {def.W, &w}})[0]);
    }
    SECTION("bad arguments: a message, nothing written") {
        std::vector<int32_t> len = {3, 0, 17};
        RaggedShape shape;
        shape.set(def.B, 3).set(def.len, len);
        std::vector<float> x((size_t)shape.size_of(def.X), 1.0f), w((size_t)shape.size_of(def.W), 1.0f),
            out((size_t)shape.size_of(def.Out), -7.0f);
        len[1] = 101;
        REQUIRE(aot_projection_cuda(ctx, nullptr, 3, len.data(), 3, x.data(), (int64_t)x.size(), w.data(),
                                    (int64_t)w.size(), out.data(), (int64_t)out.size(), error, sizeof error) != 0);
        REQUIRE_THAT(std::string(error), Contains("length array 'len': element 1 is 101"));
        for (float v : out)
            REQUIRE(v == -7.0f);
        REQUIRE(aot_projection_cuda(nullptr, nullptr, 3, len.data(), 3, x.data(), (int64_t)x.size(), w.data(),
                                    (int64_t)w.size(), out.data(), (int64_t)out.size(), nullptr, 0) != 0);
    }
    aot_projection_cuda_destroy(ctx);
    aot_projection_cuda_destroy(nullptr); // allowed, does nothing
}

TEST_CASE("a CUDA AOT library with float16 tensors takes binary16 bits and matches the reference", "[aot][gpu]") {
    cora_aot_test::PackedProjectionGpu def(Float16);
    Pipeline pipe({def.Out}, "aot_projection_cuda_f16_reference");
    char error[256] = "";
    aot_projection_cuda_f16_context *ctx = aot_projection_cuda_f16_create(0, error, sizeof error);
    INFO(error);
    REQUIRE(ctx != nullptr);
    for (const auto &lengths : testing::length_cases(40, 8, 6)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer x = Buffer::alloc(def.X, shape), w = Buffer::alloc(def.W, shape), out = Buffer::alloc(def.Out, shape);
        REQUIRE(out.type() == Float16);
        testing::fill_random(x, 3);
        testing::fill_random(w, 4);
        // The header's tensor parameters are uint16_t pointers: the bits.
        REQUIRE(aot_projection_cuda_f16(ctx, nullptr, (int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(),
                                        x.data<uint16_t>(), x.size(), w.data<uint16_t>(), w.size(),
                                        out.data<uint16_t>(), out.size(), error, sizeof error) == 0);
        testing::require_close(out, def.Out, shape, reference_evaluate(pipe, shape, {{def.X, &x}, {def.W, &w}})[0]);
    }
    // Through the generic ABI the element type is checked: float32 data for a float16 tensor fails.
    std::vector<int32_t> len = {2};
    std::vector<float> xf(16 * cora_aot_test::kProjK), wf(cora_aot_test::kProjK * cora_aot_test::kProjO),
        of(16 * cora_aot_test::kProjO);
    cora_arg_t args[] = {{"B", CORA_TYPE_INT64, 1, 1, nullptr, 0},
                         {"len", CORA_TYPE_INT32, 0, 0, len.data(), 1},
                         {"X", CORA_TYPE_FLOAT32, 0, 0, xf.data(), (int64_t)xf.size()},
                         {"W", CORA_TYPE_FLOAT32, 0, 0, wf.data(), (int64_t)wf.size()},
                         {"Out", CORA_TYPE_FLOAT32, 0, 0, of.data(), (int64_t)of.size()}};
    REQUIRE(aot_projection_cuda_f16_argv(ctx, nullptr, args, 5, error, sizeof error) != 0);
    REQUIRE_THAT(std::string(error), Contains("element type float32, expected float16"));
    aot_projection_cuda_f16_destroy(ctx);
}

#ifdef CORA_TEST_CUDA_SM_LIBRARY
TEST_CASE("a CUDA AOT library for sm_90 and sm_80 creates a context only where a GPU is", "[aot][gpu]") {
    char error[512] = "";
    aot_projection_sm_context *ctx = aot_projection_sm_create(0, error, sizeof error);
    std::string why;
    if (!cuda_device_available(&why)) {
        INFO(why);
        REQUIRE(ctx == nullptr);
        REQUIRE_THAT(std::string(error),
                     Contains("libcuda.so.1") || Contains("cuInit") || Contains("there is no CUDA device"));
        WARN("SKIPPED: running the sm_90/sm_80 library needs a GPU: " << error);
        return;
    }
    INFO(error);
    REQUIRE(ctx != nullptr);
    // On a GPU: device memory from a Kernel of the same definition, the library's results
    // against the reference.
    cora_aot_test::PackedProjectionGpu def;
    Pipeline pipe({def.Out}, "aot_projection_sm_reference");
    Kernel k = pipe.compile("cuda");
    for (const auto &lengths : testing::length_cases(40, 8, 6)) {
        INFO(testing::describe(lengths));
        RaggedShape shape;
        shape.set(def.B, (int64_t)lengths.size()).set(def.len, lengths);
        Buffer x = Buffer::alloc(def.X, shape), w = Buffer::alloc(def.W, shape), out = Buffer::alloc(def.Out, shape);
        testing::fill_random(x, 1);
        testing::fill_random(w, 2);
        DeviceBuffer dx = k.alloc(def.X, shape), dw = k.alloc(def.W, shape), dout = k.alloc(def.Out, shape);
        dx.upload(x);
        dw.upload(w);
        REQUIRE(aot_projection_sm(ctx, nullptr, (int64_t)lengths.size(), lengths.data(), (int64_t)lengths.size(),
                                  static_cast<const float *>(dx.device_pointer()), x.size(),
                                  static_cast<const float *>(dw.device_pointer()), w.size(),
                                  static_cast<float *>(dout.device_pointer()), out.size(), error, sizeof error) == 0);
        dout.download(out);
        testing::require_close(out, def.Out, shape, reference_evaluate(pipe, shape, {{def.X, &x}, {def.W, &w}})[0]);
    }
    aot_projection_sm_destroy(ctx);
}
#endif
