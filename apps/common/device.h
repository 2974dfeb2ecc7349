/** \file `--device` for the apps: where the cora kernel runs — the CPU (the app's own kernel), a
 * CUDA GPU (the app's GPU schedule, compiled with NVRTC and run through the driver API), that GPU
 * schedule emulated on the CPU (Target::CudaEmulated), or its CUDA source run by CPU threads
 * (CudaBackend::CpuThreads: the whole CUDA path without a GPU). The last two check the schedule on
 * any machine; their timings are not a GPU's. */
#pragma once

#include <cora/Cuda.h>
#include <cora/cora.h>

#include <string>
#include <vector>

#include "common/cli.h"
#include "common/timing.h"

namespace cora::apps {

enum class Device { Cpu, Cuda, CudaEmulated, CudaCpuThreads };

/** The value of --device; UsageError naming the choices otherwise. */
inline Device parse_device(const std::string &text) {
    if (text == "cpu") return Device::Cpu;
    if (text == "cuda") return Device::Cuda;
    if (text == "cuda-emulated") return Device::CudaEmulated;
    if (text == "cuda-cpu-threads") return Device::CudaCpuThreads;
    throw UsageError("--device must be cpu, cuda, cuda-emulated or cuda-cpu-threads, got '" + text + "'");
}

/** The CudaKernel of `p` for Device::Cuda or Device::CudaCpuThreads. */
inline CudaKernel compile_for(Device device, const Pipeline &p) {
    return compile_cuda_kernel(p, {}, device == Device::Cuda ? CudaBackend::Gpu : CudaBackend::CpuThreads);
}

/** Milliseconds per run of `p` (a GPU schedule) on `device` (not Cpu), after one run that leaves
 * its outputs in `bindings`: through the CUDA runtime the median of `runs` calls with the data on
 * the device (kernels, launches, synchronisation; no copies), emulated the best of `runs` calls.
 * `label` says which. RuntimeError when there is no GPU (with the reason). */
inline double run_gpu_schedule(Device device, const Pipeline &p, const RaggedShape &shape,
                               const std::vector<Binding> &bindings, int runs, std::string *label) {
    if (device == Device::Cuda || device == Device::CudaCpuThreads) {
        CudaKernel k = compile_for(device, p);
        k.run(shape, bindings);
        *label = device == Device::Cuda ? "cora, CUDA GPU (median, data on the device)"
                                        : "cora CUDA source on CPU threads (not a GPU timing)";
        return k.time_ms(shape, bindings, runs);
    }
    CompileOptions o;
    o.target = Target::CudaEmulated;
    Kernel k = p.compile(o);
    k.run(shape, bindings);
    *label = "cora GPU schedule emulated on the CPU (not a GPU timing)";
    return best_seconds(runs, [&] { k.run(shape, bindings); }) * 1e3;
}

} // namespace cora::apps
