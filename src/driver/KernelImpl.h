/** \file Internal to the driver: the CPU backend's kernel (backends "cpu" and "cuda-emulated": a C
 * entry JIT-compiled from the generated C++), and the steps before its compile that the backends
 * and KernelBatch share. */
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cora/Backend.h"
#include "driver/JIT.h"
#include "lower/Lower.h"

namespace cora::driver {

/** A kernel whose entry is a C function of cora_runtime.h, called on host memory. */
struct CpuKernel : Kernel::Impl {
    CpuKernel(std::string kernel_name, std::string backend_name)
        : Kernel::Impl(std::move(kernel_name), std::move(backend_name)) {}
    ir::LoweredModule module;
    driver::JitResult jit;
    cora_entry_fn entry = nullptr;

    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const override;
    std::vector<cora_arg_t> make_args(const RaggedShape &shape, const std::vector<Binding> &bindings) const override;
    int run_raw(const std::vector<cora_arg_t> &args, std::string *error) const override;
    double compile_seconds() const override { return jit.compile_seconds; }
    bool from_cache() const override { return jit.from_cache; }
    std::string prover_stats() const override { return module.prover_stats.str(); }
    std::string prover_report() const override { return module.prover_stats.report(); }
};

/** The backend `o` names: o.backend, else the one of o.target ("cpu", "cuda-emulated", "cuda"). */
std::string backend_name(const CompileOptions &o);
/** `o` with the target of the built-in backend `backend` ("cpu": Host; "cuda-emulated": CudaEmulated). */
CompileOptions options_for(CompileOptions o, const std::string &backend);

/** Kernel::time_ms's figure: the median milliseconds of `reps` calls of `once` after one warm-up
 * call (RuntimeError unless reps > 0). */
double median_call_ms(int reps, const std::function<void()> &once);

/** CompileOptions::debug, or CORA_DEBUG when it is negative. */
int debug_level(const CompileOptions &o);

/** A CPU kernel up to its compile: `p` lowered with `opts` (opts.target Host or CudaEmulated), its IR
 * printed, its arguments and its C++ source; named for backend `backend`. */
std::shared_ptr<CpuKernel> prepare_cpu_kernel(const Pipeline &p, const CompileOptions &opts,
                                              const std::string &backend);
/** prepare_cpu_kernel, then the compile (or the cache). */
Kernel compile_cpu_kernel(const Pipeline &p, const CompileOptions &opts, const std::string &backend);
/** A kernel of the CUDA runtime (CudaRuntime.cpp): on the GPU numbered opts.device, or on CPU threads. */
Kernel compile_cuda_runtime_kernel(const Pipeline &p, CompileOptions opts, bool on_gpu, const std::string &backend);

} // namespace cora::driver
