/** \file Pipelines of Funcs, compiled for a backend (the CPU, a GPU, their emulators) and run on ragged shapes. */
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cora/ArgumentKind.h"
#include "cora/ContractionTile.h"
#include "cora/Runtime.h"
#include "cora/Target.h"
#include "cora/Tensor.h"
#include "cora_runtime.h" // cora_arg_t and the status codes: Kernel::make_args and run_raw use them

namespace cora {

class BackendRegistry;
struct CudaProgram;
struct TuneSample;
struct TuneOptions;
struct TuneResult;

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
    /** GPU kernels (backend "cuda", "cuda-cpu-threads"): integer arithmetic in 32 bits where every
     * integer of the kernel provably fits, or in a 32-bit twin the host launches when the values
     * of this launch fit (docs/gpu.md, "32-bit indices"): 1 yes, 0 no (64 bits everywhere; results
     * are identical), negative: yes unless CORA_NARROW_GPU_INDICES=0. */
    int narrow_gpu_indices = -1;
    /** GPU kernels (backend "cuda", "cuda-cpu-threads"): copies into shared memory move 16 bytes per
     * thread at once where the elements are contiguous and aligned (docs/gpu.md, "Vector copies"):
     * 1 yes, 0 no (one element at a time; results are identical), negative: yes unless
     * CORA_VECTOR_GPU_COPIES=0. */
    int vector_gpu_copies = -1;
    /** GPU kernels (backend "cuda", "cuda-cpu-threads"): a serial loop that starts by copying
     * panels into shared memory (a cache_read at a k-panel loop) keeps them in this many stages
     * and issues each iteration's copies stages - 1 iterations ahead (cp.async on sm_80 and later;
     * docs/gpu.md, "Pipelined copies"): 2 .. 4, 1: no pipelining (results are identical), 0: the
     * value of CORA_GPU_COPY_STAGES, else 2. Other values are a CompileError. */
    int gpu_copy_stages = 0;
    /** The backend the kernel runs on, by name (cora/Backend.h): "cpu", "cuda" (a GPU),
     * "cuda-emulated" (a GPU schedule's device IR run on the CPU), "cuda-cpu-threads" (its CUDA
     * source run on the CPU), or one the caller added to `backends`. Empty: "cpu", or the backend
     * of `target` (Target::CudaEmulated: "cuda-emulated", Target::Cuda: "cuda"). A named backend
     * decides the target itself. */
    std::string backend;
    /** Where `backend` is looked up; null: the built-in backends (BackendRegistry::builtin()). */
    const BackendRegistry *backends = nullptr;
    /** The code the lowering produces (cora/Target.h): host loops, or a host/device split. */
    Target target = Target::Host;
    /** The device a kernel runs on: its ordinal, as the CUDA driver numbers them (CUDA_VISIBLE_DEVICES
     * applies). Backends that run on the CPU have only device 0. */
    int device = 0;
    /** The width in bits of the CPU vector registers (128, 256, 512) that default schedules size
     * register tiles for (a contraction left unscheduled: DefaultSchedule.cpp, user guide §4b).
     * 0: this machine's, which the JIT compiles for (ahead-of-time libraries: each target's);
     * negative: no register-tiled defaults (the untiled default, for comparison). */
    int vector_bits = 0;
    /** The register tiles of contractions left unscheduled, by Func name (absent: the rules of
     * user guide §4b). Pipeline::tune fills these from its table. */
    std::map<std::string, ContractionTile> contraction_tiles;
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

/** A pipeline compiled for one backend (cora/Backend.h): the same type whichever it is. Every
 * backend runs on host buffers and describes its arguments; backends with device memory (the CUDA
 * ones) also take device buffers, and the CPU kernel exposes its raw entry. What a backend lacks is
 * a RuntimeError naming the kernel, its backend and the missing capability. */
class Kernel {
public:
    /** Run on a shape and host buffers: builds missing aux arrays in the shape, then calls the
     * kernel (a device backend copies the inputs and the shape's arrays to the device and the
     * outputs back, and returns when they are there). RuntimeError (naming the argument, expected
     * and actual) on bad input; no output written. */
    void run(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** The backend's name ("cpu", "cuda", ...) and the pipeline's. */
    const std::string &backend() const;
    const std::string &name() const;

    const std::vector<KernelArgInfo> &arguments() const;
    /** The generated source: the C++ of a CPU kernel, the host entry's C++ of a CUDA kernel (its
     * device code: program().source). */
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
    /** Milliseconds per call with the data where the kernel reads it (device backends: on the
     * device, outputs not copied back; no host copies timed): the median of `reps` calls after one
     * warm-up. */
    double time_ms(const RaggedShape &shape, const std::vector<Binding> &bindings, int reps) const;

    // --- The raw entry (backend "cpu" and "cuda-emulated": a C function of cora_runtime.h). ---

    /** The raw argument array run() would pass (ABI order; aux arrays built in `shape`). The
     * pointers refer to `shape` and the bound buffers, which must outlive their use. */
    std::vector<cora_arg_t> make_args(const RaggedShape &shape, const std::vector<Binding> &bindings) const;
    /** Call the generated entry directly (ABI order, see arguments()). Returns the status and
     * fills `error` on failure. For tests and foreign callers. */
    int run_raw(const std::vector<cora_arg_t> &args, std::string *error) const;

    // --- Device memory (backends "cuda" and "cuda-cpu-threads"). ---

    /** Runs on device buffers, without copying them. The shape's length and aux arrays go to the
     * device in one packed transfer the first time the kernel sees them and stay there while the
     * shape's contents are unchanged (a changed shape waits for the kernel's earlier launches,
     * then replaces them). Returns once the launches are queued on `stream` (a CUstream; nullptr:
     * the default stream): call synchronize() or DeviceBuffer::download for the results. */
    void run(const RaggedShape &shape, const std::vector<DeviceBinding> &bindings, void *stream = nullptr) const;
    /** Waits for the work queued on `stream`. */
    void synchronize(void *stream = nullptr) const;
    /** Device memory for tensor `t` (an argument of the kernel) in `shape`, zeroed. */
    DeviceBuffer alloc(const Tensor &t, const RaggedShape &shape) const;
    /** A view of device memory the caller owns and keeps alive (cudaMalloc'd, a CUdeviceptr, a
     * framework's tensor data: PyTorch's data_ptr()) on this kernel's device, holding tensor `t`'s
     * `count` elements packed as `shape` stores them; nothing is allocated, copied or freed.
     * RuntimeError, naming the tensor, when `t` is not an argument of the kernel, when `count` is
     * not exactly shape.size_of(t), or when the pointer is null (with count > 0) or not aligned to
     * the element size. On "cuda-cpu-threads" device memory is host memory. */
    DeviceBuffer view(const Tensor &t, const RaggedShape &shape, void *device_pointer, int64_t count) const;
    /** Host-to-device transfers of shape arrays (the length and aux arrays the kernels read, packed)
     * so far: one per distinct shape contents in a row, whatever the number of runs; none for kernels
     * that read no such array (a dense op). Counted for all the kernels that share a device. */
    int64_t shape_transfers() const;
    /** From now on this kernel shares `other`'s device state (and that of every kernel sharing it):
     * each one's DeviceBuffers are valid arguments of the others (a pipeline of kernels on device
     * memory), and the shape arrays on the device are kept by contents for all of them, so kernels
     * run on the same ragged shape upload its arrays once between them. RuntimeError when the two
     * run on different backends or devices. Call it before running the kernel, not while another
     * thread runs it; kernels that had joined this one's state keep that state. */
    void share_device_with(const Kernel &other);
    /** The device code (backend "cuda", "cuda-cpu-threads"). */
    const CudaProgram &program() const;
    /** The device's ordinal (CompileOptions::device). */
    int device() const;

    struct Impl; ///< what a backend implements (cora/Backend.h)
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
    /** Lower and compile for opts.backend (kernels of the backends "cpu" and "cuda-emulated" are
     * C++, compiled or loaded from the cache). CompileError for a schedule the backend cannot run
     * (naming it); RuntimeError for an unknown backend (listing those there are) or one that cannot
     * run here (no GPU: saying why). */
    Kernel compile(const CompileOptions &opts = {}) const;
    /** compile() with opts.backend = `backend`: `p.compile("cuda")`. */
    Kernel compile(const std::string &backend, CompileOptions opts = {}) const;

    /** Measure a few register tiles (rows, vectors, panel depth, or none) for each contraction
     * left unscheduled, on `samples`, each candidate's outputs checked against the default's;
     * keep the winners in a table keyed by (Func, definition, vector width, size bucket), and
     * compile the winner. A key the table has is not measured again: the choice is the table's
     * (deterministic); an unreadable or corrupt table is rebuilt, not trusted; an entry that no
     * longer fits its Func is measured again. The report says which. Types in cora/Tune.h. */
    TuneResult tune(const std::vector<TuneSample> &samples, const TuneOptions &opts) const;
    TuneResult tune(const std::vector<TuneSample> &samples) const;

    const std::vector<Func> &outputs() const { return outputs_; }
    const std::string &name() const { return name_; }

private:
    std::vector<Func> outputs_;
    std::string name_;
};

} // namespace cora
