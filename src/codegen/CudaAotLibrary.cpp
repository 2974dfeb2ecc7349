/** \file The sources of a CUDA AOT library (AotLibrary.h: codegen_cuda_aot).
 *
 * One translation unit holds the host entry (codegen_cuda_host, static), the size query, the
 * device runtime and the exported functions; with CudaDeviceKind::CpuThreads a second one holds the
 * kernels compiled for the CPU (codegen_cuda_on_cpu). The device runtime is the text of
 * prelude/cora_device_runtime.h, the same code libcora's JIT kernels run on; this file adds only
 * the context and the C ABI around it. The context is an object the caller creates and destroys
 * (`<fn>_create` / `<fn>_destroy`), so the library keeps no process-wide state: it holds the
 * device (for a GPU: the driver, loaded with dlopen, so that the library loads on machines without
 * one and says so when a context is created, and the module of the embedded fatbin) and the device
 * copy of the shape's length and aux arrays, which the entry stages before its launches
 * (cora_device_t::stage_shape: one packed transfer per new shape, none for a shape whose contents
 * are unchanged). Calls on one context are serialised by its mutex. */
#include <cstdio>

#include "codegen/AotLibrary.h"
#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "codegen/EntryFunction.h"
#include "codegen/cora_device_runtime_h.inc"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The context and the exported functions; @FN@ is the function's name, @ENTRY@ the host entry's
 * symbol. Before it: the device runtime (cora_device_runtime.h) and the device section (kGpuDevice
 * or kCpuThreadsDevice), which defines CoraDevice and cora_open_device. */
const char *kContext = R"CORA(
struct @FN@_context {
    CoraDevice device;
    std::mutex mu;
    cora_rt::ShapeCache shapes; ///< the shape's length and aux arrays on the device (after `device`: released first)
};

namespace {

int32_t @FN@_run(const cora_arg_t *args, int32_t nargs, @FN@_context *ctx, void *stream, char *error,
                 int32_t error_size) {
    if (!ctx) {
        std::snprintf(error, (size_t)error_size, "@FN@: no context (create one with @FN@_create)");
        return 1;
    }
    std::lock_guard<std::mutex> lock(ctx->mu);
    if (ctx->device.make_current(error, error_size) != 0) return 3;
    cora_rt::Run run(ctx->device, ctx->shapes, stream);
    cora_device_t services = run.services();
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
    char why[1024] = {0};
    if (cora_open_device(ctx->device, device, why, (int32_t)sizeof why) != 0) {
        delete ctx; // the device releases what the failed open acquired: the driver library, the primary context
        std::snprintf(error, (size_t)error_size, "@FN@: %s", why);
        return nullptr;
    }
    return ctx;
}

CORA_API void @FN@_destroy(@FN@_context *ctx) {
    if (!ctx) return;
    char ignored[1];
    ctx->device.synchronize_all(ignored, 1); // launches still reading the shape's arrays finish first
    delete ctx;
}

CORA_API int64_t @FN@_shape_transfers(@FN@_context *ctx) {
    if (!ctx) return 0;
    std::lock_guard<std::mutex> lock(ctx->mu);
    return ctx->shapes.transfers();
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

/** The device on a GPU: the module from the embedded fatbin (cuModuleLoadData picks the image for
 * the device: the cubin of its architecture, else the PTX compiled for it by the driver). */
const char *kGpuDevice = R"CORA(
namespace {

typedef cora_rt::GpuDevice CoraDevice;

int32_t cora_open_device(CoraDevice &d, int32_t ordinal, char *error, int32_t error_size) {
    int32_t status = d.open(ordinal, error, error_size);
    if (status != CORA_OK) return status;
    return d.load_module(cora_fatbin, cora_archs, cora_kernel_names, cora_kernel_count, error, error_size);
}

} // namespace
)CORA";

/** The device on CPU threads (tests without a GPU): host memory, the kernels of the second unit. */
const char *kCpuThreadsDevice = R"CORA(
extern "C" int cora_cuda_on_cpu_launch(int kernel, const long long *grid, const long long *threads, void **params,
                                       char *error, int error_size);

namespace {

struct CoraDevice : cora_rt::CpuThreadsDevice {
    CoraDevice() : cora_rt::CpuThreadsDevice(&cora_cuda_on_cpu_launch) {}
};

int32_t cora_open_device(CoraDevice &, int32_t ordinal, char *error, int32_t error_size) {
    if (ordinal == 0) return CORA_OK;
    return cora_rt::report(CORA_ERROR_ARGUMENT, error, error_size,
                           "there is no device %d: this library runs its CUDA kernels on CPU threads (device 0)",
                           (int)ordinal);
}

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

CudaAotSource codegen_cuda_aot(const Module &m, const std::string &fn, CudaDeviceKind device, const std::string &fatbin,
                               const std::vector<int> &archs) {
    const LoweredFunc *size_query = m.function(FunctionKind::SizeQuery);
    CORA_CHECK(size_query != nullptr, "codegen_cuda_aot: the module was lowered without build_aux_in_kernel");
    CORA_CHECK(device == CudaDeviceKind::CpuThreads || !fatbin.empty(),
               "codegen_cuda_aot: no fatbin for a GPU library");
    CudaAotSource out;
    std::string &src = out.wrappers;
    src = codegen_cuda_host(m, "static ");
    src += '\n';
    src += emit_function("static ", fn + "_sizes_argv", *size_query);
    src += "\n#include <mutex>\n\n#define CORA_API extern \"C\" __attribute__((visibility(\"default\")))\n\n";
    src += kCoraDeviceRuntimeHeaderText;
    src += '\n';
    std::vector<const LoweredFunc *> kernels = m.device_kernels();
    if (device == CudaDeviceKind::Gpu) {
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
        src += "const char *const cora_archs = \"cubins for " + list + " and PTX\";\n\n} // namespace\n";
        src += kGpuDevice;
    } else {
        src += kCpuThreadsDevice;
        out.on_cpu = codegen_cuda_on_cpu(m);
    }
    src += kContext;
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
