/** \file The CPU backend's kernel (lower + codegen + JIT; marshal a shape and buffers into the
 * generated entry's arguments), and Pipeline. */
#include "cora/Pipeline.h"

#include <cstdlib>
#include <iostream>
#include <mutex>

#include "codegen/CodeGen_C.h"
#include "codegen/CppSource.h"
#include "cora/Generator.h"
#include "cora_runtime.h"
#include "driver/JIT.h"
#include "driver/KernelImpl.h"
#include "driver/Lowering.h"
#include "ir/IRPrinter.h"
#include "lower/Lower.h"
#include "runtime/RaggedShapeImpl.h"
#include "util/Debug.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

int32_t driver::type_code_of(Type t) {
    if (t == Int32) return CORA_TYPE_INT32;
    if (t == Int64) return CORA_TYPE_INT64;
    if (t == Float32) return CORA_TYPE_FLOAT32;
    if (t == Float64) return CORA_TYPE_FLOAT64;
    if (t == Float16) return CORA_TYPE_FLOAT16;
    return 0;
}

namespace {

/** A CompileOptions switch: 1 on, 0 off, negative: on unless the environment variable is "0". */
bool switched_on(int value, const char *env_name) {
    if (value >= 0) return value != 0;
    const char *env = std::getenv(env_name);
    return !(env && std::string(env) == "0");
}

/** CompileOptions::gpu_copy_stages, or CORA_GPU_COPY_STAGES for 0 (default 2). */
int gpu_copy_stages(int value) {
    const int most = ir::kMaxGpuCopyStages;
    if (value == 0) {
        const char *env = std::getenv("CORA_GPU_COPY_STAGES");
        if (!env || !*env) return 2;
        const std::string s = env;
        if (s.size() != 1 || s[0] < '1' || s[0] > '0' + most)
            throw_compile_error("CORA_GPU_COPY_STAGES is '", s, "'; it takes 1 (copies not pipelined) to ", most);
        return s[0] - '0';
    }
    if (value < 1 || value > most)
        throw_compile_error("CompileOptions::gpu_copy_stages is ", value, "; it takes 1 (copies not pipelined) to ",
                            most, ", or 0 for CORA_GPU_COPY_STAGES (default 2)");
    return value;
}

LowerOptions lower_options(const CompileOptions &o) {
    LowerOptions l;
    l.debug = driver::debug_level(o);
    l.target = o.target;
    l.use_z3 = switched_on(o.use_z3, "CORA_Z3");
    l.remove_guards = switched_on(o.remove_guards, "CORA_REMOVE_GUARDS");
    l.narrow_gpu_indices = switched_on(o.narrow_gpu_indices, "CORA_NARROW_GPU_INDICES");
    l.vector_gpu_copies = switched_on(o.vector_gpu_copies, "CORA_VECTOR_GPU_COPIES");
    l.gpu_copy_stages = gpu_copy_stages(o.gpu_copy_stages);
    l.build_aux_in_kernel = o.build_aux_in_kernel;
    l.vector_bits = o.vector_bits > 0 ? o.vector_bits : o.vector_bits == 0 ? host_vector_bits() : 0;
    l.contraction_tiles = o.contraction_tiles;
    return l;
}

std::vector<TensorPtr> output_nodes(const std::vector<Func> &outs) {
    std::vector<TensorPtr> v;
    for (const Func &f : outs)
        v.push_back(f.node());
    return v;
}

} // namespace

namespace driver {

int debug_level(const CompileOptions &o) { return o.debug >= 0 ? o.debug : util::env_debug_level(); }

std::shared_ptr<CpuKernel> prepare_cpu_kernel(const Pipeline &p, const CompileOptions &opts,
                                              const std::string &backend) {
    CORA_CHECK(opts.target != Target::Cuda, "prepare_cpu_kernel for Target::Cuda");
    auto impl = std::make_shared<CpuKernel>(p.name(), backend);
    impl->module = lower_pipeline(p, p.name(), opts);
    impl->lowered = print_module(impl->module);
    impl->source = ir::codegen_c(impl->module);
    if (debug_level(opts) >= 2) std::cerr << "-- cora: generated source --\n" << impl->source << "\n";
    impl->arguments = argument_info(impl->module);
    return impl;
}

Kernel compile_cpu_kernel(const Pipeline &p, const CompileOptions &opts, const std::string &backend) {
    std::shared_ptr<CpuKernel> impl = prepare_cpu_kernel(p, opts, backend);
    int debug = debug_level(opts);
    JitOptions jo{opts.cache_dir, opts.cxx, debug};
    impl->jit = jit_compile(impl->source, entry_symbol(impl->module), jo);
    impl->entry = reinterpret_cast<cora_entry_fn>(impl->jit.entry);
    if (debug >= 1)
        std::cerr << "-- cora: kernel " << p.name()
                  << (impl->jit.from_cache ? " loaded from cache " : " compiled into ") << impl->jit.library->path
                  << "\n";
    return Kernel(impl);
}

std::string print_module(const ir::Module &m) {
    std::string s = print(m.entry().body);
    for (const ir::LoweredFunc *k : m.device_kernels())
        s += "device kernel " + k->name + ":\n" + print(k->body);
    return s;
}

LoweredModule lower_pipeline(const Pipeline &p, const std::string &name, const CompileOptions &opts,
                             const GpuLimits &limits) {
    LowerOptions l = lower_options(opts);
    l.gpu_limits = limits;
    return lower(output_nodes(p.outputs()), name, l);
}

std::vector<KernelArgInfo> argument_info(const LoweredModule &m) {
    std::vector<KernelArgInfo> v;
    for (const ModuleArg &a : m.entry().args)
        v.push_back(KernelArgInfo{a.kind, a.name, a.kind == ModuleArg::Kind::Param ? Int64 : a.var->type, a.layout});
    return v;
}

} // namespace driver

Pipeline::Pipeline(std::vector<Func> outputs, std::string name) : outputs_(std::move(outputs)), name_(std::move(name)) {
    if (outputs_.empty()) throw_compile_error("pipeline '", name_, "' has no outputs");
}

std::string Pipeline::lower_to_string(const CompileOptions &opts) const {
    return driver::print_module(lower(output_nodes(outputs_), name_, lower_options(opts)));
}

void driver::CpuKernel::run(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
    std::vector<cora_arg_t> args = make_args(shape, bindings);
    std::string error;
    if (run_raw(args, &error) != CORA_OK) throw RuntimeError("kernel '" + module.name + "': " + error);
}

std::vector<cora_arg_t> driver::make_args(const ir::Module &m, const RaggedShape &shape,
                                          const std::vector<Binding> &bindings) {
    std::vector<BoundMemory> memory;
    for (const Binding &b : bindings) {
        if (!b.buffer) throw_runtime_error("null buffer bound for tensor '", b.tensor.name(), "'");
        memory.push_back({b.tensor, b.buffer->type(), b.buffer->raw(), b.buffer->size(), b.buffer->read_only()});
    }
    return make_args(m, shape, memory);
}

std::vector<cora_arg_t> driver::make_args(const ir::Module &m, const RaggedShape &shape,
                                          const std::vector<BoundMemory> &bindings) {
    const RaggedShape::Impl &s = *shape_impl(shape);
    s.validate_counts();
    for (size_t i = 0; i < bindings.size(); i++) {
        const BoundMemory &b = bindings[i];
        bool known = false;
        for (const ModuleArg &a : m.entry().args)
            known = known || (a.tensor && a.tensor == b.tensor.node());
        if (!known) throw_runtime_error("tensor '", b.tensor.name(), "' is not an argument of kernel '", m.name, "'");
        // Bound twice: which buffer the caller meant is unknown (it used to be the last one).
        for (size_t j = 0; j < i; j++)
            if (bindings[j].tensor.node() == b.tensor.node())
                throw_runtime_error("tensor '", b.tensor.name(), "' is bound twice in one run of kernel '", m.name,
                                    "' (bindings ", j, " and ", i, "); bind each tensor once");
    }
    std::vector<cora_arg_t> args;
    for (const ModuleArg &a : m.entry().args) {
        cora_arg_t c{};
        c.name = a.name.c_str();
        switch (a.kind) {
        case ModuleArg::Kind::Param: {
            std::lock_guard<std::mutex> lock(s.mu);
            auto it = s.params.find(a.var.get());
            if (it == s.params.end()) throw_runtime_error("param '", a.name, "' is not set in the RaggedShape");
            c.type_code = CORA_TYPE_INT64;
            c.is_scalar = 1;
            c.scalar = it->second;
            break;
        }
        case ModuleArg::Kind::LengthArray: {
            std::lock_guard<std::mutex> lock(s.mu);
            auto it = s.lengths.find(a.uf.get());
            if (it == s.lengths.end()) throw_runtime_error(input_array_title(*a.uf), " is not set in the RaggedShape");
            c.type_code = CORA_TYPE_INT32;
            c.data = const_cast<int32_t *>(it->second.data());
            c.count = (int64_t)it->second.size();
            break;
        }
        case ModuleArg::Kind::AuxArray: {
            const std::vector<int64_t> &v = s.build(a.uf.get()); // counts validated above
            c.type_code = CORA_TYPE_INT64;
            c.data = const_cast<int64_t *>(v.data());
            c.count = (int64_t)v.size();
            break;
        }
        case ModuleArg::Kind::Input:
        case ModuleArg::Kind::Output: {
            const BoundMemory *buf = nullptr;
            for (const BoundMemory &b : bindings)
                if (b.tensor.node() == a.tensor) buf = &b;
            if (!buf) throw_runtime_error("no buffer bound for tensor '", a.name, "' of kernel '", m.name, "'");
            if (a.kind == ModuleArg::Kind::Output && buf->read_only)
                throw_runtime_error("output '", a.name, "' of kernel '", m.name,
                                    "' is bound to a read-only buffer (a Buffer::view of const memory)");
            c.type_code = driver::type_code_of(buf->type);
            c.data = buf->data;
            c.count = buf->count;
            break;
        }
        }
        args.push_back(c);
    }
    return args;
}

std::vector<cora_arg_t> driver::CpuKernel::make_args(const RaggedShape &shape,
                                                     const std::vector<Binding> &bindings) const {
    return driver::make_args(module, shape, bindings);
}

int driver::CpuKernel::run_raw(const std::vector<cora_arg_t> &args, std::string *error) const {
    char buf[1024] = {0};
    int status = entry(args.data(), (int32_t)args.size(), buf, (int32_t)sizeof buf);
    if (status != CORA_OK && error) *error = buf;
    return status;
}

} // namespace cora
