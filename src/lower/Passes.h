/** \file Every lowering pass, in pipeline order (see Lower.cpp); each file holds its contract. */
#pragma once

#include "lower/LoweringContext.h"

namespace cora::ir {

void validate_pipeline(const LoweringContext &ctx);
/** The pipeline's Funcs split into those computed (producers first) and those expanded into their
 * readers (compute_inline), checked (InlineFuncs.cpp). */
struct InlineSelection {
    std::vector<TensorPtr> computed, inlined;
};
InlineSelection select_inlined(const LoweringContext &ctx);
/** `e` with every read of an inlined Func replaced by its definition (InlineFuncs.cpp). */
Expr inline_reads(const Expr &e, const LoweringContext &ctx);
Stmt lower_reductions(const Stmt &s);
/** Provide/Access become Store/Load at flat offsets (a sliced producer's within its slice);
 * `storage` gets every input's and Func's buffer and layout (StorageLowering.cpp). */
struct StorageLowered {
    Stmt body;
    StorageMap storage;
};
StorageLowered storage_lowering(const Stmt &s, const LoweringContext &ctx, const SlicedStorageMap &sliced = {});
/** Dismantled loops expanded, values known when compiling (the static values of the tensors in
 * `storage` among them) folded (DismantleLoops.cpp). */
Stmt dismantle_loops(const Stmt &s, const StorageMap &storage);
/** Allocations of every Func that is not an output (AllocateIntermediates.cpp). */
Stmt allocate_intermediates(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage);
/** The kernel's arguments in ABI order, every aux array included (InferArguments.cpp). */
std::vector<ModuleArg> infer_arguments(const Stmt &s, const LoweringContext &ctx, const StorageMap &storage);

/** The entry's body: argument checks, then `s`. With build_aux_in_kernel, the aux arrays are built
 * after the param and length checks instead of checked, and `size_query` (writing each tensor's
 * element count into `sizes`) is defined too. (AddArgumentChecks.cpp) */
struct CheckedBodies {
    Stmt entry, size_query;
    VarPtr sizes;
    /** The values known when compiling that the checks compare the arguments with. */
    std::vector<ConstantArray> constants;
};
CheckedBodies add_argument_checks(const Stmt &s, const std::vector<ModuleArg> &args,
                                  const std::vector<Permutation> &permutations, const LoweringContext &ctx);
/** `rest` inside heap allocations of the aux arrays among `args`, each built in place
 * (BuildAuxArrays.cpp). */
Stmt build_aux_arrays(const Stmt &rest, const std::vector<ModuleArg> &args, const LoweringContext &ctx);
/** UF calls become loads of the arrays among `args` (MaterializeUFs.cpp). */
Stmt materialize_ufs(const Stmt &s, const std::vector<ModuleArg> &args, const LoweringContext &ctx);
/** `args` with their expected counts materialized the same way. */
std::vector<ModuleArg> materialize_counts(const std::vector<ModuleArg> &args, const LoweringContext &ctx);
Stmt hoist_loads(const Stmt &s, const std::vector<ModuleArg> &args, const LoweringContext &ctx);
/** One level of parallel loops, each with its WorkSplit (LoopExecution.cpp). */
Stmt decide_loop_execution(const Stmt &s);
/** GPU targets: a reduction loop bound to threads becomes per-thread parts in registers and a
 * combine by one thread between two barriers (ThreadReductions.cpp). */
Stmt lower_thread_reductions(const Stmt &s, Target target);
/** GPU targets: each nest of block-bound loops becomes a device kernel (appended to `kernels`,
 * named `<kernel_prefix>_k<n>`) and a LaunchKernel in its place, its sizes checked against
 * `limits` (the device's); with `vector_copies` (CUDA), copies into shared memory take 4
 * consecutive elements per lane. (SplitHostDevice.cpp) */
Stmt split_host_device(const Stmt &s, const std::string &kernel_prefix, Target target, const GpuLimits &limits,
                       bool vector_copies, std::vector<LoweredFunc> &kernels);
/** Target::Cuda: a block-level register tile whose threads touch disjoint parts becomes one
 * slice per thread (SliceThreadTiles.cpp). */
Stmt slice_thread_tiles(const Stmt &kernel_body);
/** Target::Cuda: a float reduction over exactly one warp of threads combines its parts with
 * __shfl_xor_sync instead of shared memory (WarpReductions.cpp). */
Stmt warp_reductions(const Stmt &kernel_body, const std::vector<ForKind> &exact_bindings);
/** Target::Cuda: a serial loop whose body starts by copying shared tiles keeps them in `stages`
 * stages, so the CUDA printer can issue the copies stages - 1 iterations ahead
 * (PipelineSharedPanels.cpp); 1: nothing changes. */
Stmt pipeline_shared_panels(const Stmt &kernel_body, int stages, const GpuLimits &limits);
/** GPU targets: every gpu_mma loop of the kernel is a tensor-core tile every lane of its warp
 * reaches (TensorCoreTiles.cpp); CompileError otherwise. */
void check_mma_tiles(const LoweredFunc &kernel);
/** Target::Cuda: 32-bit integer arithmetic in the kernels where every integer provably fits, or a
 * 32-bit twin the entry launches when the values at the launch fit (NarrowIndices.cpp). */
Stmt narrow_kernel_indices(const Stmt &entry, std::vector<LoweredFunc> &kernels, const std::vector<ModuleArg> &args);

} // namespace cora::ir
