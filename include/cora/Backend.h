/** \file Backends: where a pipeline's kernels run, found by name.
 *
 * A backend compiles a Pipeline into a Kernel; the Kernel forwards every call to the backend's
 * Kernel::Impl. The built-in ones (BackendRegistry::builtin()):
 *   - "cpu":              OpenMP loops and vector statements, C++ compiled and cached;
 *   - "cuda":             a GPU schedule's device kernels in CUDA C++ (NVRTC), launched through
 *                         the driver API on GPU number CompileOptions::device;
 *   - "cuda-emulated":    the same schedule's device IR printed as C++ and run on the CPU, blocks and
 *                         threads one after another: exact, slow, on any machine;
 *   - "cuda-cpu-threads": the CUDA source itself compiled for the CPU, a fiber per CUDA thread:
 *                         the whole CUDA runtime path without a GPU.
 * Adding one (docs/design.md, "add a backend"; tests/extension/ does it): a subclass of Backend
 * whose compile() returns a Kernel over a subclass of Kernel::Impl, added to a BackendRegistry the
 * caller owns and names in CompileOptions::backends. Registries are values: nothing is
 * registered process-wide, and the built-in one is constant. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** What a backend's kernel implements. run() on host buffers is required; the other capabilities
 * default to a RuntimeError naming the kernel, its backend and what it lacks. */
struct Kernel::Impl {
    Impl(std::string kernel_name, std::string backend_name)
        : name(std::move(kernel_name)), backend(std::move(backend_name)) {}
    virtual ~Impl() = default;

    std::string name;                     ///< the pipeline's
    std::string backend;                  ///< the backend's
    std::vector<KernelArgInfo> arguments; ///< ABI order
    std::string source, lowered;          ///< Kernel::source(), Kernel::lowered()

    virtual void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const = 0;
    virtual double compile_seconds() const { return 0.0; }
    virtual bool from_cache() const { return false; }
    virtual std::string prover_stats() const { return {}; }
    virtual std::string prover_report() const { return {}; }
    /** Default: the median of `reps` run() calls after one warm-up. */
    virtual double time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const;

    virtual std::vector<cora_arg_t> make_args(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    virtual int run_raw(const std::vector<cora_arg_t> &args, std::string *error) const;

    virtual void run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream) const;
    virtual void synchronize(void *stream) const;
    virtual DeviceBuffer alloc(const Tensor &t, const RaggedShape &shape) const;
    virtual DeviceBuffer view(const Tensor &t, const RaggedShape &shape, void *device_pointer, int64_t count) const;
    virtual int64_t shape_transfers() const;
    /** Called on this kernel's Impl with the other kernel's. */
    virtual void share_device_with(const Impl &other);
    virtual const CudaProgram &program() const;
    virtual int device() const { return 0; }

    /** Throws the RuntimeError of a capability this backend lacks. */
    [[noreturn]] void lacks(const char *capability) const;
};

/** Where kernels run. */
class Backend {
public:
    virtual ~Backend() = default;
    /** The name CompileOptions::backend and the apps' --device take. */
    virtual std::string name() const = 0;
    /** One line: what it runs on, and whether its timings are those of real hardware. */
    virtual std::string description() const = 0;
    /** Whether it runs GPU schedules (loops bound with gpu_blocks / gpu_threads) rather than CPU
     * ones: an app compiles its GPU schedule for such a backend. */
    virtual bool runs_gpu_schedules() const = 0;
    /** Whether its kernels can run on this machine; when not, `why` says what is missing. */
    virtual bool available(std::string *why = nullptr) const {
        (void)why;
        return true;
    }
    /** `p` compiled with `opts` (opts.backend names this backend; the backend chooses opts.target). */
    virtual Kernel compile(const Pipeline &p, const CompileOptions &opts) const = 0;
};

/** Backends by name. A value: copy the built-in one and add yours. */
class BackendRegistry {
public:
    BackendRegistry() = default;
    /** The built-in backends ("cpu", "cuda", "cuda-emulated", "cuda-cpu-threads"), constant. */
    static const BackendRegistry &builtin();
    /** Adds `backend`; RuntimeError when it is null, its name is empty or already taken. */
    BackendRegistry &add(std::shared_ptr<const Backend> backend);
    /** The backend called `name`; RuntimeError listing the names there are when none is. */
    const Backend &get(const std::string &name) const;
    /** The backend called `name`, or null. */
    const Backend *find(const std::string &name) const;
    /** The names, in the order they were added. */
    std::vector<std::string> names() const;

private:
    std::vector<std::shared_ptr<const Backend>> backends_;
};

} // namespace cora
