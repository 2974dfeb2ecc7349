// The JIT: content-addressed cache, cache hits, concurrent compiles, debug output.
#include "common/ragged_testing.h"
#include "driver/Compiler.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace cora;
namespace fs = std::filesystem;

namespace {
fs::path fresh_dir(const std::string &tag) {
    fs::path d = fs::temp_directory_path() / ("cora-test-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(d);
    return d;
}
Func scaled(float factor, Tensor &A, Dim &batch, Dim &seq, Param &B, LengthArray &len) {
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) * factor; });
    return Out;
}
/** A ragged [batch, len(b)] input and its dims, for kernels that scale it. */
struct RaggedInput {
    Dim batch = Dim("batch"), seq = Dim("seq");
    Param B = Param("B", 1, 8);
    LengthArray len = LengthArray("len", B, 0, 10);
    Tensor A = Tensor("A", {{batch, B}, {seq, len(batch)}});
    Func scaled_by(float factor) { return scaled(factor, A, batch, seq, B, len); }
};
/** Options that compile with the compiler (or wrapper) `cxx` into a cache under `dir`. */
CompileOptions with_compiler(const fs::path &dir, const fs::path &cxx) {
    CompileOptions opts;
    opts.cache_dir = (dir / "cache").string();
    opts.cxx = cxx.string();
    return opts;
}
} // namespace

TEST_CASE("the second compile of a kernel is a cache hit", "[jit]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 10);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out = scaled(3.25f, A, batch, seq, B, len);
    CompileOptions opts;
    opts.cache_dir = fresh_dir("hit").string();
    Kernel first = Pipeline({Out}, "cached").compile(opts);
    REQUIRE_FALSE(first.from_cache());
    REQUIRE(first.compile_seconds() > 0);
    Kernel second = Pipeline({Out}, "cached").compile(opts);
    REQUIRE(second.from_cache());
    REQUIRE(second.source() == first.source());
    REQUIRE(second.lowered().find("parallel for batch") != std::string::npos);
    fs::remove_all(opts.cache_dir);
}

TEST_CASE("the compiler's version is asked once and noted in the cache, again when the compiler changes",
          "[jit][toolchain]") {
    // A wrapper around the compiler cora would use (the same one: an ASan build's kernels need
    // clang's sanitizer runtime) that logs every `--version` (each costs clang++ 50-60 ms).
    fs::path dir = fresh_dir("toolchain"), log = dir / "version-calls.log", cxx = dir / "fake-cxx";
    fs::create_directories(dir);
    auto write_wrapper = [&](const std::string &tag) {
        std::ofstream(cxx) << "#!/bin/sh\n# " << tag << "\nfor a in \"$@\"; do [ \"$a\" = --version ] && echo v >> '"
                           << log.string() << "'; done\nexec " << driver::default_cxx() << " \"$@\"\n";
        fs::permissions(cxx, fs::perms::owner_all);
    };
    auto version_calls = [&] {
        std::ifstream f(log);
        return (int)std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n');
    };
    write_wrapper("one");
    RaggedInput in;
    CompileOptions opts = with_compiler(dir, cxx);
    Kernel k1 = Pipeline({in.scaled_by(2.0f)}, "toolchain_a").compile(opts);
    REQUIRE(version_calls() == 1);
    Kernel k2 = Pipeline({in.scaled_by(3.0f)}, "toolchain_b").compile(opts); // a new kernel
    Kernel k3 = Pipeline({in.scaled_by(2.0f)}, "toolchain_a").compile(opts); // a cache hit
    REQUIRE_FALSE(k2.from_cache());
    REQUIRE(k3.from_cache());
    REQUIRE(version_calls() == 1);
    // A changed compiler (another file: size and mtime differ) is asked again, and its kernels
    // are not the old compiler's.
    write_wrapper("two, upgraded");
    Kernel k4 = Pipeline({in.scaled_by(2.0f)}, "toolchain_a").compile(opts);
    REQUIRE(version_calls() == 2);
    REQUIRE(k4.from_cache()); // same --version text: the same toolchain, so the same kernel
    fs::remove_all(dir);
}

TEST_CASE("kernels for AVX-512 targets ask the compiler for 512-bit vectors in the loops it vectorizes",
          "[jit][toolchain]") {
    // Without the preference clang and g++ keep their own vectorized loops (softmax's exp, the
    // `omp simd` loops) at 256 bits on AVX-512 CPUs.
    REQUIRE(driver::target_flags("-march=native") ==
            std::vector<std::string>{"-march=native", "-mprefer-vector-width=512"});
    REQUIRE(driver::target_flags("-march=x86-64-v4") ==
            std::vector<std::string>{"-march=x86-64-v4", "-mprefer-vector-width=512"});
    for (const char *narrow : {"-march=x86-64-v3", "-march=x86-64-v2", "-march=x86-64"})
        REQUIRE(driver::target_flags(narrow) == std::vector<std::string>{narrow});
    // The JIT passes them: a wrapper around the compiler logs its arguments.
    fs::path dir = fresh_dir("vector-width"), log = dir / "args.log", cxx = dir / "logging-cxx";
    fs::create_directories(dir);
    std::ofstream(cxx) << "#!/bin/sh\necho \"$*\" >> '" << log.string() << "'\nexec " << driver::default_cxx()
                       << " \"$@\"\n";
    fs::permissions(cxx, fs::perms::owner_all);
    RaggedInput in;
    Kernel k = Pipeline({in.scaled_by(1.5f)}, "vector_width").compile(with_compiler(dir, cxx));
    REQUIRE_FALSE(k.from_cache());
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    INFO(text);
    REQUIRE(text.find("-march=native -mprefer-vector-width=512") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("two processes compiling the same kernel at once both succeed", "[jit]") {
    fs::path dir = fresh_dir("race");
    std::vector<pid_t> kids;
    for (int p = 0; p < 2; p++) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int code = 1;
            try {
                Dim batch("batch"), seq("seq");
                Param B("B", 1, 8);
                LengthArray len("len", B, 0, 10);
                Tensor A("A", {{batch, B}, {seq, len(batch)}});
                Func Out = scaled(-1.75f, A, batch, seq, B, len);
                CompileOptions opts;
                opts.cache_dir = dir.string();
                Kernel k = Pipeline({Out}, "race").compile(opts);
                RaggedShape shape;
                shape.set(B, 2).set(len, {3, 1});
                // Only compile and load here: a forked child must not enter the OpenMP runtime
                // that the parent may have started.
                code = k.arguments().size() == 5 && shape.size_of(Out) == 4 ? 0 : 2;
            } catch (...) {
                code = 3;
            }
            _exit(code);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int status = 0;
        waitpid(k, &status, 0);
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
    }
    int so_files = 0, leftovers = 0;
    for (auto &e : fs::directory_iterator(dir)) {
        std::string n = e.path().filename().string();
        if (n.find(".tmp") != std::string::npos)
            leftovers++;
        else if (e.path().extension() == ".so")
            so_files++;
    }
    REQUIRE(so_files == 1);
    REQUIRE(leftovers == 0);
    fs::remove_all(dir);
}

TEST_CASE("the generated source and lowered IR are available for inspection", "[jit]") {
    Dim batch("batch"), seq("seq");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 10);
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out = scaled(2.0f, A, batch, seq, B, len);
    Pipeline p({Out}, "inspect");
    std::string ir = p.lower_to_string();
    REQUIRE(ir.find("assert") != std::string::npos); // argument checks come first
    REQUIRE(ir.find("parallel for batch") != std::string::npos);
    Kernel k = p.compile();
    REQUIRE(k.source().find("#pragma omp parallel for") != std::string::npos);
    REQUIRE(k.source().find("extern \"C\" int32_t cora_inspect") != std::string::npos);
}

namespace {
/** A packed-token scale whose aux arrays (prefix sums, fusion maps) are named after its dims. */
std::string scale_source(const Param &B, const LengthArray &len) {
    Dim batch("batch"), seq("seq"), tok("tok");
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func Out("Out", {{batch, B}, {seq, len(batch)}});
    Out.compute([&](Expr b, Expr s) { return A(b, s) * 2.0f; });
    Out.fuse(batch, seq, tok);
    return Pipeline({Out}, "deterministic").compile().source();
}
} // namespace

TEST_CASE("the same pipeline gives byte-identical source whatever was compiled before", "[jit][naming]") {
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 10);
    {
        // Another pipeline with the same raggedness over other dims, compiled first: its aux
        // arrays must not lend their names to the next compilation.
        Dim row("row"), col("col"), flat("flat");
        Tensor X("X", {{row, B}, {col, len(row)}});
        Func Y("Y", {{row, B}, {col, len(row)}});
        Y.compute([&](Expr r, Expr c) { return X(r, c) + 1.0f; });
        Y.fuse(row, col, flat);
        std::string other = Pipeline({Y}, "other").compile().source();
        REQUIRE(other.find("prefix_row") != std::string::npos);
    }
    std::string after_other = scale_source(B, len);
    Param B2("B", 1, 8);
    LengthArray len2("len", B2, 0, 10);
    std::string alone = scale_source(B2, len2); // fresh symbols: nothing shared with earlier pipelines
    REQUIRE(after_other == alone);
    REQUIRE(alone.find("prefix_batch") != std::string::npos);
    REQUIRE(alone.find("prefix_row") == std::string::npos);
}
