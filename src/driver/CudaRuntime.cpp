/** \file The CUDA device runtime (cora/Cuda.h: CudaKernel): the driver API loaded with dlopen
 * (libcuda.so.1 comes with the GPU driver, not the toolkit, so cora links no CUDA library), the
 * device kernels compiled by NVRTC for the GPU found and loaded as a module, the host entry
 * (codegen_cuda_host) JIT-compiled like a CPU kernel, and the cora_device_t services it calls:
 * launches, device memory for intermediates, device copies of the length and aux arrays (all of
 * them in one host-to-device transfer per run). Every failing CUDA call is a RuntimeError naming
 * the call and the error. */
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

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

/** Device memory released when the owner goes. */
struct DeviceMemory {
    const CudaDriver *driver = nullptr;
    CUdeviceptr ptr = 0;
    DeviceMemory(const CudaDriver &d, size_t bytes) : driver(&d) {
        d.check(d.mem_alloc(&ptr, std::max<size_t>(bytes, 1)), "cuMemAlloc");
    }
    DeviceMemory(const DeviceMemory &) = delete;
    DeviceMemory &operator=(const DeviceMemory &) = delete;
    ~DeviceMemory() {
        if (ptr) driver->mem_free(ptr);
    }
    void *get() const { return reinterpret_cast<void *>(ptr); }
};

} // namespace

bool cuda_device_available(std::string *why) { return load_driver(why) != nullptr; }

struct CudaKernel::Impl {
    std::shared_ptr<CudaDriver> driver;
    ir::LoweredModule module;
    CudaProgram program;
    std::string host_source;
    void *cu_module = nullptr;
    std::vector<void *> functions; ///< by kernel index
    driver::JitResult jit;
    cora_device_entry_fn entry = nullptr;
    ~Impl() {
        if (cu_module && driver) driver->module_unload(cu_module);
    }
};

namespace {

/** The cora_device_t services of one run. */
struct RunContext {
    const CudaKernel::Impl *k;
    std::map<const void *, void *> copies; ///< host length/aux array -> its device copy
    std::string last_error;

    static int32_t launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                          char *error, int32_t error_size) {
        auto *r = static_cast<RunContext *>(c);
        const CudaDriver &d = *r->k->driver;
        int rc =
            d.launch(r->k->functions.at((size_t)kernel), (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                     (unsigned)threads[0], (unsigned)threads[1], (unsigned)threads[2], 0, nullptr, params, nullptr);
        if (rc == 0) return 0;
        std::snprintf(error, (size_t)error_size, "CUDA call cuLaunchKernel (%s) failed: %s",
                      r->k->program.kernels.at((size_t)kernel).c_str(), d.error(rc).c_str());
        return 3;
    }
    static void *alloc(void *c, int64_t bytes, char *error, int32_t error_size) {
        auto *r = static_cast<RunContext *>(c);
        CUdeviceptr p = 0;
        int rc = r->k->driver->mem_alloc(&p, (size_t)std::max<int64_t>(bytes, 1));
        if (rc == 0) return reinterpret_cast<void *>(p);
        std::snprintf(error, (size_t)error_size, "CUDA call cuMemAlloc of %lld bytes failed: %s", (long long)bytes,
                      r->k->driver->error(rc).c_str());
        return nullptr;
    }
    static void release(void *c, void *p) {
        static_cast<RunContext *>(c)->k->driver->mem_free(reinterpret_cast<CUdeviceptr>(p));
    }
    static const void *device_copy(void *c, const void *host) {
        auto *r = static_cast<RunContext *>(c);
        auto it = r->copies.find(host);
        return it == r->copies.end() ? nullptr : it->second;
    }
};

size_t element_bytes(int32_t type_code) {
    return type_code == CORA_TYPE_INT32 || type_code == CORA_TYPE_FLOAT32 ? 4 : 8;
}

} // namespace

CudaKernel compile_cuda_kernel(const Pipeline &p, CompileOptions opts) {
    opts.target = Target::Cuda;
    auto impl = std::make_shared<CudaKernel::Impl>();
    std::string why;
    int device = 0;
    impl->driver = load_driver(&why, &device);
    if (!impl->driver) throw_runtime_error("pipeline '", p.name(), "': no CUDA device to run on: ", why);
    const CudaDriver &d = *impl->driver;
    int major = 0, minor = 0;
    d.check(d.device_attribute(&major, 75, device), "cuDeviceGetAttribute"); // compute capability
    d.check(d.device_attribute(&minor, 76, device), "cuDeviceGetAttribute");
    impl->module = driver::lower_for_cuda(p, opts);
    for (const ir::ModuleArg &a : impl->module.entry().args)
        if (a.tensor && a.tensor->has_value_range)
            throw_compile_error("pipeline '", p.name(), "': index tensor '", a.name,
                                "' is checked on the host, and the CUDA runtime passes tensors in device memory; "
                                "index tensors are not supported on CUDA yet");
    impl->program = driver::cuda_program(impl->module, {major * 10 + minor}, opts);
    d.check(d.module_load_data(&impl->cu_module, impl->program.binaries.at(0).cubin.data()), "cuModuleLoadData");
    for (const std::string &k : impl->program.kernels) {
        void *fn = nullptr;
        d.check(d.module_function(&fn, impl->cu_module, k.c_str()), "cuModuleGetFunction");
        impl->functions.push_back(fn);
    }
    impl->host_source = impl->program.host_source;
    int debug = opts.debug >= 0 ? opts.debug : 0;
    driver::JitOptions jo{opts.cache_dir, opts.cxx, debug};
    impl->jit = driver::jit_compile(impl->host_source, ir::entry_symbol(impl->module), jo);
    impl->entry = reinterpret_cast<cora_device_entry_fn>(impl->jit.entry);
    return CudaKernel(impl);
}

const CudaProgram &CudaKernel::program() const { return impl_->program; }
const std::string &CudaKernel::host_source() const { return impl_->host_source; }

namespace {

/** One run's device side: tensors copied in, length/aux arrays in one packed transfer. */
struct DeviceArgs {
    std::vector<cora_arg_t> args;
    std::vector<std::unique_ptr<DeviceMemory>> tensors; ///< by argument (null for the others)
    std::unique_ptr<DeviceMemory> arrays;
    RunContext ctx;
    cora_device_t device{};
};

void prepare(const CudaKernel::Impl &k, std::vector<cora_arg_t> host, DeviceArgs &out) {
    const CudaDriver &d = *k.driver;
    const auto &margs = k.module.entry().args;
    out.args = host;
    out.tensors.resize(host.size());
    // Length and aux arrays: packed into one buffer (8-byte aligned), copied in one transfer.
    std::vector<size_t> offset(host.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < host.size(); i++) {
        auto kind = margs[i].kind;
        if (kind != ir::ModuleArg::Kind::LengthArray && kind != ir::ModuleArg::Kind::AuxArray) continue;
        offset[i] = total;
        total += ((size_t)host[i].count * element_bytes(host[i].type_code) + 7) / 8 * 8;
    }
    std::vector<unsigned char> packed(total);
    for (size_t i = 0; i < host.size(); i++) {
        auto kind = margs[i].kind;
        if (kind == ir::ModuleArg::Kind::LengthArray || kind == ir::ModuleArg::Kind::AuxArray) {
            if (host[i].count > 0)
                std::memcpy(packed.data() + offset[i], host[i].data,
                            (size_t)host[i].count * element_bytes(host[i].type_code));
        } else if (kind == ir::ModuleArg::Kind::Input || kind == ir::ModuleArg::Kind::Output) {
            size_t bytes = (size_t)host[i].count * element_bytes(host[i].type_code);
            out.tensors[i] = std::make_unique<DeviceMemory>(d, bytes);
            if (kind == ir::ModuleArg::Kind::Input && bytes > 0)
                d.check(d.htod(out.tensors[i]->ptr, host[i].data, bytes), "cuMemcpyHtoD");
            out.args[i].data = out.tensors[i]->get();
        }
    }
    out.ctx.k = &k;
    if (total > 0) {
        out.arrays = std::make_unique<DeviceMemory>(d, total);
        d.check(d.htod(out.arrays->ptr, packed.data(), total), "cuMemcpyHtoD");
        for (size_t i = 0; i < host.size(); i++) {
            auto kind = margs[i].kind;
            if (kind == ir::ModuleArg::Kind::LengthArray || kind == ir::ModuleArg::Kind::AuxArray)
                out.ctx.copies[host[i].data] = static_cast<unsigned char *>(out.arrays->get()) + offset[i];
        }
    }
    out.device = cora_device_t{&out.ctx, &RunContext::launch, &RunContext::alloc, &RunContext::release,
                               &RunContext::device_copy};
}

void call(const CudaKernel::Impl &k, DeviceArgs &a) {
    char error[1024] = {0};
    int32_t rc = k.entry(a.args.data(), (int32_t)a.args.size(), &a.device, error, (int32_t)sizeof error);
    if (rc != CORA_OK) throw_runtime_error("kernel '", k.module.name, "': ", error);
    k.driver->check(k.driver->ctx_synchronize(), "cuCtxSynchronize");
}

} // namespace

void CudaKernel::run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
    const Impl &k = *impl_;
    // The context is current per thread: a kernel may run on another thread than it was built on.
    k.driver->check(k.driver->ctx_set_current(k.driver->context), "cuCtxSetCurrent");
    k.driver->check(k.driver->ctx_synchronize(), "cuCtxSynchronize");
    std::vector<cora_arg_t> host = driver::make_args(k.module, shape, bindings);
    DeviceArgs dev;
    prepare(k, host, dev);
    call(k, dev);
    for (size_t i = 0; i < host.size(); i++)
        if (k.module.entry().args[i].kind == ir::ModuleArg::Kind::Output && host[i].count > 0)
            k.driver->check(k.driver->dtoh(host[i].data, dev.tensors[i]->ptr,
                                           (size_t)host[i].count * element_bytes(host[i].type_code)),
                            "cuMemcpyDtoH");
}

double CudaKernel::time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const {
    const Impl &k = *impl_;
    if (reps < 1) throw_runtime_error("CudaKernel::time_ms: reps must be positive, got ", reps);
    k.driver->check(k.driver->ctx_set_current(k.driver->context), "cuCtxSetCurrent");
    std::vector<cora_arg_t> host = driver::make_args(k.module, shape, bindings);
    DeviceArgs dev;
    prepare(k, host, dev);
    call(k, dev); // warm-up
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        call(k, dev);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

} // namespace cora
