// The CUDA path of a pipeline without a GPU: lowered for Target::Cuda (per-thread tile slices
// included), its host entry (codegen_cuda_host) calling a cora_device_t whose launches run the
// CUDA kernels' source on CPU threads (codegen_cuda_on_cpu), both JIT-compiled. Memory is host
// memory: the device copies of the length and aux arrays are the arrays themselves.
#pragma once

#include <cora/cora.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "cora_runtime.h"
#include "driver/JIT.h"
#include "driver/Lowering.h"
#include "util/Error.h"

namespace cora::testing {

class CudaOnCpu {
public:
    explicit CudaOnCpu(const Pipeline &p) : module_(driver::lower_for_cuda(p, {})) {
        driver::JitOptions jo{"", "", 0};
        host_ = driver::jit_compile(ir::codegen_cuda_host(module_), ir::entry_symbol(module_), jo);
        kernels_ = driver::jit_compile(ir::codegen_cuda_on_cpu(module_), "cora_cuda_on_cpu_launch", jo);
    }

    /** As Kernel::run: RuntimeError with the entry's message on bad input or a failed launch. */
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
        std::vector<cora_arg_t> args = driver::make_args(module_, shape, bindings);
        Device d{reinterpret_cast<Launch>(kernels_.entry)};
        cora_device_t device{&d, &Device::launch, &Device::alloc, &Device::release, &Device::device_copy};
        char error[1024] = {0};
        auto entry = reinterpret_cast<cora_device_entry_fn>(host_.entry);
        int32_t rc = entry(args.data(), (int32_t)args.size(), &device, error, (int32_t)sizeof error);
        if (rc != CORA_OK) throw_runtime_error("kernel '", module_.name, "' (CUDA on CPU threads): ", error);
    }

    const ir::LoweredModule &module() const { return module_; }

private:
    using Launch = int (*)(int, const long long *, const long long *, void **, char *, int);
    struct Device {
        Launch run;
        static int32_t launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                              char *error, int32_t error_size) {
            const long long g[3] = {grid[0], grid[1], grid[2]}, t[3] = {threads[0], threads[1], threads[2]};
            return static_cast<Device *>(c)->run(kernel, g, t, params, error, error_size);
        }
        static void *alloc(void *, int64_t bytes, char *, int32_t) { return std::malloc((size_t)bytes); }
        static void release(void *, void *p) { std::free(p); }
        static const void *device_copy(void *, const void *host) { return host; }
    };
    ir::LoweredModule module_;
    driver::JitResult host_, kernels_;
};

} // namespace cora::testing
