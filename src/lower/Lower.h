/** \file The lowering pipeline: definitions -> a module of functions (ir/Module.h). */
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cora/ContractionTile.h"
#include "cora/Target.h"
#include "lower/GpuLimits.h"
#include "lower/LoweringContext.h"

namespace cora::ir {

struct LowerOptions {
    int debug = 0;             ///< >= 1: print the IR after each pass and the prover statistics
    bool use_z3 = true;        ///< try Z3 on obligations the built-in prover does not prove
    bool remove_guards = true; ///< drop schedule guards the prover shows redundant
    /** Build the aux arrays (prefix sums, fusion maps, longest-first orders) inside the kernel
     * from the params and length arrays, so callers pass only those and the tensors (AOT). */
    bool build_aux_in_kernel = false;
    Target target = Target::Host; ///< a GPU target splits host from device (lower/SplitHostDevice.cpp)
    GpuLimits gpu_limits;         ///< a GPU target's launch limits, checked when splitting
    /** The CPU's vector register width in bits, which default schedules tile contractions for;
     * 0: no register-tiled default schedules. */
    int vector_bits = 0;
    /** Register tiles chosen for contractions, by Func name (CompileOptions::contraction_tiles). */
    std::map<std::string, ContractionTile> contraction_tiles;
    /** Target::Cuda: kernels do their integer arithmetic in 32 bits where it provably fits
     * (lower/NarrowIndices.cpp); false: always 64 bits. */
    bool narrow_gpu_indices = true;
    /** Target::Cuda: copies into shared memory take 4 consecutive 4-byte elements per thread, which
     * the CUDA printer copies as 16 bytes where they are contiguous and aligned. */
    bool vector_gpu_copies = true;
    /** Target::Cuda: the stages of shared tiles copied at the start of a serial loop, whose copies
     * the kernel issues stages - 1 iterations ahead (PipelineSharedPanels.cpp); 1: not pipelined. */
    int gpu_copy_stages = 2;
};

/** The most stages of shared tiles pipeline_shared_panels takes (LowerOptions::gpu_copy_stages). */
constexpr int kMaxGpuCopyStages = 4;

/** A module with what the prover did for it. */
struct LoweredModule : Module {
    ProverStats prover_stats;
    std::vector<TunableContraction> tunable;
};

/** Lower the pipeline computing `outputs`. */
LoweredModule lower(const std::vector<TensorPtr> &outputs, const std::string &name, const LowerOptions &opts);

} // namespace cora::ir
