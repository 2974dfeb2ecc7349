/** \file The result of lowering: the kernel's argument list (ABI order) and its body, plus
 * the per-compilation context that passes share (no global mutable state). */
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/Bounds.h"
#include "analysis/ProverChain.h"
#include "analysis/StorageLayout.h"
#include "ir/Tensor.h"

namespace cora::ir {

struct ModuleArg {
    enum class Kind { Param, LengthArray, AuxArray, Input, Output };
    Kind kind;
    std::string name;
    VarPtr var;                       ///< the param variable, or the buffer variable
    VarPtr count_var;                 ///< arrays: the element count the caller passed
    Expr expected_count;              ///< arrays: the count the layout requires (UF calls allowed)
    std::shared_ptr<const UFNode> uf; ///< LengthArray / AuxArray
    TensorPtr tensor;                 ///< Input / Output
    /** AuxArray built by the kernel itself (AOT kernels): not in the ABI, see BuildAuxArrays.cpp. */
    bool built_in_kernel = false;
};

struct LoweredModule {
    std::string name;
    std::vector<ModuleArg> args;
    Stmt body;
    ProverStats prover_stats;
    /** With aux arrays built in the kernel: a body that checks the params and length arrays,
     * builds the aux arrays and stores each tensor argument's element count into `sizes_buffer`
     * (inputs then outputs, in argument order). Empty otherwise. */
    Stmt sizes_body;
    VarPtr sizes_buffer;
};

/** Per-tensor storage facts decided by StorageLowering. */
struct TensorStorage {
    VarPtr buffer;
    Layout layout; ///< physical layout (storage transforms applied)
    FlatLayout flat;
};

/** A loop remap whose array must be a permutation of [0, extent) (checked at run time). */
struct Permutation {
    std::shared_ptr<const UFNode> fn;
    Expr extent;
    std::string loop;
};

struct LoweringContext {
    int debug = 0;
    bool remove_guards = true;        ///< false: every schedule guard stays (the prover still validates)
    bool build_aux_in_kernel = false; ///< aux arrays are built by the kernel, not passed (AOT)
    std::unique_ptr<ProverChain> prover;
    /** This compilation's aux arrays: one symbol per structure (AuxTable.h). Interning is a cache,
     * so passes with a const context may add to it. */
    mutable AuxTable aux;
    std::vector<TensorPtr> funcs;   ///< computed tensors, producers first
    std::vector<TensorPtr> inlined; ///< Funcs expanded into their readers (compute_inline)
    std::vector<TensorPtr> inputs;  ///< input tensors, in first-use order
    std::vector<TensorPtr> outputs; ///< the pipeline's outputs
    std::map<const TensorNode *, TensorStorage> storage;
    std::vector<ModuleArg> args;
    std::vector<Permutation> permutations;
    Stmt sizes_body; ///< see LoweredModule::sizes_body
    VarPtr sizes_buffer;
    int guards_removed = 0, guards_kept = 0; ///< schedule guards proved redundant / kept
    bool is_output(const TensorNode *t) const {
        for (auto &o : outputs)
            if (o.get() == t) return true;
        return false;
    }
};

} // namespace cora::ir
