/** \file The dense tensor-compiler baseline: a Halide (14) batched matmul on padded operands,
 * JIT-compiled once with a register-tiled schedule. Kept behind this header so that only one
 * file of the benchmarks includes Halide.h. */
#pragma once

#include <memory>

namespace cora::bench {

class HalideMatmul {
public:
    HalideMatmul();
    ~HalideMatmul();
    /** C[b] = A[b] * W[b], each item M x K times K x N, row-major, items contiguous. */
    void run(const float *a, const float *w, float *c, int batch, int m, int n, int k);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace cora::bench
