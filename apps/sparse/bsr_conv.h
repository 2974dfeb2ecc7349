/** \file A 3x3 convolution (NHWC, stride 1) whose weight is block-sparse over (C_out, C_in), every
 * kernel tap inside a block (seed 003's 8 x h x w x 8 sub-volumes), as a cora definition and
 * schedule shared by the tests and the benchmark:
 *
 *     Y[n, h, w, co] = sum over the present (co-block, ci-block) sub-volumes of
 *                      X[n, h + kh, w + kw, ci] * Wt[co, kh, kw, ci]
 *
 * X is given padded by one pixel on each side ([N, H + 2, W + 2, C_in]). The weight is a BsrMatrix
 * of [C_out, 9 C_in] with blocks of br x (9 bc): block (rb, cb) holds the sub-volume of output
 * channels rb*br.. and input channels cb*bc.., its column t*bc + c being tap t = 3 kh + kw of input
 * channel cb*bc + c — conv_weight_matrix() lays a dense [C_out, 3, 3, C_in] weight out that way.
 * The reduction runs over the present sub-volumes only.
 *
 * Schedule: image rows (n, h) fused into one parallel loop; per row, output-channel blocks x
 * vectors of 16 channels x tiles of `tile_pixels` pixels, and inside the tile the row's present
 * sub-volumes, their 9 taps and bc channels, accumulating a tile_pixels x 16 register tile. */
#pragma once

#include <cora/cora.h>

#include <algorithm>
#include <string>
#include <vector>

namespace cora::apps {

/** A dense [C_out, 3, 3, C_in] conv weight as the [C_out, 9 C_in] matrix BsrConv3x3 reads: column
 * cb*9*bc + t*bc + c holds tap t of input channel cb*bc + c. */
inline std::vector<float> conv_weight_matrix(const std::vector<float> &w, int64_t cout, int64_t cin, int64_t bc) {
    std::vector<float> m((size_t)(cout * 9 * cin));
    for (int64_t co = 0; co < cout; co++)
        for (int64_t t = 0; t < 9; t++)
            for (int64_t ci = 0; ci < cin; ci++)
                m[(size_t)(co * 9 * cin + ci / bc * 9 * bc + t * bc + ci % bc)] = w[(size_t)((co * 9 + t) * cin + ci)];
    return m;
}

class BsrConv3x3 {
    // Declared first: Y's initializer uses them.
    Dim n_{"n"}, h_{"h"}, w_{"w"}, co_{"co"}, k_{"k"}, nh_{"nh"}, wo_{"wo"}, wi_{"wi"}, nb_{"nb"}, r_{"r"}, ro_{"ro"},
        ri_{"ri"}, ko_{"ko"}, ki_{"ki"}, kt_{"kt"}, kc_{"kc"};

public:
    /** X: [N, H + 2, W + 2, C_in] (pre-padded); W: BsrMatrix [C_out, 9 C_in] with blocks br x 9 bc.
     * `tile_pixels` must divide `width` (CompileError otherwise). */
    BsrConv3x3(const std::string &name, const Tensor &X, const Param &N, int64_t height, int64_t width,
               const BsrMatrix &W, int64_t tile_pixels = 5)
        : Y(name, {{n_, N}, {h_, height}, {w_, width}, {co_, W.rows()}}) {
        if (W.block_cols() % 9 != 0)
            throw CompileError("BsrConv3x3 '" + name + "': the weight's block columns (" +
                               std::to_string(W.block_cols()) + ") must be 9 x the input-channel block");
        if (tile_pixels <= 0 || width % tile_pixels != 0)
            throw CompileError("BsrConv3x3 '" + name + "': tile_pixels " + std::to_string(tile_pixels) +
                               " must divide the width " + std::to_string(width));
        const int64_t bc = W.block_cols() / 9, span = W.block_cols();
        Y.compute([&](Expr n, Expr h, Expr w, Expr co) {
            return W.row_times(k_, co, [&](Expr kk) {
                Expr cb = kk / span, rest = kk % span, tap = rest / bc, c = rest % bc;
                return X(n, h + tap / 3, w + tap % 3, cb * bc + c);
            });
        });
        const int64_t rows = std::min<int64_t>(16, W.block_rows());
        Y.fuse(n_, h_, nh_)
            .split(w_, wo_, wi_, tile_pixels)
            .split(co_, nb_, r_, W.block_rows())
            .split(k_, ko_, ki_, span)
            .split(ki_, kt_, kc_, bc);
        if (rows < W.block_rows()) {
            Y.split(r_, ro_, ri_, rows).reorder({nh_, nb_, ro_, wo_, ko_, kt_, kc_, wi_, ri_}).vectorize(ri_);
        } else {
            Y.reorder({nh_, nb_, wo_, ko_, kt_, kc_, wi_, r_}).vectorize(r_);
        }
        Y.cache_write(wo_).unroll(wi_).unroll(kt_).parallel(nh_);
    }

    Func Y;
};

} // namespace cora::apps
