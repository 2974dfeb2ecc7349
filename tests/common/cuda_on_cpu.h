// The whole CUDA path of a pipeline without a GPU: lowered for Target::Cuda (per-thread tile
// slices included), the host entry (codegen_cuda_host) and the runtime's device services, with the
// CUDA source run on CPU threads (the backend "cuda-cpu-threads": codegen_cuda_on_cpu).
#pragma once

#include <cora/Cuda.h>
#include <cora/cora.h>

#include <string>

namespace cora::testing {

/** Target::CudaEmulated: the device kernels run on the CPU block by block, thread loops as loops. */
inline CompileOptions emulated() {
    CompileOptions o;
    o.target = Target::CudaEmulated;
    return o;
}

inline Kernel cuda_on_cpu(const Pipeline &p) { return p.compile("cuda-cpu-threads"); }

/** The kernels' IR, one after another. */
inline std::string kernel_ir(const Kernel &k) {
    std::string s;
    for (const std::string &ir : k.program().kernel_ir)
        s += ir + "\n";
    return s;
}

} // namespace cora::testing
