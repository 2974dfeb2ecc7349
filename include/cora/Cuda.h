/** \file CUDA programs: a pipeline scheduled with gpu_blocks / gpu_threads, printed as CUDA C++ and
 * compiled by NVRTC. To run one, compile the pipeline on the backend "cuda" (a GPU) or
 * "cuda-cpu-threads" (the same CUDA source on the CPU): CompileOptions::backend, cora/Backend.h. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** One architecture's code of a CudaProgram. */
struct CudaBinary {
    int arch;                ///< sm_<arch>, e.g. 80 (A100) or 90 (H100)
    std::string cubin;       ///< SASS, loadable with cuModuleLoadData
    std::string ptx;         ///< PTX for compute_<arch>
    std::string log;         ///< NVRTC's warnings, if any
    bool from_cache = false; ///< loaded from the kernel cache (CompileOptions::cache_dir), not compiled
};

/** The device side of a pipeline lowered for Target::Cuda. */
struct CudaProgram {
    std::string source;                 ///< CUDA C++ of the device kernels
    std::vector<std::string> kernels;   ///< their symbols, in launch order
    std::string lowered;                ///< the host entry's IR, with its launches
    std::string host_source;            ///< the host entry's C++ (cora_device_entry_fn of cora_runtime.h)
    std::string entry_symbol;           ///< its symbol
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
 * architectures, only the source is produced. NVRTC's output is kept in the kernel cache
 * (opts.cache_dir), keyed by the source, the architecture and NVRTC's version. */
CudaProgram compile_cuda(const Pipeline &p, const std::vector<int> &archs, CompileOptions opts = {});

/** Whether a CUDA GPU can run kernels here: the driver library (libcuda.so.1) loads, cuInit succeeds
 * and a device exists. When not, `why` says which step failed. */
bool cuda_device_available(std::string *why = nullptr);

} // namespace cora
