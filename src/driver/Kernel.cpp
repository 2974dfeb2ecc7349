/** \file Kernel: one type whatever the backend, forwarding to the backend's Kernel::Impl
 * (cora/Backend.h); the capabilities a backend lacks say so. */
#include <algorithm>
#include <chrono>

#include "cora/Backend.h"
#include "driver/KernelImpl.h"
#include "util/Error.h"

namespace cora {

void Kernel::Impl::lacks(const char *capability) const {
    throw_runtime_error("kernel '", name, "' runs on backend '", backend, "', which has no ", capability);
}

double driver::median_call_ms(int reps, const std::function<void()> &once) {
    if (reps < 1) throw_runtime_error("Kernel::time_ms: reps must be positive, got ", reps);
    once(); // warm-up
    std::vector<double> ms;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        once();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

double Kernel::Impl::time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const {
    return driver::median_call_ms(reps, [&] { run(shape, bindings); });
}

std::vector<cora_arg_t> Kernel::Impl::make_args(const RaggedShape &, const std::vector<Binding> &) const {
    lacks("raw C entry (make_args, run_raw: the backends \"cpu\" and \"cuda-emulated\" have one)");
}
int Kernel::Impl::run_raw(const std::vector<cora_arg_t> &, std::string *) const {
    lacks("raw C entry (make_args, run_raw: the backends \"cpu\" and \"cuda-emulated\" have one)");
}
static const char *kDeviceMemory = "device memory (device buffers: the backends \"cuda\" and \"cuda-cpu-threads\" "
                                   "have them; run it on host Buffers)";
void Kernel::Impl::run(const RaggedShape &, const std::vector<DeviceBinding> &, void *) const { lacks(kDeviceMemory); }
void Kernel::Impl::synchronize(void *) const { lacks(kDeviceMemory); }
DeviceBuffer Kernel::Impl::alloc(const Tensor &, const RaggedShape &) const { lacks(kDeviceMemory); }
DeviceBuffer Kernel::Impl::view(const Tensor &, const RaggedShape &, void *, int64_t) const { lacks(kDeviceMemory); }
int64_t Kernel::Impl::shape_transfers() const { lacks(kDeviceMemory); }
void Kernel::Impl::share_device_with(const Impl &) { lacks(kDeviceMemory); }
const CudaProgram &Kernel::Impl::program() const {
    lacks("CUDA program (the backends \"cuda\" and \"cuda-cpu-threads\" have one)");
}

void Kernel::run(const RaggedShape &shape, const std::vector<Binding> &bindings) const { impl_->run(shape, bindings); }
const std::string &Kernel::backend() const { return impl_->backend; }
const std::string &Kernel::name() const { return impl_->name; }
const std::vector<KernelArgInfo> &Kernel::arguments() const { return impl_->arguments; }
const std::string &Kernel::source() const { return impl_->source; }
const std::string &Kernel::lowered() const { return impl_->lowered; }
double Kernel::compile_seconds() const { return impl_->compile_seconds(); }
bool Kernel::from_cache() const { return impl_->from_cache(); }
std::string Kernel::prover_stats() const { return impl_->prover_stats(); }
std::string Kernel::prover_report() const { return impl_->prover_report(); }
double Kernel::time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const {
    return impl_->time_ms(shape, bindings, reps);
}
std::vector<cora_arg_t> Kernel::make_args(const RaggedShape &shape, const std::vector<Binding> &bindings) const {
    return impl_->make_args(shape, bindings);
}
int Kernel::run_raw(const std::vector<cora_arg_t> &args, std::string *error) const {
    return impl_->run_raw(args, error);
}
void Kernel::run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream) const {
    impl_->run(shape, bindings, stream);
}
void Kernel::synchronize(void *stream) const { impl_->synchronize(stream); }
DeviceBuffer Kernel::alloc(const Tensor &t, const RaggedShape &shape) const { return impl_->alloc(t, shape); }
DeviceBuffer Kernel::view(const Tensor &t, const RaggedShape &shape, void *device_pointer, int64_t count) const {
    return impl_->view(t, shape, device_pointer, count);
}
int64_t Kernel::shape_transfers() const { return impl_->shape_transfers(); }
void Kernel::share_device_with(const Kernel &other) { impl_->share_device_with(*other.impl_); }
const CudaProgram &Kernel::program() const { return impl_->program(); }
int Kernel::device() const { return impl_->device(); }

} // namespace cora
