/** \file codegen_cuda_on_cpu (CodeGen_CUDA.h): the CUDA source of a module's kernels, unchanged,
 * compiled by the host C++ compiler and run by CPU threads.
 *
 * Why. Target::CudaEmulated runs the device IR block by block with thread loops as loops; it
 * checks indexing and bounds, but not what only the CUDA path does: the printer, the kernel
 * signatures and launch parameters, per-thread locals (slice_thread_tiles), shared memory and
 * __syncthreads. Here each CUDA thread of a block is a std::thread: a local array is per thread,
 * `__shared__` is one array for the block (a function-local static; blocks run one after another),
 * `__syncthreads()` is a barrier of the block's threads. A barrier some threads of a block reach
 * and others do not (a divergent barrier: undefined in CUDA) is reported as an error instead of
 * hanging: a thread that has returned no longer counts at the barriers of its block.
 *
 * The result defines `extern "C" int cora_cuda_on_cpu_launch(int32_t kernel, const int64_t *grid,
 * const int64_t *threads, void **params, char *error, int32_t error_size)`, the signature of
 * cora_device_t::launch without its context: kernel numbers and parameters as the host entry
 * (codegen_cuda_host) passes them. Pointers are host pointers. Slow (a thread per CUDA thread,
 * a mutex per barrier): for tests on small sizes. */
#include "codegen/CodeGen_CUDA.h"

#include "codegen/cora_runtime_h.inc"
#include "util/Error.h"

namespace cora::ir {

namespace {

const char *kOnCpuPrologue = R"(// CUDA kernels run by CPU threads (cora: codegen_cuda_on_cpu). Do not edit.
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace cora_on_cpu {

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/** The barrier of one block's threads; a thread that returned no longer counts (see above). */
struct BlockSync {
    std::mutex m;
    std::condition_variable cv;
    long long n = 0, arrived = 0, finished = 0, phase = 0, block = 0;
    bool diverged = false;
    void release_if_complete() {
        if (arrived > 0 && arrived + finished == n) {
            arrived = 0;
            phase++;
            cv.notify_all();
        }
    }
    void sync() {
        std::unique_lock<std::mutex> l(m);
        if (finished > 0) diverged = true;
        long long p = phase;
        arrived++;
        release_if_complete();
        cv.wait(l, [&] { return phase != p; });
    }
    void finish() {
        std::unique_lock<std::mutex> l(m);
        if (arrived > 0) diverged = true;
        long long b = block;
        finished++;
        release_if_complete();
        if (finished == n) {
            finished = 0;
            block++;
            cv.notify_all();
        } else {
            cv.wait(l, [&] { return block != b; });
        }
    }
};
BlockSync *block_sync = nullptr;

inline void __syncthreads() { block_sync->sync(); }

/** __shfl_xor_sync among the block's threads (the callers are one full warp): each thread leaves
 * its value in its slot, and after a barrier reads its partner's. */
std::vector<double> shuffle_slots;
template <class T> T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    const long long self = threadIdx.x + (long long)blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
    shuffle_slots[(size_t)self] = (double)v;
    block_sync->sync();
    T other = (T)shuffle_slots[(size_t)(self ^ lane_mask)];
    block_sync->sync();
    return other;
}
/** mma.sync.m16n8k16.row.col (float16 x float16 + float32) among one warp's threads (blocks of
 * 4 x 8 (x z) threads, so a warp is one z): each lane leaves its fragments in its slot; after a
 * barrier it computes its four outputs from its warp's slots, reading each element where the PTX
 * ISA's fragment layout puts it (A: row g / g + 8 in registers 0, 2 / 1, 3, k = 2t, 2t + 1 and
 * + 8; B: column g, the same ks; D: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)), so a
 * wrong fragment index in the generated kernel gives a wrong result here too. */
struct MmaSlot {
    unsigned a[4], b[2];
};
std::vector<MmaSlot> mma_slots;
inline float cora_mma_half(unsigned reg, int high) { return cora_half_to_float((uint16_t)(high ? reg >> 16 : reg)); }
inline void cora_mma_m16n8k16(float &d0, float &d1, float &d2, float &d3, unsigned a0, unsigned a1, unsigned a2,
                              unsigned a3, unsigned b0, unsigned b1) {
    const long long self = threadIdx.x + (long long)blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
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
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

#define __global__
#define __device__
#define __shared__ static
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
    BlockSync sync;
    sync.n = n;
    block_sync = &sync;
    shuffle_slots.assign((size_t)n, 0.0);
    mma_slots.assign((size_t)n, MmaSlot{});
    blockDim = {(unsigned)threads[0], (unsigned)threads[1], (unsigned)threads[2]};
    gridDim = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]};
    std::vector<std::thread> workers;
    for (long long t = 0; t < n; t++)
        workers.emplace_back([&, t] {
            threadIdx = {(unsigned)(t % threads[0]), (unsigned)(t / threads[0] % threads[1]),
                         (unsigned)(t / (threads[0] * threads[1]))};
            for (long long bz = 0; bz < grid[2]; bz++)
                for (long long by = 0; by < grid[1]; by++)
                    for (long long bx = 0; bx < grid[0]; bx++) {
                        blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)bz};
                        kernels[kernel](params);
                        sync.finish();
                    }
        });
    for (std::thread &w : workers)
        w.join();
    block_sync = nullptr;
    if (sync.diverged) {
        std::snprintf(error, (size_t)error_size,
                      "kernel %d: a __syncthreads() that some threads of a block reach and others do not", kernel);
        return 3;
    }
    return 0;
}
)";
    return src;
}

} // namespace cora::ir
