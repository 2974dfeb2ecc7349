// Bad inputs at run time: a RuntimeError (or status + message from the raw entry) naming the
// argument, expected and actual values; the output buffer is never written.
#include "common/ragged_testing.h"

#include "cora_runtime.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {
struct Scale {
    Dim batch{"batch"}, seq{"seq"};
    Param B{"B", 1, 8};
    LengthArray len{"len", B, 0, 10};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    Func Out{"Out", {{batch, B}, {seq, len(batch)}}};
    Kernel k;
    Scale() : k(build()) {}
    Kernel build() {
        Out.compute([&](Expr b, Expr s) { return 2 * A(b, s); });
        return Pipeline({Out}, "scale_errors").compile();
    }
};

constexpr float kSentinel = 12345.0f;

bool untouched(const Buffer &b) {
    for (int64_t i = 0; i < b.size(); i++)
        if (b.at(i) != kSentinel) return false;
    return true;
}
Buffer sentinel_buffer(int64_t n) {
    Buffer b(Float32, n);
    for (int64_t i = 0; i < n; i++)
        b.at(i) = kSentinel;
    return b;
}

/** Raw arguments in ABI order: B, len, aux offsets, A, Out. */
struct RawArgs {
    int64_t B;
    std::vector<int32_t> len;
    std::vector<int64_t> offsets;
    Buffer a, out;
    std::vector<cora_arg_t> args() {
        return {
            {"B", CORA_TYPE_INT64, 1, B, nullptr, 0},
            {"len", CORA_TYPE_INT32, 0, 0, len.data(), (int64_t)len.size()},
            {"aux", CORA_TYPE_INT64, 0, 0, offsets.data(), (int64_t)offsets.size()},
            {"A", CORA_TYPE_FLOAT32, 0, 0, a.raw(), a.size()},
            {"Out", CORA_TYPE_FLOAT32, 0, 0, out.raw(), out.size()},
        };
    }
};
RawArgs good_raw() {
    RawArgs r{3, {2, 0, 4}, {0, 2, 2, 6}, Buffer(Float32, 6), sentinel_buffer(6)};
    return r;
}
} // namespace

TEST_CASE("the raw ABI accepts good arguments and its order is documented by arguments()", "[error][runtime]") {
    Scale s;
    REQUIRE(s.k.arguments().size() == 5);
    REQUIRE(s.k.arguments()[0].kind == KernelArgInfo::Kind::Param);
    REQUIRE(s.k.arguments()[1].kind == KernelArgInfo::Kind::LengthArray);
    REQUIRE(s.k.arguments()[2].kind == KernelArgInfo::Kind::AuxArray);
    REQUIRE(s.k.arguments()[3].kind == KernelArgInfo::Kind::Input);
    REQUIRE(s.k.arguments()[4].kind == KernelArgInfo::Kind::Output);
    RawArgs r = good_raw();
    for (int i = 0; i < 6; i++)
        r.a.at(i) = (float)i;
    std::string err;
    REQUIRE(s.k.run_raw(r.args(), &err) == CORA_OK);
    for (int i = 0; i < 6; i++)
        REQUIRE(r.out.at(i) == 2.0f * i);
}

TEST_CASE("bad raw arguments return a status and a message, and write nothing", "[error][runtime]") {
    Scale s;
    struct Case {
        const char *what;
        std::function<void(RawArgs &, std::vector<cora_arg_t> &)> corrupt;
        const char *message;
    };
    std::vector<Case> cases = {
        {"argument count", [](RawArgs &, std::vector<cora_arg_t> &a) { a.pop_back(); }, "expected 5 arguments, got 4"},
        {"element type", [](RawArgs &, std::vector<cora_arg_t> &a) { a[3].type_code = CORA_TYPE_FLOAT64; },
         "argument 3 ('A'): element type float64, expected float32"},
        {"scalar/array", [](RawArgs &, std::vector<cora_arg_t> &a) { a[0].is_scalar = 0; },
         "argument 0 ('B'): expected a scalar, got an array"},
        {"null data", [](RawArgs &, std::vector<cora_arg_t> &a) { a[3].data = nullptr; },
         "argument 3 ('A'): invalid array"},
        {"param range", [](RawArgs &, std::vector<cora_arg_t> &a) { a[0].scalar = 9; },
         "param 'B' = 9 is outside its declared range [1, 8]"},
        {"length count", [](RawArgs &, std::vector<cora_arg_t> &a) { a[1].count = 2; },
         "length array 'len' has 2 elements, expected 3"},
        {"negative length", [](RawArgs &r, std::vector<cora_arg_t> &) { r.len[1] = -1; },
         "length array 'len': element 1 is -1, expected a value in [0, 10]"},
        {"oversized length", [](RawArgs &r, std::vector<cora_arg_t> &) { r.len[2] = 11; },
         "length array 'len': element 2 is 11, expected a value in [0, 10]"},
        {"offsets inconsistent", [](RawArgs &r, std::vector<cora_arg_t> &) { r.offsets[2] = 3; },
         "aux array 'prefix_batch' is inconsistent with the lengths: entry 2 - entry 1 = 1, expected 0"},
        {"offsets start", [](RawArgs &r, std::vector<cora_arg_t> &) { r.offsets[0] = 1; },
         "aux array 'prefix_batch' must start at 0, got 1"},
        {"offsets size", [](RawArgs &, std::vector<cora_arg_t> &a) { a[2].count = 3; },
         "aux array 'prefix_batch' has 3 elements, expected 4"},
        {"input size", [](RawArgs &, std::vector<cora_arg_t> &a) { a[3].count = 5; },
         "buffer for tensor 'A' has 5 elements, expected 6"},
        {"output size", [](RawArgs &, std::vector<cora_arg_t> &a) { a[4].count = 7; },
         "buffer for tensor 'Out' has 7 elements, expected 6"},
    };
    for (auto &c : cases) {
        INFO(c.what);
        RawArgs r = good_raw();
        std::vector<cora_arg_t> args = r.args();
        c.corrupt(r, args);
        std::string err;
        REQUIRE(s.k.run_raw(args, &err) == CORA_ERROR_ARGUMENT);
        REQUIRE_THAT(err, Contains(c.message));
        REQUIRE(untouched(r.out));
    }
}

TEST_CASE("Kernel::run reports bad shapes and buffers as RuntimeError and writes nothing", "[error][runtime]") {
    Scale s;
    RaggedShape shape;
    shape.set(s.B, 3).set(s.len, {2, 0, 4});
    Buffer a(Float32, 6), out = sentinel_buffer(6);

    Buffer short_in(Float32, 5);
    REQUIRE_THROWS_AS(s.k.run(shape, {{s.A, short_in}, {s.Out, out}}), RuntimeError);
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, short_in}, {s.Out, out}}),
                        Contains("buffer for tensor 'A' has 5 elements, expected 6"));
    Buffer wrong_type(Float64, 6);
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, wrong_type}, {s.Out, out}}),
                        Contains("element type float64, expected float32"));
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.Out, out}}), Contains("no buffer bound for tensor 'A'"));
    Tensor other("Other", {{s.batch, s.B}});
    Buffer ob(Float32, 3);
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, a}, {s.Out, out}, {other, ob}}),
                        Contains("tensor 'Other' is not an argument"));
    REQUIRE(untouched(out));

    // A tensor bound twice is an error, not "the last binding wins": an input, then an output.
    Buffer a2(Float32, 6), out2 = sentinel_buffer(6);
    REQUIRE_THROWS_AS(s.k.run(shape, {{s.A, a}, {s.A, a2}, {s.Out, out}}), RuntimeError);
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, a}, {s.A, a2}, {s.Out, out}}),
                        Contains("tensor 'A' is bound twice in one run of kernel 'scale_errors' (bindings 0 and 1)"));
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, a}, {s.Out, out}, {s.Out, out2}}),
                        Contains("tensor 'Out' is bound twice in one run of kernel 'scale_errors' (bindings 1 and 2)"));
    REQUIRE_THROWS_WITH(s.k.run(shape, {{s.A, a}, {s.Out, out}, {s.Out, out}}), Contains("'Out' is bound twice"));
    REQUIRE(untouched(out));
    REQUIRE(untouched(out2));

    RaggedShape mismatched;
    mismatched.set(s.B, 4).set(s.len, {1, 2, 3});
    REQUIRE_THROWS_WITH(s.k.run(mismatched, {{s.A, a}, {s.Out, out}}),
                        Contains("length array 'len' has 3 elements, expected 4"));
    RaggedShape missing;
    missing.set(s.len, {1, 2, 3});
    REQUIRE_THROWS_WITH(s.k.run(missing, {{s.A, a}, {s.Out, out}}), Contains("'B' is not set"));
    REQUIRE(untouched(out));
}

TEST_CASE("RaggedShape rejects bad lengths, params and offsets", "[error][runtime]") {
    Scale s;
    RaggedShape shape;
    REQUIRE_THROWS_WITH(shape.set(s.B, 0), Contains("param 'B' = 0 is outside its declared range [1, 8]"));
    REQUIRE_THROWS_WITH(shape.set(s.len, {3, -2}), Contains("length array 'len': element 1 is -2"));
    REQUIRE_THROWS_WITH(shape.set(s.len, {11}), Contains("element 0 is 11, expected a value in [0, 10]"));
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int32_t>{1, 3}), Contains("must start at 0, got 1"));
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int32_t>{0, 3, 2}), Contains("decrease at entry 2"));
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int32_t>{}), Contains("are empty"));
    shape.set(s.B, 2).set_offsets(s.len, std::vector<int32_t>{0, 3, 3});
    REQUIRE(shape.lengths(s.len) == std::vector<int32_t>{3, 0});
    REQUIRE(shape.offsets(s.len) == std::vector<int64_t>{0, 3, 3});
    REQUIRE_THROWS_WITH(Buffer::from_padded(s.A, shape, std::vector<float>(4), {2, 2}),
                        Contains("dim 'seq' has extent 3") && Contains("more than the padded size 2"));
    REQUIRE_THROWS_WITH(Buffer::from_padded(s.A, shape, std::vector<float>(5), {2, 3}),
                        Contains("padded data has 5 elements, its shape needs 6"));
    Buffer wrong(Float32, 2);
    REQUIRE_THROWS_WITH(wrong.to_padded(s.A, shape, {2, 3}), Contains("buffer has 2 elements, tensor 'A' needs 3"));
    REQUIRE_THROWS_WITH(Buffer(Float32, -1), Contains("non-negative"));
}

TEST_CASE("make_args gives the raw ABI arguments of a run", "[error][runtime]") {
    Scale s;
    RaggedShape shape;
    shape.set(s.B, 2).set(s.len, {3, 1});
    Buffer a = Buffer::alloc(s.A, shape), out = sentinel_buffer(4);
    for (int i = 0; i < 4; i++)
        a.at(i) = (float)i;
    std::vector<cora_arg_t> args = s.k.make_args(shape, {{s.A, a}, {s.Out, out}});
    REQUIRE(args.size() == 5);
    REQUIRE(args[2].count == 3); // offsets of the two rows: {0, 3, 4}
    REQUIRE(static_cast<const int64_t *>(args[2].data)[1] == 3);
    std::string err;
    REQUIRE(s.k.run_raw(args, &err) == CORA_OK);
    REQUIRE(out.at(3) == 6.0f);
    static_cast<int32_t *>(args[1].data)[0] = 2; // lengths no longer match the offsets
    REQUIRE(s.k.run_raw(args, &err) == CORA_ERROR_ARGUMENT);
    REQUIRE_THAT(err, Contains("inconsistent with the lengths"));
}

TEST_CASE("a compute_at slice too large to allocate is a RuntimeError naming it, and nothing is written",
          "[error][runtime]") {
    // F(b, i, j, k) computed at G's b is stored one sentence at a time: len^3 elements, which
    // for a sentence of 2^20 tokens is 2^62 bytes, which no allocator gives.
    Dim b("b"), i("i"), j("j"), k("k"), r("r");
    Param B("B", 1, 4);
    LengthArray len("len", B, 0, 1 << 22);
    Tensor X("X", {{b, B}, {i, len(b)}});
    for (bool parallel : {true, false}) {
        DYNAMIC_SECTION((parallel ? "in a parallel loop" : "in a serial loop")) {
            Func F("F", {{b, B}, {i, len(b)}, {j, len(b)}, {k, len(b)}}), G("G", {{b, B}, {i, len(b)}});
            F.compute([&](Expr bb, Expr ii, Expr jj, Expr kk) { return X(bb, ii) * X(bb, jj) + X(bb, kk); });
            G.compute([&](Expr bb, Expr ii) { return sum(r, len(bb), F(bb, ii, r, 0)); });
            F.compute_at(G, b);
            G.parallel(parallel ? b : i); // the slice allocated in the parallel loop, or before it
            Kernel kernel = Pipeline({G}, parallel ? "huge_slice_parallel" : "huge_slice_serial").compile();
            REQUIRE_THAT(kernel.lowered(), Contains("allocate F["));
            const int32_t n = 1 << 20; // 2^60 elements: past any address space, and no overflow
            RaggedShape shape;
            shape.set(B, 1).set(len, std::vector<int32_t>{n});
            Buffer x = Buffer::alloc(X, shape), g = sentinel_buffer(n);
            REQUIRE_THROWS_AS(kernel.run(shape, {{X, x}, {G, g}}), RuntimeError);
            REQUIRE_THROWS_WITH(
                kernel.run(shape, {{X, x}, {G, g}}),
                Contains(parallel ? "cannot allocate an iteration's slice of 'F'" : "cannot allocate") &&
                    Contains("'F'"));
            REQUIRE(untouched(g));
        }
    }
}
