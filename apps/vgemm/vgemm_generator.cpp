// The vgemm generator: run at build time by cora_add_library (apps/vgemm/CMakeLists.txt).
#include <cora/Generator.h>

#include "vgemm_def.h"

namespace {

class VGemmGenerator : public cora::Generator {
public:
    cora::GeneratorParam tile_rows{this, "tile_rows", 4, "rows of a register tile"};
    cora::GeneratorParam tile_cols{this, "tile_cols", 64,
                                   "columns of a register tile (a multiple of the vector width)"};
    cora::GeneratorParam panel_depth{this, "panel_depth", 256, "k-steps per packed panel of W (x tile_cols <= 16384)"};
    std::vector<cora::Func> build() override {
        def_ = std::make_unique<cora::apps::VGemm>(cora::apps::VGemmTiling{tile_rows, tile_cols, panel_depth});
        return {def_->C};
    }

private:
    std::unique_ptr<cora::apps::VGemm> def_;
};

} // namespace

CORA_REGISTER_GENERATOR(VGemmGenerator, "vgemm")
