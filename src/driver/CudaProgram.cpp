/** \file compile_cuda (cora/Cuda.h): lower for Target::Cuda, print the device kernels in CUDA C++
 * (codegen/CodeGen_CUDA.h) and compile them with NVRTC (driver/Nvrtc.h) for each architecture. */
#include <iostream>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "cora/Cuda.h"
#include "driver/Lowering.h"
#include "driver/Nvrtc.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"

namespace cora {

bool cuda_compiler_available(std::string *why) { return driver::Nvrtc::load(why) != nullptr; }

ir::LoweredModule driver::lower_for_cuda(const Pipeline &p, CompileOptions opts) {
    if (opts.build_aux_in_kernel)
        throw_compile_error("pipeline '", p.name(),
                            "': build_aux_in_kernel is not supported on CUDA: the device runtime copies the shape's "
                            "aux arrays to the device");
    opts.target = Target::Cuda;
    return driver::lower_pipeline(p, p.name(), opts);
}

CudaProgram driver::cuda_program(const ir::LoweredModule &m, const std::vector<int> &archs,
                                 const CompileOptions &opts) {
    CudaProgram out;
    out.source = ir::codegen_cuda(m);
    out.lowered = ir::print(m.entry().body);
    out.host_source = ir::codegen_cuda_host(m);
    out.entry_symbol = ir::entry_symbol(m);
    for (const ir::LoweredFunc *k : m.device_kernels()) {
        out.kernels.push_back(k->name);
        out.kernel_ir.push_back(ir::print(k->body));
    }
    if (opts.debug >= 2 || (opts.debug < 0 && std::getenv("CORA_DEBUG") && std::atoi(std::getenv("CORA_DEBUG")) >= 2))
        std::cerr << "-- cora: CUDA source of " << m.name << " --\n" << out.source << "\n";
    if (archs.empty()) return out;
    std::string why;
    std::shared_ptr<driver::Nvrtc> nvrtc = driver::Nvrtc::load(&why);
    if (!nvrtc) throw_runtime_error("pipeline '", m.name, "': cannot compile CUDA code: ", why);
    out.nvrtc_version = nvrtc->version();
    for (int arch : archs) {
        driver::Nvrtc::Output o = nvrtc->compile(out.source, ir::c_identifier(m.name), arch);
        out.binaries.push_back(CudaBinary{arch, std::move(o.cubin), std::move(o.ptx), std::move(o.log)});
    }
    return out;
}

CudaProgram compile_cuda(const Pipeline &p, const std::vector<int> &archs, CompileOptions opts) {
    return driver::cuda_program(driver::lower_for_cuda(p, opts), archs, opts);
}

} // namespace cora
