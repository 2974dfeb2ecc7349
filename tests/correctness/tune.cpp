/** Pipeline::tune (src/driver/Tune.cpp) and its table (src/driver/TuningTable.cpp): candidates
 * measured and checked, the winner recorded and taken from the table afterwards (the same
 * kernel), a corrupt or truncated table rebuilt, an entry that no longer fits measured again,
 * the budget, and the errors. Also CompileOptions::contraction_tiles given by hand. */
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "common/ragged_testing.h"
#include "cora/cora.h"
#include "driver/TuningTable.h"

using namespace cora;
using Catch::Matchers::Contains;

namespace {

/** A grouped GEMM over ragged token counts: Y(e, t, n) = sum_r X(e, t, r) W(e, r, n). */
struct GroupedGemm {
    Dim e{"e"}, t{"t"}, r{"r"}, n{"n"};
    Param E{"E", 1, 8};
    LengthArray count{"count", E, 0, 40};
    Tensor X{"X", {{e, E}, {t, count(e)}, {r, 300}}};
    Tensor W{"W", {{e, E}, {r, 300}, {n, 32}}};
    Func Y{"Y", {{e, E}, {t, count(e)}, {n, 32}}};
    GroupedGemm() {
        Y.compute([&](Expr a, Expr b, Expr c) { return sum(r, 300, X(a, b, r) * W(a, r, c)); });
    }
    TuneSample sample(std::vector<int32_t> counts) const {
        RaggedShape s;
        s.set(E, (int64_t)counts.size()).set(count, std::move(counts));
        return TuneSample(s);
    }
    void bind(RaggedShape &s, const std::vector<int32_t> &l) const { s.set(E, (int64_t)l.size()).set(count, l); }
};

std::string temp_table(const std::string &name) {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("cora-tune-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::filesystem::path p = dir / name;
    std::filesystem::remove(p);
    return p.string();
}

TuneOptions quick(const std::string &table) {
    TuneOptions o;
    o.table = table;
    o.reps = 1;
    o.compile.vector_bits = 256; // the same candidates on every machine
    return o;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

TEST_CASE("tune measures checked candidates, records the winner, and takes it from the table next time", "[tune]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_grouped");
    std::vector<TuneSample> samples = {g.sample({17, 0, 33, 5}), g.sample({40, 1})};
    const std::string table = temp_table("measured.txt");
    TuneResult first = p.tune(samples, quick(table));
    INFO(first.report);
    REQUIRE(first.measured >= 3); // the default tile, others, the untiled nest
    REQUIRE(first.from_table == 0);
    REQUIRE_FALSE(first.table_rebuilt);
    REQUIRE_THAT(first.report, Contains("Y [Y|"));
    REQUIRE_THAT(first.report, Contains("untiled"));
    REQUIRE(first.options.contraction_tiles.count("Y") == 1);
    std::string problem;
    driver::TuningTable saved = driver::TuningTable::load(table, &problem);
    REQUIRE(problem.empty());
    REQUIRE(saved.size() == 1);
    const std::string key = tuning_key(p, "Y", samples, first.options);
    REQUIRE(saved.find(key) != nullptr);
    REQUIRE(saved.find(key)->tile == first.options.contraction_tiles.at("Y"));
    testing::check_against_reference(
        p, first.kernel, {g.X, g.W}, [&](RaggedShape &s, const std::vector<int32_t> &l) { g.bind(s, l); }, 40, 4, 1101);

    // Deterministic given the table: nothing measured, the same choice, the same kernel.
    TuneResult second = p.tune(samples, quick(table));
    INFO(second.report);
    REQUIRE(second.measured == 0);
    REQUIRE(second.from_table == 1);
    REQUIRE_THAT(second.report, Contains("from the table"));
    REQUIRE(second.options.contraction_tiles == first.options.contraction_tiles);
    REQUIRE(second.kernel.lowered() == first.kernel.lowered());
    // compile() with the returned options gives the same kernel without the table.
    REQUIRE(p.compile(second.options).lowered() == first.kernel.lowered());
    // retune measures again.
    TuneOptions again = quick(table);
    again.retune = true;
    REQUIRE(p.tune(samples, again).measured >= 3);
}

TEST_CASE("tune compiles the table's choice as it is written", "[tune]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_from_table");
    std::vector<TuneSample> samples = {g.sample({9, 30})};
    const std::string table = temp_table("chosen.txt");
    TuneOptions o = quick(table);
    driver::TuningTable t;
    t.set(tuning_key(p, "Y", samples, o.compile), driver::TuningEntry{ContractionTile{true, 8, 1, 128}, 1.0});
    t.save(table);
    TuneResult r = p.tune(samples, o);
    INFO(r.report);
    REQUIRE(r.measured == 0);
    REQUIRE(r.from_table == 1);
    REQUIRE(r.options.contraction_tiles.at("Y") == ContractionTile{true, 8, 1, 128});
    REQUIRE_THAT(r.kernel.lowered(), Contains("unrolled for t_i in [0, 0 + 8)"));
    REQUIRE_THAT(r.kernel.lowered(), Contains("vectorized for n_i in [0, 0 + 8)"));
    REQUIRE_THAT(r.kernel.lowered(), Contains("W_cache[float32 * 1024]")); // 128 deep x 8 columns
    testing::check_against_reference(
        p, r.kernel, {g.X, g.W}, [&](RaggedShape &s, const std::vector<int32_t> &l) { g.bind(s, l); }, 40, 8, 1102);
    // A key for other sizes (another power-of-two bucket) is not this entry.
    REQUIRE(tuning_key(p, "Y", {g.sample({40, 40, 40, 40, 40, 40, 40, 40})}, o.compile) !=
            tuning_key(p, "Y", samples, o.compile));
}

TEST_CASE("a corrupt or truncated tuning table is rebuilt, not trusted", "[tune]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_corrupt");
    std::vector<TuneSample> samples = {g.sample({12, 3})};
    const std::string table = temp_table("corrupt.txt");
    TuneOptions o = quick(table);
    const std::string key = tuning_key(p, "Y", samples, o.compile);
    driver::TuningTable t;
    t.set(key, driver::TuningEntry{ContractionTile{true, 8, 1, 128}, 1.0});
    t.save(table);
    const std::string good = read_file(table);
    auto write = [&](const std::string &text) { std::ofstream(table, std::ios::trunc) << text; };
    const std::vector<std::pair<std::string, std::string>> damaged = {
        {"an edited entry", std::string(good).replace(good.find("\t1 8 1 128"), 10, "\t1 2 1 128")},
        {"a truncated write", good.substr(0, good.find("end "))},
        {"another format", "not a table\n"},
        {"an empty file", ""},
        {"a malformed entry", "cora-tuning-table 1\n" + key + "\t1 eight 1 128 1\nend 1 0\n"},
    };
    for (const auto &[what, text] : damaged) {
        DYNAMIC_SECTION(what) {
            write(text);
            std::string problem;
            (void)driver::TuningTable::load(table, &problem);
            REQUIRE_FALSE(problem.empty());
            TuneResult r = p.tune(samples, o);
            INFO(r.report);
            REQUIRE(r.table_rebuilt);
            REQUIRE_THAT(r.report, Contains("is corrupt"));
            REQUIRE_THAT(r.report, Contains("rebuilt, not trusted"));
            REQUIRE(r.from_table == 0);
            REQUIRE(r.measured >= 3);
            // The edited entry (2 rows) was not used; the rebuilt table reads back.
            REQUIRE(r.options.contraction_tiles.at("Y") != ContractionTile{true, 2, 1, 128});
            driver::TuningTable rebuilt = driver::TuningTable::load(table, &problem);
            REQUIRE(problem.empty());
            REQUIRE(rebuilt.find(key) != nullptr);
        }
    }
}

TEST_CASE("a table entry that no longer fits its Func is measured again", "[tune]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_stale");
    std::vector<TuneSample> samples = {g.sample({5, 6})};
    const std::string table = temp_table("stale.txt");
    TuneOptions o = quick(table);
    o.budget_seconds = 0;
    driver::TuningTable t;
    // 8 vectors of 8 floats: 64 columns, wider than Y's row of 32.
    t.set(tuning_key(p, "Y", samples, o.compile), driver::TuningEntry{ContractionTile{true, 4, 8, 16}, 1.0});
    t.save(table);
    TuneResult r = p.tune(samples, o);
    INFO(r.report);
    REQUIRE_THAT(r.report, Contains("no longer fits"));
    REQUIRE_THAT(r.report, Contains("do not divide its row of 32"));
    // A budget of 0: the default tile alone, used but not recorded.
    REQUIRE(r.measured == 1);
    REQUIRE_THAT(r.report, Contains("budget of 0 s spent"));
    REQUIRE_THAT(r.report, Contains("not recorded"));
    REQUIRE(r.options.contraction_tiles.at("Y") == ContractionTile{true, 4, 2, 256});
    std::string problem;
    REQUIRE(driver::TuningTable::load(table, &problem).find(tuning_key(p, "Y", samples, o.compile))->tile ==
            ContractionTile{true, 4, 8, 16}); // the table was not rewritten
}

TEST_CASE("tune errors, and tiles given by hand", "[tune][error]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_errors");
    const std::string table = temp_table("errors.txt");
    REQUIRE_THROWS_AS(p.tune({}, quick(table)), RuntimeError);
    REQUIRE_THROWS_WITH(p.tune({}, quick(table)), Contains("no samples to measure on"));
    TuneOptions zero = quick(table);
    zero.reps = 0;
    REQUIRE_THROWS_WITH(p.tune({g.sample({1})}, zero), Contains("reps must be positive, got 0"));
    TuneOptions gpu = quick(table);
    gpu.compile.backend = "cuda-emulated";
    REQUIRE_THROWS_AS(p.tune({g.sample({1})}, gpu), CompileError);
    REQUIRE_THROWS_WITH(p.tune({g.sample({1})}, gpu), Contains("only the cpu backend is tuned"));
    // Integer inputs are not filled by the tuner.
    Dim i("i"), r("r"), n("n");
    Param M("M", 1, 64);
    Tensor A("A", {{i, M}, {r, 16}}), B("B", {{r, 16}, {n, 16}}), Rows("Rows", {{i, M}}, Int32);
    Rows.index_range(0, 63);
    Func G("G", {{i, M}, {n, 16}});
    G.compute([&](Expr a, Expr c) { return sum(r, 16, A(a, r) * B(r, c)) + cast(Float32, Rows(a)); });
    RaggedShape s;
    s.set(M, 5);
    REQUIRE_THROWS_WITH(Pipeline({G}, "tune_int_input").tune({TuneSample(s)}, quick(table)),
                        Contains("input 'Rows' holds int32; the tuner fills only float32 inputs"));
    // contraction_tiles by hand: checked against the Func.
    CompileOptions o;
    o.vector_bits = 256;
    o.contraction_tiles["Y"] = ContractionTile{true, 4, 3, 256};
    REQUIRE_THROWS_AS(p.compile(o), CompileError);
    REQUIRE_THROWS_WITH(p.compile(o),
                        Contains("contraction_tiles['Y']: vectors is 3; expected 0 (the default), 1, 2, 4 or 8"));
    o.contraction_tiles["Y"] = ContractionTile{true, 17, 1, 256};
    REQUIRE_THROWS_WITH(p.compile(o), Contains("rows is 17; expected 1 to 16"));
    o.contraction_tiles["Y"] = ContractionTile{true, 4, 4, 1024};
    REQUIRE_THROWS_WITH(p.compile(o), Contains("panel is 1024; expected 1 to 512 for a tile of 32 columns"));
    o.contraction_tiles["Y"] = ContractionTile{false, 4, 0, 256};
    REQUIRE(p.compile(o).lowered().find("Y_tile") == std::string::npos);
    o.contraction_tiles["Z"] = ContractionTile{};
    REQUIRE_THROWS_WITH(p.compile(o), Contains("contraction_tiles['Z']: no Func of the pipeline by that name is a "
                                               "contraction left unscheduled"));
}

TEST_CASE("a samples file gives the tuner its shapes, and every mistake in it names the line", "[tune][error]") {
    GroupedGemm g;
    Pipeline p({g.Y}, "tune_samples_file");
    const std::string path = temp_table("samples.txt");
    auto write = [&](const std::string &text) {
        std::ofstream(path) << text;
        return path;
    };
    std::vector<TuneSample> samples =
        read_tune_samples(p, write("# shapes\nE=3 count=5,0,40\n\n  count=7 E=1   # reordered\n"));
    REQUIRE(samples.size() == 2);
    REQUIRE(samples[0].shape.value(g.E) == 3);
    REQUIRE(samples[0].shape.lengths(g.count) == std::vector<int32_t>{5, 0, 40});
    REQUIRE(samples[1].shape.value(g.E) == 1);
    REQUIRE(samples[1].shape.lengths(g.count) == std::vector<int32_t>{7});
    REQUIRE(samples[0].bindings.empty()); // the tuner allocates and fills the buffers
    // The file's shapes tune as shapes built in C++ do (a budget of 0: the default tile alone, the
    // cheapest complete run; the other tests measure every candidate).
    TuneOptions no_budget = quick(temp_table("samples-table.txt"));
    no_budget.budget_seconds = 0;
    TuneResult r = p.tune(samples, no_budget);
    INFO(r.report);
    REQUIRE(r.measured == 1);
    REQUIRE(r.options.contraction_tiles.count("Y") == 1);

    struct Bad {
        std::string text, message;
    };
    const std::vector<Bad> bad = {
        {"E=2 count=1,2\nE=2 counts=1,2\n",
         ":2: 'counts' is not a param or length array of pipeline 'tune_samples_file' (it has: E, count)"},
        {"E=2 count=1,2 E=2\n", ":1: 'E' is given twice"},
        {"E=two count=1,2\n", ":1: param 'E': 'two' is not an integer"},
        {"E=9 count=1,2\n", ":1: param 'E' = 9 is outside its declared range [1, 8]"},
        {"E=2 count=1,x\n", ":1: length array 'count': 'x' is not a 32-bit integer"},
        {"E=2 count=1,99999999999\n", ":1: length array 'count': '99999999999' is not a 32-bit integer"},
        {"E=2 count=1,41\n", ":1: "},
        {"E=2 count=1,2,3\n", ":1: "},
        {"E=2\n", ":1: no value for 'count' (each line gives every one of: E, count)"},
        {"E=2 count\n", ":1: expected name=value, got 'count'"},
        {"# nothing\n\n", ": no samples (one line per shape, name=value for each of: E, count)"},
    };
    for (const Bad &b : bad) {
        INFO(b.text);
        REQUIRE_THROWS_AS(read_tune_samples(p, write(b.text)), RuntimeError);
        REQUIRE_THROWS_WITH(read_tune_samples(p, write(b.text)), Contains(path + b.message));
    }
    // The range and count errors name the array and the value.
    REQUIRE_THROWS_WITH(read_tune_samples(p, write("E=2 count=1,41\n")), Contains("count") && Contains("41"));
    REQUIRE_THROWS_WITH(read_tune_samples(p, write("E=2 count=1,2,3\n")), Contains("count") && Contains("3"));
    REQUIRE_THROWS_WITH(read_tune_samples(p, path + ".missing"), Contains(".missing: cannot open the samples file"));

    // A pipeline of constant sizes: one sample, the empty shape; any name is an error.
    Dim fi("fi"), fr("fr"), fn("fn");
    Tensor FA("FA", {{fi, 8}, {fr, 16}}), FB("FB", {{fr, 16}, {fn, 16}});
    Func C("C", {{fi, 8}, {fn, 16}});
    C.compute([&](Expr a, Expr c) { return sum(fr, 16, FA(a, fr) * FB(fr, c)); });
    Pipeline fixed({C}, "fixed_sizes");
    REQUIRE(read_tune_samples(fixed, write("# constant sizes\n")).size() == 1);
    REQUIRE_THROWS_WITH(read_tune_samples(fixed, write("M=3\n")),
                        Contains(":1: 'M' is not a param or length array of pipeline 'fixed_sizes' (it has: none)"));
}
