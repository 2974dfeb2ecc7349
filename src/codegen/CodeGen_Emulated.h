/** \file The printer of the backend "cuda-emulated": a module lowered for Target::CudaEmulated as
 * C++ for the CPU. Each device kernel is a function run once per block, its thread loops as loops
 * (the phases between barriers one after another: what the barriers guarantee on a GPU), its
 * shared tiles the block's arrays; each launch in the entry is a loop over the grid calling it. */
#pragma once

#include <string>

#include "codegen/CodeGen_C.h"

namespace cora::ir {

/** A device kernel as a C++ function of the CPU: `static void name(params..., const int64_t
 * *cora_block)`, the body run for one block. */
std::string emulated_kernel_function(const LoweredFunc &kernel);

/** A module with device kernels after the prologue: each kernel (emulated_kernel_function), then
 * the entry as `extern "C"` function `symbol`, its launches loops over the blocks. */
std::string codegen_emulated_body(const Module &m, const std::string &symbol);

} // namespace cora::ir
