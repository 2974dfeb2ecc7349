/** \file Two pipelines over one ragged shape for the tests of kernels that share a device
 * (Kernel::share_device_with): C = X Y per matrix of a batch, then D = 2 C + 1 read from C's
 * device buffer. Shared by the CPU-threads test (tests/correctness/gpu_schedules.cpp) and the
 * device test (tests/gpu/gpu_run.cpp). */
#pragma once

#include <string>
#include <vector>

#include "cora/cora.h"

namespace cora::testing {

struct ChainedGpuPipelines {
    Dim batch{"batch"}, m{"m"}, n{"n"}, k{"k"};
    Param B;
    LengthArray Ms, Ns, Ks;
    Tensor X, Y, Cin;
    Func C, D;
    Pipeline gemm, scale;
    /** At most `max_batch` matrices of at most `max_size` rows, columns and inner size. */
    ChainedGpuPipelines(int64_t max_batch, int32_t max_size, const std::string &name)
        : B("B", 1, max_batch), Ms("Ms", B, 0, max_size), Ns("Ns", B, 0, max_size), Ks("Ks", B, 0, max_size),
          X("X", {{batch, B}, {m, Ms(batch)}, {k, Ks(batch)}}), Y("Y", {{batch, B}, {k, Ks(batch)}, {n, Ns(batch)}}),
          Cin("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}}), C("C", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}}),
          D("D", {{batch, B}, {m, Ms(batch)}, {n, Ns(batch)}}), gemm(build_gemm(name)), scale(build_scale(name)) {}
    RaggedShape shape(const std::vector<int32_t> &ms, const std::vector<int32_t> &ns,
                      const std::vector<int32_t> &ks) const {
        RaggedShape s;
        s.set(B, (int64_t)ms.size()).set(Ms, ms).set(Ns, ns).set(Ks, ks);
        return s;
    }
    /** The reference of D on host inputs: C from the reference, rounded to float32, then D. */
    std::vector<double> reference(const RaggedShape &s, const Buffer &x, const Buffer &y) const {
        const std::vector<double> c_ref = reference_evaluate(gemm, s, {{X, &x}, {Y, &y}})[0];
        Buffer c = Buffer::alloc(Cin, s);
        for (int64_t e = 0; e < c.size(); e++)
            c.data<float>()[e] = (float)c_ref[(size_t)e];
        return reference_evaluate(scale, s, {{Cin, &c}})[0];
    }

private:
    Pipeline build_gemm(const std::string &name) {
        C.compute([&](Expr b, Expr i, Expr j) { return sum(k, Ks(b), X(b, i, k) * Y(b, k, j)); });
        C.gpu_blocks(m, batch).gpu_threads(n);
        return Pipeline({C}, name + "_gemm");
    }
    Pipeline build_scale(const std::string &name) {
        D.compute([&](Expr b, Expr i, Expr j) { return Cin(b, i, j) * 2.0f + 1.0f; });
        D.gpu_blocks(m, batch).gpu_threads(n);
        return Pipeline({D}, name + "_scale");
    }
};

} // namespace cora::testing
