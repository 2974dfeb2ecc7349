// GEMM schedules shared by the emulated GPU tests (correctness/gpu_schedules.cpp,
// correctness/gpu_tensor_cores.cpp) and the device tests (gpu/gpu_run.cpp), so that the
// schedule run on a device is the one checked on every machine.
#pragma once

#include <cora/cora.h>

namespace cora::testing {

/** C[i, j] = sum_k A[i, k] * Bm[k, j], scheduled as blocks of 32 x 32 outputs over 8 x 8 threads,
 * each thread 4 x 4 unrolled sums, k-panels of 8 of A and Bm in shared memory, and the block's
 * tile cached at the block loop (in CUDA, one 4 x 4 slice per thread: slice_thread_tiles). */
inline void schedule_sliced_gemm(Func &C, const Tensor &A, const Tensor &Bm, const Dim &i, const Dim &j, const Dim &k) {
    Dim io("io"), ii("ii"), it("it"), ir("ir"), jo("jo"), ji("ji"), jt("jt"), jr("jr"), ko("ko"), ki("ki");
    C.split(i, io, ii, 32).split(ii, it, ir, 4).split(j, jo, ji, 32).split(ji, jt, jr, 4).split(k, ko, ki, 8);
    C.reorder({io, jo, ko, it, jt, ki, ir, jr}).gpu_blocks(jo, io).gpu_threads(jt, it);
    C.cache_read(A, ko).cache_read(Bm, ko).unroll(ir).unroll(jr).cache_write(jo);
}

/** C[i, j] = sum_k A[i, k] * B[k, j] over whole tiles (M = 32 Mb, N = 32 Nb, K = 16 Kb: no bound
 * check divides a warp), float16 operands by default, for tensor-core schedules. */
struct TileGemm {
    Dim i{"i"}, j{"j"}, k{"k"}, io{"io"}, ii{"ii"}, iw{"iw"}, im{"im"}, ih{"ih"}, g{"g"}, jo{"jo"}, ji{"ji"}, jw{"jw"},
        nj{"nj"}, jm{"jm"}, t{"t"}, jl{"jl"}, ko{"ko"}, ki{"ki"};
    Param Mb, Nb, Kb;
    Expr M = Expr(Mb) * 32, N = Expr(Nb) * 32, K = Expr(Kb) * 16;
    Tensor A, B;
    Func C;
    explicit TileGemm(Type operands = Float16, Type out = Float32, int64_t max_tiles = 6)
        : Mb("Mb", 0, max_tiles), Nb("Nb", 0, max_tiles), Kb("Kb", 0, 2 * max_tiles),
          A("A", {{i, M}, {k, K}}, operands), B("B", {{k, K}, {j, N}}, operands), C("C", {{i, M}, {j, N}}, out) {
        C.compute([&](Expr x, Expr y) { return sum(k, K, A(x, k) * B(k, y)); });
    }
    /** The loops of the tensor-core tiles: i = 32 io + 16 iw + 8 ih + g, j = 32 jo + 8 nj + 2 t + jl,
     * k = 16 ko + ki (k by `k_step`, 16 for the instruction). */
    void split_tiles(int64_t k_step = 16) {
        C.split(i, io, ii, 32).split(ii, iw, im, 16).split(im, ih, g, 8);
        C.split(j, jo, ji, 32).split(ji, nj, jm, 8).split(jm, t, jl, 2).split(k, ko, ki, k_step);
    }
    /** Tensor cores: blocks of 32 x 32 outputs, two warps along i (threads z), each 16 rows x 4
     * tiles of 8 columns, k-panels of 16 in shared memory; in each tile, thread (t, g) of the
     * 4 x 8 warp holds rows g + 8 ih and columns 2 t + jl, the layout of mma.sync.m16n8k16. */
    void schedule() {
        split_tiles();
        C.reorder({io, jo, ko, iw, g, t, nj, ki, ih, jl}).gpu_blocks(jo, io).gpu_threads(t, g, iw);
        C.cache_read(A, ko).cache_read(B, ko).cache_write(jo).gpu_mma(ki);
    }
};

} // namespace cora::testing
