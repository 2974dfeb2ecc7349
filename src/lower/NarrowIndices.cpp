/** \file Pass: 32-bit integer arithmetic in device kernels where it is proved (CUDA).
 *
 * Why: every index of the IR is an int64. On a GPU a 64-bit add is two instructions and a 64-bit
 * multiply several; the copies of a vgemm tile into shared memory spent most of their
 * instructions on them (bench/results/gpu.md). A kernel whose integers all fit in int32 computes
 * the same values in 32 bits.
 *
 * Does: for each device kernel, bounds the magnitude of every integer it computes, intermediate
 * values included (analysis/IndexMagnitude.h), given its launch:
 *  - a constant bound <= INT32_MAX (the declared ranges of the params and lengths suffice): the
 *    kernel's index_bits become 32;
 *  - else, bounded again with the params' values at the launch instead of their declared maxima:
 *    where that bound depends on values known only at the launch (a param's value, the largest
 *    offset in a prefix-sum array, a launch size): a twin of the kernel, `<name>_i32` with
 *    index_bits 32, is appended to `kernels`, and the launch records the choice
 *    (LaunchKernel::narrow): the host
 *    entry computes the arrays' magnitudes and the bounds, overflow-checked, and launches the
 *    twin when every bound is at most INT32_MAX, else the 64-bit kernel — an argument set that
 *    would overflow int32 takes the 64-bit kernel, never a wrong result;
 *  - no bound (an integer read from device memory, a reassigned integer local) or a constant one
 *    over INT32_MAX: 64 bits.
 * Inputs: the entry's body (its LaunchKernels), the device kernels, the module's arguments (the
 * length and aux arrays the host holds, with their declared ranges). Outputs: the entry's body
 * with the choices, the kernels with index_bits set and the twins appended.
 * Requires: split_host_device and the CUDA passes after it (the kernels' final bodies).
 * Ensures: the printers (codegen/CodeGen_CUDA.cpp) print a 32-bit kernel's Int64 values as
 * int32_t; the emulated target is not passed here (its kernels run as host code, in 64 bits).
 * Tests: tests/pass/narrow_indices.cpp. */
#include "analysis/IndexMagnitude.h"
#include "ir/IRVisitor.h"
#include "lower/Passes.h"

#include <climits>

namespace cora::ir {

namespace {

class AddChoices : public IRMutator {
public:
    explicit AddChoices(const std::map<std::string, NarrowLaunch> &choices) : choices_(choices) {}

protected:
    using IRMutator::mutate_node;
    Stmt mutate_node(const LaunchKernel *op, const Stmt &self) override {
        auto it = choices_.find(op->kernel);
        if (it == choices_.end()) return self;
        return LaunchKernel::make(op->kernel, op->grid, op->threads, op->args, it->second);
    }

private:
    const std::map<std::string, NarrowLaunch> &choices_;
};

} // namespace

Stmt narrow_kernel_indices(const Stmt &entry, std::vector<LoweredFunc> &kernels, const std::vector<ModuleArg> &args) {
    HostArrays arrays;
    for (const ModuleArg &a : args)
        if (a.kind == ModuleArg::Kind::LengthArray || a.kind == ModuleArg::Kind::AuxArray)
            arrays[a.var.get()] = a.uf.get();
    std::map<std::string, const LaunchKernel *> launches;
    visit_stmts(entry, [&](const Stmt &s) {
        if (const LaunchKernel *l = s.as<LaunchKernel>()) launches[l->kernel] = l;
    });
    std::map<std::string, NarrowLaunch> choices;
    const size_t count = kernels.size();
    for (size_t i = 0; i < count; i++) {
        auto launch = launches.find(kernels[i].name);
        if (launch == launches.end()) continue; // never launched (nothing to decide)
        const KernelMagnitude declared = kernel_magnitude(kernels[i], *launch->second, arrays, ParamBounds::Declared);
        if (declared.bounded && declared.constant <= INT32_MAX && declared.symbolic.empty()) {
            kernels[i].index_bits = 32;
            continue;
        }
        // The values at the launch: params as they are, not at their declared maxima.
        KernelMagnitude m = kernel_magnitude(kernels[i], *launch->second, arrays, ParamBounds::AtLaunch);
        if (!m.bounded || m.constant > INT32_MAX || m.symbolic.empty()) continue;
        LoweredFunc twin = kernels[i];
        twin.name += "_i32";
        twin.index_bits = 32;
        choices[kernels[i].name] = NarrowLaunch{twin.name, std::move(m.symbolic), std::move(m.arrays)};
        kernels.push_back(std::move(twin));
    }
    return choices.empty() ? entry : AddChoices(choices).mutate(entry);
}

} // namespace cora::ir
