/* cora_device_runtime.h: the runtime of cora's CUDA kernels, written once.
 *
 * libcora's JIT kernels include it (src/driver/CudaRuntime.cpp, behind the backends "cuda" and "cuda-cpu-threads");
 * a CUDA AOT library embeds its text (src/codegen/CudaAotLibrary.cpp), as every generated source
 * embeds cora_runtime.h. So the driver-API table, the device limits, the launch checks and the
 * staging of the shape's arrays are the same code in both. It holds:
 *  - cora_rt::CudaDriver: the driver API loaded with dlopen. libcuda.so.1 comes with the GPU
 *    driver, not the toolkit, so nothing links a CUDA library, and code using this loads on a
 *    machine without a GPU and says why it cannot run there.
 *  - cora_rt::Device, what a host entry needs of a device (memory, copies, launches, waits), and
 *    two of them: GpuDevice (a module loaded on device N, its limits read from the device) and
 *    CpuThreadsDevice (the CUDA source compiled for the CPU: host memory, launches run to completion).
 *  - cora_rt::ShapeCache: the length and aux arrays the kernels read, packed into one device
 *    buffer, uploaded in one transfer when their contents change and kept by contents, so that
 *    kernels over one ragged shape share a copy.
 *  - cora_rt::Run: one call's cora_device_t services (cora_runtime.h) over a Device and a ShapeCache.
 * Nothing here throws or keeps process-wide state: every fallible call returns a cora_status and,
 * when not CORA_OK, a NUL-terminated message in (error, error_size), which the JIT turns into a
 * RuntimeError and an AOT library returns through its C ABI. Everything is in an unnamed
 * namespace: each library that embeds it has its own copy, never another library's.
 * Include cora_runtime.h first. */
#ifndef CORA_DEVICE_RUNTIME_H
#define CORA_DEVICE_RUNTIME_H

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {
namespace cora_rt {

/** Writes the message (printf-style) to `error` and returns `status`. */
inline int32_t report(int32_t status, char *error, int32_t error_size, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
inline int32_t report(int32_t status, char *error, int32_t error_size, const char *format, ...) {
    if (error && error_size > 0) {
        va_list args;
        va_start(args, format);
        std::vsnprintf(error, (size_t)error_size, format, args);
        va_end(args);
    }
    return status;
}

typedef unsigned long long DevicePtr; /* CUdeviceptr */

/** The driver-API entry points cora calls (CUresult is an int enum; handles are pointers). */
struct CudaDriver {
    void *lib = nullptr;
    int (*init)(unsigned) = nullptr;
    int (*device_count)(int *) = nullptr;
    int (*device_get)(int *, int) = nullptr;
    int (*device_attribute)(int *, int, int) = nullptr;
    int (*primary_retain)(void **, int) = nullptr;
    int (*primary_release)(int) = nullptr;
    int (*set_current)(void *) = nullptr;
    int (*ctx_synchronize)() = nullptr;
    int (*module_load_data)(void **, const void *) = nullptr;
    int (*module_unload)(void *) = nullptr;
    int (*module_function)(void **, void *, const char *) = nullptr;
    int (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                         void **) = nullptr;
    int (*mem_alloc)(DevicePtr *, size_t) = nullptr;
    int (*mem_free)(DevicePtr) = nullptr;
    int (*htod)(DevicePtr, const void *, size_t) = nullptr;
    int (*dtoh)(void *, DevicePtr, size_t) = nullptr;
    int (*memset8)(DevicePtr, unsigned char, size_t) = nullptr;
    int (*stream_synchronize)(void *) = nullptr;
    int (*error_name)(int, const char **) = nullptr;

    CudaDriver() = default;
    CudaDriver(const CudaDriver &) = delete;
    CudaDriver &operator=(const CudaDriver &) = delete;
    ~CudaDriver() { unload(); }

    /** dlopen, every entry point, cuInit; then `*count` devices (none is not an error here). */
    int32_t load(int *count, char *error, int32_t error_size) {
        unload();
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *why = dlerror();
            return report(CORA_ERROR_DEVICE, error, error_size, "no CUDA driver: libcuda.so.1 cannot be loaded (%s)",
                          why ? why : "");
        }
        bool ok = bind("cuInit", init) && bind("cuDeviceGetCount", device_count) && bind("cuDeviceGet", device_get) &&
                  bind("cuDeviceGetAttribute", device_attribute) && bind("cuDevicePrimaryCtxRetain", primary_retain) &&
                  bind("cuDevicePrimaryCtxRelease_v2", primary_release) && bind("cuCtxSetCurrent", set_current) &&
                  bind("cuCtxSynchronize", ctx_synchronize) && bind("cuModuleLoadData", module_load_data) &&
                  bind("cuModuleUnload", module_unload) && bind("cuModuleGetFunction", module_function) &&
                  bind("cuLaunchKernel", launch_kernel) && bind("cuMemAlloc_v2", mem_alloc) &&
                  bind("cuMemFree_v2", mem_free) && bind("cuMemcpyHtoD_v2", htod) && bind("cuMemcpyDtoH_v2", dtoh) &&
                  bind("cuMemsetD8_v2", memset8) && bind("cuStreamSynchronize", stream_synchronize) &&
                  bind("cuGetErrorName", error_name);
        if (!ok) {
            unload();
            return report(CORA_ERROR_DEVICE, error, error_size,
                          "libcuda.so.1 lacks driver API entry points cora needs (a driver older than CUDA 11?)");
        }
        int rc = init(0);
        if (rc != 0) return failed(rc, "cuInit", "", error, error_size);
        *count = 0;
        if ((rc = device_count(count)) != 0) return failed(rc, "cuDeviceGetCount", "", error, error_size);
        return CORA_OK;
    }
    void unload() {
        if (lib) dlclose(lib);
        lib = nullptr;
    }
    /** "CUDA call <call><detail> failed: <name> (<rc>)"; returns CORA_ERROR_DEVICE. */
    int32_t failed(int rc, const char *call, const char *detail, char *error, int32_t error_size) const {
        const char *name = nullptr;
        if (error_name) error_name(rc, &name);
        return report(CORA_ERROR_DEVICE, error, error_size, "CUDA call %s%s failed: %s (%d)", call, detail,
                      name ? name : "CUDA error", rc);
    }

private:
    template <typename F> bool bind(const char *name, F &fn) {
        fn = reinterpret_cast<F>(dlsym(lib, name));
        return fn != nullptr;
    }
};

/** What a host entry needs of the device it runs on. Each call returns CORA_OK or a status with
 * the message in (error, error_size). */
class Device {
public:
    virtual ~Device() {}
    /** Makes the device's context current on the calling thread (a kernel may run on another
     * thread than the one it was built on). */
    virtual int32_t make_current(char *error, int32_t error_size) = 0;
    /** `bytes` (at least 1) of device memory, or nullptr with the message. */
    virtual void *alloc(size_t bytes, char *error, int32_t error_size) = 0;
    virtual void release(void *p) = 0;
    virtual int32_t upload(void *dst, const void *src, size_t bytes, char *error, int32_t error_size) = 0;
    virtual int32_t download(void *dst, const void *src, size_t bytes, char *error, int32_t error_size) = 0;
    virtual int32_t zero(void *dst, size_t bytes, char *error, int32_t error_size) = 0;
    /** cora_device_t::launch on `stream`. */
    virtual int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *stream,
                           char *error, int32_t error_size) = 0;
    /** Waits for the work queued on `stream`. */
    virtual int32_t synchronize(void *stream, char *error, int32_t error_size) = 0;
    /** Waits for everything queued on the device. */
    virtual int32_t synchronize_all(char *error, int32_t error_size) = 0;
};

/** Device attributes (CUdevice_attribute) read at open. */
enum : int {
    kMaxThreadsPerBlock = 1,
    kMaxBlockDimX = 2,
    kMaxGridDimX = 5,
    kComputeCapabilityMajor = 75,
    kComputeCapabilityMinor = 76,
};

/** A CUDA device: its primary context and a module of the kernels. */
class GpuDevice : public Device {
public:
    GpuDevice() = default;
    GpuDevice(const GpuDevice &) = delete;
    GpuDevice &operator=(const GpuDevice &) = delete;
    ~GpuDevice() override { close(); }

    /** Opens device `ordinal`: the driver, its primary context, its limits. Returns with the driver
     * loaded even when it fails at a later step (close() undoes what was done). */
    int32_t open(int32_t ordinal, char *error, int32_t error_size) {
        int count = 0;
        int32_t status = driver_.load(&count, error, error_size);
        if (status != CORA_OK) return status;
        if (ordinal < 0 || ordinal >= count)
            return report(CORA_ERROR_ARGUMENT, error, error_size, "there is no CUDA device %d (this machine has %d)",
                          (int)ordinal, count);
        int rc = driver_.device_get(&device_, ordinal);
        if (rc != 0) return driver_.failed(rc, "cuDeviceGet", "", error, error_size);
        ordinal_ = ordinal;
        for (int i = 0; i < 3; i++) {
            if ((rc = driver_.device_attribute(&max_block_[i], kMaxBlockDimX + i, device_)) != 0 ||
                (rc = driver_.device_attribute(&max_grid_[i], kMaxGridDimX + i, device_)) != 0)
                return driver_.failed(rc, "cuDeviceGetAttribute", "", error, error_size);
        }
        if ((rc = driver_.device_attribute(&max_threads_, kMaxThreadsPerBlock, device_)) != 0 ||
            (rc = driver_.device_attribute(&major_, kComputeCapabilityMajor, device_)) != 0 ||
            (rc = driver_.device_attribute(&minor_, kComputeCapabilityMinor, device_)) != 0)
            return driver_.failed(rc, "cuDeviceGetAttribute", "", error, error_size);
        if ((rc = driver_.primary_retain(&context_, device_)) != 0) {
            context_ = nullptr;
            return driver_.failed(rc, "cuDevicePrimaryCtxRetain", "", error, error_size);
        }
        return make_current(error, error_size);
    }
    /** sm_<major><minor> of the open device, e.g. 90. */
    int compute_capability() const { return major_ * 10 + minor_; }
    /** The open device's launch limits: threads per block, and per axis (0..2: x, y, z) block and
     * grid sizes. Lowering checks a kernel against them (a CompileError for constant sizes), as
     * launch() does at run time. */
    int max_threads_per_block() const { return max_threads_; }
    int max_block_dim(int axis) const { return max_block_[axis]; }
    int max_grid_dim(int axis) const { return max_grid_[axis]; }
    int ordinal() const { return ordinal_; }

    /** Loads `image` (a cubin, PTX or fatbin, as cuModuleLoadData takes) and looks up its `count`
     * kernels; `holds` says what the image holds, for the message when the device cannot load it. */
    int32_t load_module(const void *image, const char *holds, const char *const *names, int count, char *error,
                        int32_t error_size) {
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.module_load_data(&module_, image);
        if (rc != 0) {
            module_ = nullptr;
            char detail[200];
            std::snprintf(detail, sizeof detail, " (the code holds %s; device %d is sm_%d%d)", holds, ordinal_, major_,
                          minor_);
            return driver_.failed(rc, "cuModuleLoadData", detail, error, error_size);
        }
        try {
            names_.assign(names, names + count);
            functions_.assign((size_t)count, nullptr);
        } catch (const std::bad_alloc &) {
            return report(CORA_ERROR_ALLOCATION, error, error_size, "out of host memory for the kernels' table");
        }
        for (int k = 0; k < count; k++)
            if ((rc = driver_.module_function(&functions_[(size_t)k], module_, names[k])) != 0) {
                char detail[200];
                std::snprintf(detail, sizeof detail, " (%s)", names[k]);
                return driver_.failed(rc, "cuModuleGetFunction", detail, error, error_size);
            }
        return CORA_OK;
    }
    /** Releases the module, the context and the driver (what open and load_module acquired). */
    void close() {
        if (module_ && context_ && driver_.set_current(context_) == 0) driver_.module_unload(module_);
        if (context_) driver_.primary_release(device_);
        driver_.unload();
        module_ = context_ = nullptr;
    }

    int32_t make_current(char *error, int32_t error_size) override {
        int rc = driver_.set_current(context_);
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuCtxSetCurrent", "", error, error_size);
    }
    void *alloc(size_t bytes, char *error, int32_t error_size) override {
        if (make_current(error, error_size) != CORA_OK) return nullptr;
        DevicePtr p = 0;
        int rc = driver_.mem_alloc(&p, bytes > 0 ? bytes : 1);
        if (rc == 0) return reinterpret_cast<void *>(p);
        char detail[64];
        std::snprintf(detail, sizeof detail, " of %zu bytes", bytes);
        driver_.failed(rc, "cuMemAlloc", detail, error, error_size);
        return nullptr;
    }
    void release(void *p) override {
        if (p && driver_.set_current(context_) == 0) driver_.mem_free(reinterpret_cast<DevicePtr>(p));
    }
    int32_t upload(void *dst, const void *src, size_t bytes, char *error, int32_t error_size) override {
        if (bytes == 0) return CORA_OK;
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.htod(reinterpret_cast<DevicePtr>(dst), src, bytes);
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuMemcpyHtoD", "", error, error_size);
    }
    int32_t download(void *dst, const void *src, size_t bytes, char *error, int32_t error_size) override {
        if (bytes == 0) return CORA_OK;
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.dtoh(dst, reinterpret_cast<DevicePtr>(src), bytes);
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuMemcpyDtoH", "", error, error_size);
    }
    int32_t zero(void *dst, size_t bytes, char *error, int32_t error_size) override {
        if (bytes == 0) return CORA_OK;
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.memset8(reinterpret_cast<DevicePtr>(dst), 0, bytes);
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuMemsetD8", "", error, error_size);
    }
    /** Checked against the device's limits first: a launch the driver would refuse is named with
     * its sizes and the limit it passes. */
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *stream,
                   char *error, int32_t error_size) override {
        if (kernel < 0 || (size_t)kernel >= functions_.size())
            return report(CORA_ERROR_DEVICE, error, error_size, "launch of kernel %d: the module has %zu kernels",
                          (int)kernel, functions_.size());
        const char *name = names_[(size_t)kernel];
        const char *limit = nullptr;
        int64_t block = 1;
        for (int i = 0; i < 3; i++) {
            block *= threads[i] > 0 ? threads[i] : 1;
            if (grid[i] > max_grid_[i]) limit = "grid dimension";
            if (threads[i] > max_block_[i]) limit = "block dimension";
        }
        if (block > max_threads_) limit = "threads per block";
        if (limit)
            return report(CORA_ERROR_DEVICE, error, error_size,
                          "kernel %s: launch of %lld x %lld x %lld blocks of %lld x %lld x %lld threads exceeds the "
                          "device's limits (%s; device %d allows %d threads per block, blocks of %d x %d x %d, grids "
                          "of %d x %d x %d)",
                          name, (long long)grid[0], (long long)grid[1], (long long)grid[2], (long long)threads[0],
                          (long long)threads[1], (long long)threads[2], limit, ordinal_, max_threads_, max_block_[0],
                          max_block_[1], max_block_[2], max_grid_[0], max_grid_[1], max_grid_[2]);
        int rc = driver_.launch_kernel(functions_[(size_t)kernel], (unsigned)grid[0], (unsigned)grid[1],
                                       (unsigned)grid[2], (unsigned)threads[0], (unsigned)threads[1],
                                       (unsigned)threads[2], 0, stream, params, nullptr);
        if (rc == 0) return CORA_OK;
        char detail[200];
        std::snprintf(detail, sizeof detail, " (%s)", name);
        return driver_.failed(rc, "cuLaunchKernel", detail, error, error_size);
    }
    int32_t synchronize(void *stream, char *error, int32_t error_size) override {
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.stream_synchronize(stream);
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuStreamSynchronize", "", error, error_size);
    }
    int32_t synchronize_all(char *error, int32_t error_size) override {
        int32_t status = make_current(error, error_size);
        if (status != CORA_OK) return status;
        int rc = driver_.ctx_synchronize();
        return rc == 0 ? CORA_OK : driver_.failed(rc, "cuCtxSynchronize", "", error, error_size);
    }

private:
    CudaDriver driver_;
    int device_ = -1, ordinal_ = -1;
    void *context_ = nullptr, *module_ = nullptr;
    int max_threads_ = 0, max_block_[3] = {0, 0, 0}, max_grid_[3] = {0, 0, 0}, major_ = 0, minor_ = 0;
    std::vector<const char *> names_; ///< the kernels' names, owned by whoever passed them to load_module
    std::vector<void *> functions_;
};

/** The CUDA kernels compiled for the CPU (codegen_cuda_on_cpu), their launcher given: host memory
 * as device memory; a launch runs to completion before it returns, so there is nothing to wait for. */
class CpuThreadsDevice : public Device {
public:
    typedef int (*LaunchFn)(int kernel, const long long *grid, const long long *threads, void **params, char *error,
                            int error_size);
    explicit CpuThreadsDevice(LaunchFn launcher) : launcher_(launcher) {}

    int32_t make_current(char *, int32_t) override { return CORA_OK; }
    void *alloc(size_t bytes, char *error, int32_t error_size) override {
        void *p = std::calloc(bytes > 0 ? bytes : 1, 1);
        if (!p)
            report(CORA_ERROR_ALLOCATION, error, error_size, "out of host memory for %zu bytes of 'device' memory",
                   bytes);
        return p;
    }
    void release(void *p) override { std::free(p); }
    int32_t upload(void *dst, const void *src, size_t bytes, char *, int32_t) override {
        if (bytes) std::memcpy(dst, src, bytes);
        return CORA_OK;
    }
    int32_t download(void *dst, const void *src, size_t bytes, char *, int32_t) override {
        if (bytes) std::memcpy(dst, src, bytes);
        return CORA_OK;
    }
    int32_t zero(void *dst, size_t bytes, char *, int32_t) override {
        if (bytes) std::memset(dst, 0, bytes);
        return CORA_OK;
    }
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *, char *error,
                   int32_t error_size) override {
        const long long g[3] = {grid[0], grid[1], grid[2]}, t[3] = {threads[0], threads[1], threads[2]};
        return launcher_(kernel, g, t, params, error, error_size);
    }
    int32_t synchronize(void *, char *, int32_t) override { return CORA_OK; }
    int32_t synchronize_all(char *, int32_t) override { return CORA_OK; }

private:
    LaunchFn launcher_;
};

/** The length and aux arrays on the device: one packed buffer (each array 8-byte aligned), kept by
 * contents. Kernels that share one (on one device) upload a shape's arrays once between them. Not
 * synchronised: its owner holds a lock around every call. */
class ShapeCache {
public:
    ShapeCache() = default;
    ShapeCache(const ShapeCache &) = delete;
    ShapeCache &operator=(const ShapeCache &) = delete;
    ~ShapeCache() { clear(); }

    /** The offsets of the `n` arrays (host[i], bytes[i] bytes) in the buffer(), uploading again
     * only when one of them is not there with the same contents. Then it keeps the arrays already
     * there if some of them were found (another kernel of the same shape), else only these (a new
     * shape), and never more than 4x these arrays' bytes. The launches still reading the old copy
     * (of any kernel sharing it) finish first. All on `device`, which must outlive the buffer. */
    int32_t place(Device &device, int32_t n, const void *const *host, const int64_t *bytes, size_t *offsets,
                  char *error, int32_t error_size) {
        try {
            return place_arrays(device, n, host, bytes, offsets, error, error_size);
        } catch (const std::bad_alloc &) {
            return report(CORA_ERROR_ALLOCATION, error, error_size, "out of host memory staging the shape's arrays");
        }
    }
    void *buffer() const { return buffer_; }
    /** Host-to-device transfers so far. */
    int64_t transfers() const { return transfers_; }
    /** Releases the device copy (on the device it was made on). */
    void clear() {
        if (buffer_) owner_->release(buffer_);
        buffer_ = nullptr;
        owner_ = nullptr;
        arrays_.clear();
    }

private:
    struct Array {
        std::vector<unsigned char> contents;
        size_t offset;
    };
    static size_t aligned(size_t bytes) { return (bytes + 7) / 8 * 8; }
    /** The offset of an array with these contents among `in`, or -1. */
    static long long find(const std::vector<Array> &in, const void *p, size_t size) {
        for (const Array &a : in)
            if (a.contents.size() == size && (size == 0 || std::memcmp(a.contents.data(), p, size) == 0))
                return (long long)a.offset;
        return -1;
    }
    int32_t place_arrays(Device &device, int32_t n, const void *const *host, const int64_t *bytes, size_t *offsets,
                         char *error, int32_t error_size) {
        bool all_there = buffer_ != nullptr, some_there = false;
        size_t wanted = 0;
        for (int32_t i = 0; i < n; i++) {
            wanted += aligned((size_t)bytes[i]);
            long long at = buffer_ ? find(arrays_, host[i], (size_t)bytes[i]) : -1;
            all_there = all_there && at >= 0;
            some_there = some_there || at >= 0;
            if (at >= 0) offsets[i] = (size_t)at;
        }
        if (all_there) return CORA_OK;
        std::vector<Array> arrays;
        size_t total = 0;
        if (some_there) {
            for (const Array &a : arrays_)
                total += aligned(a.contents.size());
            if (total + wanted <= 4 * (wanted > 8 ? wanted : 8))
                arrays = arrays_;
            else
                total = 0;
        }
        for (int32_t i = 0; i < n; i++) {
            const unsigned char *p = static_cast<const unsigned char *>(host[i]);
            const size_t size = (size_t)bytes[i];
            long long at = find(arrays, p, size);
            if (at >= 0) {
                offsets[i] = (size_t)at;
                continue;
            }
            offsets[i] = total;
            arrays.push_back(Array{std::vector<unsigned char>(p, p + size), total});
            total += aligned(size);
        }
        std::vector<unsigned char> packed(total > 8 ? total : 8);
        for (const Array &a : arrays)
            if (!a.contents.empty()) std::memcpy(packed.data() + a.offset, a.contents.data(), a.contents.size());
        int32_t status = device.synchronize_all(error, error_size);
        if (status != CORA_OK) return status;
        clear();
        void *d = device.alloc(packed.size(), error, error_size);
        if (!d) return CORA_ERROR_ALLOCATION;
        if ((status = device.upload(d, packed.data(), packed.size(), error, error_size)) != CORA_OK) {
            device.release(d);
            return status;
        }
        buffer_ = d;
        owner_ = &device;
        arrays_.swap(arrays);
        transfers_++;
        return CORA_OK;
    }

    Device *owner_ = nullptr; ///< the device buffer_ was allocated on
    void *buffer_ = nullptr;
    std::vector<Array> arrays_;
    int64_t transfers_ = 0;
};

/** One call of a host entry: its cora_device_t services on `device`, launches on `stream`, the
 * shape's arrays staged through `shapes` (once per call: the entry stages the same arrays before
 * each launch). The caller holds the lock that guards `shapes` for the whole call. */
class Run {
public:
    Run(Device &device, ShapeCache &shapes, void *stream) : device_(device), shapes_(shapes), stream_(stream) {}
    cora_device_t services() { return cora_device_t{this, &launch, &alloc, &release, &stage_shape}; }

private:
    static int32_t launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                          char *error, int32_t error_size) {
        Run *r = static_cast<Run *>(c);
        return r->device_.launch(kernel, grid, threads, params, r->stream_, error, error_size);
    }
    static void *alloc(void *c, int64_t bytes, char *error, int32_t error_size) {
        return static_cast<Run *>(c)->device_.alloc((size_t)(bytes > 0 ? bytes : 1), error, error_size);
    }
    static void release(void *c, void *p) { static_cast<Run *>(c)->device_.release(p); }
    static int32_t stage_shape(void *c, int32_t n, const void *const *host, const int64_t *bytes,
                               const void **device_arrays, char *error, int32_t error_size) {
        Run *r = static_cast<Run *>(c);
        if (!r->staged_) {
            try {
                r->offsets_.assign((size_t)(n > 0 ? n : 1), 0);
            } catch (const std::bad_alloc &) {
                return report(CORA_ERROR_ALLOCATION, error, error_size,
                              "out of host memory staging the shape's arrays");
            }
            int32_t status = r->shapes_.place(r->device_, n, host, bytes, r->offsets_.data(), error, error_size);
            if (status != CORA_OK) return status;
            r->staged_ = true;
        }
        for (int32_t i = 0; i < n; i++)
            device_arrays[i] = static_cast<unsigned char *>(r->shapes_.buffer()) + r->offsets_[(size_t)i];
        return CORA_OK;
    }

    Device &device_;
    ShapeCache &shapes_;
    void *stream_;
    bool staged_ = false;
    std::vector<size_t> offsets_; ///< this call's arrays in the packed buffer, once staged
};

} // namespace cora_rt
} // namespace

#endif /* CORA_DEVICE_RUNTIME_H */
