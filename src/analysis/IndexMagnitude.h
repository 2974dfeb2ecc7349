/** \file The magnitude of a device kernel's integers: a bound on |v| for every integer value the
 * kernel computes, as expressions the host can evaluate before the launch.
 *
 * Why: a kernel whose integers all fit in int32 can do its index arithmetic in 32 bits (one
 * instruction where 64-bit arithmetic on a GPU takes two to four), lower/NarrowIndices.cpp.
 *
 * The bound is an interval-free magnitude M(e) >= |e| built bottom-up:
 *  - M(a + b) = M(a) + M(b), M(a * b) = M(a) M(b), M(a / c) = M(a) / |c| + 1, M(a % c) = |c| - 1,
 *    M(min/max/select) = the larger of the two;
 *  - a loop variable's is M(min) + M(extent) (the end value the loop compares with), a GPU-bound
 *    one's adds the launch size of its axis (the printers set it before they check it against
 *    the extent), a let's is that of its value;
 *  - leaves: constants; the kernel's integer scalars (a param's declared range, or |p| at the
 *    launch: ParamBounds); reads of length and aux arrays, by the declared value range when it is
 *    finite, else by the array's magnitude, which the host computes from its values.
 * Every rule is sound for every input, so a bound that evaluates to at most INT32_MAX proves that
 * no integer of the kernel (intermediate ones included) leaves int32. An integer read from device
 * memory (an intermediate, a shared array) or an integer local that is reassigned has no bound. */
#pragma once

#include <map>
#include <vector>

#include "ir/IR.h"
#include "ir/Module.h"

namespace cora::ir {

struct KernelMagnitude {
    bool bounded = true; ///< false: some integer of the kernel has no bound (it stays 64-bit)
    /** The largest constant bound (saturated at INT64_MAX). */
    int64_t constant = 0;
    /** The bounds that depend on values known at the launch, deduplicated: each mentions only host
     * scalars (the kernel's parameters, the launch sizes) and the arrays' magnitude variables. */
    std::vector<Expr> symbolic;
    /** The array magnitudes `symbolic` mentions. */
    std::vector<NarrowLaunch::ArrayMagnitude> arrays;
};

/** The host-held integer arrays a kernel may read (the entry's length and aux arrays, built or
 * passed): each buffer variable with its declaration (range), or null where it has none. */
using HostArrays = std::map<const VarNode *, const UFNode *>;

/** How a param's magnitude enters the bounds: by its declared range (a constant: the bound holds
 * for every launch), or as its value at the launch (tighter: the bound is evaluated there). */
enum class ParamBounds { Declared, AtLaunch };

/** Bounds every integer of `kernel` (a device kernel of the module) launched by `launch`. */
KernelMagnitude kernel_magnitude(const LoweredFunc &kernel, const LaunchKernel &launch, const HostArrays &arrays,
                                 ParamBounds params);

} // namespace cora::ir
