/** \file The pass order, top to bottom. Reading lower() tells the whole story:
 *
 *   1. collect funcs (producers first) and validate them: dims, extents, access bounds, storage cover
 *   1b. select_inlined: compute_inline Funcs leave the list; their reads get expanded
 *   2. schedule_loops: one loop nest per op from its schedule (split, fuse with prelude-built
 *      fusion maps, pad_loop incl. bulk padding, remap, with guards the prover may remove;
 *      reorder, parallel/vectorize/unroll; default: outermost loop parallel; then hfuse);
 *      vloop extents are UF calls
 *   3. lower_reductions: reductions become accumulator loops
 *   4. storage_lowering: storage transforms, dimension graph -> flat offsets through prefix-sum aux
 *      arrays, simplified (fusion maps cancel against prefix sums)
 *   5. allocate_intermediates: sizes computed by the library
 *   6. infer_arguments, then add_argument_checks (AOT: build_aux_arrays after the param and
 *      length checks, so callers pass no aux arrays)
 *   7. materialize_ufs: UF calls become loads of argument arrays
 *   8. simplify
 *   9. hoist_loads: loop-invariant aux/length-array reads move out of loops */
#include "lower/Lower.h"

#include <iostream>

#include "analysis/PipelineOrder.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

void dump(const LoweringContext &ctx, const char *pass, const Stmt &s) {
    if (ctx.debug >= 1) std::cerr << "-- cora: IR after " << pass << " --\n" << print(s) << "\n";
}

} // namespace

LoweredModule lower(const std::vector<TensorPtr> &outputs, const std::string &name, const LowerOptions &opts) {
    LoweringContext ctx;
    ctx.debug = opts.debug;
    ctx.remove_guards = opts.remove_guards;
    ctx.build_aux_in_kernel = opts.build_aux_in_kernel;
    ctx.prover = std::make_unique<ProverChain>(opts.use_z3);
    if (outputs.empty()) throw_compile_error("pipeline '", name, "' has no outputs");
    for (auto &o : outputs) {
        if (o->is_input)
            throw_compile_error("pipeline '", name, "': output '", o->name, "' is an input tensor, not a Func");
        ctx.outputs.push_back(o);
    }
    ctx.funcs = pipeline_order(ctx.outputs, &ctx.inputs);

    validate_pipeline(ctx);
    select_inlined(ctx);
    Stmt s = schedule_loops(ctx);
    dump(ctx, "schedule_loops", s);
    s = lower_reductions(s);
    dump(ctx, "lower_reductions", s);
    s = storage_lowering(s, ctx);
    dump(ctx, "storage_lowering", s);
    s = allocate_intermediates(s, ctx);
    dump(ctx, "allocate_intermediates", s);
    infer_arguments(s, ctx);
    s = add_argument_checks(s, ctx);
    dump(ctx, "add_argument_checks", s);
    s = materialize_ufs(s, ctx);
    dump(ctx, "materialize_ufs", s);
    s = simplify(s);
    dump(ctx, "simplify", s);
    if (ctx.sizes_body.defined()) ctx.sizes_body = simplify(materialize_ufs(ctx.sizes_body, ctx));
    s = hoist_loads(s, ctx);
    dump(ctx, "hoist_loads", s);

    LoweredModule m;
    m.prover_stats = ctx.prover->stats();
    m.prover_stats.guards_removed = ctx.guards_removed;
    m.prover_stats.guards_kept = ctx.guards_kept;
    if (ctx.debug >= 1) std::cerr << "-- cora: prover: " << m.prover_stats.str() << "\n";
    m.name = name;
    m.args = ctx.args;
    m.body = s;
    m.sizes_body = ctx.sizes_body;
    m.sizes_buffer = ctx.sizes_buffer;
    return m;
}

} // namespace cora::ir
