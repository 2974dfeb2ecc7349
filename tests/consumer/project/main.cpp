// Uses the installed cora: a ragged row sum, checked by hand.
#include <cora/cora.h>

#include <cstdio>

int main() {
    using namespace cora;
    Dim batch("batch"), seq("seq"), r("r");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 16);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func RowSum("RowSum", {{batch, B}});
    RowSum.compute([&](Expr b) { return sum(r, len(b), A(b, r)); });
    Kernel k = Pipeline({RowSum}, "consumer_rowsum").compile();

    RaggedShape shape;
    shape.set(B, 3).set(len, {3, 0, 5});
    Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(RowSum, shape);
    for (int64_t i = 0; i < a.size(); i++)
        a.at(i) = (float)(i + 1);
    k.run(shape, {{A, a}, {RowSum, out}});
    const float expect[3] = {1 + 2 + 3, 0, 4 + 5 + 6 + 7 + 8};
    for (int b = 0; b < 3; b++) {
        if (out.at(b) != expect[b]) {
            std::printf("consumer: row %d is %g, expected %g\n", b, out.at(b), expect[b]);
            return 1;
        }
    }
    std::printf("consumer: ok\n");
    return 0;
}
