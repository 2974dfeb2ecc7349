// Test generators: built into the `test_generators` program, run by cora_add_library at build
// time (tests/CMakeLists.txt), and linked into aot_tests.
#include <cora/Generator.h>

#include "definitions.h"

namespace {

using namespace cora;

class PackedProjectionGenerator : public Generator {
public:
    GeneratorParam pad{this, "pad", 16, "bulk padding of the fused token loop"};
    GeneratorParam tile{this, "tile", 16, "token tile"};
    std::vector<Func> build() override {
        def_ = std::make_unique<cora_aot_test::PackedProjection>(pad, tile);
        return {def_->Out};
    }

private:
    std::unique_ptr<cora_aot_test::PackedProjection> def_;
};

class RaggedScoresGenerator : public Generator {
public:
    GeneratorParam longest_first{this, "longest_first", 1, "take batch items longest first"};
    GeneratorParam scale_per_mille{this, "scale_per_mille", 125, "the score scale, in thousandths"};
    std::vector<Func> build() override {
        def_ = std::make_unique<cora_aot_test::RaggedScores>(longest_first != 0, (float)scale_per_mille / 1000.0f);
        return {def_->S};
    }

private:
    std::unique_ptr<cora_aot_test::RaggedScores> def_;
};

class BsrProductGenerator : public Generator {
public:
    GeneratorParam static_pattern{this, "static_pattern", 0, "specialise to cora_aot_test::bsr_static_pattern()"};
    std::vector<Func> build() override {
        def_ = std::make_unique<cora_aot_test::BsrProduct>(static_pattern != 0);
        return {def_->Y};
    }

private:
    std::unique_ptr<cora_aot_test::BsrProduct> def_;
};

/** A token GEMM with no schedule: what --tune measures (aot_tuned_gemm, generator_tune_* tests). */
class TokenGemmGenerator : public Generator {
public:
    std::vector<Func> build() override {
        def_ = std::make_unique<cora_aot_test::TokenGemm>();
        return {def_->Y};
    }

private:
    std::unique_ptr<cora_aot_test::TokenGemm> def_;
};

/** The projection with a GPU schedule, for CUDA targets (cuda-sm_<NN>, cuda-cpu-threads). */
class PackedProjectionGpuGenerator : public Generator {
public:
    GeneratorParam half{this, "half", 0, "float16 tensors (binary16 storage, float32 sums)"};
    std::vector<Func> build() override {
        def_ = std::make_unique<cora_aot_test::PackedProjectionGpu>(half ? Float16 : Float32);
        return {def_->Out};
    }

private:
    std::unique_ptr<cora_aot_test::PackedProjectionGpu> def_;
};

} // namespace

CORA_REGISTER_GENERATOR(PackedProjectionGpuGenerator, "packed_projection_gpu")
CORA_REGISTER_GENERATOR(PackedProjectionGenerator, "packed_projection")
CORA_REGISTER_GENERATOR(BsrProductGenerator, "bsr_product")
CORA_REGISTER_GENERATOR(RaggedScoresGenerator, "ragged_scores")
CORA_REGISTER_GENERATOR(TokenGemmGenerator, "token_gemm")
