// Defects found by probing cora as a hostile user would (issue 14), one test case each: the JIT
// with g++ (libgomp unloaded under its threads), sizes that overflow 64 bits, shell
// metacharacters in paths, a corrupted or planted kernel cache, aliased buffers and reference
// cycles between tensor nodes.
#include "common/ragged_testing.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "cora_runtime.h"
#include "driver/Compiler.h"
#include "driver/KernelCache.h"
#include "driver/Subprocess.h"

using namespace cora;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string &tag) {
    fs::path d = fs::temp_directory_path() / ("cora-reliability-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(d);
    return d;
}

/** Out = scale * A over a ragged [batch, seq] with a parallel batch loop. */
struct Scale {
    Dim batch{"batch"}, seq{"seq"};
    Param B{"B", 1, 64};
    LengthArray len{"len", B, 0, 1000};
    Tensor A{"A", {{batch, B}, {seq, len(batch)}}};
    Func Out{"Out", {{batch, B}, {seq, len(batch)}}};
    explicit Scale(float scale) {
        Out.compute([&, scale](Expr b, Expr s) { return scale * A(b, s); });
    }
    /** Runs the kernel on lengths {7, 0, 300, 5} and checks every element. */
    void check(const Kernel &k, float scale) {
        RaggedShape shape;
        shape.set(B, 4).set(len, {7, 0, 300, 5});
        Buffer a = Buffer::alloc(A, shape), out = Buffer::alloc(Out, shape);
        testing::fill_random(a, 3);
        k.run(shape, {{A, a}, {Out, out}});
        for (int64_t i = 0; i < a.size(); i++)
            REQUIRE(out.at(i) == scale * a.at(i));
    }
};

/** Sets (or unsets, with nullopt) an environment variable for the life of the object. */
class ScopedEnv {
public:
    ScopedEnv(const char *name, std::optional<std::string> value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old;
        if (value)
            setenv(name, value->c_str(), 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }

private:
    const char *name_;
    std::optional<std::string> old_;
};

fs::path only_library(const fs::path &dir) {
    std::optional<fs::path> found;
    for (auto &e : fs::directory_iterator(dir))
        if (e.path().extension() == ".so") {
            REQUIRE_FALSE(found);
            found = e.path();
        }
    REQUIRE(found);
    return *found;
}

} // namespace

TEST_CASE("kernels built by g++ keep libgomp loaded after they are unloaded", "[reliability][jit]") {
    if (!driver::sanitizer_flags().empty()) {
        WARN("skipped: g++'s sanitizer runtime cannot join a clang-sanitized process");
        return;
    }
    try {
        driver::toolchain_identity({"g++"});
    } catch (const EnvironmentError &) {
        WARN("skipped: no g++ on PATH");
        return;
    }
    CompileOptions opts;
    opts.cxx = "g++";
    opts.cache_dir = fresh_dir("gxx").string();
    {
        Scale s(2.0f);
        Kernel k = Pipeline({s.Out}, "gxx_first").compile(opts);
        s.check(k, 2.0f); // starts libgomp's worker threads
    }                     // the kernel's library is closed here
    // libgomp's threads are still alive; their code must still be mapped.
    void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(gomp != nullptr);
    dlclose(gomp);
    Scale s(-3.0f);
    Kernel k = Pipeline({s.Out}, "gxx_second").compile(opts);
    for (int r = 0; r < 20; r++)
        s.check(k, -3.0f);
    fs::remove_all(opts.cache_dir);
}

TEST_CASE("sizes that overflow 64 bits are errors, never wrapped sizes that pass", "[reliability][overflow]") {
    Dim i("i"), j("j");
    Param N("N", 1, int64_t(1) << 40);
    Tensor A("A", {{i, N}, {j, N}});
    Func Out("Out", {{i, N}, {j, N}});
    Out.compute([&](Expr a, Expr b) { return A(a, b) + 1.0f; });

    SECTION("Buffer's byte count") {
        REQUIRE_THROWS_AS(Buffer(Float32, int64_t(1) << 62), RuntimeError);
        REQUIRE_THROWS_WITH(Buffer(Float32, int64_t(1) << 62), Contains("size in bytes overflows 64 bits"));
        REQUIRE_THROWS_WITH(Buffer(Float64, int64_t(1) << 61), Contains("size in bytes overflows 64 bits"));
    }
    SECTION("a tensor whose element count does not fit in 64 bits") {
        RaggedShape shape;
        shape.set(N, int64_t(1) << 32); // N * N = 2^64
        REQUIRE_THROWS_AS(shape.size_of(Out), RuntimeError);
        REQUIRE_THROWS_WITH(shape.size_of(Out), Contains("integer overflow") && Contains("does not fit in 64 bits"));
        REQUIRE_THROWS_WITH(Buffer::alloc(Out, shape), Contains("integer overflow"));
    }
    SECTION("a tensor whose element count fits but whose bytes do not (the issue's repro)") {
        RaggedShape shape;
        shape.set(N, int64_t(1) << 31); // 2^62 elements, 2^64 bytes
        REQUIRE(shape.size_of(Out) == int64_t(1) << 62);
        REQUIRE_THROWS_WITH(Buffer::alloc(Out, shape), Contains("size in bytes overflows 64 bits"));
    }
    SECTION("the generated checks compute sizes overflow-checked") {
        Kernel k = Pipeline({Out}, "overflow_check").compile();
        float a = 0, out = 7.0f;
        auto raw = [&](int64_t n, int64_t count) {
            return std::vector<cora_arg_t>{{"N", CORA_TYPE_INT64, 1, n, nullptr, 0},
                                           {"A", CORA_TYPE_FLOAT32, 0, 0, &a, count},
                                           {"Out", CORA_TYPE_FLOAT32, 0, 0, &out, count}};
        };
        std::string err;
        // N * N wraps to 0 = the counts: the check must still fail.
        REQUIRE(k.run_raw(raw(int64_t(1) << 32, 0), &err) == CORA_ERROR_ARGUMENT);
        REQUIRE_THAT(err, Contains("overflows 64-bit integers") && Contains("buffer for tensor 'A'"));
        // A count whose bytes cannot exist is not an array.
        REQUIRE(k.run_raw(raw(int64_t(1) << 31, int64_t(1) << 62), &err) == CORA_ERROR_ARGUMENT);
        REQUIRE_THAT(err, Contains("argument 1 ('A'): invalid array"));
        REQUIRE(out == 7.0f);
        REQUIRE(k.run_raw(raw(1, 1), &err) == CORA_OK);
        REQUIRE(out == 1.0f);
    }
}

TEST_CASE("prefix sums that overflow are rejected by the shape and by kernels that build them",
          "[reliability][overflow]") {
    // Nested raggedness: item b holds len(b)^2 elements; three items of 2^31 - 1 exceed 2^63.
    Dim b("b"), i("i"), j("j");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, INT32_MAX);
    Tensor A("A", {{b, B}, {i, len(b)}, {j, len(b)}});
    Func Out("Out", {{b, B}, {i, len(b)}, {j, len(b)}});
    Out.compute([&](Expr x, Expr y, Expr z) { return A(x, y, z) * 2.0f; });
    Out.parallel(b); // not the default fused rows: their maps (one entry per row) would not fit in memory
    std::vector<int32_t> huge = {INT32_MAX, INT32_MAX, INT32_MAX};

    RaggedShape shape;
    shape.set(B, 3).set(len, huge);
    REQUIRE_THROWS_AS(shape.size_of(Out), RuntimeError);
    REQUIRE_THROWS_WITH(shape.size_of(Out), Contains("overflow"));

    CompileOptions in_kernel; // as AOT libraries do: the kernel computes the offsets itself
    in_kernel.build_aux_in_kernel = true;
    Kernel k = Pipeline({Out}, "overflow_prefix").compile(in_kernel);
    float a = 0, out = 5.0f;
    std::vector<cora_arg_t> args = {{"B", CORA_TYPE_INT64, 1, 3, nullptr, 0},
                                    {"len", CORA_TYPE_INT32, 0, 0, huge.data(), 3},
                                    {"A", CORA_TYPE_FLOAT32, 0, 0, &a, 0},
                                    {"Out", CORA_TYPE_FLOAT32, 0, 0, &out, 0}};
    std::string err;
    REQUIRE(k.run_raw(args, &err) == CORA_ERROR_ARGUMENT);
    REQUIRE_THAT(err, Contains("overflows 64-bit integers"));
    REQUIRE(out == 5.0f);
}

TEST_CASE("paths with shell metacharacters are file names, never commands", "[reliability][jit]") {
    fs::path marker = fs::temp_directory_path() / ("cora-pwned-" + std::to_string(getpid()));
    fs::remove(marker);
    fs::path dir = fresh_dir("x';touch " + marker.string() + ";'$(touch " + marker.string() + ")");
    CompileOptions opts;
    opts.cache_dir = dir.string();
    Scale s(1.5f);
    Kernel k = Pipeline({s.Out}, "shell_injection").compile(opts);
    s.check(k, 1.5f);
    REQUIRE_FALSE(k.from_cache());
    REQUIRE_FALSE(fs::exists(marker));
    REQUIRE(fs::exists(only_library(dir)));
    fs::remove_all(dir);
}

TEST_CASE("a missing compiler is an environment error naming it", "[reliability][jit]") {
    Scale s(1.0f);
    CompileOptions opts;
    opts.cache_dir = fresh_dir("nocxx").string();
    opts.cxx = "cora-no-such-compiler++";
    REQUIRE_THROWS_AS(Pipeline({s.Out}, "no_compiler").compile(opts), EnvironmentError);
    REQUIRE_THROWS_WITH(Pipeline({s.Out}, "no_compiler").compile(opts),
                        Contains("cannot run 'cora-no-such-compiler++': no such program on PATH") &&
                            Contains("CORA_CXX"));
    opts.cxx = "/nonexistent/bin/c++";
    REQUIRE_THROWS_WITH(Pipeline({s.Out}, "no_compiler").compile(opts),
                        Contains("cannot run '/nonexistent/bin/c++': no such program"));
    opts.cxx = "   ";
    REQUIRE_THROWS_WITH(Pipeline({s.Out}, "no_compiler").compile(opts),
                        Contains("compiler command (CORA_CXX) is empty"));
    fs::remove_all(opts.cache_dir);
}

TEST_CASE("the kernel cache recompiles entries that are truncated, corrupted or replaced", "[reliability][cache]") {
    CompileOptions opts;
    opts.cache_dir = fresh_dir("corrupt").string();
    Scale s(4.0f);
    {
        // (Kernels are unloaded before their file is damaged: overwriting a mapped library in
        // place would damage the live mapping too, which no cache can defend against.)
        Kernel first = Pipeline({s.Out}, "cache_integrity").compile(opts);
        REQUIRE_FALSE(first.from_cache());
    }
    fs::path so = only_library(opts.cache_dir);
    std::string good;
    {
        std::ifstream f(so, std::ios::binary);
        good.assign(std::istreambuf_iterator<char>(f), {});
    }
    // A second, different kernel: a valid ELF with other code.
    std::string other;
    {
        CompileOptions o2;
        o2.cache_dir = fresh_dir("other").string();
        Scale t(-1.0f);
        Pipeline({t.Out}, "cache_integrity").compile(o2);
        std::ifstream f(only_library(o2.cache_dir), std::ios::binary);
        other.assign(std::istreambuf_iterator<char>(f), {});
        fs::remove_all(o2.cache_dir);
    }
    struct Damage {
        const char *what;
        std::string bytes;
    };
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x5a;
    for (const Damage &d :
         {Damage{"truncated to half", good.substr(0, good.size() / 2)}, Damage{"one byte flipped", flipped},
          Damage{"another kernel", other}, Damage{"empty", ""}}) {
        INFO(d.what);
        {
            std::ofstream f(so, std::ios::binary | std::ios::trunc);
            f << d.bytes;
        }
        Kernel k = Pipeline({s.Out}, "cache_integrity").compile(opts);
        REQUIRE_FALSE(k.from_cache());
        s.check(k, 4.0f);
        Kernel again = Pipeline({s.Out}, "cache_integrity").compile(opts); // healed
        REQUIRE(again.from_cache());
    }
    fs::remove_all(opts.cache_dir);
}

TEST_CASE("the kernel cache directory must be private", "[reliability][cache]") {
    Scale s(1.0f);
    CompileOptions opts;
    fs::path dir = fresh_dir("perm");
    opts.cache_dir = dir.string();

    SECTION("a new directory is created 0700") {
        Pipeline({s.Out}, "private_cache").compile(opts);
        struct stat st;
        REQUIRE(stat(dir.c_str(), &st) == 0);
        REQUIRE((st.st_mode & 0777) == 0700);
    }
    SECTION("one writable by others is refused") {
        fs::create_directories(dir);
        fs::permissions(dir, fs::perms::all);
        REQUIRE_THROWS_AS(Pipeline({s.Out}, "private_cache").compile(opts), EnvironmentError);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "private_cache").compile(opts),
                            Contains("is writable by others (mode 0777)") && Contains("chmod go-w"));
        REQUIRE(fs::is_empty(dir)); // nothing compiled into it
    }
    SECTION("one inside a directory that others can replace is refused") {
        fs::create_directories(dir / "cache");
        fs::permissions(dir, fs::perms::all);
        opts.cache_dir = (dir / "cache").string();
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "private_cache").compile(opts),
                            Contains("lies inside") && Contains("writable by others without the sticky bit"));
    }
    SECTION("one owned by another user is refused") {
        if (geteuid() != 0) {
            WARN("skipped: only root can give a directory to another user");
            return;
        }
        fs::create_directories(dir);
        REQUIRE(chmod(dir.c_str(), 0700) == 0);
        REQUIRE(chown(dir.c_str(), 65534, 65534) == 0);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "private_cache").compile(opts),
                            Contains("is owned by uid 65534, not by this user"));
    }
    SECTION("without HOME the default is a per-user directory") {
        ScopedEnv no_dir("CORA_CACHE_DIR", std::nullopt), no_xdg("XDG_CACHE_HOME", std::nullopt),
            no_home("HOME", std::nullopt), tmp("TMPDIR", dir.string());
        fs::create_directories(dir);
        REQUIRE(driver::default_cache_dir() == (dir / ("cora-cache-" + std::to_string(geteuid()))).string());
        opts.cache_dir.clear();
        Kernel k = Pipeline({s.Out}, "private_cache").compile(opts);
        s.check(k, 1.0f);
        struct stat st;
        REQUIRE(stat(driver::default_cache_dir().c_str(), &st) == 0);
        REQUIRE((st.st_mode & 0777) == 0700);
    }
    fs::remove_all(dir);
}

TEST_CASE("an output that shares memory with another argument is rejected", "[reliability][alias]") {
    Scale s(2.0f);
    Kernel k = Pipeline({s.Out}, "alias_check").compile();
    RaggedShape shape;
    shape.set(s.B, 2).set(s.len, {3, 4});
    Buffer a = Buffer::alloc(s.A, shape), out = Buffer::alloc(s.Out, shape);
    testing::fill_random(a, 9);
    std::vector<float> before(a.data<float>(), a.data<float>() + a.size());
    REQUIRE_THROWS_AS(k.run(shape, {{s.A, a}, {s.Out, a}}), RuntimeError);
    REQUIRE_THROWS_WITH(k.run(shape, {{s.A, a}, {s.Out, a}}),
                        Contains("output argument 4 ('Out') overlaps argument 3 ('A') in memory"));
    REQUIRE(std::equal(before.begin(), before.end(), a.data<float>()));

    // Partial overlap through the raw ABI: Out starts inside A.
    std::vector<cora_arg_t> args = k.make_args(shape, {{s.A, a}, {s.Out, out}});
    std::vector<float> big(20, 1.0f);
    args[3].data = big.data();
    args[4].data = big.data() + 6;
    std::string err;
    REQUIRE(k.run_raw(args, &err) == CORA_ERROR_ARGUMENT);
    REQUIRE_THAT(err, Contains("overlaps argument 3 ('A')"));
    // An output over a length array is caught too.
    args[4].data = args[1].data;
    REQUIRE(k.run_raw(args, &err) == CORA_ERROR_ARGUMENT);
    REQUIRE_THAT(err, Contains("overlaps argument 1 ('len')"));
    // Adjacent but disjoint buffers are fine.
    args[3].data = big.data();
    args[4].data = big.data() + 7;
    REQUIRE(k.run_raw(args, &err) == CORA_OK);
}

TEST_CASE("split_op and compute_at leave no reference cycles", "[reliability][leak]") {
    std::weak_ptr<const ir::TensorNode> head, tail, producer, consumer;
    {
        Dim b("b"), i("i");
        Param B("B", 1, 8);
        LengthArray len("len", B, 0, 40);
        Tensor A("A", {{b, B}, {i, len(b)}});
        Func P("P", {{b, B}, {i, len(b)}}), C("C", {{b, B}, {i, len(b)}}), S("S", {{b, B}, {i, len(b)}});
        P.compute([&](Expr x, Expr y) { return A(x, y) + 1.0f; });
        C.compute([&](Expr x, Expr y) { return P(x, y) * 2.0f; });
        P.compute_at(C, b);
        S.compute([&](Expr x, Expr y) { return A(x, y) - 1.0f; });
        Func t = S.split_op(i, len(b) / 2);
        head = S.node();
        tail = t.node();
        producer = P.node();
        consumer = C.node();
        // Both still work while they live.
        RaggedShape shape;
        shape.set(B, 2).set(len, {5, 8});
        Buffer a = Buffer::alloc(A, shape), c = Buffer::alloc(C, shape), sb = Buffer::alloc(S, shape);
        testing::fill_random(a, 1);
        Pipeline({C}, "no_cycles_at").compile().run(shape, {{A, a}, {C, c}});
        Pipeline({S}, "no_cycles_split").compile().run(shape, {{A, a}, {S, sb}});
        for (int64_t k = 0; k < a.size(); k++) {
            REQUIRE(c.at(k) == (a.at(k) + 1.0f) * 2.0f);
            REQUIRE(sb.at(k) == a.at(k) - 1.0f);
        }
    }
    REQUIRE(head.expired());
    REQUIRE(tail.expired());
    REQUIRE(producer.expired());
    REQUIRE(consumer.expired());
}

TEST_CASE("an op-split tail that outlives its Func says so", "[reliability][leak]") {
    Dim b("b"), i("i");
    Param B("B", 1, 8);
    LengthArray len("len", B, 0, 40);
    std::optional<Func> tail;
    {
        Tensor A("A", {{b, B}, {i, len(b)}});
        Func C("C", {{b, B}, {i, len(b)}});
        C.compute([&](Expr x, Expr y) { return A(x, y); });
        tail = C.split_op(i, len(b) / 2);
    }
    REQUIRE_THROWS_AS(tail->reorder_storage({i, b}), CompileError);
    REQUIRE_THROWS_WITH(tail->reorder_storage({i, b}), Contains("whose Func no longer exists"));
}

TEST_CASE("offsets that span the whole int64 range are rejected without overflow", "[reliability][overflow]") {
    // Found by fuzz_ragged_shape: the difference of two offsets overflowed before the check.
    Scale s(1.0f);
    RaggedShape shape;
    REQUIRE_THROWS_AS(shape.set_offsets(s.len, std::vector<int64_t>{0, 10, INT64_MIN}), RuntimeError);
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int64_t>{0, 10, INT64_MIN}),
                        Contains("decrease at entry 2"));
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int64_t>{0, -5, INT64_MAX}),
                        Contains("decrease at entry 1"));
    REQUIRE_THROWS_WITH(shape.set_offsets(s.len, std::vector<int64_t>{0, 0, INT64_MAX}), Contains("exceeds int32"));
    shape.set_offsets(s.len, std::vector<int64_t>{0, 3, 3, 10});
    REQUIRE(shape.lengths(s.len) == std::vector<int32_t>{3, 0, 7});
}

namespace {

/** An executable shell script at `path` (a stand-in compiler for the tests below). */
void write_script(const fs::path &path, const std::string &body) {
    {
        std::ofstream f(path);
        f << "#!/bin/sh\n" << body;
    }
    fs::permissions(path, fs::perms::owner_all);
}

/** The names in `dir` (recursively) that a compile left: scratch directories and temporaries. */
std::vector<std::string> temporaries(const fs::path &dir) {
    std::vector<std::string> found;
    for (auto &e : fs::recursive_directory_iterator(dir))
        if (e.path().filename().string().find(".tmp") != std::string::npos) found.push_back(e.path().string());
    return found;
}

/** A pid that no process has now: a child's, after it exited and was reaped. */
pid_t exited_pid() {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    int status = 0;
    waitpid(pid, &status, 0);
    return pid;
}

} // namespace

TEST_CASE("a compile leaves no temporary file behind, whether it fails, is killed or succeeds",
          "[reliability][cache]") {
    Scale s(2.0f);
    const fs::path work = fresh_dir("hygiene"), tmp = work / "tmp", bin = work / "bin";
    fs::create_directories(tmp);
    fs::create_directories(bin);
    ScopedEnv private_tmp("TMPDIR", tmp.string()); // where the compiler would put its objects
    CompileOptions opts;
    opts.cache_dir = (work / "cache").string();
    // A compiler that answers --version, drops an object file in TMPDIR as clang does, then does what
    // the test needs; the one-line probe of report_compile_failure is compiled by the real one.
    auto fake = [&](const std::string &name, const std::string &on_kernel) {
        fs::path p = bin / name;
        write_script(p, "case \"$*\" in *--version*) echo fake 1.0; exit 0;; esac\n"
                        "touch \"$TMPDIR/kernel-left.o\"\n"
                        "case \"$*\" in *probe.cpp*) exec c++ \"$@\";; esac\n" +
                            on_kernel);
        return p.string();
    };

    SECTION("the generated code is rejected: InternalError, scratch removed") {
        opts.cxx = fake("rejects", "echo 'kernel.cpp:1:1: error: expected expression'; exit 1\n");
        REQUIRE_THROWS_AS(Pipeline({s.Out}, "hygiene").compile(opts), InternalError);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "hygiene").compile(opts), Contains("failed to compile (a bug in cora") &&
                                                                            Contains("CORA_DEBUG=2") &&
                                                                            Contains("expected expression"));
    }
    SECTION("a compiler that fails on anything: EnvironmentError, not a bug in cora") {
        const fs::path p = bin / "broken";
        write_script(p, "case \"$*\" in *--version*) echo broken 1.0; exit 0;; esac\n"
                        "touch \"$TMPDIR/kernel-left.o\"; echo 'error: unsupported option -fopenmp'; exit 1\n");
        opts.cxx = p.string();
        REQUIRE_THROWS_AS(Pipeline({s.Out}, "hygiene").compile(opts), EnvironmentError);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "hygiene").compile(opts),
                            Contains("fails on any source with the kernels' flags") &&
                                Contains("unsupported option -fopenmp"));
    }
    SECTION("a full disk: EnvironmentError naming it") {
        opts.cxx = fake("full", "echo 'fatal error: error writing to kernel.o: No space left on device'; exit 1\n");
        REQUIRE_THROWS_AS(Pipeline({s.Out}, "hygiene").compile(opts), EnvironmentError);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "hygiene").compile(opts),
                            Contains("could not work (No space left on device)"));
    }
    SECTION("a permission refused: EnvironmentError naming it") {
        opts.cxx = fake("denied", "echo 'error: unable to open output file: Permission denied'; exit 1\n");
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "hygiene").compile(opts), Contains("could not work (Permission denied)"));
    }
    SECTION("a compiler killed mid-compile: EnvironmentError, its files removed") {
        opts.cxx = fake("killed", "kill -9 $$\n");
        REQUIRE_THROWS_AS(Pipeline({s.Out}, "hygiene").compile(opts), EnvironmentError);
        REQUIRE_THROWS_WITH(Pipeline({s.Out}, "hygiene").compile(opts), Contains("killed by signal 9"));
    }
    SECTION("a successful compile") {
        Kernel k = Pipeline({s.Out}, "hygiene").compile(opts);
        s.check(k, 2.0f);
        REQUIRE(fs::exists(only_library(opts.cache_dir)));
    }
    INFO("left: " << ::Catch::Detail::stringify(temporaries(work)));
    REQUIRE(temporaries(opts.cache_dir).empty());
    REQUIRE(fs::is_empty(tmp)); // nothing in the process's temporary directory either
    fs::remove_all(work);
}

TEST_CASE("the next compile sweeps the temporaries of compiles that were killed", "[reliability][cache]") {
    Scale s(3.0f);
    CompileOptions opts;
    const fs::path dir = fresh_dir("sweep");
    opts.cache_dir = dir.string();
    Pipeline({s.Out}, "sweep_seed").compile(opts); // creates the cache
    const pid_t dead = exited_pid();
    const std::string d = std::to_string(dead), me = std::to_string(getpid());
    // What a killed compile leaves: a scratch directory with a source and the compiler's object,
    // and an old-style temporary source; a live compile's scratch (this process's pid) must stay.
    const fs::path dead_scratch = dir / ("k0123.tmp" + d + "_0_1.d"),
                   dead_source = dir / ("k0123.tmp" + d + "_1_2.cpp"),
                   live_scratch = dir / ("k4567.tmp" + me + "_99_3.d"),
                   young_dead = dir / ("k89ab.tmp" + d + "_2_4.cpp");
    fs::create_directories(dead_scratch);
    fs::create_directories(live_scratch);
    std::ofstream(dead_scratch / "kernel.cpp") << "int x;";
    std::ofstream(dead_scratch / "k0123-a1b2c3.o") << "obj";
    std::ofstream(dead_source) << "int y;";
    std::ofstream(young_dead) << "int z;";
    const auto ten_minutes_ago = fs::file_time_type::clock::now() - std::chrono::minutes(10);
    for (const fs::path &p : {dead_scratch, dead_source, live_scratch})
        fs::last_write_time(p, ten_minutes_ago);
    Scale t(-3.0f); // another kernel: a cache miss, so a compile runs
    Kernel k = Pipeline({t.Out}, "sweep_trigger").compile(opts);
    REQUIRE_FALSE(k.from_cache());
    REQUIRE_FALSE(fs::exists(dead_scratch));
    REQUIRE_FALSE(fs::exists(dead_source));
    REQUIRE(fs::exists(live_scratch)); // its process runs
    REQUIRE(fs::exists(young_dead));   // two minutes' grace (another PID namespace's live compile)
    fs::remove_all(dir);
}

TEST_CASE("cache files that are links, FIFOs or endless are mismatches, never followed or waited on",
          "[reliability][cache]") {
    CompileOptions opts;
    const fs::path dir = fresh_dir("special");
    opts.cache_dir = dir.string();
    Scale s(5.0f);
    { Kernel first = Pipeline({s.Out}, "special_files").compile(opts); }
    const fs::path so = only_library(dir), sum = fs::path(so).replace_extension(".sum");
    const fs::path elsewhere = fresh_dir("special-copy");
    fs::create_directories(elsewhere);
    fs::copy_file(so, elsewhere / "copy.so");
    fs::copy_file(sum, elsewhere / "copy.sum");
    struct Case {
        const char *what;
        std::function<void()> damage;
    };
    const std::vector<Case> cases = {
        {"the checksum a link to /dev/zero (an endless read)",
         [&] {
             fs::remove(sum);
             fs::create_symlink("/dev/zero", sum);
         }},
        {"the library a FIFO (opening it would wait forever)",
         [&] {
             fs::remove(so);
             REQUIRE(mkfifo(so.c_str(), 0600) == 0);
         }},
        {"the library a link to a good copy elsewhere",
         [&] {
             fs::remove(so);
             fs::create_symlink(elsewhere / "copy.so", so);
         }},
        {"the checksum a link to a good copy elsewhere",
         [&] {
             fs::remove(sum);
             fs::create_symlink(elsewhere / "copy.sum", sum);
         }},
    };
    for (const Case &c : cases) {
        INFO(c.what);
        c.damage();
        Kernel k = Pipeline({s.Out}, "special_files").compile(opts);
        REQUIRE_FALSE(k.from_cache()); // rebuilt: the entry did not verify
        s.check(k, 5.0f);
        REQUIRE(fs::is_regular_file(fs::symlink_status(so)));
        REQUIRE(fs::is_regular_file(fs::symlink_status(sum)));
        REQUIRE(Pipeline({s.Out}, "special_files").compile(opts).from_cache()); // healed
    }
    // A note (the compiler's version line) that is a link to /dev/zero is ignored, not read.
    for (auto &e : fs::directory_iterator(dir))
        if (e.path().extension() == ".note") {
            fs::remove(e.path());
            fs::create_symlink("/dev/zero", e.path());
        }
    Scale t(6.0f);
    s.check(Pipeline({s.Out}, "special_files").compile(opts), 5.0f);
    t.check(Pipeline({t.Out}, "special_files_note").compile(opts), 6.0f);
    fs::remove_all(dir);
    fs::remove_all(elsewhere);
}

TEST_CASE("without HOME, a link planted where the fallback cache would be is refused", "[reliability][cache]") {
    const fs::path tmp = fresh_dir("fallback"), target = fresh_dir("fallback-target");
    fs::create_directories(tmp);
    fs::create_directories(target);
    REQUIRE(chmod(target.c_str(), 0700) == 0);
    ScopedEnv no_dir("CORA_CACHE_DIR", std::nullopt), no_xdg("XDG_CACHE_HOME", std::nullopt),
        no_home("HOME", std::nullopt), tmpdir("TMPDIR", tmp.string());
    const fs::path fallback = driver::default_cache_dir();
    REQUIRE(fallback == tmp / ("cora-cache-" + std::to_string(geteuid())));
    // The link points at a private directory of this very user: only the link itself gives it away.
    fs::create_directory_symlink(target, fallback);
    Scale s(1.0f);
    REQUIRE_THROWS_AS(Pipeline({s.Out}, "planted_link").compile(), EnvironmentError);
    REQUIRE_THROWS_WITH(Pipeline({s.Out}, "planted_link").compile(),
                        Contains("is a symbolic link") && Contains("not the directory cora creates there"));
    REQUIRE(fs::is_empty(target)); // nothing compiled into the link's target
    // A link the user names as the cache (CORA_CACHE_DIR, or here the options) is their choice, and is
    // followed to its (private) target.
    CompileOptions opts;
    opts.cache_dir = (tmp / "my-cache-link").string();
    fs::create_directory_symlink(target, opts.cache_dir);
    s.check(Pipeline({s.Out}, "planted_link").compile(opts), 1.0f);
    REQUIRE_FALSE(fs::is_empty(target));
    fs::remove(fallback);
    fs::remove_all(tmp);
    fs::remove_all(target);
}
