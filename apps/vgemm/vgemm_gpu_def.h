/** \file vgemm's GPU schedule (CUDA), shared by `vgemm --device`, the GPU benchmark and the tests. */
#pragma once

#include <cora/cora.h>

namespace cora::apps {

/** C_b = X_b Y_b over a batch of matrices of different sizes (M_b x K_b times K_b x N_b, each
 * row-major, packed one after another). Blocks over (column tiles, row tiles, matrix), the tile
 * counts launched at the batch's largest (blocks past a matrix's tiles do nothing); 16 x 16
 * threads of 4 x 4 accumulators per 64 x 64 tile; per k-panel of 16, X's and Y's panels in shared
 * memory, the accumulators across the panels (per-thread slices in CUDA). */
struct VgemmGpu {
    Dim batch{"batch"}, m{"m"}, n{"n"}, r{"r"}, mo{"mo"}, mi{"mi"}, mt{"mt"}, mr{"mr"}, no{"no"}, ni{"ni"}, nt{"nt"},
        nr{"nr"}, ro{"ro"}, ri{"ri"};
    Param B{"B", 1, 4096};
    LengthArray Ms{"Ms", B, 0, 4096}, Ns{"Ns", B, 0, 4096}, Ks{"Ks", B, 0, 4096};
    Tensor X{"X", {{batch, B}, {m, Ms(batch)}, {r, Ks(batch)}}}, Y{"Y", {{batch, B}, {r, Ks(batch)}, {n, Ns(batch)}}};
    Func C{"C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}}};
    VgemmGpu() {
        C.compute([&](Expr b, Expr x, Expr y) { return sum(r, Ks(b), X(b, x, r) * Y(b, r, y)); });
        C.split(m, mo, mi, 64).split(mi, mt, mr, 4).split(n, no, ni, 64).split(ni, nt, nr, 4).split(r, ro, ri, 16);
        C.reorder({batch, mo, no, ro, mt, nt, ri, mr, nr}).gpu_blocks(no, mo, batch).gpu_threads(nt, mt);
        C.cache_read(X, ro).cache_read(Y, ro);
        C.unroll(mr).unroll(nr).cache_write(no);
    }
    Pipeline pipeline() const { return Pipeline({C}, "vgemm_gpu"); }
    /** The batch's sizes: one (M, N, K) per matrix. */
    void bind(RaggedShape &s, const std::vector<std::array<int32_t, 3>> &shapes) const {
        std::vector<int32_t> ms, ns, ks;
        for (const auto &g : shapes) {
            ms.push_back(g[0]);
            ns.push_back(g[1]);
            ks.push_back(g[2]);
        }
        s.set(B, (int64_t)shapes.size()).set(Ms, ms).set(Ns, ns).set(Ks, ks);
    }
};

} // namespace cora::apps
