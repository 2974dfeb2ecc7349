#include "halide_matmul.h"

#include <Halide.h>

namespace cora::bench {

struct HalideMatmul::Impl {
    Halide::ImageParam a{Halide::Float(32), 3, "a"}, w{Halide::Float(32), 3, "w"};
    Halide::Func c{"c"}, prod{"prod"};
    Halide::Var j{"j"}, i{"i"}, b{"b"}, jo{"jo"}, ji{"ji"}, io{"io"}, ii{"ii"}, t{"t"};
    Halide::RDom k;

    Impl() : k(0, a.dim(0).extent(), "k") {
        // Halide dims are innermost first: a(k, i, b), w(j, k, b), c(j, i, b).
        prod(j, i, b) = 0.0f;
        prod(j, i, b) += a(k, i, b) * w(j, k, b);
        c(j, i, b) = prod(j, i, b);
        // The register-tiled schedule of Halide's matmul examples, with cora's tile: each 4 x 32
        // tile of c accumulates in a small intermediate (kept in registers) over all of k,
        // vectorized by 16; tile rows x items run across threads.
        c.tile(j, i, jo, io, ji, ii, 32, 4).vectorize(ji, 16).unroll(ii).fuse(io, b, t).parallel(t);
        prod.compute_at(c, jo).vectorize(j, 16).unroll(i);
        prod.update().reorder(j, i, k).vectorize(j, 16).unroll(i);
        c.compile_jit(Halide::get_jit_target_from_environment());
    }
};

HalideMatmul::HalideMatmul() : impl_(std::make_unique<Impl>()) {}
HalideMatmul::~HalideMatmul() = default;

void HalideMatmul::run(const float *a, const float *w, float *c, int batch, int m, int n, int k) {
    Halide::Buffer<float> ab(const_cast<float *>(a), k, m, batch), wb(const_cast<float *>(w), n, k, batch),
        cb(c, n, m, batch);
    impl_->a.set(ab);
    impl_->w.set(wb);
    impl_->c.realize(cb);
}

} // namespace cora::bench
