/** \file trmm's GPU schedule (CUDA), shared by `trmm --device`, the GPU benchmark and the tests. */
#pragma once

#include <cora/cora.h>

namespace cora::apps {

/** C = L X with L lower-triangular (M x M) and X dense (M x N), row-major. A block per `tile` x
 * `tile` tile of C (default 64), 16 x 16 threads of `tile/16` x `tile/16` accumulators each. Per
 * k-panel of 16 (unrolled) the block copies L's tile x 16 and X's 16 x tile panels into shared
 * memory (the copies spread over its threads); the accumulators live across the panels
 * (cache_write at the block loop: in CUDA each thread keeps its slice in registers,
 * lower/SliceThreadTiles.cpp). The panel loop of a block row stops at the row's last triangle
 * panel. The GPU benchmark times tile 64 and 128 (8 x 8 per thread: a quarter of a shared-memory
 * load per multiply-add instead of half). */
struct TrmmGpu {
    Dim i{"i"}, j{"j"}, r{"r"}, io{"io"}, ii{"ii"}, it{"it"}, ir{"ir"}, jo{"jo"}, ji{"ji"}, jt{"jt"}, jr{"jr"},
        ro{"ro"}, ri{"ri"};
    Param M{"M", 1, 16384}, N{"N", 1, 16384};
    Tensor L{"L", {{i, M}, {r, M}}}, X{"X", {{r, M}, {j, N}}};
    Func C{"C", {{i, M}, {j, N}}};
    explicit TrmmGpu(int64_t tile = 64) {
        C.compute([&](Expr x, Expr y) { return sum(r, x + 1, L(x, r) * X(r, y)); });
        C.split(i, io, ii, tile).split(ii, it, ir, tile / 16).split(j, jo, ji, tile).split(ji, jt, jr, tile / 16);
        C.split(r, ro, ri, 16).reorder({io, jo, ro, it, jt, ri, ir, jr}).gpu_blocks(jo, io).gpu_threads(jt, it);
        C.cache_read(L, ro).cache_read(X, ro);
        C.unroll(ri).unroll(ir).unroll(jr).cache_write(jo);
    }
    Pipeline pipeline() const { return Pipeline({C}, "trmm_gpu"); }
};

} // namespace cora::apps
