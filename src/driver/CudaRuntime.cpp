/** \file The kernels of the backends "cuda" and "cuda-cpu-threads" (cora/Backend.h) and their
 * DeviceBuffers. Such a kernel is the host entry (codegen_cuda_host, JIT-compiled like a CPU
 * kernel) over a device of prelude/cora_device_runtime.h, the runtime CUDA AOT libraries embed too
 * (one driver-API table,
 * one set of launch checks, one staging of the shape's arrays):
 *  - cora_rt::GpuDevice: the driver API loaded with dlopen, the kernels compiled by NVRTC for the
 *    device's compute capability and loaded as a module. Every failing CUDA call is a RuntimeError
 *    naming the call and the error.
 *  - cora_rt::CpuThreadsDevice: the same CUDA source compiled for the CPU (codegen_cuda_on_cpu),
 *    host memory: everything but the driver runs without a GPU, so the tests cover it.
 * This file adds what is C++ API: exceptions, buffers that keep their kernel's device alive, and
 * the device state kernels share (Kernel::share_device_with). */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "cora/Backend.h"
#include "cora/Cuda.h"
#include "cora_runtime.h"
// After cora_runtime.h, which it builds on.
#include "cora_device_runtime.h"
#include "driver/JIT.h"
#include "driver/KernelImpl.h"
#include "driver/Lowering.h"
#include "driver/Nvrtc.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora {

bool cuda_device_available(std::string *why) {
    cora_rt::GpuDevice device;
    char error[1024] = {0};
    if (device.open(0, error, (int32_t)sizeof error) == CORA_OK) return true;
    if (why) *why = error;
    return false;
}

namespace {

/** A kernel's device, its failures RuntimeErrors; for CPU threads, with the library that holds the
 * kernels' CPU code. */
struct KernelDevice {
    driver::JitResult on_cpu; ///< declared first: destroyed after the device that calls into it
    std::unique_ptr<cora_rt::Device> device;

    void *alloc(size_t bytes) {
        void *p = nullptr;
        checked([&](char *e, int32_t n) {
            p = device->alloc(std::max<size_t>(bytes, 1), e, n);
            return p ? CORA_OK : CORA_ERROR_ALLOCATION;
        });
        return p;
    }
    void release(void *p) noexcept { device->release(p); }
    void upload(void *dst, const void *src, size_t bytes) {
        checked([&](char *e, int32_t n) { return device->upload(dst, src, bytes, e, n); });
    }
    void download(void *dst, const void *src, size_t bytes) {
        checked([&](char *e, int32_t n) { return device->download(dst, src, bytes, e, n); });
    }
    void zero(void *dst, size_t bytes) {
        checked([&](char *e, int32_t n) { return device->zero(dst, bytes, e, n); });
    }
    void synchronize(void *stream) {
        checked([&](char *e, int32_t n) { return device->synchronize(stream, e, n); });
    }
    void synchronize_all() {
        checked([&](char *e, int32_t n) { return device->synchronize_all(e, n); });
    }
    /** Runs one cora_rt call with an error buffer: a failure is a RuntimeError with its message. */
    template <typename Call> static void checked(Call &&call) {
        char error[1024] = {0};
        if (call(error, (int32_t)sizeof error) != CORA_OK) throw_runtime_error(error);
    }
};

} // namespace

/** What kernels that share a device (Kernel::share_device_with) have in common: their memory
 * space (each other's DeviceBuffers are valid arguments) and the shape arrays on the device, kept
 * by contents in one packed buffer (cora_rt::ShapeCache): kernels over the same ragged shape pay
 * one transfer between them. */
struct SharedDeviceState {
    std::mutex mu; ///< held for a whole host-entry call: staging and launches of one kernel at a time
    /** The device the cache's buffer was allocated on, kept alive for its release; declared before
     * `shapes` so that it is destroyed after it. */
    std::shared_ptr<KernelDevice> owner;
    cora_rt::ShapeCache shapes;
};

namespace {

/** A kernel of the CUDA runtime: its host entry and its device. */
struct CudaRuntimeKernel : Kernel::Impl, std::enable_shared_from_this<CudaRuntimeKernel> {
    CudaRuntimeKernel(std::string kernel_name, std::string backend_name)
        : Kernel::Impl(std::move(kernel_name), std::move(backend_name)) {}
    bool on_gpu = true;
    int device_ordinal = 0;
    ir::LoweredModule module;
    CudaProgram cuda;
    driver::JitResult jit;
    cora_device_entry_fn entry = nullptr;
    std::shared_ptr<KernelDevice> kernel_device;
    std::shared_ptr<SharedDeviceState> shared = std::make_shared<SharedDeviceState>();

    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const override;
    double time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const override;
    double compile_seconds() const override { return jit.compile_seconds; }
    bool from_cache() const override { return jit.from_cache; }
    std::string prover_stats() const override { return module.prover_stats.str(); }
    std::string prover_report() const override { return module.prover_stats.report(); }
    void run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream) const override;
    void synchronize(void *stream) const override { kernel_device->synchronize(stream); }
    DeviceBuffer alloc(const Tensor &t, const RaggedShape &shape) const override;
    DeviceBuffer view(const Tensor &t, const RaggedShape &shape, void *device_pointer, int64_t count) const override;
    int64_t shape_transfers() const override {
        std::lock_guard<std::mutex> lock(shared->mu);
        return shared->shapes.transfers();
    }
    void share_device_with(const Kernel::Impl &other) override;
    const CudaProgram &program() const override { return cuda; }
    int device() const override { return device_ordinal; }

    /** Device buffers for the tensors of `bindings`, inputs uploaded. */
    std::vector<DeviceBuffer> to_device(const RaggedShape &shape, const std::vector<Binding> &bindings,
                                        std::vector<DeviceBinding> &out) const;
    void require_argument(const Tensor &t) const;
};

} // namespace

struct DeviceBuffer::Impl {
    std::shared_ptr<const CudaRuntimeKernel> kernel; ///< keeps the device alive
    void *ptr = nullptr;
    Type type = Float32;
    int64_t count = 0;
    bool owned = true; ///< false: a view of the caller's device memory (Kernel::view), never freed here
    /** Allocated for an index tensor (Tensor::index_range): uploads are checked against its range. */
    std::shared_ptr<const ir::TensorNode> index_tensor;
    /** The smallest and largest value the host saw go in (an integer buffer uploaded, or zeroed by
     * alloc); none when the device wrote it or cora never saw its values (a view). An index
     * tensor's argument is accepted only when this lies within the tensor's declared range. */
    std::optional<std::pair<int64_t, int64_t>> known_values;
    ~Impl() {
        if (owned) kernel->kernel_device->release(ptr);
    }
};

const std::shared_ptr<DeviceBuffer::Impl> &device_buffer_impl(const DeviceBuffer &b) { return b.impl_; }

namespace {

/** The smallest and largest of `count` values of an integer `type` at `data` ({max, min}: none);
 * nothing for other types. */
std::optional<std::pair<int64_t, int64_t>> integer_extremes(const void *data, Type type, int64_t count) {
    if (type != Int32 && type != Int64) return std::nullopt;
    std::pair<int64_t, int64_t> r{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    for (int64_t i = 0; i < count; i++) {
        const int64_t v =
            type == Int32 ? (int64_t) static_cast<const int32_t *>(data)[i] : static_cast<const int64_t *>(data)[i];
        r = {std::min(r.first, v), std::max(r.second, v)};
    }
    return r;
}

/** Index tensor `t`'s check of host values (the CPU entry's, lower/AddArgumentChecks.cpp): throws
 * naming the first element outside its declared range. */
void check_index_values(const ir::TensorNode &t, const Buffer &host) {
    for (int64_t i = 0; i < host.size(); i++) {
        const int64_t v = host.type() == Int32 ? (int64_t)host.data<int32_t>()[i] : host.data<int64_t>()[i];
        if (v < t.min_value || v > t.max_value)
            throw_runtime_error("index tensor '", t.name, "': element ", i, " (packed position) is ", v,
                                ", outside its declared range [", t.min_value, ", ", t.max_value, "]");
    }
}

/** Calls the host entry on `args` (tensor pointers on the device), launches queued on `stream`. */
void call_entry(const CudaRuntimeKernel &k, const std::vector<cora_arg_t> &args, void *stream) {
    const std::shared_ptr<SharedDeviceState> shared = k.shared;
    std::lock_guard<std::mutex> lock(shared->mu);
    char error[1024] = {0};
    if (k.kernel_device->device->make_current(error, (int32_t)sizeof error) != CORA_OK)
        throw_runtime_error("kernel '", k.module.name, "': ", error);
    cora_rt::Run run(*k.kernel_device->device, shared->shapes, stream);
    cora_device_t services = run.services();
    const int64_t transfers = shared->shapes.transfers();
    int32_t rc = k.entry(args.data(), (int32_t)args.size(), &services, error, (int32_t)sizeof error);
    // A new copy of the shape's arrays lives on this kernel's device (the old one, released, was
    // on the previous owner's).
    if (shared->shapes.transfers() != transfers) shared->owner = k.kernel_device;
    if (rc != CORA_OK) throw_runtime_error("kernel '", k.module.name, "': ", error);
}

} // namespace

std::vector<DeviceBuffer> CudaRuntimeKernel::to_device(const RaggedShape &shape, const std::vector<Binding> &bindings,
                                                       std::vector<DeviceBinding> &out) const {
    // The host buffers' sizes and types first, named as a CPU kernel names them: the device
    // buffers are sized by the library, so the entry's own checks would not see a wrong host size.
    for (const Binding &b : bindings) {
        if (!b.buffer) throw_runtime_error("null buffer bound for tensor '", b.tensor.name(), "'");
        const int64_t expected = shape.size_of(b.tensor);
        if (b.buffer->size() != expected)
            throw_runtime_error("kernel '", module.name, "': buffer for tensor '", b.tensor.name(), "' has ",
                                b.buffer->size(), " elements, expected ", expected);
        if (b.buffer->type() != b.tensor.node()->type)
            throw_runtime_error("kernel '", module.name, "': buffer for tensor '", b.tensor.name(), "' holds ",
                                b.buffer->type().str(), " elements, expected ", b.tensor.node()->type.str());
    }
    std::vector<DeviceBuffer> buffers;
    buffers.reserve(bindings.size());
    for (const Binding &b : bindings) {
        buffers.push_back(alloc(b.tensor, shape));
        bool input = false;
        for (const ir::ModuleArg &a : module.entry().args)
            input = input || (a.tensor == b.tensor.node() && a.kind == ir::ModuleArg::Kind::Input);
        if (input) buffers.back().upload(*b.buffer);
    }
    for (size_t i = 0; i < bindings.size(); i++)
        out.emplace_back(bindings[i].tensor, buffers[i]);
    return buffers;
}

Kernel driver::compile_cuda_runtime_kernel(const Pipeline &p, CompileOptions opts, bool on_gpu,
                                           const std::string &backend) {
    opts.target = Target::Cuda;
    auto impl = std::make_shared<CudaRuntimeKernel>(p.name(), backend);
    impl->on_gpu = on_gpu;
    std::vector<int> archs;
    std::unique_ptr<cora_rt::GpuDevice> gpu;
    char error[1024] = {0};
    if (on_gpu) {
        gpu = std::make_unique<cora_rt::GpuDevice>();
        if (gpu->open(opts.device, error, (int32_t)sizeof error) != CORA_OK)
            throw_runtime_error("pipeline '", p.name(), "': no CUDA device to run on: ", error);
        archs.push_back(gpu->compute_capability());
    } else if (opts.device != 0) {
        throw_runtime_error("pipeline '", p.name(), "': backend '", backend, "' has device 0 only, got device ",
                            opts.device);
    }
    impl->device_ordinal = opts.device;
    ir::GpuLimits limits; // the device's, where there is one; else those every GPU has
    if (gpu) {
        limits.max_threads_per_block = gpu->max_threads_per_block();
        for (int i = 0; i < 3; i++) {
            limits.max_block[i] = gpu->max_block_dim(i);
            limits.max_grid[i] = gpu->max_grid_dim(i);
        }
    }
    impl->module = driver::lower_for_cuda(p, opts, limits);
    for (const ir::ModuleArg &a : impl->module.entry().args)
        if (a.tensor && a.tensor->static_values)
            throw_compile_error("pipeline '", p.name(), "': index tensor '", a.name,
                                "' has values known when compiling (index_values), which the CUDA runtime cannot "
                                "check in device memory; give it a range (index_range) instead");
    impl->cuda = driver::cuda_program(impl->module, archs, opts);
    const int debug = opts.debug >= 0 ? opts.debug : 0;
    const driver::JitOptions jo{opts.cache_dir, opts.cxx, debug};
    impl->kernel_device = std::make_shared<KernelDevice>();
    if (gpu) {
        std::vector<const char *> names;
        for (const std::string &k : impl->cuda.kernels)
            names.push_back(k.c_str());
        const std::string holds = "a cubin for sm_" + std::to_string(archs[0]);
        if (gpu->load_module(impl->cuda.binaries.at(0).cubin.data(), holds.c_str(), names.data(), (int)names.size(),
                             error, (int32_t)sizeof error) != CORA_OK)
            throw_runtime_error("pipeline '", p.name(), "': ", error);
        impl->kernel_device->device = std::move(gpu);
    } else {
        impl->kernel_device->on_cpu =
            driver::jit_compile(ir::codegen_cuda_on_cpu(impl->module), "cora_cuda_on_cpu_launch", jo);
        impl->kernel_device->device = std::make_unique<cora_rt::CpuThreadsDevice>(
            reinterpret_cast<cora_rt::CpuThreadsDevice::LaunchFn>(impl->kernel_device->on_cpu.entry));
    }
    impl->source = impl->cuda.host_source;
    impl->lowered = impl->cuda.lowered;
    impl->arguments = driver::argument_info(impl->module);
    impl->jit = driver::jit_compile(impl->source, ir::entry_symbol(impl->module), jo);
    impl->entry = reinterpret_cast<cora_device_entry_fn>(impl->jit.entry);
    return Kernel(impl);
}

void CudaRuntimeKernel::share_device_with(const Kernel::Impl &other_impl) {
    const auto *other = dynamic_cast<const CudaRuntimeKernel *>(&other_impl);
    if (other && other->shared == shared) return;
    if (!other || other->on_gpu != on_gpu)
        throw_runtime_error("kernel '", name, "' runs on backend '", backend, "' and kernel '", other_impl.name,
                            "' on backend '", other_impl.backend, "': they have no device memory to share");
    if (other->device_ordinal != device_ordinal)
        throw_runtime_error("kernel '", name, "' runs on CUDA device ", device_ordinal, " and kernel '", other->name,
                            "' on device ", other->device_ordinal, ": they have no device memory to share");
    shared = other->shared;
}

void CudaRuntimeKernel::require_argument(const Tensor &t) const {
    bool known = false;
    for (const ir::ModuleArg &a : module.entry().args)
        known = known || (a.tensor && a.tensor == t.node());
    if (!known) throw_runtime_error("tensor '", t.name(), "' is not an argument of kernel '", module.name, "'");
}

DeviceBuffer CudaRuntimeKernel::view(const Tensor &t, const RaggedShape &shape, void *device_pointer,
                                     int64_t count) const {
    require_argument(t);
    auto fail = [&](auto &&...msg) {
        throw_runtime_error("Kernel::view of tensor '", t.name(), "' (kernel '", module.name, "'): ", msg...);
    };
    const int64_t need = shape.size_of(t);
    if (count != need)
        fail(count, " elements given, the tensor has ", need,
             " in this shape (its packed size; Kernel::arguments() and the AOT header give the layout)");
    if (count > 0 && !device_pointer) fail("null device pointer for ", count, " elements");
    const Type type = t.node()->type;
    if ((uintptr_t)device_pointer % (uintptr_t)type.bytes() != 0)
        fail("device pointer ", device_pointer, " is not aligned to its ", type.bytes(), "-byte elements");
    auto b = std::make_shared<DeviceBuffer::Impl>();
    b->kernel = shared_from_this();
    b->type = type;
    b->count = count;
    b->ptr = device_pointer;
    b->owned = false;
    if (t.node()->has_value_range) b->index_tensor = t.node(); // its values unknown until uploaded
    return DeviceBuffer(b);
}

DeviceBuffer CudaRuntimeKernel::alloc(const Tensor &t, const RaggedShape &shape) const {
    require_argument(t);
    auto b = std::make_shared<DeviceBuffer::Impl>();
    b->kernel = shared_from_this();
    b->type = t.node()->type;
    b->count = shape.size_of(t);
    const size_t bytes = (size_t)b->count * (size_t)b->type.bytes();
    b->ptr = kernel_device->alloc(bytes);
    kernel_device->zero(b->ptr, bytes);
    if (t.node()->has_value_range) b->index_tensor = t.node();
    if (b->count > 0)
        b->known_values = std::make_pair(int64_t(0), int64_t(0)); // zeroed
    else
        b->known_values = integer_extremes(nullptr, Int64, 0);
    return DeviceBuffer(b);
}

Type DeviceBuffer::type() const { return impl_->type; }
int64_t DeviceBuffer::size() const { return impl_->count; }
void *DeviceBuffer::device_pointer() const { return impl_->ptr; }
const std::string &DeviceBuffer::backend() const { return impl_->kernel->backend; }
int DeviceBuffer::device() const { return impl_->kernel->device_ordinal; }

void DeviceBuffer::upload(const Buffer &host) {
    if (host.type() != impl_->type || host.size() != impl_->count)
        throw_runtime_error("DeviceBuffer::upload: the host buffer holds ", host.size(), " ", host.type().str(),
                            " elements, the device buffer ", impl_->count, " ", impl_->type.str());
    if (impl_->index_tensor) check_index_values(*impl_->index_tensor, host); // nothing uploaded if not
    impl_->kernel->kernel_device->upload(impl_->ptr, host.raw(), (size_t)impl_->count * (size_t)impl_->type.bytes());
    // A view's memory is the caller's, who may rewrite it through their own pointer: never trusted.
    std::lock_guard<std::mutex> lock(impl_->kernel->shared->mu);
    impl_->known_values.reset();
    if (impl_->owned) impl_->known_values = integer_extremes(host.raw(), host.type(), host.size());
}

void DeviceBuffer::download(Buffer &host) const {
    if (host.type() != impl_->type || host.size() != impl_->count)
        throw_runtime_error("DeviceBuffer::download: the host buffer holds ", host.size(), " ", host.type().str(),
                            " elements, the device buffer ", impl_->count, " ", impl_->type.str());
    if (host.read_only()) throw_runtime_error("DeviceBuffer::download into a read-only buffer");
    impl_->kernel->kernel_device->synchronize_all();
    impl_->kernel->kernel_device->download(host.raw(), impl_->ptr, (size_t)impl_->count * (size_t)impl_->type.bytes());
}

void CudaRuntimeKernel::run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream) const {
    std::vector<driver::BoundMemory> memory;
    for (const DeviceBinding &b : bindings) {
        if (!b.buffer) throw_runtime_error("null device buffer bound for tensor '", b.tensor.name(), "'");
        if (device_buffer_impl(*b.buffer)->kernel->shared != shared)
            throw_runtime_error("the device buffer bound for tensor '", b.tensor.name(),
                                "' belongs to another kernel's device; allocate it with this kernel's alloc(), or "
                                "share the kernels' device (Kernel::share_device_with)");
        memory.push_back({b.tensor, b.buffer->type(), b.buffer->device_pointer(), b.buffer->size(), false});
    }
    // Index tensors: the entry cannot read device memory, so their values are checked where they
    // came through the host (DeviceBuffer::upload); a buffer whose values cora has not seen is
    // refused, not trusted.
    std::vector<DeviceBuffer::Impl *> written;
    std::unique_lock<std::mutex> lock(shared->mu); // known_values, which upload() also sets
    for (const DeviceBinding &b : bindings)
        for (const ir::ModuleArg &a : module.entry().args)
            if (a.tensor == b.tensor.node() && a.kind == ir::ModuleArg::Kind::Output)
                written.push_back(device_buffer_impl(*b.buffer).get());
    for (const DeviceBinding &b : bindings)
        for (const ir::ModuleArg &a : module.entry().args) {
            if (a.tensor != b.tensor.node()) continue;
            DeviceBuffer::Impl &impl = *device_buffer_impl(*b.buffer);
            if (a.kind != ir::ModuleArg::Kind::Input || !a.tensor->has_value_range) continue;
            for (const DeviceBuffer::Impl *out : written) {
                const char *p = static_cast<const char *>(impl.ptr), *q = static_cast<const char *>(out->ptr);
                const size_t pn = (size_t)impl.count * (size_t)impl.type.bytes(),
                             qn = (size_t)out->count * (size_t)out->type.bytes();
                if (pn > 0 && qn > 0 && p < q + qn && q < p + pn)
                    throw_runtime_error("kernel '", module.name, "': index tensor '", a.name,
                                        "': its device memory is also bound as an output of the same run, which "
                                        "would rewrite the indices while they are read");
            }
            if (!impl.known_values)
                throw_runtime_error("kernel '", module.name, "': index tensor '", a.name,
                                    "': cora has not seen the values of its device buffer (a view of device memory, "
                                    "or written on the device), and cannot check them there; fill it with "
                                    "DeviceBuffer::upload, which checks them, or run on host buffers");
            const auto [lo, hi] = *impl.known_values;
            if (lo <= hi && (lo < a.tensor->min_value || hi > a.tensor->max_value))
                throw_runtime_error(
                    "kernel '", module.name, "': index tensor '", a.name, "': its device buffer holds values in [", lo,
                    ", ", hi, "], outside its declared range [", a.tensor->min_value, ", ", a.tensor->max_value, "]");
        }
    for (DeviceBuffer::Impl *impl : written)
        impl->known_values.reset(); // the device writes it (reset first: a failed launch may have written some)
    lock.unlock();
    call_entry(*this, driver::make_args(module, shape, memory), stream);
}

void CudaRuntimeKernel::run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
    driver::make_args(module, shape, bindings); // the host arguments' checks, before any copy
    std::vector<DeviceBinding> device_bindings;
    std::vector<DeviceBuffer> buffers = to_device(shape, bindings, device_bindings);
    run(shape, device_bindings, nullptr);
    kernel_device->synchronize(nullptr);
    for (size_t i = 0; i < bindings.size(); i++)
        for (const ir::ModuleArg &a : module.entry().args)
            if (a.tensor == bindings[i].tensor.node() && a.kind == ir::ModuleArg::Kind::Output)
                buffers[i].download(*bindings[i].buffer);
}

double CudaRuntimeKernel::time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const {
    if (reps < 1) throw_runtime_error("Kernel::time_ms: reps must be positive, got ", reps);
    driver::make_args(module, shape, bindings);
    std::vector<DeviceBinding> device_bindings;
    std::vector<DeviceBuffer> buffers = to_device(shape, bindings, device_bindings);
    // The warm-up also puts the shape's arrays on the device.
    return driver::median_call_ms(reps, [&] {
        run(shape, device_bindings, nullptr);
        kernel_device->synchronize(nullptr);
    });
}

} // namespace cora
