/** \file What the lowering produces for a backend (cora/Backend.h): host loops or a host/device split. */
#pragma once

namespace cora {

enum class Target {
    /** The CPU: OpenMP loops, vector statements. Loops bound with gpu_blocks / gpu_threads are an
     * error here (CompileError naming the loop). */
    Host,
    /** An NVIDIA GPU: every op's outer loops are bound with gpu_blocks (and gpu_threads); the
     * kernels are CUDA C++ (compile_cuda(); the backends "cuda" and "cuda-cpu-threads"). */
    Cuda,
    /** The same host/device split as Cuda, run on the CPU: each launch runs its blocks and,
     * in each block, its threads one after another (the kernel's code is the device code printed
     * as C++). Slow, and exact: indexing, bound checks and launch sizes of a GPU schedule are
     * checked against the reference on any machine. */
    CudaEmulated
};

inline bool is_gpu(Target t) { return t != Target::Host; }
inline const char *target_name(Target t) {
    return t == Target::Host ? "host" : t == Target::Cuda ? "cuda" : "cuda-emulated";
}

} // namespace cora
