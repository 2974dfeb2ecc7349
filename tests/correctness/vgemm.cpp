// vgemm: a batch of GEMMs with per-item M, N, K (three length arrays, nested raggedness in
// three dims of each operand).
#include "common/ragged_testing.h"

using namespace cora;

TEST_CASE("vgemm with per-item M, N, K matches the reference", "[vgemm]") {
    Dim batch("batch"), m("m"), n("n"), kd("k"), r("r");
    Param B("B", 1, 8);
    LengthArray M("M", B, 0, 24), N("N", B, 0, 24), K("K", B, 0, 24);
    Tensor A("A", {{batch, B}, {m, M(batch)}, {kd, K(batch)}});
    Tensor W("W", {{batch, B}, {kd, K(batch)}, {n, N(batch)}});
    Func C("C", {{batch, B}, {m, M(batch)}, {n, N(batch)}});
    C.compute([&](Expr b, Expr i, Expr j) { return sum(r, K(b), A(b, i, r) * W(b, r, j)); });
    Pipeline pipe({C}, "vgemm");
    Kernel k = pipe.compile();

    std::mt19937 rng(3);
    auto cases = testing::length_cases(24, 8, 9);
    for (size_t c = 0; c < cases.size(); c++) {
        const auto &ms = cases[c];
        // N and K: rotations of the M case, so that edge values meet different partners.
        std::vector<int32_t> ns(ms.size()), ks(ms.size());
        for (size_t i = 0; i < ms.size(); i++) {
            ns[i] = ms[(i + 1) % ms.size()];
            ks[i] = ms[(i + 2) % ms.size()];
        }
        INFO("M " << testing::describe(ms) << " N " << testing::describe(ns) << " K " << testing::describe(ks));
        RaggedShape shape;
        shape.set(B, (int64_t)ms.size()).set(M, ms).set(N, ns).set(K, ks);
        Buffer a = Buffer::alloc(A, shape), w = Buffer::alloc(W, shape), out = Buffer::alloc(C, shape);
        testing::fill_random(a, (uint32_t)c);
        testing::fill_random(w, (uint32_t)c + 100);
        k.run(shape, {{A, a}, {W, w}, {C, out}});
        testing::require_close(out, reference_evaluate(pipe, shape, {{A, &a}, {W, &w}})[0]);
    }
}
