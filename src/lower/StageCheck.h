/** \file The forms the IR takes between lowering passes, checked after each one (StageCheck.cpp). */
#pragma once

#include "ir/IR.h"

namespace cora::ir {

/** In pipeline order: each stage also satisfies the rules of the ones before it. */
enum class Stage { Scheduled, ReductionsLowered, StorageLowered, Materialized };

/** InternalError naming `pass` when `s` holds a node that `stage` no longer allows. */
void check_stage(const Stmt &s, Stage stage, const char *pass);

} // namespace cora::ir
