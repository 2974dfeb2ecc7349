/** \file Every lowering pass, in pipeline order (see Lower.cpp); each file holds its contract. */
#pragma once

#include "lower/Module.h"

namespace cora::ir {

void validate_pipeline(LoweringContext &ctx);
Stmt schedule_loops(LoweringContext &ctx);
Stmt lower_reductions(const Stmt &s);
Stmt storage_lowering(const Stmt &s, LoweringContext &ctx);
Stmt allocate_intermediates(const Stmt &s, LoweringContext &ctx);
void infer_arguments(const Stmt &s, LoweringContext &ctx);
Stmt add_argument_checks(const Stmt &s, LoweringContext &ctx);
Stmt materialize_ufs(const Stmt &s, LoweringContext &ctx);

} // namespace cora::ir
