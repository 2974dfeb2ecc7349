/** \file A lowered module: the functions one compilation produces, each with its arguments in ABI
 * order and its body. Today a host entry (the kernel) and, for AOT libraries, a size query; a
 * device target adds its kernels as functions of their own kind. Printers (codegen/) walk the list. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "ir/Tensor.h"

namespace cora::ir {

struct ModuleArg {
    enum class Kind { Param, LengthArray, AuxArray, Input, Output };
    Kind kind;
    std::string name;
    VarPtr var;                       ///< the param variable, or the buffer variable
    VarPtr count_var;                 ///< arrays: the element count the caller passed
    Expr expected_count;              ///< arrays: the count the layout requires (no UF calls left)
    std::shared_ptr<const UFNode> uf; ///< LengthArray / AuxArray
    TensorPtr tensor;                 ///< Input / Output
    /** Input / Output: where each element lives, in words and formulas (analysis/LayoutDescription.h);
     * LengthArray: its element count. Stated in AOT headers and Kernel::arguments(). */
    std::string layout;
};

enum class FunctionKind {
    Entry,    ///< the kernel: checks its arguments, then computes the outputs
    SizeQuery ///< AOT: checks the params and length arrays, writes each tensor argument's element count
};

struct LoweredFunc {
    FunctionKind kind;
    std::vector<ModuleArg> args; ///< in ABI order
    /** Arrays the function writes that are not tensors, passed after `args` (the size query's
     * `sizes`: inputs then outputs, in argument order). */
    std::vector<VarPtr> output_arrays;
    Stmt body;
};

struct Module {
    std::string name;
    std::vector<LoweredFunc> functions; ///< the entry first

    const LoweredFunc &entry() const { return functions.front(); }
    /** The function of kind `k`, or nullptr. */
    const LoweredFunc *function(FunctionKind k) const {
        for (const LoweredFunc &f : functions)
            if (f.kind == k) return &f;
        return nullptr;
    }
};

} // namespace cora::ir
