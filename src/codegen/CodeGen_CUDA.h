/** \file The CUDA printer of a module's device kernels (Target::Cuda).
 *
 * Each device kernel (FunctionKind::Device) becomes `extern "C" __global__ void <name>(params)`,
 * its parameters as kernel_parameters() declares them. A loop bound to a block or thread axis
 * prints as its variable set from blockIdx / threadIdx, with the body under `index < extent`
 * (CodeGen_C's bound-loop form); other loops are plain loops (`#pragma unroll` for unrolled and
 * vectorized ones of constant extent); a per-thread tile is a local array. Math is CUDA's device
 * library (expf, fminf, ...), integer / and % are floor division and Euclidean modulo as on the
 * CPU, so the two targets compute the same values. The source needs no header: NVRTC compiles it
 * as it is (driver/Nvrtc.h). The host entry is C++ for the host compiler (codegen_cuda_host). */
#pragma once

#include <string>

#include "codegen/CodeGen_C.h"

namespace cora::ir {

/** The CUDA C++ source of the module's device kernels (empty module: the prologue only). */
std::string codegen_cuda(const Module &m);

/** The CUDA source of the module's kernels wrapped to run on CPU threads (CudaOnCpu.cpp): a thread
 * per CUDA thread, __shared__ per block, __syncthreads a barrier (divergent ones reported). It
 * defines `extern "C" int cora_cuda_on_cpu_launch(int kernel, const long long *grid, const long long
 * *threads, void **params, char *error, int error_size)`, cora_device_t::launch's contract. For
 * tests of the CUDA path without a GPU. */
std::string codegen_cuda_on_cpu(const Module &m);

/** The C++ source of the module's host entry for the CUDA runtime: the CPU entry's argument checks
 * (and, lowered with build_aux_in_kernel, the building of its aux arrays), then each LaunchKernel as
 * cora_device_t::stage_shape for the length and aux arrays the kernels read and a call of
 * cora_device_t::launch (prelude/cora_runtime.h) with the kernel's parameters (those arrays replaced
 * by their device copies); intermediates the kernels use are allocated on the device. Compiled by
 * the host C++ compiler like a CPU kernel. `linkage` prefixes the definition (AOT libraries: static). */
std::string codegen_cuda_host(const Module &m, const std::string &linkage = "extern \"C\" ");

} // namespace cora::ir
