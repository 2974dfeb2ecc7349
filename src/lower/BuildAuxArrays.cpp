/** \file Pass (AOT kernels): build the aux arrays inside the kernel.
 *
 * A JIT kernel takes its aux arrays from the caller's RaggedShape, which builds them once per
 * batch and shares them between kernels. An ahead-of-time library has no RaggedShape: its
 * callers pass params, length arrays and tensors only. This pass makes the kernel compute each
 * aux array itself, with its kind's IR builder (AuxKind::build, analysis/AuxKind.h), the same
 * statements the host prelude interprets for JIT kernels (runtime/RaggedShape.cpp).
 * Requires: the argument list (dependencies before dependants) and the param and length
 * checks placed before the result (the builders read lengths at checked indices).
 * Ensures: every aux array is a heap Allocate around `rest`, filled before `rest` runs (the
 * entry function leaves these arrays out of its arguments, Lower.cpp).
 * Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/aot.cpp (every aux kind against the JIT kernel). */
#include "analysis/AuxKind.h"
#include "lower/Passes.h"

namespace cora::ir {

Stmt build_aux_arrays(const Stmt &rest, const std::vector<ModuleArg> &args, const LoweringContext &ctx) {
    std::vector<const ModuleArg *> aux;
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::AuxArray) aux.push_back(&a);
    Stmt s = rest;
    for (auto it = aux.rbegin(); it != aux.rend(); ++it) {
        const ModuleArg &a = **it;
        Stmt build = aux_kind(*a.uf->aux).build(AuxArray{a.uf, a.name, a.var}, ctx.aux);
        s = Allocate::make(a.var, a.expected_count, Block::make({build, s}));
    }
    return s;
}

} // namespace cora::ir
