/** \file Pass: allocate every Func that is not an output, sized by its flattened layout
 * (the library computes every size; users never do). Allocations wrap the whole computation,
 * producers outermost. Tests: tests/pass/passes.cpp (the pass alone), tests/correctness/pipeline.cpp. */
#include "lower/Passes.h"

namespace cora::ir {

Stmt allocate_intermediates(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage) {
    Stmt body = s;
    for (auto it = ctx.funcs.rbegin(); it != ctx.funcs.rend(); ++it) {
        if (ctx.is_output(it->get())) continue;
        const TensorStorage &st = storage.at(it->get());
        body = Allocate::make(st.buffer, st.flat.size, body);
    }
    return body;
}

} // namespace cora::ir
