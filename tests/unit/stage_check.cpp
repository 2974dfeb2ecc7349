// Stage checks between lowering passes, and the split between user errors (CompileError, from the
// public API) and cora's own invariants (InternalError, from the IR factories).
#include <catch2/catch.hpp>

#include "cora/cora.h"
#include "ir/IR.h"
#include "lower/StageCheck.h"

using namespace cora;
using namespace cora::ir;
using Catch::Matchers::Contains;

TEST_CASE("a node left behind by a pass fails the stage check with the pass's name", "[lower][stage]") {
    Dim i("i");
    Param N("N", 1, 8);
    Tensor A("A", {{i, N}});
    Func F("F", {{i, N}});
    Expr read = A(Expr(i));
    Stmt provide = Provide::make(F.node(), {Expr(i)}, read + 1.0f);
    Stmt loop = For::make(i.node()->var, IntImm::make(0), N, ForKind::Serial, provide);
    check_stage(loop, Stage::Scheduled, "schedule_loops");
    check_stage(loop, Stage::ReductionsLowered, "lower_reductions");
    REQUIRE_THROWS_AS(check_stage(loop, Stage::StorageLowered, "storage_lowering"), InternalError);
    REQUIRE_THROWS_WITH(check_stage(loop, Stage::StorageLowered, "storage_lowering"),
                        Contains("after pass storage_lowering the IR should be storage lowered") &&
                            Contains("a tensor write of 'F'"));
    Dim r("r");
    Stmt reduce = Provide::make(F.node(), {Expr(i)}, sum(r, 4, A(Expr(r))));
    REQUIRE_THROWS_WITH(check_stage(reduce, Stage::ReductionsLowered, "lower_reductions"),
                        Contains("a reduction over 'r'"));
    LengthArray len("len", N, 0, 9);
    VarPtr buf = make_var("buf", VarRole::Buffer, Int64);
    Stmt store = Store::make(buf, IntImm::make(0), len(Expr(0)));
    check_stage(store, Stage::StorageLowered, "storage_lowering");
    REQUIRE_THROWS_WITH(check_stage(store, Stage::Materialized, "materialize_ufs"), Contains("a call of 'len'"));
    Stmt check = Assert::make(EQ::make(IntImm::make(1), IntImm::make(1)), {"never"}, {});
    REQUIRE_THROWS_WITH(check_stage(For::make(i.node()->var, IntImm::make(0), N, ForKind::Parallel, check),
                                    Stage::Scheduled, "add_argument_checks"),
                        Contains("an argument check inside a parallel loop"));
}

TEST_CASE("user mistakes in expressions are CompileErrors; IR invariants are InternalErrors", "[ir][errors]") {
    Dim i("i");
    Param N("N", 1, 8);
    Tensor A("A", {{i, N}});
    LengthArray len("len", N, 0, 9);
    Expr f = A(Expr(i)), n = Expr(i);
    REQUIRE_THROWS_AS(f + n, CompileError);
    REQUIRE_THROWS_WITH(f + n, Contains("operands of '+' have different types float32 and int64") &&
                                   Contains("convert one of them: cast(Float32, e) or cast(Int64, e)"));
    REQUIRE_THROWS_WITH(select(n, f, f), Contains("select condition must be boolean"));
    REQUIRE_THROWS_WITH(exp(n), Contains("exp() needs a floating-point argument"));
    REQUIRE_THROWS_WITH(len(f), Contains("argument of 'len' must be an integer index"));
    REQUIRE_THROWS_WITH(A(f), Contains("index 0 of 'A' (dim 'i') must be an integer expression"));
    REQUIRE_THROWS_WITH((n < 1) + (n < 2), Contains("arithmetic '+' on boolean operands"));
    REQUIRE_THROWS_WITH(Expr() * 2, Contains("undefined (default-constructed) Expr"));
    // The same mistakes reaching an IR factory directly are bugs in cora.
    REQUIRE_THROWS_AS(Add::make(f, n), InternalError);
    REQUIRE_THROWS_AS(Select::make(n, f, f), InternalError);
    REQUIRE_THROWS_AS(UFCall::make(len.node(), {f}), InternalError);
    REQUIRE_THROWS_AS(Access::make(A.node(), {}), InternalError);
}
