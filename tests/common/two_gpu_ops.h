// Two GPU ops over a ragged batch, the second over fused tokens: more than one launch, aux arrays
// (built by a CUDA AOT library on the host) and a device intermediate. Used by the CUDA AOT tests
// and those of the device runtime on the fake driver.
#pragma once

#include <cora/cora.h>

#include <functional>
#include <vector>

namespace cora::testing {

struct TwoGpuOps {
    Dim batch{"batch"}, seq{"seq"}, tok{"tok"}, to{"to"}, ti{"ti"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 40};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    Func P{"P", {{batch, B}, {seq, len(batch)}}}, S{"S", {{batch, B}, {seq, len(batch)}}};
    TwoGpuOps() {
        P.compute([&](Expr b, Expr s) { return A(b, s) * 3.0f + 1.0f; });
        S.compute([&](Expr b, Expr s) { return P(b, s) * P(b, s); });
        P.gpu_blocks(batch).gpu_threads(seq);
        S.fuse(batch, seq, tok).split(tok, to, ti, 16).gpu_blocks(to).gpu_threads(ti);
    }
    Pipeline pipeline() const { return Pipeline({S}, "two_ops"); }
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> bind =
        [this](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    RaggedShape shape(const std::vector<int32_t> &lengths) const {
        RaggedShape s;
        bind(s, lengths);
        return s;
    }
};

} // namespace cora::testing
