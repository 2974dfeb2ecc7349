// Out[b, s] = factor * A[b, s] + b over a ragged batch, one parallel loop over the packed tokens.
#include <cora/Generator.h>

class RaggedScale : public cora::Generator {
public:
    cora::GeneratorParam factor{this, "factor", 2, "the scale"};
    std::vector<cora::Func> build() override {
        using namespace cora;
        Dim batch("batch"), seq("seq"), tok("tok");
        Param B("B", 1, 1024);
        LengthArray len("len", B, 0, 512);
        Tensor A("A", {{batch, B}, {seq, len(batch)}});
        Func Out("Out", {{batch, B}, {seq, len(batch)}});
        float f = (float)factor.value();
        Out.compute([&](Expr b, Expr s) { return f * A(b, s) + cast(Float32, b); });
        Out.fuse(batch, seq, tok).parallel(tok);
        return {Out};
    }
};
CORA_REGISTER_GENERATOR(RaggedScale, "ragged_scale")
