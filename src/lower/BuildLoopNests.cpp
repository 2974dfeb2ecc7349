/** \file Pass: the default schedule. One loop nest per Func, in dependency order; each loop
 * runs over a domain dim from 0 to its extent (a vloop when the extent uses outer dims or
 * UF calls); the outermost loop of each nest is parallel. The innermost body is a Provide.
 * Requires: a validated pipeline. Tests: every file in tests/correctness. */
#include "lower/Passes.h"

namespace cora::ir {

Stmt build_loop_nests(LoweringContext &ctx) {
    std::vector<Stmt> nests;
    for (const TensorPtr &f : ctx.funcs) {
        std::vector<Expr> idx;
        for (const LayoutDim &d : f->domain) idx.push_back(var_expr(d.dim->var));
        Stmt s = Provide::make(f, idx, f->value);
        for (int k = (int)f->domain.size() - 1; k >= 0; k--) {
            const LayoutDim &d = f->domain[k];
            s = For::make(d.dim->var, IntImm::make(0), d.extent, k == 0 ? ForKind::Parallel : ForKind::Serial, s);
        }
        nests.push_back(s);
    }
    return Block::make(nests);
}

}  // namespace cora::ir
