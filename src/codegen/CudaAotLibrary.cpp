/** \file The sources of a CUDA AOT library (AotLibrary.h: codegen_cuda_aot).
 *
 * One translation unit holds the host entry (codegen_cuda_host, static), the size query, the
 * device runtime and the exported functions; with CudaAotDevice::CpuThreads a second one holds the
 * kernels compiled for the CPU (codegen_cuda_on_cpu). The runtime is a context object the caller
 * creates and destroys (`<fn>_create` / `<fn>_destroy`), so the library keeps no process-wide
 * state: it holds the loaded module and the device copy of the last shape's length and aux arrays,
 * which the entry stages before its launches (cora_device_t::stage_shape: one packed transfer per
 * new shape, none for a shape whose contents are unchanged). Calls on one context are serialised by
 * its mutex. The GPU runtime loads libcuda.so.1 with dlopen (the library links no CUDA library, so
 * it loads on machines without a GPU and says so when a context is created) and loads the embedded
 * fatbin with cuModuleLoadData, which picks the image for the device: the cubin of its
 * architecture, else the PTX compiled for it by the driver. */
#include <cstdio>

#include "codegen/AotLibrary.h"
#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "codegen/EntryFunction.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** What the context and the exported functions need; @FN@ is the function's name, @ENTRY@ the
 * host entry's symbol. The device section (kGpuDevice or kCpuThreadsDevice) defines CoraDevice. */
const char *kRuntime = R"CORA(
struct @FN@_context {
    CoraDevice device;
    std::mutex mu;
    std::vector<unsigned char> shape_host; ///< the last staged length and aux arrays, packed
    void *shape_device = nullptr;          ///< their device copy
    int64_t shape_transfers = 0;
};

namespace {

/** One call's cora_device_t services. */
struct CoraRun {
    @FN@_context *ctx;
    void *stream;
    std::vector<size_t> offsets; ///< the staged arrays in the packed copy, once staged in this call
};

int32_t cora_run_launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                        char *error, int32_t error_size) {
    CoraRun *r = static_cast<CoraRun *>(c);
    return r->ctx->device.launch(kernel, grid, threads, params, r->stream, error, error_size);
}

void *cora_run_alloc(void *c, int64_t bytes, char *error, int32_t error_size) {
    return static_cast<CoraRun *>(c)->ctx->device.alloc((size_t)(bytes > 0 ? bytes : 1), error, error_size);
}

void cora_run_release(void *c, void *p) { static_cast<CoraRun *>(c)->ctx->device.release(p); }

int32_t cora_run_stage(void *c, int32_t n, const void *const *host, const int64_t *bytes, const void **device,
                       char *error, int32_t error_size) {
    CoraRun *r = static_cast<CoraRun *>(c);
    @FN@_context &k = *r->ctx;
    if (r->offsets.empty()) {
        std::vector<size_t> offset((size_t)n, 0);
        size_t total = 0;
        for (int32_t i = 0; i < n; i++) {
            offset[(size_t)i] = total;
            total += ((size_t)bytes[i] + 7) / 8 * 8;
        }
        std::vector<unsigned char> packed(total);
        for (int32_t i = 0; i < n; i++)
            if (bytes[i] > 0) std::memcpy(packed.data() + offset[(size_t)i], host[i], (size_t)bytes[i]);
        if (!k.shape_device || packed != k.shape_host) {
            // Another shape: launches still reading the old copy finish first.
            if (k.device.synchronize_all(error, error_size) != 0) return 3;
            if (k.shape_device) k.device.release(k.shape_device);
            k.shape_device = nullptr;
            k.shape_host.clear();
            void *d = k.device.alloc(total > 8 ? total : 8, error, error_size);
            if (!d) return 2;
            if (k.device.upload(d, packed.data(), total, error, error_size) != 0) {
                k.device.release(d);
                return 3;
            }
            k.shape_device = d;
            k.shape_host = std::move(packed);
            k.shape_transfers++;
        }
        r->offsets = std::move(offset);
    }
    for (int32_t i = 0; i < n; i++)
        device[i] = static_cast<unsigned char *>(k.shape_device) + r->offsets[(size_t)i];
    return 0;
}

int32_t @FN@_run(const cora_arg_t *args, int32_t nargs, @FN@_context *ctx, void *stream, char *error,
                 int32_t error_size) {
    if (!ctx) {
        std::snprintf(error, (size_t)error_size, "@FN@: no context (create one with @FN@_create)");
        return 1;
    }
    std::lock_guard<std::mutex> lock(ctx->mu);
    if (ctx->device.make_current(error, error_size) != 0) return 3;
    CoraRun run{ctx, stream, {}};
    cora_device_t services{&run, &cora_run_launch, &cora_run_alloc, &cora_run_release, &cora_run_stage};
    return @ENTRY@(args, nargs, &services, error, error_size);
}

} // namespace

CORA_API @FN@_context *@FN@_create(int32_t device, char *error, int32_t error_size) {
    char scratch[1];
    if (!error || error_size <= 0) {
        error = scratch;
        error_size = 1;
    }
    @FN@_context *ctx = new (std::nothrow) @FN@_context;
    if (!ctx) {
        std::snprintf(error, (size_t)error_size, "@FN@_create: out of memory");
        return nullptr;
    }
    if (ctx->device.open(device, error, error_size) != 0) {
        ctx->device.close(); // what the failed open acquired: the driver library, the primary context
        delete ctx;
        return nullptr;
    }
    return ctx;
}

CORA_API void @FN@_destroy(@FN@_context *ctx) {
    if (!ctx) return;
    char ignored[1];
    if (ctx->device.make_current(ignored, 1) == 0) {
        ctx->device.synchronize_all(ignored, 1);
        if (ctx->shape_device) ctx->device.release(ctx->shape_device);
    }
    ctx->device.close();
    delete ctx;
}

CORA_API int64_t @FN@_shape_transfers(@FN@_context *ctx) {
    if (!ctx) return 0;
    std::lock_guard<std::mutex> lock(ctx->mu);
    return ctx->shape_transfers;
}

CORA_API int32_t @FN@_argv(@FN@_context *ctx, void *stream, const cora_arg_t *args, int32_t nargs, char *error,
                           int32_t error_size) {
    char scratch[1];
    if (!error || error_size <= 0) {
        error = scratch;
        error_size = 1;
    }
    return @FN@_run(args, nargs, ctx, stream, error, error_size);
}
)CORA";

/** CoraDevice on a GPU: the driver API through dlopen, the module from the embedded fatbin. */
const char *kGpuDevice = R"CORA(
namespace {

typedef unsigned long long CoraDevicePtr; // CUdeviceptr

struct CoraDevice {
    void *lib = nullptr, *context = nullptr, *module = nullptr;
    int device = -1;
    void *functions[cora_kernel_count > 0 ? cora_kernel_count : 1] = {};
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
    int (*mem_alloc)(CoraDevicePtr *, size_t) = nullptr;
    int (*mem_free)(CoraDevicePtr) = nullptr;
    int (*htod)(CoraDevicePtr, const void *, size_t) = nullptr;
    int (*error_name)(int, const char **) = nullptr;

    int32_t fail(int rc, const char *call, const char *detail, char *error, int32_t error_size) const {
        const char *name = nullptr;
        if (error_name) error_name(rc, &name);
        std::snprintf(error, (size_t)error_size, "CUDA call %s%s failed: %s (%d)", call, detail,
                      name ? name : "CUDA error", rc);
        return 3;
    }
    template <typename F> bool bind(const char *name, F &fn) {
        fn = reinterpret_cast<F>(dlsym(lib, name));
        return fn != nullptr;
    }
    int32_t open(int32_t ordinal, char *error, int32_t error_size) {
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            std::snprintf(error, (size_t)error_size, "@FN@: no CUDA driver: libcuda.so.1 cannot be loaded (%s)",
                          e ? e : "");
            return 3;
        }
        bool ok = bind("cuInit", init) && bind("cuDeviceGetCount", device_count) && bind("cuDeviceGet", device_get) &&
                  bind("cuDeviceGetAttribute", device_attribute) &&
                  bind("cuDevicePrimaryCtxRetain", primary_retain) &&
                  bind("cuDevicePrimaryCtxRelease_v2", primary_release) && bind("cuCtxSetCurrent", set_current) &&
                  bind("cuCtxSynchronize", ctx_synchronize) && bind("cuModuleLoadData", module_load_data) &&
                  bind("cuModuleUnload", module_unload) && bind("cuModuleGetFunction", module_function) &&
                  bind("cuLaunchKernel", launch_kernel) && bind("cuMemAlloc_v2", mem_alloc) &&
                  bind("cuMemFree_v2", mem_free) && bind("cuMemcpyHtoD_v2", htod) &&
                  bind("cuGetErrorName", error_name);
        if (!ok) {
            std::snprintf(error, (size_t)error_size, "@FN@: libcuda.so.1 lacks driver API entry points this library needs");
            return 3;
        }
        int rc = init(0), count = 0;
        if (rc != 0) return fail(rc, "cuInit", "", error, error_size);
        if ((rc = device_count(&count)) != 0) return fail(rc, "cuDeviceGetCount", "", error, error_size);
        if (ordinal < 0 || ordinal >= count) {
            std::snprintf(error, (size_t)error_size, "@FN@: there is no CUDA device %d (this machine has %d)",
                          (int)ordinal, count);
            return 1;
        }
        if ((rc = device_get(&device, ordinal)) != 0) return fail(rc, "cuDeviceGet", "", error, error_size);
        if ((rc = primary_retain(&context, device)) != 0) {
            context = nullptr;
            return fail(rc, "cuDevicePrimaryCtxRetain", "", error, error_size);
        }
        if ((rc = set_current(context)) != 0) return fail(rc, "cuCtxSetCurrent", "", error, error_size);
        if ((rc = module_load_data(&module, cora_fatbin)) != 0) {
            module = nullptr;
            int major = 0, minor = 0;
            device_attribute(&major, 75, device); // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
            device_attribute(&minor, 76, device);
            char detail[160];
            std::snprintf(detail, sizeof detail, " (the library holds %s; device %d is sm_%d%d)", cora_archs,
                          (int)ordinal, major, minor);
            return fail(rc, "cuModuleLoadData", detail, error, error_size);
        }
        for (int k = 0; k < cora_kernel_count; k++)
            if ((rc = module_function(&functions[k], module, cora_kernel_names[k])) != 0)
                return fail(rc, "cuModuleGetFunction", "", error, error_size);
        return 0;
    }
    int32_t make_current(char *error, int32_t error_size) {
        int rc = set_current(context);
        return rc == 0 ? 0 : fail(rc, "cuCtxSetCurrent", "", error, error_size);
    }
    void close() {
        if (module) module_unload(module);
        if (context) primary_release(device);
        if (lib) dlclose(lib);
        module = context = lib = nullptr;
    }
    void *alloc(size_t bytes, char *error, int32_t error_size) {
        CoraDevicePtr p = 0;
        int rc = mem_alloc(&p, bytes);
        if (rc == 0) return reinterpret_cast<void *>(p);
        char detail[64];
        std::snprintf(detail, sizeof detail, " of %zu bytes", bytes);
        fail(rc, "cuMemAlloc", detail, error, error_size);
        return nullptr;
    }
    void release(void *p) {
        if (p) mem_free(reinterpret_cast<CoraDevicePtr>(p));
    }
    int32_t upload(void *dst, const void *src, size_t bytes, char *error, int32_t error_size) {
        int rc = bytes ? htod(reinterpret_cast<CoraDevicePtr>(dst), src, bytes) : 0;
        return rc == 0 ? 0 : fail(rc, "cuMemcpyHtoD", "", error, error_size);
    }
    int32_t synchronize_all(char *error, int32_t error_size) {
        int rc = ctx_synchronize();
        return rc == 0 ? 0 : fail(rc, "cuCtxSynchronize", "", error, error_size);
    }
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *stream,
                   char *error, int32_t error_size) {
        if (grid[0] > 2147483647 || grid[1] > 65535 || grid[2] > 65535 || threads[0] * threads[1] * threads[2] > 1024) {
            std::snprintf(error, (size_t)error_size,
                          "kernel %s: launch of %lld x %lld x %lld blocks of %lld x %lld x %lld threads exceeds the "
                          "device's limits",
                          cora_kernel_names[kernel], (long long)grid[0], (long long)grid[1], (long long)grid[2],
                          (long long)threads[0], (long long)threads[1], (long long)threads[2]);
            return 3;
        }
        int rc = launch_kernel(functions[kernel], (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                               (unsigned)threads[0], (unsigned)threads[1], (unsigned)threads[2], 0, stream, params,
                               nullptr);
        if (rc == 0) return 0;
        char detail[200];
        std::snprintf(detail, sizeof detail, " (%s)", cora_kernel_names[kernel]);
        return fail(rc, "cuLaunchKernel", detail, error, error_size);
    }
};

} // namespace
)CORA";

/** CoraDevice on CPU threads (tests without a GPU): host memory, the kernels of the second unit. */
const char *kCpuThreadsDevice = R"CORA(
extern "C" int cora_cuda_on_cpu_launch(int kernel, const long long *grid, const long long *threads, void **params,
                                       char *error, int error_size);

namespace {

struct CoraDevice {
    int32_t open(int32_t ordinal, char *error, int32_t error_size) {
        if (ordinal == 0) return 0;
        std::snprintf(error, (size_t)error_size,
                      "@FN@: there is no device %d: this library runs its CUDA kernels on CPU threads (device 0)",
                      (int)ordinal);
        return 1;
    }
    int32_t make_current(char *, int32_t) { return 0; }
    void close() {}
    void *alloc(size_t bytes, char *error, int32_t error_size) {
        void *p = std::calloc(bytes, 1);
        if (!p) std::snprintf(error, (size_t)error_size, "cannot allocate %zu bytes of 'device' memory", bytes);
        return p;
    }
    void release(void *p) { std::free(p); }
    int32_t upload(void *dst, const void *src, size_t bytes, char *, int32_t) {
        if (bytes) std::memcpy(dst, src, bytes);
        return 0;
    }
    int32_t synchronize_all(char *, int32_t) { return 0; } // launches run to completion when called
    int32_t launch(int32_t kernel, const int64_t *grid, const int64_t *threads, void **params, void *, char *error,
                   int32_t error_size) {
        const long long g[3] = {grid[0], grid[1], grid[2]}, t[3] = {threads[0], threads[1], threads[2]};
        return cora_cuda_on_cpu_launch(kernel, g, t, params, error, error_size);
    }
};

} // namespace
)CORA";

std::string replace_all(std::string s, const std::string &from, const std::string &to) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
        s.replace(pos, from.size(), to);
    return s;
}

/** `bytes` as the initialiser of an unsigned char array, 24 per line. */
std::string byte_array(const std::string &bytes) {
    std::string out;
    out.reserve(bytes.size() * 5 + bytes.size() / 24 + 8);
    char hex[8];
    for (size_t i = 0; i < bytes.size(); i++) {
        std::snprintf(hex, sizeof hex, "0x%02x,", (unsigned char)bytes[i]);
        out += hex;
        if (i % 24 == 23) out += '\n';
    }
    return out;
}

} // namespace

CudaAotSource codegen_cuda_aot(const Module &m, const std::string &fn, CudaAotDevice device, const std::string &fatbin,
                               const std::vector<int> &archs) {
    const LoweredFunc *size_query = m.function(FunctionKind::SizeQuery);
    CORA_CHECK(size_query != nullptr, "codegen_cuda_aot: the module was lowered without build_aux_in_kernel");
    CORA_CHECK(device == CudaAotDevice::CpuThreads || !fatbin.empty(), "codegen_cuda_aot: no fatbin for a GPU library");
    CudaAotSource out;
    std::string &src = out.wrappers;
    src = codegen_cuda_host(m, "static ");
    src += '\n';
    src += emit_function("static ", fn + "_sizes_argv", *size_query);
    src += "\n#include <dlfcn.h>\n#include <cstdlib>\n#include <cstring>\n#include <mutex>\n#include <new>\n#include "
           "<vector>\n\n"
           "#define CORA_API extern \"C\" __attribute__((visibility(\"default\")))\n\n";
    std::vector<const LoweredFunc *> kernels = m.device_kernels();
    if (device == CudaAotDevice::Gpu) {
        std::string names, list;
        // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
        for (const LoweredFunc *k : kernels) {
            names += '"';
            names += c_escape(k->name, false);
            names += "\", ";
        }
        for (int a : archs) {
            list += list.empty() ? "sm_" : ", sm_";
            list += std::to_string(a);
        }
        src += "namespace {\n\n// The device code: cubins for " + list +
               " and PTX, as the CUDA toolkit's fatbinary packs them.\n";
        src += "alignas(64) const unsigned char cora_fatbin[] = {\n" + byte_array(fatbin) + "\n};\n";
        src += "constexpr int cora_kernel_count = " + std::to_string(kernels.size()) + ";\n";
        src += "const char *const cora_kernel_names[] = {" + (names.empty() ? std::string("nullptr") : names) + "};\n";
        src += "const char *const cora_archs = \"" + list + "\";\n\n} // namespace\n";
        src += kGpuDevice;
    } else {
        src += kCpuThreadsDevice;
        out.on_cpu = codegen_cuda_on_cpu(m);
    }
    src += kRuntime;
    std::vector<const ModuleArg *> abi = arg_list(m.entry()), shape = arg_list(*size_query);
    src += "\nCORA_API int32_t " + fn + "(" + fn + "_context *ctx, void *stream, " + typed_params(abi) +
           "char *error, int32_t error_size) {\n" + typed_call(abi, fn + "_run", "ctx, stream, ") + "}\n";
    src += "\nCORA_API int32_t " + fn + "_buffer_sizes(" + typed_params(shape) +
           "int64_t *sizes, char *error, int32_t error_size) {\n" + typed_call(shape, fn + "_sizes_argv", "sizes, ") +
           "}\n";
    src = replace_all(replace_all(src, "@FN@", fn), "@ENTRY@", entry_symbol(m));
    out.header = aot_header(m, fn, true);
    return out;
}

} // namespace cora::ir
