/** \file GPU kernels: a pipeline scheduled with gpu_blocks / gpu_threads, compiled to CUDA. */
#pragma once

#include <string>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** One architecture's code of a CudaProgram. */
struct CudaBinary {
    int arch;          ///< sm_<arch>, e.g. 80 (A100) or 90 (H100)
    std::string cubin; ///< SASS, loadable with cuModuleLoadData
    std::string ptx;   ///< PTX for compute_<arch>
    std::string log;   ///< NVRTC's warnings, if any
};

/** The device side of a pipeline lowered for Target::Cuda. */
struct CudaProgram {
    std::string source;                 ///< CUDA C++ of the device kernels
    std::vector<std::string> kernels;   ///< their symbols, in launch order
    std::string lowered;                ///< the host entry's IR, with its launches
    std::vector<std::string> kernel_ir; ///< each kernel's IR
    std::vector<CudaBinary> binaries;   ///< one per requested architecture
    std::string nvrtc_version;
};

/** Whether the CUDA runtime compiler (NVRTC) can be loaded here; when not, `why` lists what was
 * tried. A CUDA toolkit is needed only for this; a GPU is not. */
bool cuda_compiler_available(std::string *why = nullptr);

/** Lowers `p` for Target::Cuda (opts.target is ignored) and compiles its device kernels with
 * NVRTC for each sm_<arch> in `archs`. CompileError for a schedule that is illegal on a GPU or
 * code NVRTC rejects (with its log); RuntimeError when NVRTC cannot be loaded. With no
 * architectures, only the source is produced. */
CudaProgram compile_cuda(const Pipeline &p, const std::vector<int> &archs, CompileOptions opts = {});

} // namespace cora
