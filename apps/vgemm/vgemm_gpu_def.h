/** \file vgemm's GPU schedule (CUDA), shared by `vgemm --device`, the GPU benchmark and the tests. */
#pragma once

#include <cora/cora.h>

namespace cora::apps {

/** Binds a batch of (M, N, K) triples: its size to `count`, each column to its length array. */
inline void bind_triples(RaggedShape &s, const Param &count, const LengthArray &ms, const LengthArray &ns,
                         const LengthArray &ks, const std::vector<std::array<int32_t, 3>> &triples) {
    std::vector<int32_t> m, n, k;
    for (const auto &t : triples) {
        m.push_back(t[0]);
        n.push_back(t[1]);
        k.push_back(t[2]);
    }
    s.set(count, (int64_t)triples.size()).set(ms, m).set(ns, n).set(ks, k);
}

/** C_b = X_b Y_b over a batch of matrices of different sizes (M_b x K_b times K_b x N_b, each
 * row-major, packed one after another). Blocks over (column tiles, row tiles, matrix), the tile
 * counts launched at the batch's largest (blocks past a matrix's tiles do nothing); 16 x 16
 * threads of `tile/16` x `tile/16` accumulators per `tile` x `tile` tile (default 64; the GPU
 * benchmark times 64 and 128); per k-panel of 16, X's and Y's panels in shared memory, the
 * accumulators across the panels (per-thread slices in CUDA). */
struct VgemmGpu {
    Dim batch{"batch"}, m{"m"}, n{"n"}, r{"r"}, mo{"mo"}, mi{"mi"}, mt{"mt"}, mr{"mr"}, no{"no"}, ni{"ni"}, nt{"nt"},
        nr{"nr"}, ro{"ro"}, ri{"ri"};
    Param B{"B", 1, 4096};
    LengthArray Ms{"Ms", B, 0, 4096}, Ns{"Ns", B, 0, 4096}, Ks{"Ks", B, 0, 4096};
    Tensor X{"X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}}, Y{"Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}}};
    Func C{"C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}}};
    explicit VgemmGpu(int64_t tile = 64) {
        C.compute([&](Expr b, Expr x, Expr y) { return sum(r, Ks(b), X(b, x, r) * Y(b, r, y)); });
        C.split(m, mo, mi, tile).split(mi, mt, mr, tile / 16).split(n, no, ni, tile).split(ni, nt, nr, tile / 16);
        C.split(r, ro, ri, 16);
        C.reorder({batch, mo, no, ro, mt, nt, ri, mr, nr}).gpu_blocks(no, mo, batch).gpu_threads(nt, mt);
        C.cache_read(X, ro).cache_read(Y, ro);
        C.unroll(mr).unroll(nr).cache_write(no);
    }
    Pipeline pipeline() const { return Pipeline({C}, "vgemm_gpu"); }
    /** The batch's sizes: one (M, N, K) per matrix. */
    void bind(RaggedShape &s, const std::vector<std::array<int32_t, 3>> &shapes) const {
        bind_triples(s, B, Ms, Ns, Ks, shapes);
    }
};

/** vgemm on tensor cores (Func::gpu_mma): float16 X and Y, float32 C, every matrix a whole number
 * of tiles — M_b = 32 Mt_b, N_b = 32 Nt_b, K_b = 16 Kt_b (a batch with other sizes is padded with
 * zeros to those multiples, which changes no sum). Blocks of 32 x 32 outputs over (column tiles,
 * row tiles, matrix), launched at the batch's largest tile counts; two warps along the rows, each
 * 16 rows x 4 tiles of 8 columns in mma.sync.m16n8k16's layout; k-panels of 16 in shared memory,
 * the block's float32 sums across them. docs/gpu.md, "Tensor cores". */
struct VgemmTensorCores {
    Dim batch{"batch"}, m{"m"}, n{"n"}, r{"r"}, mo{"mo"}, mi{"mi"}, mw{"mw"}, mm{"mm"}, mh{"mh"}, mg{"mg"}, no{"no"},
        ni{"ni"}, nj{"nj"}, nm{"nm"}, nt{"nt"}, nl{"nl"}, ro{"ro"}, ri{"ri"};
    Param B{"B", 1, 4096};
    LengthArray Mt{"Mt", B, 0, 128}, Nt{"Nt", B, 0, 128}, Kt{"Kt", B, 0, 256};
    Tensor X{"X", {{batch, B}, {m, Mt(batch) * 32}, {r, Kt(batch) * 16}}, Float16},
        Y{"Y", {{batch, B}, {r, Kt(batch) * 16}, {n, Nt(batch) * 32}}, Float16};
    Func C{"C", {{batch, B}, {m, Mt(batch) * 32}, {n, Nt(batch) * 32}}};
    /** `tile` 32 (the default): blocks of 32 x 32 outputs, two warps of 16 x 32, k-panels of 16;
     * 128: blocks of 128 x 128 outputs, 8 warps of 16 x 128 (16 tensor-core tiles, 64 float32 sums
     * per thread; one A fragment per warp and k-step serves its 16 tiles), k-panels of 16 (K is a multiple of 16;
     * longer panels would leave a guard on the last one). The matrices' sizes are whole 32 x 32
     * tiles either way; a block's warps past a matrix's rows skip their tiles whole. */
    explicit VgemmTensorCores(int64_t tile = 32) {
        C.compute([&](Expr b, Expr x, Expr y) { return sum(r, Kt(b) * 16, X(b, x, r) * Y(b, r, y)); });
        if (tile == 128) {
            C.split(m, mo, mi, 128).split(mi, mw, mm, 16).split(mm, mh, mg, 8);
            C.split(n, no, ni, 128).split(ni, nj, nm, 8).split(nm, nt, nl, 2);
            C.split(r, ro, ri, 16);
            C.reorder({batch, mo, no, ro, mw, mg, nt, nj, ri, mh, nl}).gpu_blocks(no, mo, batch);
            C.gpu_threads(nt, mg, mw).cache_read(X, ro).cache_read(Y, ro).cache_write(no).gpu_mma(ri);
            C.unroll(nj); // the 64 sums stay in registers: their indices constant once unrolled
            return;
        }
        C.split(m, mo, mi, 32).split(mi, mw, mm, 16).split(mm, mh, mg, 8);
        C.split(n, no, ni, 32).split(ni, nj, nm, 8).split(nm, nt, nl, 2).split(r, ro, ri, 16);
        C.reorder({batch, mo, no, ro, mw, mg, nt, nj, ri, mh, nl}).gpu_blocks(no, mo, batch).gpu_threads(nt, mg, mw);
        C.cache_read(X, ro).cache_read(Y, ro).cache_write(no).gpu_mma(ri);
    }
    Pipeline pipeline() const { return Pipeline({C}, "vgemm_tensor_cores"); }
    /** The batch's sizes in tiles: one (Mt, Nt, Kt) per matrix. */
    void bind(RaggedShape &s, const std::vector<std::array<int32_t, 3>> &tiles) const {
        bind_triples(s, B, Mt, Nt, Kt, tiles);
    }
};

} // namespace cora::apps
