/** \file The CUDA device runtime (cora/Cuda.h: CudaKernel, DeviceBuffer). A CudaKernel is the host
 * entry (codegen_cuda_host, JIT-compiled like a CPU kernel) over a Device, which launches the
 * kernels and holds their memory:
 *  - GpuDevice: the driver API loaded with dlopen (libcuda.so.1 comes with the GPU driver, not the
 *    toolkit, so cora links no CUDA library), the kernels compiled by NVRTC for the GPU found and
 *    loaded as a module. Every failing CUDA call is a RuntimeError naming the call and the error.
 *  - CpuThreadsDevice: the same CUDA source compiled for the CPU (codegen_cuda_on_cpu), host memory:
 *    everything but the driver runs without a GPU, so the tests cover it.
 * The cora_device_t services the entry calls: launches (on the run's stream), device memory for
 * intermediates, and the device copies of the length and aux arrays: all of them packed into one
 * buffer, uploaded in one transfer when the kernel first sees the shape's contents and kept while
 * they stay the same. */
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "cora/Cuda.h"
#include "cora_runtime.h"
#include "driver/JIT.h"
#include "driver/Lowering.h"
#include "driver/Nvrtc.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora {

namespace {

using CUdeviceptr = unsigned long long;

/** The driver API entry points cora calls (CUresult is an int enum; handles are pointers). */
struct CudaDriver {
    void *handle = nullptr;
    void *context = nullptr; ///< device 0's primary context
    int (*init)(unsigned) = nullptr;
    int (*device_count)(int *) = nullptr;
    int (*device_get)(int *, int) = nullptr;
    int (*device_attribute)(int *, int, int) = nullptr;
    int (*primary_retain)(void **, int) = nullptr;
    int (*primary_release)(int) = nullptr;
    int (*ctx_set_current)(void *) = nullptr;
    int (*ctx_synchronize)() = nullptr;
    int (*module_load_data)(void **, const void *) = nullptr;
    int (*module_unload)(void *) = nullptr;
    int (*module_function)(void **, void *, const char *) = nullptr;
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                  void **) = nullptr;
    int (*mem_alloc)(CUdeviceptr *, size_t) = nullptr;
    int (*mem_free)(CUdeviceptr) = nullptr;
    int (*htod)(CUdeviceptr, const void *, size_t) = nullptr;
    int (*dtoh)(void *, CUdeviceptr, size_t) = nullptr;
    int (*memset8)(CUdeviceptr, unsigned char, size_t) = nullptr;
    int (*stream_synchronize)(void *) = nullptr;
    int (*error_name)(int, const char **) = nullptr;

    std::string error(int rc) const {
        const char *name = nullptr;
        if (error_name) error_name(rc, &name);
        return (name ? std::string(name) : "CUDA error") + " (" + std::to_string(rc) + ")";
    }
    void check(int rc, const char *call) const {
        if (rc != 0) throw_runtime_error("CUDA call ", call, " failed: ", error(rc));
    }
};

template <typename F> bool bind(void *h, const char *name, F &fn) {
    fn = reinterpret_cast<F>(dlsym(h, name));
    return fn != nullptr;
}

/** The driver, initialised, with device 0's primary context current; nullptr and `why` otherwise. */
std::shared_ptr<CudaDriver> load_driver(std::string *why, int *device = nullptr) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (why) *why = std::string("the CUDA driver library libcuda.so.1 is not installed (") + (e ? e : "") + ")";
        return nullptr;
    }
    auto d = std::shared_ptr<CudaDriver>(new CudaDriver, [](CudaDriver *p) {
        if (p->handle) dlclose(p->handle);
        delete p;
    });
    d->handle = h;
    bool ok = bind(h, "cuInit", d->init) && bind(h, "cuDeviceGetCount", d->device_count) &&
              bind(h, "cuDeviceGet", d->device_get) && bind(h, "cuDeviceGetAttribute", d->device_attribute) &&
              bind(h, "cuDevicePrimaryCtxRetain", d->primary_retain) &&
              bind(h, "cuDevicePrimaryCtxRelease_v2", d->primary_release) &&
              bind(h, "cuCtxSetCurrent", d->ctx_set_current) && bind(h, "cuCtxSynchronize", d->ctx_synchronize) &&
              bind(h, "cuModuleLoadData", d->module_load_data) && bind(h, "cuModuleUnload", d->module_unload) &&
              bind(h, "cuModuleGetFunction", d->module_function) && bind(h, "cuLaunchKernel", d->launch) &&
              bind(h, "cuMemAlloc_v2", d->mem_alloc) && bind(h, "cuMemFree_v2", d->mem_free) &&
              bind(h, "cuMemcpyHtoD_v2", d->htod) && bind(h, "cuMemcpyDtoH_v2", d->dtoh) &&
              bind(h, "cuMemsetD8_v2", d->memset8) && bind(h, "cuStreamSynchronize", d->stream_synchronize) &&
              bind(h, "cuGetErrorName", d->error_name);
    if (!ok) {
        if (why) *why = "libcuda.so.1 lacks driver API entry points cora needs";
        return nullptr;
    }
    int rc = d->init(0), count = 0;
    if (rc == 0) rc = d->device_count(&count);
    if (rc != 0 || count == 0) {
        if (why) *why = rc != 0 ? "cuInit failed: " + d->error(rc) : std::string("no CUDA device is present");
        return nullptr;
    }
    int dev = 0;
    void *ctx = nullptr;
    rc = d->device_get(&dev, 0);
    if (rc == 0) rc = d->primary_retain(&ctx, dev);
    if (rc == 0) rc = d->ctx_set_current(ctx);
    d->context = ctx;
    if (rc != 0) {
        if (why) *why = "cannot open a context on device 0: " + d->error(rc);
        return nullptr;
    }
    if (device) *device = dev;
    return d;
}

} // namespace

bool cuda_device_available(std::string *why) { return load_driver(why) != nullptr; }

namespace {

/** What a CudaKernel needs of the device it runs on. */
class Device {
public:
    virtual ~Device() = default;
    /** `bytes` of device memory (at least 1); RuntimeError when there is none. */
    virtual void *alloc(size_t bytes) = 0;
    virtual void release(void *p) noexcept = 0;
    virtual void upload(void *dst, const void *src, size_t bytes) = 0;
    virtual void download(void *dst, const void *src, size_t bytes) = 0;
    virtual void zero(void *dst, size_t bytes) = 0;
    /** cora_device_t::launch on `stream`. */
    virtual int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *stream,
                           char *error, int32_t error_size) = 0;
    virtual void synchronize(void *stream) = 0;
    /** Waits for everything queued on the device. */
    virtual void synchronize_all() = 0;
};

class GpuDevice : public Device {
public:
    GpuDevice(std::shared_ptr<CudaDriver> d, const CudaProgram &program) : d_(std::move(d)), names_(program.kernels) {
        d_->check(d_->module_load_data(&module_, program.binaries.at(0).cubin.data()), "cuModuleLoadData");
        for (const std::string &k : program.kernels) {
            void *fn = nullptr;
            d_->check(d_->module_function(&fn, module_, k.c_str()), "cuModuleGetFunction");
            functions_.push_back(fn);
        }
    }
    ~GpuDevice() override {
        if (module_) d_->module_unload(module_);
    }
    void *alloc(size_t bytes) override {
        current();
        CUdeviceptr p = 0;
        int rc = d_->mem_alloc(&p, std::max<size_t>(bytes, 1));
        if (rc != 0) throw_runtime_error("CUDA call cuMemAlloc of ", bytes, " bytes failed: ", d_->error(rc));
        return reinterpret_cast<void *>(p);
    }
    void release(void *p) noexcept override {
        if (p) d_->mem_free(reinterpret_cast<CUdeviceptr>(p));
    }
    void upload(void *dst, const void *src, size_t bytes) override {
        current();
        if (bytes) d_->check(d_->htod(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
    }
    void download(void *dst, const void *src, size_t bytes) override {
        current();
        if (bytes) d_->check(d_->dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
    }
    void zero(void *dst, size_t bytes) override {
        current();
        if (bytes) d_->check(d_->memset8(reinterpret_cast<CUdeviceptr>(dst), 0, bytes), "cuMemsetD8");
    }
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *stream,
                   char *error, int32_t error_size) override {
        int rc =
            d_->launch(functions_.at((size_t)kernel), (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                       (unsigned)threads[0], (unsigned)threads[1], (unsigned)threads[2], 0, stream, params, nullptr);
        if (rc == 0) return 0;
        std::snprintf(error, (size_t)error_size, "CUDA call cuLaunchKernel (%s) failed: %s",
                      names_.at((size_t)kernel).c_str(), d_->error(rc).c_str());
        return 3;
    }
    void synchronize(void *stream) override {
        current();
        d_->check(d_->stream_synchronize(stream), "cuStreamSynchronize");
    }
    void synchronize_all() override {
        current();
        d_->check(d_->ctx_synchronize(), "cuCtxSynchronize");
    }

private:
    /** The context is current per thread: a kernel may run on another thread than it was built on. */
    void current() { d_->check(d_->ctx_set_current(d_->context), "cuCtxSetCurrent"); }
    std::shared_ptr<CudaDriver> d_;
    std::vector<std::string> names_;
    void *module_ = nullptr;
    std::vector<void *> functions_;
};

class CpuThreadsDevice : public Device {
public:
    CpuThreadsDevice(const ir::Module &m, const driver::JitOptions &jo)
        : jit_(driver::jit_compile(ir::codegen_cuda_on_cpu(m), "cora_cuda_on_cpu_launch", jo)),
          launch_(reinterpret_cast<LaunchFn>(jit_.entry)) {}
    void *alloc(size_t bytes) override {
        void *p = std::calloc(std::max<size_t>(bytes, 1), 1);
        if (!p) throw_runtime_error("out of host memory for ", bytes, " bytes of 'device' memory");
        return p;
    }
    void release(void *p) noexcept override { std::free(p); }
    void upload(void *dst, const void *src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void download(void *dst, const void *src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void zero(void *dst, size_t bytes) override {
        if (bytes) std::memset(dst, 0, bytes);
    }
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *, char *error,
                   int32_t error_size) override {
        const long long g[3] = {grid[0], grid[1], grid[2]}, t[3] = {threads[0], threads[1], threads[2]};
        return launch_(kernel, g, t, params, error, error_size);
    }
    void synchronize(void *) override {} // launches run to completion when called
    void synchronize_all() override {}

private:
    using LaunchFn = int (*)(int, const long long *, const long long *, void **, char *, int);
    driver::JitResult jit_;
    LaunchFn launch_;
};

} // namespace

/** What kernels that share a device (CudaKernel::share_device_with) have in common: their memory
 * space (each other's DeviceBuffers are valid arguments) and the shape arrays on the device. The
 * arrays are kept by contents in one packed device buffer: a kernel whose arrays are all there
 * uploads nothing, so kernels over the same ragged shape pay one transfer between them (more only
 * when a later kernel reads an array the earlier ones did not). */
struct SharedDeviceState {
    std::mutex mu;                 ///< held for a whole host-entry call: staging and launches of one kernel at a time
    std::shared_ptr<Device> owner; ///< the device `buffer` was allocated on (kept alive for its release)
    void *buffer = nullptr;
    std::vector<std::pair<std::vector<unsigned char>, size_t>> arrays; ///< contents and offset in `buffer`
    int64_t transfers = 0;
    ~SharedDeviceState() {
        if (owner && buffer) owner->release(buffer);
    }
};

struct CudaKernel::Impl {
    CudaBackend backend = CudaBackend::Gpu;
    ir::LoweredModule module;
    CudaProgram program;
    std::string host_source;
    driver::JitResult jit;
    cora_device_entry_fn entry = nullptr;
    std::shared_ptr<Device> device;
    std::shared_ptr<SharedDeviceState> shared = std::make_shared<SharedDeviceState>();
};

struct DeviceBuffer::Impl {
    std::shared_ptr<CudaKernel::Impl> kernel; ///< keeps the device alive
    void *ptr = nullptr;
    Type type = Float32;
    int64_t count = 0;
    ~Impl() { kernel->device->release(ptr); }
};

namespace {

/** One run's cora_device_t services. */
struct RunContext {
    CudaKernel::Impl *k;
    SharedDeviceState *shared; ///< the state whose mutex this run holds (read once, at the call's start)
    void *stream = nullptr;
    std::vector<size_t> staged_offsets; ///< this run's shape arrays in the packed device buffer, once staged

    static int32_t launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                          char *error, int32_t error_size) {
        auto *r = static_cast<RunContext *>(c);
        return r->k->device->launch(kernel, grid, threads, params, r->stream, error, error_size);
    }
    static void *alloc(void *c, int64_t bytes, char *error, int32_t error_size) {
        try {
            return static_cast<RunContext *>(c)->k->device->alloc((size_t)std::max<int64_t>(bytes, 1));
        } catch (const std::exception &e) {
            std::snprintf(error, (size_t)error_size, "%s", e.what());
            return nullptr;
        }
    }
    static void release(void *c, void *p) { static_cast<RunContext *>(c)->k->device->release(p); }
    static int32_t stage_shape(void *c, int32_t n, const void *const *host, const int64_t *bytes, const void **device,
                               char *error, int32_t error_size) {
        auto *r = static_cast<RunContext *>(c);
        try {
            if (r->staged_offsets.empty()) r->staged_offsets = place_shape_arrays(*r->k, *r->shared, n, host, bytes);
            for (int32_t i = 0; i < n; i++)
                device[i] = static_cast<unsigned char *>(r->shared->buffer) + r->staged_offsets[(size_t)i];
            return CORA_OK;
        } catch (const std::exception &e) {
            std::snprintf(error, (size_t)error_size, "%s", e.what());
            return CORA_ERROR_DEVICE;
        }
    }
    cora_device_t services() { return cora_device_t{this, &launch, &alloc, &release, &stage_shape}; }

    /** The offsets of the `n` arrays in the shared packed device buffer (8-byte aligned), which is
     * uploaded again only when one of them is not there with the same contents. Then it keeps the
     * arrays already there if some of them were found (another kernel of the same shape), else only
     * these (a new shape), and never more than 4x these arrays' bytes. Called with the shared
     * state's mutex held. */
    static std::vector<size_t> place_shape_arrays(CudaKernel::Impl &k, SharedDeviceState &st, int32_t n,
                                                  const void *const *host, const int64_t *bytes) {
        using Arrays = std::vector<std::pair<std::vector<unsigned char>, size_t>>;
        // The offset of an array with these contents among `in`, if there is one.
        auto find = [](const Arrays &in, const void *p, size_t size) -> std::optional<size_t> {
            for (const auto &[contents, offset] : in)
                if (contents.size() == size && (size == 0 || std::memcmp(contents.data(), p, size) == 0)) return offset;
            return std::nullopt;
        };
        std::vector<size_t> offset((size_t)n, 0);
        bool all_there = st.buffer != nullptr, some_there = false;
        size_t wanted = 0;
        for (int32_t i = 0; i < n; i++) {
            wanted += ((size_t)bytes[i] + 7) / 8 * 8;
            std::optional<size_t> at = st.buffer ? find(st.arrays, host[i], (size_t)bytes[i]) : std::nullopt;
            all_there = all_there && at.has_value();
            some_there = some_there || at.has_value();
            if (at) offset[(size_t)i] = *at;
        }
        if (all_there) return offset;
        Arrays arrays;
        size_t total = 0;
        if (some_there) {
            for (const auto &a : st.arrays)
                total += (a.first.size() + 7) / 8 * 8;
            if (total + wanted <= 4 * std::max<size_t>(wanted, 8))
                arrays = st.arrays;
            else
                total = 0;
        }
        for (int32_t i = 0; i < n; i++) {
            const auto *p = static_cast<const unsigned char *>(host[i]);
            const size_t size = (size_t)bytes[i];
            if (std::optional<size_t> at = find(arrays, p, size)) {
                offset[(size_t)i] = *at;
                continue;
            }
            offset[(size_t)i] = total;
            arrays.emplace_back(std::vector<unsigned char>(p, p + size), total);
            total += (size + 7) / 8 * 8;
        }
        std::vector<unsigned char> packed(std::max<size_t>(total, 8));
        for (const auto &[contents, at] : arrays)
            if (!contents.empty()) std::memcpy(packed.data() + at, contents.data(), contents.size());
        // The launches still reading the old copy (of any kernel sharing it) finish first.
        k.device->synchronize_all();
        if (st.buffer) st.owner->release(st.buffer);
        st.buffer = nullptr;
        st.arrays.clear();
        st.buffer = k.device->alloc(packed.size());
        st.owner = k.device;
        k.device->upload(st.buffer, packed.data(), packed.size());
        st.arrays = std::move(arrays);
        st.transfers++;
        return offset;
    }
};

/** Calls the host entry on `args` (tensor pointers on the device), launches queued on `stream`. */
void call_entry(CudaKernel::Impl &k, const std::vector<cora_arg_t> &args, void *stream) {
    const std::shared_ptr<SharedDeviceState> shared = k.shared;
    std::lock_guard<std::mutex> lock(shared->mu);
    RunContext ctx{&k, shared.get(), stream, {}};
    cora_device_t services = ctx.services();
    char error[1024] = {0};
    int32_t rc = k.entry(args.data(), (int32_t)args.size(), &services, error, (int32_t)sizeof error);
    if (rc != CORA_OK) throw_runtime_error("kernel '", k.module.name, "': ", error);
}

/** Device buffers for the tensors of `bindings`, inputs uploaded. */
std::vector<DeviceBuffer> to_device(const CudaKernel &kernel, const CudaKernel::Impl &k, const RaggedShape &shape,
                                    const std::vector<Binding> &bindings, std::vector<DeviceBinding> &out) {
    // The host buffers' sizes and types first, named as a CPU kernel names them: the device
    // buffers are sized by the library, so the entry's own checks would not see a wrong host size.
    for (const Binding &b : bindings) {
        if (!b.buffer) throw_runtime_error("null buffer bound for tensor '", b.tensor.name(), "'");
        const int64_t expected = shape.size_of(b.tensor);
        if (b.buffer->size() != expected)
            throw_runtime_error("kernel '", k.module.name, "': buffer for tensor '", b.tensor.name(), "' has ",
                                b.buffer->size(), " elements, expected ", expected);
        if (b.buffer->type() != b.tensor.node()->type)
            throw_runtime_error("kernel '", k.module.name, "': buffer for tensor '", b.tensor.name(), "' holds ",
                                b.buffer->type().str(), " elements, expected ", b.tensor.node()->type.str());
    }
    std::vector<DeviceBuffer> buffers;
    buffers.reserve(bindings.size());
    for (const Binding &b : bindings) {
        buffers.push_back(kernel.alloc(b.tensor, shape));
        bool input = false;
        for (const ir::ModuleArg &a : k.module.entry().args)
            input = input || (a.tensor == b.tensor.node() && a.kind == ir::ModuleArg::Kind::Input);
        if (input) buffers.back().upload(*b.buffer);
    }
    for (size_t i = 0; i < bindings.size(); i++)
        out.emplace_back(bindings[i].tensor, buffers[i]);
    return buffers;
}

} // namespace

CudaKernel compile_cuda_kernel(const Pipeline &p, CompileOptions opts, CudaBackend backend) {
    opts.target = Target::Cuda;
    auto impl = std::make_shared<CudaKernel::Impl>();
    impl->backend = backend;
    std::shared_ptr<CudaDriver> driver;
    std::vector<int> archs;
    if (backend == CudaBackend::Gpu) {
        std::string why;
        int device = 0;
        driver = load_driver(&why, &device);
        if (!driver) throw_runtime_error("pipeline '", p.name(), "': no CUDA device to run on: ", why);
        int major = 0, minor = 0;
        driver->check(driver->device_attribute(&major, 75, device), "cuDeviceGetAttribute"); // compute capability
        driver->check(driver->device_attribute(&minor, 76, device), "cuDeviceGetAttribute");
        archs.push_back(major * 10 + minor);
    }
    impl->module = driver::lower_for_cuda(p, opts);
    for (const ir::ModuleArg &a : impl->module.entry().args)
        if (a.tensor && a.tensor->has_value_range)
            throw_compile_error("pipeline '", p.name(), "': index tensor '", a.name,
                                "' is checked on the host, and the CUDA runtime passes tensors in device memory; "
                                "index tensors are not supported on CUDA yet");
    impl->program = driver::cuda_program(impl->module, archs, opts);
    const int debug = opts.debug >= 0 ? opts.debug : 0;
    const driver::JitOptions jo{opts.cache_dir, opts.cxx, debug};
    if (backend == CudaBackend::Gpu)
        impl->device = std::make_shared<GpuDevice>(driver, impl->program);
    else
        impl->device = std::make_shared<CpuThreadsDevice>(impl->module, jo);
    impl->host_source = impl->program.host_source;
    impl->jit = driver::jit_compile(impl->host_source, ir::entry_symbol(impl->module), jo);
    impl->entry = reinterpret_cast<cora_device_entry_fn>(impl->jit.entry);
    return CudaKernel(impl);
}

const CudaProgram &CudaKernel::program() const { return impl_->program; }
const std::string &CudaKernel::host_source() const { return impl_->host_source; }
CudaBackend CudaKernel::backend() const { return impl_->backend; }
int64_t CudaKernel::shape_transfers() const {
    std::lock_guard<std::mutex> lock(impl_->shared->mu);
    return impl_->shared->transfers;
}

void CudaKernel::share_device_with(const CudaKernel &other) {
    if (other.impl_->shared == impl_->shared) return;
    auto where = [](CudaBackend b) { return b == CudaBackend::Gpu ? "on the GPU" : "on CPU threads"; };
    if (other.impl_->backend != impl_->backend)
        throw_runtime_error("kernel '", impl_->module.name, "' runs ", where(impl_->backend), " and kernel '",
                            other.impl_->module.name, "' ", where(other.impl_->backend),
                            ": they have no device memory to share");
    impl_->shared = other.impl_->shared;
}

DeviceBuffer CudaKernel::alloc(const Tensor &t, const RaggedShape &shape) const {
    bool known = false;
    for (const ir::ModuleArg &a : impl_->module.entry().args)
        known = known || (a.tensor && a.tensor == t.node());
    if (!known) throw_runtime_error("tensor '", t.name(), "' is not an argument of kernel '", impl_->module.name, "'");
    auto b = std::make_shared<DeviceBuffer::Impl>();
    b->kernel = impl_;
    b->type = t.node()->type;
    b->count = shape.size_of(t);
    const size_t bytes = (size_t)b->count * (size_t)b->type.bytes();
    b->ptr = impl_->device->alloc(bytes);
    impl_->device->zero(b->ptr, bytes);
    return DeviceBuffer(b);
}

Type DeviceBuffer::type() const { return impl_->type; }
int64_t DeviceBuffer::size() const { return impl_->count; }
void *DeviceBuffer::device_pointer() const { return impl_->ptr; }

void DeviceBuffer::upload(const Buffer &host) {
    if (host.type() != impl_->type || host.size() != impl_->count)
        throw_runtime_error("DeviceBuffer::upload: the host buffer holds ", host.size(), " ", host.type().str(),
                            " elements, the device buffer ", impl_->count, " ", impl_->type.str());
    impl_->kernel->device->upload(impl_->ptr, host.raw(), (size_t)impl_->count * (size_t)impl_->type.bytes());
}

void DeviceBuffer::download(Buffer &host) const {
    if (host.type() != impl_->type || host.size() != impl_->count)
        throw_runtime_error("DeviceBuffer::download: the host buffer holds ", host.size(), " ", host.type().str(),
                            " elements, the device buffer ", impl_->count, " ", impl_->type.str());
    if (host.read_only()) throw_runtime_error("DeviceBuffer::download into a read-only buffer");
    impl_->kernel->device->synchronize_all();
    impl_->kernel->device->download(host.raw(), impl_->ptr, (size_t)impl_->count * (size_t)impl_->type.bytes());
}

void CudaKernel::run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream) const {
    std::vector<driver::BoundMemory> memory;
    for (const DeviceBinding &b : bindings) {
        if (!b.buffer) throw_runtime_error("null device buffer bound for tensor '", b.tensor.name(), "'");
        if (b.buffer->impl_->kernel->shared != impl_->shared)
            throw_runtime_error("the device buffer bound for tensor '", b.tensor.name(),
                                "' belongs to another kernel's device; allocate it with this kernel's alloc(), or "
                                "share the kernels' device (CudaKernel::share_device_with)");
        memory.push_back({b.tensor, b.buffer->type(), b.buffer->device_pointer(), b.buffer->size(), false});
    }
    call_entry(*impl_, driver::make_args(impl_->module, shape, memory), stream);
}

void CudaKernel::synchronize(void *stream) const { impl_->device->synchronize(stream); }

void CudaKernel::run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
    driver::make_args(impl_->module, shape, bindings); // the host arguments' checks, before any copy
    std::vector<DeviceBinding> device_bindings;
    std::vector<DeviceBuffer> buffers = to_device(*this, *impl_, shape, bindings, device_bindings);
    run(shape, device_bindings);
    impl_->device->synchronize(nullptr);
    for (size_t i = 0; i < bindings.size(); i++)
        for (const ir::ModuleArg &a : impl_->module.entry().args)
            if (a.tensor == bindings[i].tensor.node() && a.kind == ir::ModuleArg::Kind::Output)
                buffers[i].download(*bindings[i].buffer);
}

double CudaKernel::time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const {
    if (reps < 1) throw_runtime_error("CudaKernel::time_ms: reps must be positive, got ", reps);
    driver::make_args(impl_->module, shape, bindings);
    std::vector<DeviceBinding> device_bindings;
    std::vector<DeviceBuffer> buffers = to_device(*this, *impl_, shape, bindings, device_bindings);
    auto once = [&] {
        run(shape, device_bindings);
        impl_->device->synchronize(nullptr);
    };
    once(); // warm-up (and the shape's arrays on the device)
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        once();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

} // namespace cora
