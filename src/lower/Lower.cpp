/** \file The pass order, top to bottom. Reading lower() tells the whole story:
 *
 *   1. collect funcs (producers first) and validate them: dims, extents, access bounds, storage cover
 *   1b. select_inlined: compute_inline Funcs leave the list; their reads get expanded
 *   2. the loop nests (Scheduling.h): choose_default_schedules for the ops left unscheduled (outer
 *      loops fused into one parallel loop, innermost vectorized, contractions register-tiled) and
 *      row_fused_defaults (a row's reductions computed at the row), then per op (each Func, then its
 *      op-split tails):
 *      plan_loops (the schedule's transforms replayed on front::LoopReplay: split, fuse with
 *      prelude-built fusion maps, pad_loop incl. bulk padding, remap; reorder; extents; loop
 *      kinds) -> check_gpu_bindings -> check_padded_iterations -> add_guards (placed, proved ones dropped) ->
 *      bound_loops_by_guards -> apply_cache_reads -> build_loop_nest (cache_write tiles,
 *      reduction init/update); then apply_compute_at, apply_specialize_interior and apply_hfuse over all ops.
 *      vloop extents are UF calls
 *   3. lower_reductions: reductions become accumulator loops
 *   4. storage_lowering: storage transforms, dimension graph -> flat offsets through prefix-sum aux
 *      arrays, simplified (fusion maps cancel against prefix sums); a compute_at producer that
 *      apply_compute_at found sliceable is indexed within one iteration's slice
 *   4b. dismantle_loops: dismantled loops expanded, one body per index, values known when
 *      compiling (static sparsity patterns) folded into each
 *   5. allocate_intermediates: sizes computed by the library; a sliced producer per iteration of
 *      its consumer's loop
 *   6. infer_arguments, then add_argument_checks (AOT: build_aux_arrays after the param and
 *      length checks, so callers pass no aux arrays, and a size query function)
 *   7. materialize_ufs: UF calls become loads of argument arrays
 *   8. simplify
 *   9. hoist_loads: loop-invariant reads of aux/length arrays and intermediates move out of loops
 *  10. decide_loop_execution: one level of parallel loops, each with its work split
 *  11. lower_thread_reductions (GPU targets): a reduction loop bound to threads becomes per-thread
 *      parts and a combine between two barriers
 *  12. split_host_device (GPU targets): each nest of block loops becomes a device kernel and a launch
 *  13. slice_thread_tiles (CUDA): block-level register tiles become per-thread slices
 *  14. warp_reductions (CUDA): a reduction over one warp combines with shuffles
 *  15. narrow_kernel_indices (CUDA): 32-bit integers in kernels where they provably fit, or a
 *      32-bit twin launched when the launch's values fit
 * The result is a Module (ir/Module.h): the entry, for AOT the size query, for GPU targets the
 * device kernels; each pass returns
 * what later ones need (arguments, permutations, guard counts), and the LoweringContext holds only
 * what every pass shares (options, prover, aux table, tensors, storage).
 * After each pass the IR's form is checked for its stage (StageCheck.h); with CORA_DEBUG >= 1
 * each pass prints its IR and the time it took. */
#include "lower/Lower.h"

#include <cctype>
#include <chrono>
#include <iostream>

#include "analysis/PipelineOrder.h"
#include "analysis/Simplify.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"
#include "lower/Scheduling.h"
#include "lower/StageCheck.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Times a pass, checks the IR it returns for `stage`, and prints it under CORA_DEBUG. */
class PassRunner {
public:
    explicit PassRunner(const LoweringContext &ctx) : ctx_(ctx) {}
    template <typename F> Stmt run(const char *pass, Stage stage, F &&f) {
        auto t0 = std::chrono::steady_clock::now();
        Stmt s = f();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        check_stage(s, stage, pass);
        if (ctx_.debug >= 1) std::cerr << "-- cora: IR after " << pass << " (" << ms << " ms) --\n" << print(s) << "\n";
        return s;
    }
    template <typename F> void run_step(const char *step, F &&f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (ctx_.debug >= 1) std::cerr << "-- cora: " << step << " (" << ms << " ms)\n";
    }

private:
    const LoweringContext &ctx_;
};

/** The prefix of device kernel symbols: the module name made an identifier. */
std::string kernel_prefix(const std::string &module) {
    std::string s = "cora_";
    for (char c : module)
        s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return s;
}

} // namespace

LoweredModule lower(const std::vector<TensorPtr> &outputs, const std::string &name, const LowerOptions &opts) {
    LoweringContext ctx;
    ctx.debug = opts.debug;
    ctx.remove_guards = opts.remove_guards;
    ctx.build_aux_in_kernel = opts.build_aux_in_kernel;
    ctx.target = opts.target;
    ctx.gpu_limits = opts.gpu_limits;
    ctx.prover = std::make_unique<ProverChain>(opts.use_z3);
    if (outputs.empty()) throw_compile_error("pipeline '", name, "' has no outputs");
    for (auto &o : outputs) {
        if (o->is_input)
            throw_compile_error("pipeline '", name, "': output '", o->name, "' is an input tensor, not a Func");
        ctx.outputs.push_back(o);
    }
    ctx.funcs = pipeline_order(ctx.outputs, &ctx.inputs);

    PassRunner pass(ctx);
    ctx.prover->set_context("validation");
    pass.run_step("validate_pipeline", [&] { validate_pipeline(ctx); });
    pass.run_step("select_inlined", [&] {
        InlineSelection selected = select_inlined(ctx);
        ctx.funcs = std::move(selected.computed);
        ctx.inlined = std::move(selected.inlined);
    });
    const std::vector<TensorPtr> ops = scheduled_ops(ctx);
    DefaultSchedules defaults;
    pass.run_step("choose_default_schedules", [&] {
        defaults =
            choose_default_schedules(ops, DefaultScheduleTarget{ctx.target, opts.vector_bits, &opts.contraction_tiles},
                                     [&](const Expr &e) { return inline_reads(e, ctx); });
        ctx.default_schedules = defaults.schedules;
        for (auto &[op, schedule] : row_fused_defaults(ops, defaults.schedules, ctx))
            ctx.default_schedules[op] = schedule;
    });
    std::vector<Stmt> nests;
    std::vector<Permutation> permutations; // loop remaps, checked at run time
    int guards_removed = 0, guards_kept = 0;
    auto loop_nest = [&](const TensorPtr &op) {
        ctx.prover->set_context("schedule of Func '" + op->name + "'" +
                                (op->defined_at.empty() ? "" : " (" + op->defined_at + ")"));
        LoopPlan plan = plan_loops(op, ctx);
        check_gpu_bindings(plan, ctx.target);
        std::string pad_unsafe = check_padded_iterations(plan, ctx);
        PlacedGuards guards = add_guards(plan, pad_unsafe, ctx);
        bound_loops_by_guards(plan, guards);
        if (plan.schedule->interior_at) (void)plan.position_of(plan.schedule->interior_at, "specialize_interior");
        CacheReads reads = apply_cache_reads(plan, ctx);
        Stmt nest = build_loop_nest(plan, guards, reads, ctx);
        const auto &remaps = plan.transformed.permutations; // recorded once the nest is built
        permutations.insert(permutations.end(), remaps.begin(), remaps.end());
        guards_removed += guards.removed;
        guards_kept += guards.kept;
        return nest;
    };
    pass.run_step("loop nests", [&] {
        for (const TensorPtr &op : ops) {
            try {
                nests.push_back(loop_nest(op));
            } catch (const CompileError &e) {
                // A register-tiled default the prover or a cache_read cannot accept (a box it cannot
                // bound, say) gives way to the untiled default; any other schedule's error stands.
                auto untiled = defaults.untiled.find(op.get());
                if (untiled == defaults.untiled.end()) throw;
                if (ctx.debug >= 1)
                    std::cerr << "-- cora: Func '" << op->name << "' takes its untiled default schedule: " << e.what()
                              << "\n";
                ctx.default_schedules[op.get()] = untiled->second;
                std::erase_if(defaults.tunable, [&](const TunableContraction &t) { return t.func == op->name; });
                nests.push_back(loop_nest(op));
            }
        }
    });
    ctx.prover->set_context("compute_at, hfuse and storage lowering");
    SlicedStorageMap sliced; // compute_at producers stored one iteration's slice at a time
    pass.run_step("compute_at", [&] { sliced = apply_compute_at(ops, nests, ctx); });
    pass.run_step("specialize_interior", [&] { apply_specialize_interior(ops, nests, ctx); });
    Stmt s = pass.run("hfuse", Stage::Scheduled, [&] { return apply_hfuse(ops, nests, ctx); });
    s = pass.run("lower_reductions", Stage::ReductionsLowered, [&] { return lower_reductions(s); });
    StorageMap storage; // every tensor's buffer and layout, from storage lowering on
    s = pass.run("storage_lowering", Stage::StorageLowered, [&] {
        StorageLowered lowered = storage_lowering(s, ctx, sliced);
        storage = std::move(lowered.storage);
        return lowered.body;
    });
    s = pass.run("dismantle_loops", Stage::StorageLowered, [&] { return dismantle_loops(s, storage); });
    s = pass.run("allocate_intermediates", Stage::StorageLowered,
                 [&] { return allocate_intermediates(s, ctx, storage); });
    std::vector<ModuleArg> args;
    pass.run_step("infer_arguments", [&] { args = infer_arguments(s, ctx, storage); });
    CheckedBodies checked;
    s = pass.run("add_argument_checks", Stage::StorageLowered, [&] {
        checked = add_argument_checks(s, args, permutations, ctx);
        return checked.entry;
    });
    s = pass.run("materialize_ufs", Stage::Materialized, [&] { return materialize_ufs(s, args, ctx); });
    args = materialize_counts(args, ctx);
    s = pass.run("simplify", Stage::Materialized, [&] { return simplify(s); });
    s = pass.run("hoist_loads", Stage::Materialized, [&] { return hoist_loads(s, args, ctx); });
    s = pass.run("decide_loop_execution", Stage::Materialized, [&] { return decide_loop_execution(s); });
    s = pass.run("lower_thread_reductions", Stage::Materialized,
                 [&] { return lower_thread_reductions(s, ctx.target); });
    std::vector<LoweredFunc> device_kernels;
    s = pass.run("split_host_device", Stage::Materialized, [&] {
        return split_host_device(s, kernel_prefix(name), ctx.target, ctx.gpu_limits, opts.vector_gpu_copies,
                                 device_kernels);
    });
    if (ctx.target == Target::Cuda) // the emulation runs thread loops as loops: whole tiles, shared parts
        for (LoweredFunc &k : device_kernels) {
            k.body = pass.run("slice_thread_tiles", Stage::Materialized, [&] { return slice_thread_tiles(k.body); });
            k.body = pass.run("warp_reductions", Stage::Materialized,
                              [&] { return warp_reductions(k.body, k.exact_bindings); });
            k.body = pass.run("pipeline_shared_panels", Stage::Materialized,
                              [&] { return pipeline_shared_panels(k.body, opts.gpu_copy_stages, ctx.gpu_limits); });
        }
    for (const LoweredFunc &k : device_kernels)
        pass.run_step("check_mma_tiles", [&] { check_mma_tiles(k); });
    if (ctx.target == Target::Cuda && opts.narrow_gpu_indices)
        s = pass.run("narrow_kernel_indices", Stage::Materialized,
                     [&] { return narrow_kernel_indices(s, device_kernels, args); });

    LoweredModule m;
    m.name = name;
    LoweredFunc entry{FunctionKind::Entry, {}, {}, s, {}, {}, {}, {}};
    for (const ModuleArg &a : args) { // AOT kernels build their aux arrays: callers pass none
        if (!(ctx.build_aux_in_kernel && a.kind == ModuleArg::Kind::AuxArray))
            entry.args.push_back(a);
        else
            m.built_aux_arrays.push_back(a.var);
    }
    auto attach_constants = [&](LoweredFunc &f) { // the constant arrays its body reads
        for (const ConstantArray &c : checked.constants) {
            bool used = false;
            visit_exprs(f.body, [&](const Expr &e) {
                if (const Load *l = e.as<Load>()) used = used || l->buffer == c.var;
            });
            if (used) f.constants.push_back(c);
        }
    };
    attach_constants(entry);
    m.functions.push_back(entry);
    if (checked.size_query.defined()) {
        LoweredFunc sizes{FunctionKind::SizeQuery, {}, {checked.sizes}, {}, {}, {}, {}, {}};
        sizes.body = pass.run("materialize_ufs + simplify (size query)", Stage::Materialized, [&] {
            return decide_loop_execution(simplify(materialize_ufs(checked.size_query, args, ctx)));
        });
        for (const ModuleArg &a : args)
            if (a.kind == ModuleArg::Kind::Param || a.kind == ModuleArg::Kind::LengthArray) sizes.args.push_back(a);
        attach_constants(sizes);
        m.functions.push_back(sizes);
    }
    for (const LoweredFunc &k : device_kernels) {
        if (ctx.debug >= 1) std::cerr << "-- cora: device kernel " << k.name << " --\n" << print(k.body) << "\n";
        m.functions.push_back(k);
    }
    m.prover_stats = ctx.prover->stats();
    m.tunable = defaults.tunable;
    m.prover_stats.guards_removed = guards_removed;
    m.prover_stats.guards_kept = guards_kept;
    if (ctx.debug >= 1) std::cerr << "-- cora: prover: " << m.prover_stats.report() << "\n";
    return m;
}

} // namespace cora::ir
