/** \file The Funcs a pipeline computes, producers before consumers, and its input tensors. */
#pragma once

#include <vector>

#include "ir/Tensor.h"

namespace cora::ir {

/** Funcs reachable from `outputs` in dependency order; inputs in first-use order.
 * CompileError for a Func used without a definition. */
std::vector<TensorPtr> pipeline_order(const std::vector<TensorPtr> &outputs, std::vector<TensorPtr> *inputs);

} // namespace cora::ir
