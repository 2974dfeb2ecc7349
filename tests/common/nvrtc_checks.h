// Checks that a pipeline's CUDA source compiles (NVRTC), shared by the GPU schedule tests.
#pragma once

#include <cora/Cuda.h>
#include <cora/cora.h>

#include <catch2/catch.hpp>

#include <string>

namespace cora::testing {

/** NVRTC compiles the pipeline's kernels for sm_80 and sm_90 without a warning, each a visible entry
 * of the PTX, which contains `ptx_text` when given; returns the program (source only, with the
 * reason printed, when no toolkit is installed). */
inline CudaProgram require_cuda_compiles(const Pipeline &p, const std::string &ptx_text = "") {
    std::string why;
    if (!cuda_compiler_available(&why)) {
        WARN("SKIPPED: NVRTC compilation of '" << p.name() << "': " << why);
        return compile_cuda(p, {});
    }
    CudaProgram cp = compile_cuda(p, {80, 90});
    INFO(cp.source);
    REQUIRE(cp.binaries.size() == 2);
    REQUIRE(!cp.kernels.empty());
    for (const CudaBinary &b : cp.binaries) {
        INFO("sm_" << b.arch << " log: " << b.log);
        REQUIRE(b.log.find("warning") == std::string::npos);
        REQUIRE(b.cubin.size() > 0);
        REQUIRE_THAT(b.ptx, Catch::Matchers::Contains(".target sm_" + std::to_string(b.arch)));
        for (const std::string &k : cp.kernels)
            REQUIRE_THAT(b.ptx, Catch::Matchers::Contains(".entry " + k + "("));
        if (!ptx_text.empty()) REQUIRE_THAT(b.ptx, Catch::Matchers::Contains(ptx_text));
    }
    return cp;
}

/** The program's kernels without the 32-bit twins that lower/NarrowIndices.cpp may add (named
 * `<kernel>_i32`): one per launch. */
inline std::vector<std::string> launched_kernels(const CudaProgram &cp) {
    std::vector<std::string> k;
    for (const std::string &name : cp.kernels)
        if (name.size() < 4 || name.compare(name.size() - 4, 4, "_i32") != 0) k.push_back(name);
    return k;
}

} // namespace cora::testing
