// Illegal schedules raise CompileError naming the Func and loop.
#include "common/ragged_testing.h"

using namespace cora;
using Catch::Matchers::Contains;

TEST_CASE("illegal schedules are rejected with clear messages", "[error][schedule]") {
    Dim batch("batch"), seq("seq"), so("so"), si("si"), bo("bo"), bi("bi"), other("other");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 30);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    auto fresh = [&] {
        Func F("F", {{batch, B}, {seq, len(batch)}});
        F.compute([&](Expr b, Expr s) { return A(b, s) + 1; });
        return F;
    };
    {
        Func F = fresh();
        F.reorder({seq, batch}); // seq's extent len(batch) needs batch outside
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("schedule of Func 'F': loop 'seq' has extent") &&
                                                         Contains("depends on loop 'batch'") &&
                                                         Contains("must stay outside it"));
    }
    {
        Func F = fresh();
        F.split(batch, bo, bi, 2).reorder({bo, seq, bi}); // seq needs both halves of batch
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("depends on loop 'bi'"));
    }
    {
        Func F = fresh();
        REQUIRE_THROWS_WITH(F.split(seq, so, si, 0), Contains("factor must be positive, got 0"));
        REQUIRE_THROWS_WITH(F.split(other, so, si, 4), Contains("'other' is not a loop of this Func"));
        F.split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(F.split(seq, bo, bi, 2), Contains("'seq' is not a loop of this Func"));
        REQUIRE_THROWS_WITH(F.split(batch, so, bi, 2), Contains("dim 'so' already names a loop"));
        REQUIRE_THROWS_WITH(F.split(batch, bo, bo, 2), Contains("outer and inner must be different"));
        REQUIRE_THROWS_WITH(F.reorder({si, si}), Contains("'si' is listed twice"));
        REQUIRE_THROWS_WITH(F.parallel(other), Contains("'other' is not a loop"));
        F.parallel(so);
        REQUIRE_THROWS_WITH(F.unroll(so), Contains("loop 'so' is already marked"));
    }
    {
        Func F = fresh();
        F.vectorize(seq);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(),
                            Contains("vectorize in Func 'F': loop 'seq' has extent") && Contains("not a constant"));
    }
    {
        Func F = fresh();
        F.unroll(batch);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("unroll in Func 'F': loop 'batch'"));
    }
    {
        Func F = fresh();
        F.parallel(seq).split(seq, so, si, 4);
        REQUIRE_THROWS_WITH(Pipeline({F}).compile(), Contains("'seq' is marked but is not a loop any more"));
    }
}
