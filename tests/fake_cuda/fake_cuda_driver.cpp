// A stand-in for libcuda.so.1, built as that file name in its own folder of the build tree, so
// that the GPU side of cora's device runtime (prelude/cora_device_runtime.h: the driver table,
// device limits, module loading, launch checks, shape staging, error messages) runs on machines
// without a GPU: the tests that use it set LD_LIBRARY_PATH to that folder. Device memory is host
// memory; kernels are not run, their launches are recorded. The fake_cuda_* functions let a test
// see what happened and make the next call of a given entry point fail. It is a test double: its
// state is global, as the real driver's is.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

typedef unsigned long long DevicePtr;

enum : int {
    kSuccess = 0,
    kInvalidValue = 1,
    kOutOfMemory = 2,
    kNotInitialized = 3,
    kInvalidDevice = 101,
    kInvalidImage = 200,
    kInvalidContext = 201,
    kInvalidHandle = 400,
    kNotFound = 500,
    kLaunchFailed = 719,
};

struct Module {
    std::vector<std::string> functions;
};
struct Function {
    std::string name;
};
struct Launch {
    std::string name;
    unsigned grid[3], block[3];
};

struct State {
    std::mutex mu;
    bool initialised = false;
    int retained = 0;
    void *current = nullptr;
    std::set<void *> allocations;
    std::set<Module *> modules;
    std::vector<Launch> launches;
    int64_t uploads = 0;
    std::map<std::string, int> fail_next; ///< entry point -> the error its next call returns
};

State &state() {
    static State s;
    return s;
}
int primary_context_token; // the one context's handle

int devices() {
    const char *n = std::getenv("FAKE_CUDA_DEVICES");
    return n ? std::atoi(n) : 1;
}
/** Threads per block the fake device allows (FAKE_CUDA_MAX_THREADS; default 1024, as every GPU). */
int max_threads_per_block() {
    const char *n = std::getenv("FAKE_CUDA_MAX_THREADS");
    return n ? std::atoi(n) : 1024;
}

/** The injected error of `call`, once, or kSuccess; call with the mutex held. */
int injected(State &s, const char *call) {
    auto it = s.fail_next.find(call);
    if (it == s.fail_next.end()) return kSuccess;
    int rc = it->second;
    s.fail_next.erase(it);
    return rc;
}

#define FAKE_ENTER(call)                                                                                               \
    State &s = state();                                                                                                \
    std::lock_guard<std::mutex> lock(s.mu);                                                                            \
    if (int rc_ = injected(s, call)) return rc_;                                                                       \
    if (!s.initialised && std::strcmp(call, "cuInit") != 0) return kNotInitialized

} // namespace

FAKE_API int cuInit(unsigned flags) {
    FAKE_ENTER("cuInit");
    if (flags != 0) return kInvalidValue;
    s.initialised = true;
    return kSuccess;
}
FAKE_API int cuDeviceGetCount(int *count) {
    FAKE_ENTER("cuDeviceGetCount");
    *count = devices();
    return kSuccess;
}
FAKE_API int cuDeviceGet(int *device, int ordinal) {
    FAKE_ENTER("cuDeviceGet");
    if (ordinal < 0 || ordinal >= devices()) return kInvalidDevice;
    *device = ordinal;
    return kSuccess;
}
FAKE_API int cuDeviceGetAttribute(int *value, int attribute, int device) {
    FAKE_ENTER("cuDeviceGetAttribute");
    if (device < 0 || device >= devices()) return kInvalidDevice;
    switch (attribute) {
    case 1: *value = max_threads_per_block(); return kSuccess;
    case 2:
    case 3: *value = 1024; return kSuccess;       // block x, y
    case 4: *value = 64; return kSuccess;         // block z
    case 5: *value = 2147483647; return kSuccess; // grid x
    case 6:
    case 7: *value = 65535; return kSuccess;
    case 75: *value = 9; return kSuccess; // sm_90
    case 76: *value = 0; return kSuccess;
    default: return kInvalidValue;
    }
}
FAKE_API int cuDevicePrimaryCtxRetain(void **context, int device) {
    FAKE_ENTER("cuDevicePrimaryCtxRetain");
    if (device < 0 || device >= devices()) return kInvalidDevice;
    s.retained++;
    *context = &primary_context_token;
    return kSuccess;
}
FAKE_API int cuDevicePrimaryCtxRelease_v2(int device) {
    FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
    if (device < 0 || device >= devices() || s.retained == 0) return kInvalidContext;
    s.retained--;
    return kSuccess;
}
FAKE_API int cuCtxSetCurrent(void *context) {
    FAKE_ENTER("cuCtxSetCurrent");
    if (context && context != &primary_context_token) return kInvalidContext;
    s.current = context;
    return kSuccess;
}
FAKE_API int cuCtxSynchronize() {
    FAKE_ENTER("cuCtxSynchronize");
    return s.current ? kSuccess : kInvalidContext;
}
FAKE_API int cuStreamSynchronize(void *) {
    FAKE_ENTER("cuStreamSynchronize");
    return s.current ? kSuccess : kInvalidContext;
}
/** Any image but one that starts with "BAD" loads; its functions are those looked up. */
FAKE_API int cuModuleLoadData(void **module, const void *image) {
    FAKE_ENTER("cuModuleLoadData");
    if (!s.current) return kInvalidContext;
    if (!image || std::memcmp(image, "BAD", 3) == 0) return kInvalidImage;
    Module *m = new Module;
    s.modules.insert(m);
    *module = m;
    return kSuccess;
}
FAKE_API int cuModuleUnload(void *module) {
    FAKE_ENTER("cuModuleUnload");
    Module *m = static_cast<Module *>(module);
    if (!s.modules.erase(m)) return kInvalidHandle;
    delete m;
    return kSuccess;
}
/** A function of any name but "missing". */
FAKE_API int cuModuleGetFunction(void **function, void *module, const char *name) {
    FAKE_ENTER("cuModuleGetFunction");
    if (!s.modules.count(static_cast<Module *>(module))) return kInvalidHandle;
    if (std::strcmp(name, "missing") == 0) return kNotFound;
    static std::map<std::string, Function> functions;
    Function &f = functions[name];
    f.name = name;
    *function = &f;
    return kSuccess;
}
FAKE_API int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned shared_bytes, void *, void **params, void **extra) {
    FAKE_ENTER("cuLaunchKernel");
    if (!s.current) return kInvalidContext;
    if (!function || (!params && !extra) || shared_bytes > 49152) return kInvalidValue;
    s.launches.push_back(Launch{static_cast<Function *>(function)->name, {gx, gy, gz}, {bx, by, bz}});
    return kSuccess;
}
FAKE_API int cuMemAlloc_v2(DevicePtr *p, size_t bytes) {
    FAKE_ENTER("cuMemAlloc_v2");
    if (!s.current) return kInvalidContext;
    if (bytes == 0) return kInvalidValue;
    void *q = std::malloc(bytes);
    if (!q) return kOutOfMemory;
    s.allocations.insert(q);
    *p = reinterpret_cast<DevicePtr>(q);
    return kSuccess;
}
FAKE_API int cuMemFree_v2(DevicePtr p) {
    FAKE_ENTER("cuMemFree_v2");
    void *q = reinterpret_cast<void *>(p);
    if (!s.allocations.erase(q)) return kInvalidValue;
    std::free(q);
    return kSuccess;
}
FAKE_API int cuMemcpyHtoD_v2(DevicePtr dst, const void *src, size_t bytes) {
    FAKE_ENTER("cuMemcpyHtoD_v2");
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    s.uploads++;
    return kSuccess;
}
FAKE_API int cuMemcpyDtoH_v2(void *dst, DevicePtr src, size_t bytes) {
    FAKE_ENTER("cuMemcpyDtoH_v2");
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    return kSuccess;
}
FAKE_API int cuMemsetD8_v2(DevicePtr dst, unsigned char value, size_t bytes) {
    FAKE_ENTER("cuMemsetD8_v2");
    std::memset(reinterpret_cast<void *>(dst), value, bytes);
    return kSuccess;
}
FAKE_API int cuGetErrorName(int rc, const char **name) {
    switch (rc) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
    default: *name = nullptr; return kInvalidValue;
    }
}

/** NVRTC, loaded in the same process, asks the driver for its private tables: there are none here
 * (as where no driver is installed, which NVRTC handles). */
FAKE_API int cuGetExportTable(const void **table, const void *) {
    *table = nullptr;
    return 801; // CUDA_ERROR_NOT_SUPPORTED
}

// What a test inspects and controls.

/** The next call of entry point `call` (its exported name) returns `rc`. */
FAKE_API void fake_cuda_fail_next(const char *call, int rc) {
    std::lock_guard<std::mutex> lock(state().mu);
    state().fail_next[call] = rc;
}
FAKE_API int64_t fake_cuda_launch_count() {
    std::lock_guard<std::mutex> lock(state().mu);
    return (int64_t)state().launches.size();
}
/** Launch `i`'s kernel name (into name[size]) and sizes; 0, or -1 when there is no such launch. */
FAKE_API int fake_cuda_launch(int64_t i, char *name, int size, unsigned *grid, unsigned *block) {
    std::lock_guard<std::mutex> lock(state().mu);
    const std::vector<Launch> &l = state().launches;
    if (i < 0 || i >= (int64_t)l.size()) return -1;
    std::snprintf(name, (size_t)size, "%s", l[(size_t)i].name.c_str());
    for (int d = 0; d < 3; d++) {
        grid[d] = l[(size_t)i].grid[d];
        block[d] = l[(size_t)i].block[d];
    }
    return 0;
}
FAKE_API int64_t fake_cuda_uploads() {
    std::lock_guard<std::mutex> lock(state().mu);
    return state().uploads;
}
/** Device allocations, modules and primary-context references held now (all 0 when nothing leaks). */
FAKE_API int64_t fake_cuda_live_allocations() {
    std::lock_guard<std::mutex> lock(state().mu);
    return (int64_t)state().allocations.size();
}
FAKE_API int64_t fake_cuda_live_modules() {
    std::lock_guard<std::mutex> lock(state().mu);
    return (int64_t)state().modules.size();
}
FAKE_API int fake_cuda_retained_contexts() {
    std::lock_guard<std::mutex> lock(state().mu);
    return state().retained;
}
