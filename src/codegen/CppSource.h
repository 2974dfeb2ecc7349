/** \file The source of the C++ backends ("cpu", "cuda-emulated"): a module's whole translation
 * unit, printed by CodeGen_C (host code alone) or the emulator's printer (CodeGen_Emulated.h:
 * a module with device kernels). */
#pragma once

#include <string>
#include <vector>

#include "ir/Module.h"

namespace cora::ir {

/** The JIT source of a module: the prologue, then codegen_c_body with the module's entry_symbol. */
std::string codegen_c(const Module &m);

/** A module's code after the prologue: its entry (EntryFunction.h) as `extern "C"` function
 * `symbol`, preceded by its device kernels when it has some (emulated). */
std::string codegen_c_body(const Module &m, const std::string &symbol);

/** One JIT source for several modules (KernelBatch): the prologue once, then each module's body in
 * a namespace of its own (`cora_batch_<i>`: their kernels' names may repeat), its entry named
 * `symbols[i]` (the symbols must differ). One compiler run builds them all. */
std::string codegen_c_batch(const std::vector<const Module *> &modules, const std::vector<std::string> &symbols);

} // namespace cora::ir
