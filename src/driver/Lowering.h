/** \file Internal to the driver: a Pipeline lowered with CompileOptions (the JIT and AOT share it). */
#pragma once

#include <string>
#include <vector>

#include "cora/Pipeline.h"
#include "lower/Lower.h"

namespace cora::driver {

ir::LoweredModule lower_pipeline(const Pipeline &p, const std::string &name, const CompileOptions &opts);
/** The entry's IR, then each device kernel's (GPU targets) after a line `device kernel <name>:`. */
std::string print_module(const ir::Module &m);
/** The arguments a caller passes, in ABI order (aux arrays built in the kernel left out). */
std::vector<KernelArgInfo> argument_info(const ir::LoweredModule &m);

} // namespace cora::driver
