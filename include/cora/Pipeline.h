/** \file Pipelines of Funcs, compiled to CPU kernels (JIT, cached) and run on ragged shapes. */
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cora/ArgumentKind.h"
#include "cora/Runtime.h"
#include "cora/Target.h"
#include "cora/Tensor.h"
#include "cora_runtime.h" // cora_arg_t and the status codes: Kernel::make_args and run_raw use them

namespace cora {

struct CompileOptions {
    /** Debug level: 1 prints each pass's IR, 2 also the generated source and compile command.
     * Negative: take CORA_DEBUG from the environment. */
    int debug = -1;
    /** Kernel cache directory; empty: CORA_CACHE_DIR, else $XDG_CACHE_HOME/cora, else ~/.cache/cora. */
    std::string cache_dir;
    /** C++ compiler; empty: CORA_CXX, else clang++ when found, else c++. */
    std::string cxx;
    /** Ask Z3 about bounds the built-in prover cannot show: 1 yes, 0 no, negative: yes unless
     * CORA_Z3=0. Without Z3 some correct programs are rejected; none is ever miscompiled. */
    int use_z3 = -1;
    /** Drop schedule guards (split, padding, fusion) that the prover shows redundant: 1 yes,
     * 0 no (every guard stays, results are identical), negative: yes unless CORA_REMOVE_GUARDS=0. */
    int remove_guards = -1;
    /** Build the aux arrays inside the kernel (as ahead-of-time libraries do) instead of taking
     * them from the RaggedShape. Results are identical; the shape's shared arrays go unused. */
    bool build_aux_in_kernel = false;
    /** Where the kernels run (cora/Target.h). */
    Target target = Target::Host;
    /** The CUDA device a CUDA kernel (cora/Cuda.h) runs on: its ordinal, as the driver numbers them
     * (CUDA_VISIBLE_DEVICES applies). CudaBackend::CpuThreads has only device 0. */
    int device = 0;
};

/** One argument of a compiled kernel, in ABI order. */
struct KernelArgInfo {
    using Kind = ArgumentKind;
    Kind kind;
    std::string name;
    Type type;
    /** Input / Output: where each element lives (offset formula, storage order, padding, element
     * count), as the AOT header states it; LengthArray: its element count. Else empty. */
    std::string layout;
};

/** Binds a buffer to a tensor for one run. */
struct Binding {
    Tensor tensor;
    Buffer *buffer;
    Binding(const Tensor &t, Buffer &b) : tensor(t), buffer(&b) {}
};

class Kernel {
public:
    /** Run on a shape: builds missing aux arrays in the shape, then calls the kernel.
     * RuntimeError (naming the argument, expected and actual) on bad input; no output written. */
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** The raw argument array run() would pass (ABI order; aux arrays built in `shape`). The
     * pointers refer to `shape` and the bound buffers, which must outlive their use. */
    std::vector<cora_arg_t> make_args(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** Call the generated entry directly (ABI order, see arguments()). Returns the status and
     * fills `error` on failure. For tests and foreign callers. */
    int run_raw(const std::vector<cora_arg_t> &args, std::string *error) const;

    const std::vector<KernelArgInfo> &arguments() const;
    /** The generated C++ source. */
    const std::string &source() const;
    /** The lowered IR after all passes (GPU targets: the entry with its launches, then each
     * device kernel). */
    const std::string &lowered() const;
    /** Seconds spent compiling (0 when loaded from the cache) and whether the cache was hit. */
    double compile_seconds() const;
    bool from_cache() const;
    /** Compile-time proof obligations: how many, cached, proved by which prover. */
    std::string prover_stats() const;
    /** prover_stats(), then one line per obligation nobody proved (each kept a guard or a run-time
     * check): where it was asked (the Func and its compute() call's file:line), the goal, and why,
     * with Z3's counterexample when it found one. CORA_DEBUG=1 prints it. */
    std::string prover_report() const;

    struct Impl;
    explicit Kernel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<Impl> impl_;
};

class Pipeline {
public:
    /** A pipeline computing `outputs` and every Func they read, in dependency order. */
    Pipeline(std::vector<Func> outputs, std::string name = "pipeline");

    /** Lower and print the final IR (no compilation), as Kernel::lowered() shows it. */
    std::string lower_to_string(const CompileOptions &opts = {}) const;
    /** Lower, generate C++ and compile (or load from the cache). */
    Kernel compile(const CompileOptions &opts = {}) const;

    const std::vector<Func> &outputs() const { return outputs_; }
    const std::string &name() const { return name_; }

private:
    std::vector<Func> outputs_;
    std::string name_;
};

} // namespace cora
