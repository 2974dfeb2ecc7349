/** \file The lowering pipeline: definitions -> one kernel body with its argument list. */
#pragma once

#include "lower/Module.h"

namespace cora::ir {

/** Lower the pipeline computing `outputs`. `debug` >= 1 prints the IR after each pass. */
LoweredModule lower(const std::vector<TensorPtr> &outputs, const std::string &name, int debug);

}  // namespace cora::ir
