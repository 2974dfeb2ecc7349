/** \file GPU kernels: a pipeline scheduled with gpu_blocks / gpu_threads, compiled to CUDA. */
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

/** A pipeline compiled for the GPU of this machine: device kernels (NVRTC, for its compute
 * capability, loaded with the driver API) and a host entry (JIT-compiled C++) that checks the
 * arguments as a CPU kernel does, sizes the launches and launches them. */
class CudaKernel {
public:
    /** Runs on host buffers: copies the inputs, and the length and aux arrays (in one packed
     * transfer), to the device, runs the launches, copies the outputs back; returns when they are
     * there. RuntimeError on bad input (nothing written) or a failing CUDA call (naming the call
     * and the error). */
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** Milliseconds per call of the host entry (checks, launches, synchronisation) with the data
     * already on the device: the median of `reps` calls after one warm-up. Outputs are not copied back. */
    double time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const;

    const CudaProgram &program() const;
    /** The host entry's C++ source. */
    const std::string &host_source() const;

    struct Impl;
    explicit CudaKernel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<Impl> impl_;
};

/** Compiles `p` for the GPU found here (opts.target is ignored). RuntimeError when there is none
 * (with cuda_device_available's reason); CompileError as compile_cuda. */
CudaKernel compile_cuda_kernel(const Pipeline &p, CompileOptions opts = {});

} // namespace cora
