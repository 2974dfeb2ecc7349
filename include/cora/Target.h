/** \file Where a pipeline's kernels run. */
#pragma once

namespace cora {

enum class Target {
    /** The CPU: OpenMP loops, vector statements. Loops bound with gpu_blocks / gpu_threads are an
     * error here (CompileError naming the loop). */
    Host,
    /** An NVIDIA GPU: every op's outer loops are bound with gpu_blocks (and gpu_threads); the
     * kernels are CUDA C++ (cuda_source(), compiled by NVRTC in compile_cuda()). */
    Cuda,
    /** The same host/device split as Cuda, run on the CPU: each launch runs its blocks and,
     * in each block, its threads one after another (the kernel's code is the device code printed
     * as C++). Slow, and exact: indexing, bound checks and launch sizes of a GPU schedule are
     * checked against the reference on any machine. */
    CudaEmulated
};

/** Where a CUDA kernel (cora/Cuda.h: CudaKernel) or a CUDA AOT library runs its device code. */
enum class CudaBackend {
    Gpu,        ///< this machine's GPU, through the CUDA driver API
    CpuThreads, ///< the same CUDA source compiled for the CPU, a fiber per CUDA thread of a block on the launching
                ///< thread, __syncthreads a barrier (divergent ones reported): the whole CUDA path without a GPU,
                ///< for tests; one core runs every CUDA thread
};

inline bool is_gpu(Target t) { return t != Target::Host; }
inline const char *target_name(Target t) {
    return t == Target::Host ? "host" : t == Target::Cuda ? "cuda" : "cuda-emulated";
}

} // namespace cora
