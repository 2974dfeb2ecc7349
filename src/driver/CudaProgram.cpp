/** \file compile_cuda (cora/Cuda.h): lower for Target::Cuda, print the device kernels in CUDA C++
 * (codegen/CodeGen_CUDA.h) and compile them with NVRTC (driver/Nvrtc.h) for each architecture.
 *
 * NVRTC's output is cached in the kernel cache (driver/KernelCache.h) as a data entry whose key is
 * the content hash of the source, the architecture, NVRTC's version and library path and the
 * record format: the same kernels for the same GPU compile once per machine, and a new toolkit,
 * another architecture or any change in the code is a new entry. A corrupt entry fails its
 * checksum or its record's framing and is compiled again. */
#include <cstdlib>
#include <iostream>
#include <optional>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_CUDA.h"
#include "cora/Cuda.h"
#include "driver/KernelCache.h"
#include "driver/Lowering.h"
#include "driver/Nvrtc.h"
#include "ir/IRPrinter.h"
#include "util/Error.h"
#include "util/Hash.h"

namespace cora {

bool cuda_compiler_available(std::string *why) { return driver::Nvrtc::load(why) != nullptr; }

namespace {

constexpr const char *kRecordTag = "cora-nvrtc-record 1\n";

/** NVRTC's output as one cache entry: the tag, then cubin, PTX and log, each as "<size>\n<bytes>". */
std::string encode_record(const driver::Nvrtc::Output &o) {
    std::string r = kRecordTag;
    for (const std::string *part : {&o.cubin, &o.ptx, &o.log})
        r += std::to_string(part->size()) + "\n" + *part;
    return r;
}

/** The record's parts, or nullopt when its framing does not hold (then it is compiled again). */
std::optional<driver::Nvrtc::Output> decode_record(const std::string &r) {
    std::string tag = kRecordTag;
    if (r.compare(0, tag.size(), tag) != 0) return std::nullopt;
    size_t pos = tag.size();
    driver::Nvrtc::Output o;
    for (std::string *part : {&o.cubin, &o.ptx, &o.log}) {
        size_t nl = r.find('\n', pos);
        if (nl == std::string::npos || nl == pos || nl - pos > 18) return std::nullopt;
        size_t n = 0;
        for (size_t i = pos; i < nl; i++) {
            if (r[i] < '0' || r[i] > '9') return std::nullopt;
            n = n * 10 + (size_t)(r[i] - '0');
        }
        if (n > r.size() - nl - 1) return std::nullopt;
        *part = r.substr(nl + 1, n);
        pos = nl + 1 + n;
    }
    if (pos != r.size() || o.cubin.empty()) return std::nullopt;
    return o;
}

} // namespace

ir::LoweredModule driver::lower_for_cuda(const Pipeline &p, CompileOptions opts, const ir::GpuLimits &limits) {
    if (opts.build_aux_in_kernel)
        throw_compile_error("pipeline '", p.name(),
                            "': build_aux_in_kernel is not supported on CUDA: the device runtime copies the shape's "
                            "aux arrays to the device");
    opts.target = Target::Cuda;
    return driver::lower_pipeline(p, p.name(), opts, limits);
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
    driver::KernelCache cache(opts.cache_dir.empty() ? driver::default_cache_dir() : opts.cache_dir);
    for (int arch : archs) {
        std::string key = util::content_hash(std::string(kRecordTag) + "nvrtc " + out.nvrtc_version + " " +
                                             nvrtc->path() + "\nsm_" + std::to_string(arch) + "\n" + out.source);
        std::optional<driver::Nvrtc::Output> o;
        if (std::optional<std::string> cached = cache.read_data(key)) o = decode_record(*cached);
        bool from_cache = o.has_value();
        if (!o) {
            o = nvrtc->compile(out.source, ir::c_identifier(m.name), arch);
            cache.write_data(key, encode_record(*o));
        }
        out.binaries.push_back(CudaBinary{arch, std::move(o->cubin), std::move(o->ptx), std::move(o->log), from_cache});
    }
    return out;
}

CudaProgram compile_cuda(const Pipeline &p, const std::vector<int> &archs, CompileOptions opts) {
    return driver::cuda_program(driver::lower_for_cuda(p, opts), archs, opts);
}

} // namespace cora
