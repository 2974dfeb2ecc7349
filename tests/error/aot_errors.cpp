// Per-target AOT builds: one pipeline per target may schedule differently, but must define the
// same function (one header, one size query); the mismatches are CompileErrors naming the
// argument, found before any compiler runs. And the vector widths generators schedule by.
#include "common/ragged_testing.h"

#include <cora/Generator.h>

#include <filesystem>

using namespace cora;
using Catch::Matchers::Contains;

namespace {

/** Out = 2 * In over a ragged batch; `name` names the input, `pad` pads its storage. */
Pipeline scale(const std::string &input_name, int64_t pad, int64_t split) {
    Dim b("b"), s("s"), so("so"), si("si");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 32);
    Tensor In(input_name, {{b, B}, {s, len(b)}});
    Func Out("Out", {{b, B}, {s, len(b)}});
    Out.compute([&](Expr bb, Expr ss) { return In(bb, ss) * 2.0f; });
    if (pad > 1) In.pad_storage(s, pad);
    if (split > 1) Out.split(s, so, si, split);
    return Pipeline({Out}, "scale");
}

AotOptions options(const std::string &targets) {
    AotOptions o;
    o.output_dir = (std::filesystem::temp_directory_path() / "cora-aot-errors").string();
    o.target = targets;
    return o;
}

} // namespace

TEST_CASE("per-target pipelines must define the same function", "[error][aot]") {
    SECTION("a different argument name") {
        REQUIRE_THROWS_AS(compile_to_library({scale("In", 1, 1), scale("X", 1, 1)}, options("x86-64-v4,x86-64-v3")),
                          CompileError);
        REQUIRE_THROWS_WITH(compile_to_library({scale("In", 1, 1), scale("X", 1, 1)}, options("x86-64-v4,x86-64-v3")),
                            Contains("AOT target variant 1: argument") && Contains("X (") &&
                                Contains("names and storage layouts may not"));
    }
    SECTION("a different storage layout") {
        REQUIRE_THROWS_WITH(compile_to_library({scale("In", 1, 1), scale("In", 4, 1)}, options("x86-64-v4,x86-64-v3")),
                            Contains("AOT target variant 1: argument") && Contains("elements"));
    }
    SECTION("as many pipelines as targets, or one") {
        REQUIRE_THROWS_WITH(compile_to_library({scale("In", 1, 1), scale("In", 1, 4)}, options("x86-64-v4")),
                            Contains("2 pipelines for 1 targets"));
    }
    SECTION("tuned tiles: one map per CPU target") {
        AotOptions o = options("x86-64-v4,x86-64-v3");
        o.target_tiles.resize(3);
        REQUIRE_THROWS_AS(compile_to_library(scale("In", 1, 1), o), CompileError);
        REQUIRE_THROWS_WITH(compile_to_library(scale("In", 1, 1), o),
                            Contains("contraction tiles for 3 targets, but 2 targets"));
        AotOptions cuda = options("cuda-cpu-threads");
        cuda.target_tiles.resize(1);
        REQUIRE_THROWS_WITH(compile_to_library(scale("In", 1, 1), cuda),
                            Contains("target_tiles are register tiles of CPU targets, not of 'cuda-cpu-threads'"));
    }
}

TEST_CASE("generators learn their target's vector width", "[aot]") {
    struct Probe : Generator {
        std::vector<Func> build() override { return {}; }
    } g;
    REQUIRE(g.target() == "host");
    REQUIRE(g.vector_bits() == host_vector_bits());
    g.set_target("x86-64-v4");
    REQUIRE(g.vector_bits() == 512);
    g.set_target("x86-64-v3");
    REQUIRE(g.vector_bits() == 256);
    g.set_target("x86-64");
    REQUIRE(g.vector_bits() == 128);
    REQUIRE((host_vector_bits() == 128 || host_vector_bits() == 256 || host_vector_bits() == 512));
}
