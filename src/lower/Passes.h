/** \file Every lowering pass, in pipeline order (see Lower.cpp); each file holds its contract. */
#pragma once

#include "lower/Module.h"

namespace cora::ir {

void validate_pipeline(LoweringContext &ctx);
void select_inlined(LoweringContext &ctx);
/** `e` with every read of an inlined Func replaced by its definition (InlineFuncs.cpp). */
Expr inline_reads(const Expr &e, const LoweringContext &ctx);
Stmt lower_reductions(const Stmt &s);
Stmt storage_lowering(const Stmt &s, LoweringContext &ctx);
Stmt allocate_intermediates(const Stmt &s, LoweringContext &ctx);
void infer_arguments(const Stmt &s, LoweringContext &ctx);
Stmt add_argument_checks(const Stmt &s, LoweringContext &ctx);
/** `rest` inside heap allocations of the aux arrays, each built in place (BuildAuxArrays.cpp). */
Stmt build_aux_arrays(const Stmt &rest, const LoweringContext &ctx);
Stmt materialize_ufs(const Stmt &s, LoweringContext &ctx);
Stmt hoist_loads(const Stmt &s, LoweringContext &ctx);
/** One level of parallel loops, each with its WorkSplit (LoopExecution.cpp). */
Stmt decide_loop_execution(const Stmt &s);

} // namespace cora::ir
