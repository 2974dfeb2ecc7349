/** \file A lowered module: the functions one compilation produces, each with its arguments in ABI
 * order and its body. A host entry (the kernel), for AOT libraries a size query, and for GPU
 * targets the device kernels the entry launches. Printers (codegen/) walk the list. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cora/ArgumentKind.h"
#include "ir/IR.h"
#include "ir/Tensor.h"

namespace cora::ir {

struct ModuleArg {
    using Kind = ArgumentKind; ///< the public vocabulary (cora/ArgumentKind.h)
    Kind kind;
    std::string name;
    VarPtr var;                       ///< the param variable, or the buffer variable
    VarPtr count_var;                 ///< arrays: the element count the caller passed
    Expr expected_count;              ///< arrays: the count the layout requires (no UF calls left)
    std::shared_ptr<const UFNode> uf; ///< LengthArray / AuxArray
    TensorPtr tensor;                 ///< Input / Output
    /** Input / Output: where each element lives, in words and formulas (formats/ragged/LayoutDescription.h);
     * LengthArray: its element count. Stated in AOT headers and Kernel::arguments(). */
    std::string layout;
};

/** Values known when compiling that a function reads (the static pattern its arguments are
 * checked against, lower/AddArgumentChecks.cpp): printed as a `static const` array of `var`'s
 * element type at the top of the function's body. */
struct ConstantArray {
    VarPtr var;
    std::vector<int64_t> values;
};

enum class FunctionKind {
    Entry,     ///< the kernel: checks its arguments, then computes the outputs
    SizeQuery, ///< AOT: checks the params and length arrays, writes each tensor argument's element count
    Device     ///< GPU targets: a device kernel the entry launches (a LaunchKernel names it)
};

struct LoweredFunc {
    FunctionKind kind;
    std::vector<ModuleArg> args; ///< in ABI order
    /** Arrays the function writes that are not tensors, passed after `args` (the size query's
     * `sizes`: inputs then outputs, in argument order). */
    std::vector<VarPtr> output_arrays;
    Stmt body;
    /** Device kernels: the symbol, and the parameters (buffers and scalars of the host scope, in
     * the order the LaunchKernel passes them). The body is the nest of GPU-bound loops. */
    std::string name;
    std::vector<VarPtr> params;
    /** Device kernels: the bound axes whose launch size is exactly the extent of their one loop
     * (no other loop bound to the axis, an extent known at launch): no bound check is needed. */
    std::vector<ForKind> exact_bindings;
    /** The constant arrays the body reads (host functions). */
    std::vector<ConstantArray> constants;
    /** Device kernels: the width of their integer arithmetic, 64 or 32 (lower/NarrowIndices.cpp:
     * 32 where every integer value the kernel computes provably fits). */
    int index_bits = 64;
};

struct Module {
    std::string name;
    std::vector<LoweredFunc> functions; ///< the entry first, device kernels last
    /** Lowered with build_aux_in_kernel: the aux arrays the entry builds itself (host allocations,
     * in the order of the arguments they replace). A GPU entry stages them on the device. */
    std::vector<VarPtr> built_aux_arrays;

    const LoweredFunc &entry() const { return functions.front(); }
    /** The function of kind `k`, or nullptr. */
    const LoweredFunc *function(FunctionKind k) const {
        for (const LoweredFunc &f : functions)
            if (f.kind == k) return &f;
        return nullptr;
    }
    /** The device kernels (GPU targets), in launch order of first appearance. */
    std::vector<const LoweredFunc *> device_kernels() const {
        std::vector<const LoweredFunc *> v;
        for (const LoweredFunc &f : functions)
            if (f.kind == FunctionKind::Device) v.push_back(&f);
        return v;
    }
};

} // namespace cora::ir
