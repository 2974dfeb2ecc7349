/** \file Ahead-of-time CUDA libraries (compile_to_library with CUDA targets; driver/AotCuda.cpp). */
#pragma once

#include <string>
#include <vector>

#include "cora/Generator.h"

namespace cora::driver {

/** Whether the comma-separated target list names a CUDA target ("cuda-..."). */
bool names_cuda_target(const std::string &targets);

/** The architectures of a CUDA target list (sm_<NN> each), `*on_cpu_threads` set for
 * "cuda-cpu-threads"; CompileError naming the bad target for anything else, a repeated target or
 * cuda-cpu-threads combined with others. */
std::vector<int> check_cuda_target_list(const std::string &targets, bool *on_cpu_threads = nullptr);

/** Whether this CPU runs CPU target `target` ("host", "x86-64-v4", ...: the features the library
 * checks at run time); CompileError for an unknown target. */
bool host_runs_target(const std::string &target);
/** The vector width in bits of CPU target `target` (0 for "host": the building machine's). */
int target_vector_bits(const std::string &target);

/** CompileError unless compile_to_library builds `targets` (CPU targets, or CUDA ones): for a
 * generator's command line, checked before anything is built. */
void check_target_list(const std::string &targets);

/** Builds lib<fn>.so and <fn>.h for CUDA targets: "cuda-sm_<NN>" (one or more, e.g.
 * "cuda-sm_90,cuda-sm_80": the device code compiled by NVRTC for each, packed with the PTX of the
 * oldest into a fatbin by the toolkit's fatbinary and embedded in the library), or
 * "cuda-cpu-threads" alone (the kernels run on CPU threads: for tests without a GPU). One schedule
 * serves every architecture: per_target[0]'s. CompileError for a bad target list or a pipeline
 * the CUDA runtime does not support; RuntimeError when NVRTC or fatbinary cannot be found; Error
 * when a tool fails. */
AotResult compile_cuda_library(const std::vector<Pipeline> &per_target, const std::string &fn,
                               const AotOptions &options);

} // namespace cora::driver
