// The encoder's kernel generator, run at build time by cora_add_library (CMakeLists.txt here):
// `kernel` picks one of the layer's five kernels (encoder_def.h), `causal` and `gelu` its variant.
#include <cora/Generator.h>

#include "encoder_def.h"

namespace {

class EncoderGenerator : public cora::Generator {
public:
    cora::GeneratorParam kernel{this, "kernel", 0, "0 qkv, 1 attention, 2 out_norm, 3 ff1, 4 ff2_norm"};
    cora::GeneratorParam causal{this, "causal", 0, "attention over keys j <= i only"};
    cora::GeneratorParam gelu{this, "gelu", 0, "GELU instead of ReLU in ff1"};
    cora::GeneratorParam mask_full{this, "mask_full", 0, "causal as full attention with a mask (the baseline)"};
    std::vector<cora::Func> build() override {
        if (kernel < 0 || kernel > 4) throw cora::CompileError("encoder generator: kernel must be in [0, 4]");
        def_ = cora::apps::make_encoder_kernel(
            (cora::apps::EncoderKernel)(int64_t)kernel,
            cora::apps::EncoderOptions{causal != 0, gelu != 0, mask_full != 0, vector_bits()});
        return {def_->output()};
    }

private:
    std::unique_ptr<cora::apps::EncoderKernelDef> def_;
};

} // namespace

CORA_REGISTER_GENERATOR(EncoderGenerator, "encoder")
