/** \file codegen_cuda_on_cpu (CodeGen_CUDA.h): the CUDA source of a module's kernels, unchanged,
 * compiled by the host C++ compiler and run by CPU threads.
 *
 * Why. Target::CudaEmulated runs the device IR block by block with thread loops as loops; it
 * checks indexing and bounds, but not what only the CUDA path does: the printer, the kernel
 * signatures and launch parameters, per-thread locals (slice_thread_tiles), shared memory and
 * __syncthreads. Here each CUDA thread of a block is a fiber (a ucontext with a stack of its own)
 * on the thread that launches: a local array is per CUDA thread, `__shared__` is one array for the
 * block (a function-local static, per launching thread; blocks run one after another), and
 * `__syncthreads()` switches to the next fiber until every thread of the block has reached it. A
 * barrier some threads of a block reach and others do not (a divergent barrier: undefined in CUDA)
 * is reported as an error instead of hanging: a thread that has returned no longer counts at the
 * barriers of its block.
 *
 * Fibers, not std::threads (as this backend first used): a barrier of 256 OS threads on two cores
 * is a storm of futex wake-ups and context switches; the suite's CUDA-on-CPU tests spent most of
 * their time in the kernel (sys time 5x user time). A fiber switch is a register save and one
 * signal-mask call. Under AddressSanitizer each switch is announced to it
 * (__sanitizer_start_switch_fiber), so it knows which stack is live.
 *
 * The result defines `extern "C" int cora_cuda_on_cpu_launch(int32_t kernel, const int64_t *grid,
 * const int64_t *threads, void **params, char *error, int32_t error_size)`, the signature of
 * cora_device_t::launch without its context: kernel numbers and parameters as the host entry
 * (codegen_cuda_host) passes them. Pointers are host pointers. For tests on small sizes: one CPU
 * core runs every CUDA thread of the launch. */
#include "codegen/CodeGen_CUDA.h"

#include "codegen/cora_runtime_h.inc"
#include "util/Error.h"

namespace cora::ir {

namespace {

const char *kOnCpuPrologue = R"(// CUDA kernels run by CPU threads (cora: codegen_cuda_on_cpu). Do not edit.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CORA_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORA_ASAN_FIBERS 1
#endif
#endif
#ifdef CORA_ASAN_FIBERS
extern "C" void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif

namespace cora_on_cpu {

/** A lane's mma.sync operands (see cora_mma_m16n8k16 below). */
struct MmaSlot {
    unsigned a[4], b[2];
};

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
// Per launching thread: the fibers of a launch all run on the thread that called it, so two host
// threads may launch at the same time.
thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

/** One launch's CUDA threads as fibers (ucontext) on the calling thread, and the barrier of the
 * block they run: a fiber runs until it reaches __syncthreads() or the end of its block, then the
 * next one runs. When every fiber waits or has finished, the waiting ones are released; a thread
 * that finished no longer counts (see above). One block after another, as CUDA may order them. */
struct BlockSync {
    enum State { Runnable, Waiting, Finished, Exited };
    /** A cp.async copy in flight: its 16 bytes are read when it is issued (its source is never
     * written by the kernel) and land in shared memory only when the thread waits for its group,
     * so a kernel that reads a tile before waiting for it reads the old contents, as it might on a
     * GPU. */
    struct PendingCopy {
        void *dst;
        unsigned char bytes[16];
    };
    struct Fiber {
        ucontext_t context;
        dim3 thread;
        State state = Runnable;
        std::vector<PendingCopy> open;                 // issued since the last commit
        std::vector<std::vector<PendingCopy>> groups; // committed, oldest first
    };
    std::vector<Fiber> fibers;
    ucontext_t scheduler;
    Fiber *current = nullptr;
    long long n = 0, arrived = 0, finished = 0;
    bool diverged = false;
    bool misaligned_rows = false; // an ldmatrix row address not 16-byte aligned
    char *stacks = nullptr;
    size_t stack_bytes = 0, page = 0, region = 0;
    void (*body)() = nullptr;      // a fiber's function (fiber_main)
    void (*call)(void **) = nullptr; // the kernel, called once per block by every fiber
    void **params = nullptr;
    bool done = false; // set before the last resume: the fibers leave their loop
    std::vector<double> shuffle_slots; // a value per thread (__shfl_xor_sync)
    std::vector<MmaSlot> mma_slots;    // fragments per thread (mma.sync)
    std::vector<const uint16_t *> row_slots; // a row address per thread (ldmatrix)
#ifdef CORA_ASAN_FIBERS
    const void *scheduler_stack = nullptr;
    size_t scheduler_stack_size = 0;
#endif

    /** Reserves a stack per thread (guard page below each); false when the memory is not there. */
    bool allocate(long long threads) {
        n = threads;
        page = (size_t)sysconf(_SC_PAGESIZE);
        stack_bytes = 256 * 1024;
        region = (size_t)n * (stack_bytes + page);
        void *p = mmap(nullptr, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return false;
        stacks = static_cast<char *>(p);
        fibers.resize((size_t)n);
        for (long long t = 0; t < n; t++) {
            char *guard = stacks + (size_t)t * (stack_bytes + page);
            mprotect(guard, page, PROT_NONE);
            Fiber &f = fibers[(size_t)t];
            f.thread = {(unsigned)(t % blockDim.x), (unsigned)(t / blockDim.x % blockDim.y),
                        (unsigned)(t / ((long long)blockDim.x * blockDim.y))};
            getcontext(&f.context);
            f.context.uc_stack.ss_sp = guard + page;
            f.context.uc_stack.ss_size = stack_bytes;
            f.context.uc_link = &scheduler;
            makecontext(&f.context, body, 0);
        }
        return true;
    }
    ~BlockSync() {
        if (stacks) munmap(stacks, region);
    }
    /** From the scheduler into fiber `f`. */
    void resume(Fiber &f) {
        current = &f;
        threadIdx = f.thread;
#ifdef CORA_ASAN_FIBERS
        void *fake = nullptr;
        __sanitizer_start_switch_fiber(&fake, f.context.uc_stack.ss_sp, f.context.uc_stack.ss_size);
        swapcontext(&scheduler, &f.context);
        __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
        swapcontext(&scheduler, &f.context);
#endif
    }
    /** From the current fiber back to the scheduler, leaving it in `state`. */
    void yield(State state) {
        Fiber &f = *current;
        f.state = state;
#ifdef CORA_ASAN_FIBERS
        void *fake = nullptr;
        __sanitizer_start_switch_fiber(&fake, scheduler_stack, scheduler_stack_size);
        swapcontext(&f.context, &scheduler);
        __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
        swapcontext(&f.context, &scheduler);
#endif
    }
    /** The first switch into a fiber ends here (ASan: where the scheduler's stack is noted). */
    void started() {
#ifdef CORA_ASAN_FIBERS
        __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack, &scheduler_stack_size);
#endif
    }
    void sync() {
        if (finished > 0) diverged = true;
        arrived++;
        yield(Waiting);
    }
    void finish() {
        if (arrived > 0) diverged = true;
        finished++;
        yield(Finished);
    }
    /** Runs one block: every fiber to its end of the block, releasing barriers as they fill. */
    void run_block() {
        for (;;) {
            for (Fiber &f : fibers)
                if (f.state == Runnable) resume(f);
            if (arrived == 0) break; // every thread finished the block
            arrived = 0;
            for (Fiber &f : fibers)
                if (f.state == Waiting) f.state = Runnable;
        }
        finished = 0;
        for (Fiber &f : fibers) {
            f.state = Runnable;
            f.open.clear();
            f.groups.clear();
        }
    }
    /** Lets every fiber leave its loop (after the last block). */
    void run_exit() {
        done = true;
        for (Fiber &f : fibers)
            resume(f);
    }
    /** The fiber's last switch: it is not resumed again. */
    void exit_fiber() {
        Fiber &f = *current;
        f.state = Exited;
#ifdef CORA_ASAN_FIBERS
        __sanitizer_start_switch_fiber(nullptr, scheduler_stack, scheduler_stack_size);
#endif
        swapcontext(&f.context, &scheduler);
    }
};
thread_local BlockSync *block_sync = nullptr;

inline void __syncthreads() { block_sync->sync(); }

/** __shfl_xor_sync among the block's threads (the callers are one full warp): each thread leaves
 * its value in its slot, and after a barrier reads its partner's. */
template <class T> T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    const long long self = threadIdx.x + (long long)blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
    block_sync->shuffle_slots[(size_t)self] = (double)v;
    block_sync->sync();
    T other = (T)block_sync->shuffle_slots[(size_t)(self ^ lane_mask)];
    block_sync->sync();
    return other;
}
/** mma.sync.m16n8k16.row.col (float16 x float16 + float32) among one warp's threads (blocks of
 * 4 x 8 (x z) threads, so a warp is one z): each lane leaves its fragments in its slot; after a
 * barrier it computes its four outputs from its warp's slots, reading each element where the PTX
 * ISA's fragment layout puts it (A: row g / g + 8 in registers 0, 2 / 1, 3, k = 2t, 2t + 1 and
 * + 8; B: column g, the same ks; D: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)), so a
 * wrong fragment index in the generated kernel gives a wrong result here too. */
inline float cora_mma_half(unsigned reg, int high) { return cora_half_to_float((uint16_t)(high ? reg >> 16 : reg)); }
inline void cora_mma_m16n8k16(float &d0, float &d1, float &d2, float &d3, unsigned a0, unsigned a1, unsigned a2,
                              unsigned a3, unsigned b0, unsigned b1) {
    const long long self = threadIdx.x + (long long)blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
    std::vector<MmaSlot> &mma_slots = block_sync->mma_slots;
    mma_slots[(size_t)self] = {{a0, a1, a2, a3}, {b0, b1}};
    block_sync->sync();
    const long long lane = self % 32, warp = self - lane, g = lane / 4, t = lane % 4;
    float *d[4] = {&d0, &d1, &d2, &d3}, out[4];
    for (int r = 0; r < 4; r++) {
        const long long row = g + 8 * (r / 2), col = 2 * t + r % 2;
        float acc = *d[r];
        for (int k = 0; k < 16; k++) {
            const MmaSlot &sa = mma_slots[(size_t)(warp + (row % 8) * 4 + (k % 8) / 2)];
            const MmaSlot &sb = mma_slots[(size_t)(warp + col * 4 + (k % 8) / 2)];
            acc += cora_mma_half(sa.a[row / 8 + 2 * (k / 8)], k % 2) * cora_mma_half(sb.b[k / 8], k % 2);
        }
        out[r] = acc;
    }
    block_sync->sync();
    for (int r = 0; r < 4; r++)
        *d[r] = out[r];
}
/** ldmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16 among one warp's threads: each lane leaves
 * its row address in its slot (lane l: row l % 8 of matrix l / 8); after a barrier, register j of
 * lane l gets from matrix j the halves at row l / 4, columns 2 (l % 4) and + 1 (.trans: rows
 * 2 (l % 4) and + 1, column l / 4), low half first. A row address that is not 16-byte aligned,
 * which the GPU would fault on, fails the launch here. */
template <int N, bool Trans> void cora_ldmatrix(unsigned *regs, const uint16_t *row) {
    const long long self = threadIdx.x + (long long)blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
    const bool aligned = ((unsigned long long)row & 15) == 0;
    if (!aligned) block_sync->misaligned_rows = true; // the launch fails; nothing is read from it
    block_sync->row_slots[(size_t)self] = aligned ? row : nullptr;
    block_sync->sync();
    const long long lane = self % 32, warp = self - lane;
    for (int j = 0; j < N; j++) {
        uint16_t half[2];
        for (int h = 0; h < 2; h++) {
            const uint16_t *from = block_sync->row_slots[(size_t)(warp + 8 * j + (Trans ? 2 * (lane % 4) + h : lane / 4))];
            half[h] = !from ? 0 : Trans ? from[lane / 4] : from[2 * (lane % 4) + h];
        }
        regs[j] = (unsigned)half[0] | ((unsigned)half[1] << 16);
    }
    block_sync->sync();
}
inline void cora_ldmatrix_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3, const uint16_t *row) {
    unsigned r[4];
    cora_ldmatrix<4, false>(r, row);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void cora_ldmatrix_x2(unsigned &r0, unsigned &r1, const uint16_t *row) {
    unsigned r[2];
    cora_ldmatrix<2, false>(r, row);
    r0 = r[0], r1 = r[1];
}
inline void cora_ldmatrix_x2_trans(unsigned &r0, unsigned &r1, const uint16_t *row) {
    unsigned r[2];
    cora_ldmatrix<2, true>(r, row);
    r0 = r[0], r1 = r[1];
}
/** 16 bytes at once, as the GPU's vector copies into shared memory (CodeGen_CUDA.cpp) do. */
inline void cora_copy16(void *dst, const void *src) { std::memcpy(dst, src, 16); }
/** cp.async and its groups (CodeGen_CUDA.cpp's pipelined loops), per CUDA thread: see PendingCopy. */
inline void cora_copy16_async(void *dst, const void *src) {
    BlockSync::PendingCopy p;
    p.dst = dst;
    std::memcpy(p.bytes, src, 16);
    block_sync->current->open.push_back(p);
}
inline void cora_copy_async_commit() {
    BlockSync::Fiber &f = *block_sync->current;
    f.groups.push_back(std::move(f.open));
    f.open.clear();
}
template <int N> void cora_copy_async_wait() {
    BlockSync::Fiber &f = *block_sync->current;
    while (f.groups.size() > (size_t)N) {
        for (const BlockSync::PendingCopy &p : f.groups.front())
            std::memcpy(p.dst, p.bytes, 16);
        f.groups.erase(f.groups.begin());
    }
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

#define __global__
#define __device__
#define __shared__ static thread_local
)";

} // namespace

std::string codegen_cuda_on_cpu(const Module &m) {
    // The ABI header first: its float16 conversions stand in for the GPU's cvt instructions.
    std::string src = std::string(kCoraRuntimeHeaderText) + "\n" + kOnCpuPrologue;
    // The device source after its first line (the banner), as NVRTC gets it.
    std::string cuda = codegen_cuda(m);
    src += cuda.substr(cuda.find('\n') + 1);
    src += "\n#undef __global__\n#undef __device__\n#undef __shared__\n\n";
    // Each kernel called with the parameter array of a launch (pointers to the values).
    std::string table;
    int index = 0;
    for (const LoweredFunc *k : m.device_kernels()) {
        std::string call = "static void cora_call_" + std::to_string(index) + "(void **p) {\n    " + k->name + "(";
        for (size_t i = 0; i < k->params.size(); i++) {
            const VarPtr &p = k->params[i];
            std::string t = p->type.c_name();
            std::string value = p->role == VarRole::Buffer ? "*(" + t + " *const *)p[" + std::to_string(i) + "]"
                                                           : "*(const " + t + " *)p[" + std::to_string(i) + "]";
            call += (i ? ", " : "") + value;
        }
        src += call + ");\n}\n";
        table += (table.empty() ? "" : ", ") + ("cora_call_" + std::to_string(index));
        index++;
    }
    src += "using KernelCall = void (*)(void **);\n";
    src += "const KernelCall kernels[] = {" + (table.empty() ? std::string("nullptr") : table) + "};\n";
    src += "const int kernel_count = " + std::to_string(index) + ";\n";
    src += R"(
/** Every fiber's function: the kernel for each block the scheduler runs, until it says done. */
void fiber_main() {
    BlockSync &s = *block_sync;
    s.started();
    while (!s.done) {
        s.call(s.params);
        s.finish();
    }
    s.exit_fiber();
}
)";
    src += R"(
} // namespace cora_on_cpu

extern "C" int cora_cuda_on_cpu_launch(int kernel, const long long *grid, const long long *threads, void **params,
                                       char *error, int error_size) {
    using namespace cora_on_cpu;
    if (kernel < 0 || kernel >= kernel_count) {
        std::snprintf(error, (size_t)error_size, "no kernel number %d", kernel);
        return 3;
    }
    long long n = threads[0] * threads[1] * threads[2];
    if (n < 1 || n > 1024 || grid[0] < 1 || grid[1] < 1 || grid[2] < 1) {
        std::snprintf(error, (size_t)error_size, "launch of kernel %d with %lld x %lld x %lld threads", kernel,
                      threads[0], threads[1], threads[2]);
        return 3;
    }
    blockDim = {(unsigned)threads[0], (unsigned)threads[1], (unsigned)threads[2]};
    gridDim = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]};
    BlockSync sync;
    sync.body = &fiber_main;
    sync.call = kernels[kernel];
    sync.params = params;
    sync.shuffle_slots.assign((size_t)n, 0.0);
    sync.mma_slots.assign((size_t)n, MmaSlot{});
    sync.row_slots.assign((size_t)n, nullptr);
    if (!sync.allocate(n)) {
        std::snprintf(error, (size_t)error_size, "kernel %d: cannot map stacks for %lld CPU fibers", kernel, n);
        return 2;
    }
    BlockSync *outer = block_sync; // a launch from inside a kernel (none today) keeps its caller's
    block_sync = &sync;
    for (long long bz = 0; bz < grid[2]; bz++)
        for (long long by = 0; by < grid[1]; by++)
            for (long long bx = 0; bx < grid[0]; bx++) {
                blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)bz};
                sync.run_block();
            }
    sync.run_exit();
    block_sync = outer;
    if (sync.diverged) {
        std::snprintf(error, (size_t)error_size,
                      "kernel %d: a __syncthreads() that some threads of a block reach and others do not", kernel);
        return 3;
    }
    if (sync.misaligned_rows) {
        std::snprintf(error, (size_t)error_size, "kernel %d: an ldmatrix row address that is not 16-byte aligned",
                      kernel);
        return 3;
    }
    return 0;
}
)";
    return src;
}

} // namespace cora::ir
