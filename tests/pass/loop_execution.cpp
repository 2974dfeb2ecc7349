// decide_loop_execution (lower/LoopExecution.cpp): one level of parallel loops, each with the work
// split its body calls for; For::with keeps every field it is not asked to change.
#include <catch2/catch.hpp>

#include "ir/IR.h"
#include "lower/Passes.h"

using namespace cora;
using namespace cora::ir;

namespace {

VarPtr loop_var(const char *name) { return make_var(name, VarRole::Index, Int64); }

Stmt store_at(const VarPtr &buffer, const VarPtr &index) {
    return Store::make(buffer, var_expr(index), FloatImm::make(1.0, Float32));
}

const For *as_for(const Stmt &s) {
    const For *f = s.as<For>();
    REQUIRE(f != nullptr);
    return f;
}

} // namespace

TEST_CASE("a parallel loop inside a parallel or vectorized loop runs serially", "[lower][loops]") {
    VarPtr buf = make_var("buf", VarRole::Buffer, Float32), i = loop_var("i"), j = loop_var("j");
    Expr n = IntImm::make(8);
    for (ForKind outer : {ForKind::Parallel, ForKind::Vectorized}) {
        Stmt nest = For::make(i, IntImm::make(0), n, outer,
                              For::make(j, IntImm::make(0), n, ForKind::Parallel, store_at(buf, j)));
        Stmt decided = decide_loop_execution(nest);
        REQUIRE(as_for(decided)->for_kind == outer);
        REQUIRE(as_for(as_for(decided)->body)->for_kind == ForKind::Serial);
    }
    // Serial and unrolled loops open no region: the parallel loop inside stays parallel.
    Stmt serial = For::make(i, IntImm::make(0), n, ForKind::Unrolled,
                            For::make(j, IntImm::make(0), n, ForKind::Parallel, store_at(buf, j)));
    REQUIRE(as_for(as_for(decide_loop_execution(serial))->body)->for_kind == ForKind::Parallel);
}

TEST_CASE("a parallel loop is split dynamically exactly when its iterations' work differs", "[lower][loops]") {
    VarPtr buf = make_var("buf", VarRole::Buffer, Float32), i = loop_var("i"), j = loop_var("j"),
           len = make_var("len", VarRole::Buffer, Int64), row = make_var("row", VarRole::Local, Int64);
    Expr n = IntImm::make(16);
    auto parallel = [&](Stmt body) { return For::make(i, IntImm::make(0), n, ForKind::Parallel, body); };
    Stmt uniform = parallel(For::make(j, IntImm::make(0), IntImm::make(4), ForKind::Serial, store_at(buf, j)));
    Stmt ragged =
        parallel(For::make(j, IntImm::make(0), Load::make(len, var_expr(i)), ForKind::Serial, store_at(buf, j)));
    // Through a let: the row length is named first, then bounds the inner loop.
    Stmt through_let =
        parallel(LetStmt::make(row, Load::make(len, var_expr(i)),
                               For::make(j, IntImm::make(0), var_expr(row), ForKind::Serial, store_at(buf, j))));
    Stmt branch = parallel(IfThenElse::make(LT::make(var_expr(i), IntImm::make(3)), store_at(buf, i), Stmt()));
    REQUIRE(as_for(decide_loop_execution(uniform))->work_split == WorkSplit::Static);
    REQUIRE(as_for(decide_loop_execution(ragged))->work_split == WorkSplit::Dynamic);
    REQUIRE(as_for(decide_loop_execution(through_let))->work_split == WorkSplit::Dynamic);
    REQUIRE(as_for(decide_loop_execution(branch))->work_split == WorkSplit::Dynamic);
    // Already decided: the pass returns the same statement.
    Stmt decided = decide_loop_execution(ragged);
    REQUIRE(decide_loop_execution(decided).same_as(decided));
}

TEST_CASE("For::with changes the named fields and carries the others over", "[ir][loops]") {
    VarPtr buf = make_var("buf", VarRole::Buffer, Float32), i = loop_var("i");
    Stmt loop = For::make(i, IntImm::make(2), IntImm::make(5), ForKind::Parallel, store_at(buf, i));
    Stmt dynamic = as_for(loop)->with([](For &f) { f.work_split = WorkSplit::Dynamic; });
    Stmt rebodied = as_for(dynamic)->with([&](For &f) { f.body = store_at(buf, i); });
    const For *r = as_for(rebodied);
    REQUIRE(r->var == i);
    REQUIRE(r->for_kind == ForKind::Parallel);
    REQUIRE(r->work_split == WorkSplit::Dynamic);
    REQUIRE(*as_const_int(r->min) == 2);
    REQUIRE(*as_const_int(r->extent) == 5);
    REQUIRE(!r->body.same_as(as_for(loop)->body));
    REQUIRE(as_for(loop)->work_split == WorkSplit::Static); // the original is unchanged
}
