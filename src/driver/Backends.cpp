/** \file The built-in backends and the registry that finds backends by name (cora/Backend.h).
 * A new backend is a Backend subclass in its own file; making it built in is one line in
 * make_builtin(), the list BackendRegistry::builtin() holds. */
#include <algorithm>

#include "cora/Backend.h"
#include "cora/Cuda.h"
#include "driver/KernelImpl.h"
#include "util/Error.h"

namespace cora {

namespace {

/** A built-in backend's name and description. */
class NamedBackend : public Backend {
public:
    NamedBackend(const char *name, const char *description) : name_(name), description_(description) {}
    std::string name() const override { return name_; }
    std::string description() const override { return description_; }

protected:
    std::string name_, description_;
};

/** Backends whose kernels are generated C++ with a C entry: the CPU, and GPU schedules emulated. */
class CppBackend : public NamedBackend {
public:
    CppBackend(const char *name, Target target, const char *description)
        : NamedBackend(name, description), target_(target) {}
    bool runs_gpu_schedules() const override { return target_ != Target::Host; }
    Kernel compile(const Pipeline &p, const CompileOptions &opts) const override {
        CompileOptions o = opts;
        o.target = target_;
        if (o.device != 0)
            throw_runtime_error("pipeline '", p.name(), "': backend '", name_, "' has device 0 only, got device ",
                                o.device);
        return driver::compile_cpu_kernel(p, o, name_);
    }

private:
    Target target_;
};

/** Backends of the CUDA runtime: a GPU, or the CUDA source on CPU threads. */
class CudaRuntimeBackend : public NamedBackend {
public:
    CudaRuntimeBackend(const char *name, bool on_gpu, const char *description)
        : NamedBackend(name, description), on_gpu_(on_gpu) {}
    bool runs_gpu_schedules() const override { return true; }
    bool available(std::string *why) const override {
        std::string no_compiler;
        if (!cuda_compiler_available(&no_compiler)) {
            if (why) *why = no_compiler;
            return false;
        }
        return !on_gpu_ || cuda_device_available(why);
    }
    Kernel compile(const Pipeline &p, const CompileOptions &opts) const override {
        return driver::compile_cuda_runtime_kernel(p, opts, on_gpu_, name_);
    }

private:
    bool on_gpu_;
};

BackendRegistry make_builtin() {
    BackendRegistry r;
    r.add(std::make_shared<CppBackend>("cpu", Target::Host, "the CPU: OpenMP loops and vector statements"));
    r.add(std::make_shared<CudaRuntimeBackend>("cuda", true, "a CUDA GPU through the driver API (NVRTC)"));
    r.add(std::make_shared<CppBackend>("cuda-emulated", Target::CudaEmulated,
                                       "a GPU schedule's device IR run on the CPU (exact; not a GPU timing)"));
    r.add(std::make_shared<CudaRuntimeBackend>(
        "cuda-cpu-threads", false, "a GPU schedule's CUDA source run by CPU threads (exact; not a GPU timing)"));
    return r;
}

} // namespace

const BackendRegistry &BackendRegistry::builtin() {
    static const BackendRegistry registry = make_builtin(); // constant once made
    return registry;
}

BackendRegistry &BackendRegistry::add(std::shared_ptr<const Backend> backend) {
    if (!backend) throw_runtime_error("BackendRegistry::add: null backend");
    const std::string name = backend->name();
    if (name.empty()) throw_runtime_error("BackendRegistry::add: a backend needs a non-empty name");
    if (find(name)) throw_runtime_error("BackendRegistry::add: there is a backend called '", name, "' already");
    backends_.push_back(std::move(backend));
    return *this;
}

const Backend *BackendRegistry::find(const std::string &name) const {
    for (const auto &b : backends_)
        if (b->name() == name) return b.get();
    return nullptr;
}

const Backend &BackendRegistry::get(const std::string &name) const {
    if (const Backend *b = find(name)) return *b;
    std::string known;
    for (const std::string &n : names())
        known += (known.empty() ? "'" : ", '") + n + "'";
    throw_runtime_error("no backend called '", name, "' (there are ", known.empty() ? std::string("none") : known, ")");
}

std::vector<std::string> BackendRegistry::names() const {
    std::vector<std::string> v;
    for (const auto &b : backends_)
        v.push_back(b->name());
    return v;
}

std::string driver::backend_name(const CompileOptions &o) {
    if (!o.backend.empty()) return o.backend;
    return o.target == Target::Host ? "cpu" : o.target == Target::CudaEmulated ? "cuda-emulated" : "cuda";
}

CompileOptions driver::options_for(CompileOptions o, const std::string &backend) {
    o.target = backend == "cpu" ? Target::Host : backend == "cuda-emulated" ? Target::CudaEmulated : Target::Cuda;
    return o;
}

Kernel Pipeline::compile(const CompileOptions &opts) const {
    const BackendRegistry &registry = opts.backends ? *opts.backends : BackendRegistry::builtin();
    const Backend *backend = nullptr;
    try {
        backend = &registry.get(driver::backend_name(opts));
    } catch (const RuntimeError &e) {
        throw_runtime_error("pipeline '", name(), "': ", e.what());
    }
    return backend->compile(*this, opts);
}

Kernel Pipeline::compile(const std::string &backend, CompileOptions opts) const {
    opts.backend = backend;
    return compile(opts);
}

} // namespace cora
