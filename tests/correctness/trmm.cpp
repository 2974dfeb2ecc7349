// trmm: C = L * X with L lower-triangular M x M and X dense M x N; the reduction extent is
// i + 1, a vloop over an outer loop variable. L is stored dense, and also packed triangular
// (storage extent i + 1: a vdim depending on an outer dim, not on a length array).
#include "common/ragged_testing.h"

using namespace cora;

TEST_CASE("trmm with reduction extent i+1 matches the reference and a hand loop", "[trmm]") {
    Dim row("row"), col("col"), kd("k"), r("r");
    Param M("M", 1, 64), N("N", 1, 64);
    Tensor L("L", {{row, M}, {kd, M}});
    Tensor X("X", {{kd, M}, {col, N}});
    Func C("C", {{row, M}, {col, N}});
    C.compute([&](Expr i, Expr j) { return sum(r, i + 1, L(i, r) * X(r, j)); });
    Pipeline pipe({C}, "trmm");
    Kernel k = pipe.compile();

    Tensor Lp("Lp", {{row, M}, {kd, row + 1}}); // packed lower triangle
    Func Cp("Cp", {{row, M}, {col, N}});
    Cp.compute([&](Expr i, Expr j) { return sum(r, i + 1, Lp(i, r) * X(r, j)); });
    Pipeline packed({Cp}, "trmm_packed");
    Kernel kp = packed.compile();

    for (auto [m, n] : std::vector<std::pair<int, int>>{{1, 1}, {1, 7}, {5, 1}, {8, 8}, {9, 17}, {33, 12}, {64, 64}}) {
        INFO("M=" << m << " N=" << n);
        RaggedShape shape;
        shape.set(M, m).set(N, n);
        Buffer l = Buffer::alloc(L, shape), x = Buffer::alloc(X, shape), c = Buffer::alloc(C, shape);
        testing::fill_random(l, (uint32_t)m);
        testing::fill_random(x, (uint32_t)n + 50);
        k.run(shape, {{L, l}, {X, x}, {C, c}});
        testing::require_close(c, reference_evaluate(pipe, shape, {{L, &l}, {X, &x}})[0]);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int t = 0; t <= i; t++)
                    acc += (double)l.at(i * m + t) * x.at(t * n + j);
                REQUIRE(c.at(i * n + j) == Approx(acc).margin(1e-4));
            }

        Buffer lp = Buffer::alloc(Lp, shape), cp = Buffer::alloc(Cp, shape);
        REQUIRE(lp.size() == (int64_t)m * (m + 1) / 2);
        for (int i = 0, at = 0; i < m; i++)
            for (int t = 0; t <= i; t++)
                lp.at(at++) = l.at(i * m + t);
        kp.run(shape, {{Lp, lp}, {X, x}, {Cp, cp}});
        for (int64_t i = 0; i < c.size(); i++)
            REQUIRE(cp.at(i) == Approx(c.at(i)).margin(1e-5));
    }
}
