// Malformed definitions raise cora::CompileError naming the dim or tensor at fault.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
struct Fixture {
    Dim batch{"batch"}, seq{"seq"}, heads{"heads"}, k{"k"};
    Param B{"B", 1, 16};
    LengthArray len{"len", B, 0, 32};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
};
} // namespace

TEST_CASE("a definition using a dim that is not in its domain is rejected", "[error][compile]") {
    Fixture f;
    Func Out("Out", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    Out.compute([&](Expr b, Expr s) { return f.A(b, s) + cast(Float32, f.k.var()); });
    REQUIRE_THROWS_WITH(Pipeline({Out}).compile(), Contains("definition of 'Out'") && Contains("uses dim 'k'"));
}

TEST_CASE("an extent that depends on an inner dim is rejected", "[error][compile]") {
    Fixture f;
    REQUIRE_THROWS_AS((Tensor("T", {{f.batch, f.B}, {f.seq, f.heads + 1}, {f.heads, 4}})), CompileError);
    REQUIRE_THROWS_WITH((Tensor("T", {{f.batch, f.B}, {f.seq, f.heads + 1}, {f.heads, 4}})),
                        Contains("extent of dim 'seq'") && Contains("depends on dim 'heads'") &&
                            Contains("not outside it"));
    REQUIRE_THROWS_WITH((Func("F", {{f.batch, f.k + 2}, {f.seq, 3}})),
                        Contains("extent of dim 'batch'") && Contains("unknown dim 'k'"));
    REQUIRE_THROWS_WITH((Tensor("T", {{f.batch, f.B}, {f.batch, 3}})), Contains("dim 'batch' appears twice"));
}

TEST_CASE("a storage layout too small for the loop's range is rejected", "[error][compile]") {
    Fixture f;
    Func Out("Out", {{f.batch, f.B}, {f.seq, f.len(f.batch) + 1}});
    Out.compute([&](Expr b, Expr s) { return cast(Float32, s); });
    Out.store_in({{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    REQUIRE_THROWS_WITH(Pipeline({Out}).compile(),
                        Contains("Func 'Out': storage layout too small for the loop range") &&
                            Contains("dim 'seq' is stored with extent len(batch)"));
    // A storage layout with different dims is rejected at once.
    Func G("G", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    REQUIRE_THROWS_WITH(G.store_in({{f.seq, f.B}, {f.batch, 4}}), Contains("storage dim 0 is 'seq'"));
    REQUIRE_THROWS_WITH(G.store_in({{f.batch, f.B}}), Contains("storage layout has 1 dims"));
}

TEST_CASE("accesses that may leave a tensor's extent are rejected", "[error][compile]") {
    Fixture f;
    Func Out("Out", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    Out.compute([&](Expr b, Expr s) { return f.A(b, s + 1); });
    REQUIRE_THROWS_WITH(Pipeline({Out}).compile(),
                        Contains("read of 'A' in dim 'seq'") && Contains("may reach or pass the extent len(batch)"));
    Func Neg("Neg", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    Neg.compute([&](Expr b, Expr s) { return f.A(b, s - 1); });
    REQUIRE_THROWS_WITH(Pipeline({Neg}).compile(), Contains("read of 'A' in dim 'seq'") && Contains("may be negative"));
    // The loop extent is larger than the tensor it reads.
    Func Wide("Wide", {{f.batch, f.B}, {f.seq, 32}});
    Wide.compute([&](Expr b, Expr s) { return f.A(b, s); });
    REQUIRE_THROWS_WITH(Pipeline({Wide}).compile(), Contains("read of 'A' in dim 'seq'"));
    // A length array indexed past its count.
    Func Len("Len", {{f.batch, f.B}, {f.seq, f.len(f.batch + 1)}});
    Len.compute([&](Expr b, Expr s) { return 1.0f; });
    REQUIRE_THROWS_WITH(Pipeline({Len}).compile(), Contains("length array 'len'") && Contains("may reach or pass"));
}

TEST_CASE("extents that may be negative are rejected", "[error][compile]") {
    Fixture f;
    Tensor T("T", {{f.batch, f.B}, {f.seq, f.len(f.batch) - 1}});
    Func Out("Out", {{f.batch, f.B}, {f.seq, f.len(f.batch) - 1}});
    Out.compute([&](Expr b, Expr s) { return T(b, s); });
    REQUIRE_THROWS_WITH(Pipeline({Out}).compile(), Contains("extent of dim 'seq'") && Contains("may be negative"));
}

TEST_CASE("malformed reductions are rejected", "[error][compile]") {
    Fixture f;
    Func Out("Out", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    Out.compute([&](Expr b, Expr s) { return sum(f.seq, f.len(b), f.A(b, s)); });
    REQUIRE_THROWS_WITH(Pipeline({Out}).compile(),
                        Contains("reduction over dim 'seq'") && Contains("already a loop dim"));
    Func Inner("Inner", {{f.batch, f.B}});
    // The extent of a reduction may not use its own dim.
    Inner.compute([&](Expr b) { return sum(f.k, f.k + 1, f.A(b, f.k)); });
    REQUIRE_THROWS_WITH(Pipeline({Inner}).compile(), Contains("uses dim 'k'"));
}

TEST_CASE("other malformed definitions give clear errors", "[error][compile]") {
    Fixture f;
    Func Undef("Undef", {{f.batch, f.B}});
    Func User("User", {{f.batch, f.B}});
    User.compute([&](Expr b) { return Undef(b); });
    REQUIRE_THROWS_WITH(Pipeline({User}).compile(), Contains("Func 'Undef' is used but has no definition"));

    Func Arity("Arity", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    REQUIRE_THROWS_WITH(Arity.compute([&](Expr b) { return f.A(b, 0); }),
                        Contains("lambda of 'Arity' takes 1 argument(s) but its domain has 2 dim(s)"));

    Func Typed("Typed", {{f.batch, f.B}});
    REQUIRE_THROWS_WITH(Typed.compute([&](Expr b) { return f.len(b); }),
                        Contains("holds float32") && Contains("use cast()"));
    REQUIRE_THROWS_WITH(f.A(f.batch), Contains("tensor 'A' has 2 dimension(s), accessed with 1"));
    REQUIRE_THROWS_WITH(f.A(f.batch, f.seq) + f.len(f.batch), Contains("different types float32 and int64"));
    REQUIRE_THROWS_WITH(Param("P", 5, 1), Contains("empty range [5, 1]"));
    REQUIRE_THROWS_WITH(LengthArray("L", f.B, 0, int64_t(1) << 40), Contains("does not fit int32"));
    REQUIRE_THROWS_WITH(ceil_mult(f.len(f.batch), 0), Contains("multiple must be positive"));
    REQUIRE_THROWS_WITH(Pipeline({}), Contains("has no outputs"));

    Func Self("Self", {{f.batch, f.B}});
    REQUIRE_THROWS_WITH(Self.compute([&](Expr b) { return Self(b) + 1; }), Contains("reads itself"));
    Func Twice("Twice", {{f.batch, f.B}});
    Twice.compute([&](Expr b) { return 1.0f; });
    REQUIRE_THROWS_WITH(Twice.compute([&](Expr b) { return 2.0f; }), Contains("already defined"));
}

TEST_CASE("a consumer may not read a producer outside its loop domain", "[error][compile]") {
    Fixture f;
    Func P("P", {{f.batch, f.B}, {f.seq, f.len(f.batch)}});
    P.compute([&](Expr b, Expr s) { return f.A(b, s); });
    P.store_in({{f.batch, f.B}, {f.seq, f.len(f.batch) + 4}}); // stored larger than computed
    Func C("C", {{f.batch, f.B}, {f.seq, f.len(f.batch) + 4}});
    C.compute([&](Expr b, Expr s) { return P(b, s); });
    REQUIRE_THROWS_WITH(Pipeline({C}).compile(), Contains("read of 'P' in dim 'seq'"));
}

TEST_CASE("a swapped index is reported with values, the tensor's dim order, a hint and the definition's line",
          "[error][compile][prover]") {
    Dim batch("batch"), s("s"), f("f");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 64);
    Tensor X("X", {{batch, B}, {s, len(batch)}, {f, 64}});
    Func Y("Y", {{batch, B}, {s, len(batch)}, {f, 64}});
    const int line = __LINE__ + 1;
    Y.compute([&](Expr b, Expr t, Expr c) { return X(b, c, t) * 2.0f; }); // X[b, s, f] read as X(b, f, s)
    std::string msg;
    try {
        Pipeline({Y}, "swapped").compile();
    } catch (const CompileError &e) {
        msg = e.what();
    }
    INFO(msg);
    CHECK_THAT(msg, Contains("definition of 'Y' (error/definition_errors.cpp:" + std::to_string(line) + ")"));
    CHECK_THAT(msg, Contains("read of 'X' in dim 's': index f may reach or pass the extent len(batch)"));
    // Concrete values Z3 found (within the declared ranges) that break the bound.
    CHECK_THAT(msg, Contains(", e.g. B = "));
    CHECK_THAT(msg, Contains(" len(batch) = "));
    CHECK_THAT(msg, Contains("'X' is declared X[batch < B][s < len(batch)][f < 64], read here as X(batch, f, s)"));
    CHECK_THAT(msg, Contains("index 1 is 'f', which is dim 2 ('f'), and index 2 fits dim 1 ('s'): are the two "
                             "swapped?"));
    // No hint where swapping would not fix the read: X(b, f, f) has no index that fits dim 's'.
    Func Z("Z", {{batch, B}, {s, len(batch)}, {f, 64}});
    Z.compute([&](Expr b, Expr t, Expr c) { return X(b, c, c) * 2.0f; });
    REQUIRE_THROWS_WITH(Pipeline({Z}, "not_swapped").compile(),
                        Contains("read here as X(batch, f, f)") && !Contains("swapped"));
}

TEST_CASE("the prover report lists every unproved obligation with its Func and line", "[prover]") {
    Dim batch("batch"), seq("seq"), feat("feat"), so("so"), si("si");
    Param B("B", 1, 16);
    LengthArray len("len", B, 0, 64);
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {feat, 8}});
    Func Y("Y", {{batch, B}, {seq, len(batch)}, {feat, 8}});
    const int line = __LINE__ + 1;
    Y.compute([&](Expr b, Expr t, Expr c) { return X(b, t, c) + 1.0f; });
    Y.split(seq, so, si, 4); // len(batch) need not be a multiple of 4: the guard stays
    Kernel k = Pipeline({Y}, "report").compile();
    const std::string r = k.prover_report();
    INFO(r);
    REQUIRE_THAT(r, StartsWith(k.prover_stats()));
    CHECK_THAT(
        r, Contains("\nunproved in schedule of Func 'Y' (error/definition_errors.cpp:" + std::to_string(line) + "): "));
    CHECK_THAT(r, Contains("Z3 found inputs within the declared ranges where"));
    CHECK_THAT(r, Contains(", e.g. "));
}
