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

class CudaKernel;

/** Memory on a CudaKernel's device for one tensor, sized by the library for a shape
 * (CudaKernel::alloc), released when the last copy of the handle goes; or a view of the caller's
 * device memory (CudaKernel::view), never released by cora. */
class DeviceBuffer {
public:
    Type type() const;
    int64_t size() const; ///< elements
    /** The device address (a CUdeviceptr for CudaBackend::Gpu). */
    void *device_pointer() const;
    /** Copies `host` (the same type and size, else RuntimeError) to the device; returns when done. */
    void upload(const Buffer &host);
    /** Copies the device data into `host` (the same type and size); waits for the kernel's work. */
    void download(Buffer &host) const;

    struct Impl;
    explicit DeviceBuffer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

private:
    friend class CudaKernel;
    std::shared_ptr<Impl> impl_;
};

/** A tensor bound to device memory. */
struct DeviceBinding {
    Tensor tensor;
    DeviceBuffer *buffer;
    DeviceBinding(const Tensor &t, DeviceBuffer &b) : tensor(t), buffer(&b) {}
};

/** A pipeline compiled for a CUDA device: device kernels (NVRTC, for its compute capability, loaded
 * with the driver API) and a host entry (JIT-compiled C++) that checks the arguments as a CPU kernel
 * does, sizes the launches and launches them. */
class CudaKernel {
public:
    /** Runs on host buffers: copies the inputs, and the length and aux arrays (in one packed
     * transfer), to the device, runs the launches, copies the outputs back; returns when they are
     * there. RuntimeError on bad input (nothing written) or a failing CUDA call (naming the call
     * and the error). */
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** Runs on device buffers, without copying them. The shape's length and aux arrays go to the
     * device in one packed transfer the first time the kernel sees them and stay there while the
     * shape's contents are unchanged (a changed shape waits for the kernel's earlier launches,
     * then replaces them). Returns once the launches are queued on `stream` (a CUstream; nullptr:
     * the default stream): call synchronize() or DeviceBuffer::download for the results. */
    void run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream = nullptr) const;
    /** Waits for the work queued on `stream`. */
    void synchronize(void *stream = nullptr) const;
    /** Device memory for tensor `t` (an argument of the kernel) in `shape`, zeroed. */
    DeviceBuffer alloc(const Tensor &t, const RaggedShape &shape) const;
    /** A view of device memory the caller owns and keeps alive (cudaMalloc'd, a CUdeviceptr, a
     * framework's tensor data: PyTorch's data_ptr()) on this kernel's device, holding tensor `t`'s
     * `count` elements packed as `shape` stores them; nothing is allocated, copied or freed.
     * RuntimeError, naming the tensor, when `t` is not an argument of the kernel, when `count` is
     * not exactly shape.size_of(t), or when the pointer is null (with count > 0) or not aligned to
     * the element size. On CudaBackend::CpuThreads device memory is host memory. */
    DeviceBuffer view(const Tensor &t, const RaggedShape &shape, void *device_pointer, int64_t count) const;
    /** Milliseconds per call of the host entry (checks, launches, synchronisation) with the data
     * already on the device: the median of `reps` calls after one warm-up. Outputs are not copied back. */
    double time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const;

    /** Host-to-device transfers of shape arrays (the length and aux arrays the kernels read, packed)
     * so far: one per distinct shape contents in a row, whatever the number of runs; none for kernels
     * that read no such array (a dense op). Counted for all the kernels that share a device. */
    int64_t shape_transfers() const;
    /** From now on this kernel shares `other`'s device state (and that of every kernel sharing it):
     * each one's DeviceBuffers are valid arguments of the others (a pipeline of kernels on device
     * memory), and the shape arrays on the device are kept by contents for all of them, so kernels
     * run on the same ragged shape upload its arrays once between them. RuntimeError when the two
     * run on different backends (GPU, CPU threads). Call it before running the kernel, not while
     * another thread runs it; kernels that had joined this one's state keep that state. */
    void share_device_with(const CudaKernel &other);

    const CudaProgram &program() const;
    /** The host entry's C++ source. */
    const std::string &host_source() const;
    CudaBackend backend() const;
    /** The device's ordinal (CompileOptions::device). */
    int device() const;

    struct Impl;
    explicit CudaKernel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<Impl> impl_;
};

/** Compiles `p` for a CUDA device (opts.target is ignored): GPU number opts.device of this machine
 * (RuntimeError when there is none, with the reason), or CPU threads (device 0 only). CompileError
 * as compile_cuda. */
CudaKernel compile_cuda_kernel(const Pipeline &p, CompileOptions opts = {}, CudaBackend backend = CudaBackend::Gpu);

} // namespace cora
