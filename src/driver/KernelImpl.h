/** \file Internal to the driver: what a CPU Kernel holds, and the steps before its compile that
 * Pipeline::compile and KernelBatch share. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cora/Pipeline.h"
#include "driver/JIT.h"
#include "lower/Lower.h"

namespace cora {

struct Kernel::Impl {
    ir::LoweredModule module;
    std::vector<KernelArgInfo> arg_info;
    std::string source, lowered;
    driver::JitResult jit;
    cora_entry_fn entry = nullptr;
};

namespace driver {

/** CompileOptions::debug, or CORA_DEBUG when it is negative. */
int debug_level(const CompileOptions &o);

/** A CPU kernel up to its compile: `p` lowered with `opts` (CompileError for a GPU target, which
 * Pipeline::compile does not build), its IR printed, its arguments and its C++ source. */
std::shared_ptr<Kernel::Impl> prepare_cpu_kernel(const Pipeline &p, const CompileOptions &opts);

} // namespace driver
} // namespace cora
