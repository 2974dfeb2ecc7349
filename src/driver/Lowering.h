/** \file Internal to the driver: a Pipeline lowered with CompileOptions (the JIT and AOT share it). */
#pragma once

#include <string>
#include <vector>

#include "cora/Cuda.h"
#include "cora/Pipeline.h"
#include "lower/Lower.h"

namespace cora::driver {

/** `p` lowered with `opts`; a GPU target's launches checked against `limits` (the device's). */
ir::LoweredModule lower_pipeline(const Pipeline &p, const std::string &name, const CompileOptions &opts,
                                 const ir::GpuLimits &limits = {});
/** `p` lowered for Target::Cuda and a device with `limits` (CompileError for options the CUDA
 * runtime does not support). */
ir::LoweredModule lower_for_cuda(const Pipeline &p, CompileOptions opts, const ir::GpuLimits &limits = {});
/** The device code of a module lowered for CUDA, compiled by NVRTC for each of `archs`. */
CudaProgram cuda_program(const ir::LoweredModule &m, const std::vector<int> &archs, const CompileOptions &opts);
/** The raw arguments of `m`'s entry for a run on `shape` with `bindings` (ABI order; aux arrays built
 * in `shape`; pointers into the shape and the buffers). RuntimeError for unknown, missing or
 * read-only bindings and params or length arrays the shape lacks. */
std::vector<cora_arg_t> make_args(const ir::Module &m, const RaggedShape &shape, const std::vector<Binding> &bindings);
/** One tensor's memory for make_args: wherever it lives (host or device). */
struct BoundMemory {
    Tensor tensor;
    Type type;
    void *data;
    int64_t count;
    bool read_only;
};
/** make_args with the tensors' memory given as BoundMemory (e.g. device buffers). */
std::vector<cora_arg_t> make_args(const ir::Module &m, const RaggedShape &shape,
                                  const std::vector<BoundMemory> &bindings);
/** The runtime ABI's type code of an element type. */
int32_t type_code_of(Type t);
/** The entry's IR, then each device kernel's (GPU targets) after a line `device kernel <name>:`. */
std::string print_module(const ir::Module &m);
/** The arguments a caller passes, in ABI order (aux arrays built in the kernel left out). */
std::vector<KernelArgInfo> argument_info(const ir::LoweredModule &m);

} // namespace cora::driver
