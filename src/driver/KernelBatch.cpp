/** \file KernelBatch (cora/KernelBatch.h): the pipelines' modules printed into one source
 * (codegen_c_batch), compiled by one compiler run, each kernel bound to its own entry symbol. */
#include "cora/KernelBatch.h"

#include <iostream>

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CppSource.h"
#include "driver/JIT.h"
#include "driver/KernelImpl.h"
#include "util/Error.h"

namespace cora {

struct KernelBatch::Pending {
    std::shared_ptr<driver::CpuKernel> impl;
    std::string name;
};

KernelBatch::KernelBatch(CompileOptions opts) : opts_(std::move(opts)) {}

size_t KernelBatch::add(const Pipeline &p) {
    const std::string backend = driver::backend_name(opts_);
    if (backend != "cpu" && backend != "cuda-emulated")
        throw_compile_error("pipeline '", p.name(),
                            "': a KernelBatch compiles C++ kernels (backends \"cpu\" and "
                            "\"cuda-emulated\"), not for backend '",
                            backend, "'");
    auto pending = std::make_shared<Pending>(
        Pending{driver::prepare_cpu_kernel(p, driver::options_for(opts_, backend), backend), p.name()});
    pending_.push_back(std::move(pending));
    return pending_.size() - 1;
}

size_t KernelBatch::size() const { return pending_.size(); }

std::vector<Kernel> KernelBatch::compile() {
    std::vector<std::shared_ptr<Pending>> batch;
    batch.swap(pending_); // empty again whatever happens below
    if (batch.empty()) return {};
    std::vector<const ir::Module *> modules;
    std::vector<std::string> symbols;
    for (size_t i = 0; i < batch.size(); i++) {
        modules.push_back(&batch[i]->impl->module);
        // The index keeps symbols apart when pipelines share a name.
        symbols.push_back("cora_batch" + std::to_string(i) + "_" + ir::c_identifier(batch[i]->name));
    }
    std::string source = ir::codegen_c_batch(modules, symbols);
    const int debug = driver::debug_level(opts_);
    if (debug >= 2)
        std::cerr << "-- cora: generated source of a batch of " << batch.size() << " --\n" << source << "\n";
    driver::JitResult jit = driver::jit_compile(source, symbols, driver::JitOptions{opts_.cache_dir, opts_.cxx, debug});
    if (debug >= 1)
        std::cerr << "-- cora: batch of " << batch.size() << " kernels "
                  << (jit.from_cache ? "loaded from cache " : "compiled into ") << jit.library->path << "\n";
    std::vector<Kernel> kernels;
    for (size_t i = 0; i < batch.size(); i++) {
        std::shared_ptr<driver::CpuKernel> impl = batch[i]->impl;
        impl->jit = jit;
        impl->jit.entry = jit.entries[i];
        impl->jit.compile_seconds = jit.compile_seconds / (double)batch.size(); // each kernel's share
        impl->entry = reinterpret_cast<cora_entry_fn>(jit.entries[i]);
        kernels.emplace_back(impl);
    }
    return kernels;
}

} // namespace cora
