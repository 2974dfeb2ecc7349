/** \file KernelBatch: many pipelines compiled into one library by one compiler run. */
#pragma once

#include <memory>
#include <vector>

#include "cora/Pipeline.h"

namespace cora {

/** Compiles many pipelines with one run of the C++ compiler: their kernels share one generated
 * source (the common prologue once, each kernel in a namespace of its own) and one shared library.
 *
 * Why: a kernel's compile has a fixed cost — starting the compiler, parsing the standard headers
 * the kernels include, linking — that is most of the time of a small kernel. Code that builds many
 * small kernels (differential tests of random schedules, a search over schedules or tile sizes, an
 * application with one kernel per layer) pays it once per batch instead of once per kernel.
 *
 * The kernels are the same as Pipeline::compile's (same lowering, same entry, same checks); only
 * their library is shared, and it stays loaded while any of them lives. The library is cached by
 * the batch's whole source: the same batch again is a cache hit; a kernel compiled alone is a
 * different cache entry. C++ kernels only: the backends "cpu" and "cuda-emulated" (CompileOptions::backend).
 *
 *     KernelBatch batch;
 *     for (Pipeline &p : pipelines) batch.add(p);   // lowered here: CompileError names the pipeline
 *     std::vector<Kernel> kernels = batch.compile(); // one compiler run, kernels in the order added
 */
class KernelBatch {
public:
    explicit KernelBatch(CompileOptions opts = {});

    /** Lowers `p` now and keeps it for compile(); returns its index in compile()'s result.
     * CompileError (as Pipeline::compile throws it) when `p` cannot be lowered or its backend is another;
     * the batch is then unchanged. */
    size_t add(const Pipeline &p);
    /** How many pipelines wait for compile(). */
    size_t size() const;
    /** Generates one source for every pipeline added since the last compile() and compiles it
     * (or loads it from the cache); returns their kernels in the order added and empties the
     * batch. An empty batch gives no kernels and runs no compiler. */
    std::vector<Kernel> compile();

private:
    struct Pending;
    CompileOptions opts_;
    std::vector<std::shared_ptr<Pending>> pending_;
};

} // namespace cora
