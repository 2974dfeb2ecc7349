/** \file A samples file for the tuner: one shape per line, `name=value` for each of the
 * pipeline's params (an integer) and length arrays (comma-separated integers). It is what a
 * generator measures on at build time (`--tune`, cora_add_library's TUNE_SAMPLES), where there is
 * no program to build shapes in C++. Every name is found among the arguments of the pipeline's
 * entry (the same Param and LengthArray nodes a RaggedShape binds), each value checked against its
 * declared range and each array's count against its count expression (a pipeline of constant sizes
 * has one sample, the empty shape, and its file only comments); a mistake is a RuntimeError
 * naming the file, the line and the name. Tests: tests/correctness/tune.cpp, tests/CMakeLists.txt
 * (generator_tune_*). */
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cora/Tune.h"
#include "driver/Lowering.h"
#include "runtime/RaggedShapeImpl.h"
#include "util/Error.h"

namespace cora {

namespace {

/** `text` as an integer, or false when it is not exactly one. */
bool parse_integer(const std::string &text, int64_t *out) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE) return false;
    *out = v;
    return true;
}

} // namespace

std::vector<TuneSample> read_tune_samples(const Pipeline &p, const std::string &path) {
    std::ifstream in(path);
    if (!in) throw_runtime_error(path, ": cannot open the samples file");
    // The entry's params and length arrays, by name (the lowering finds every one the pipeline reads).
    ir::LoweredModule m = driver::lower_pipeline(p, p.name(), CompileOptions{});
    std::map<std::string, const ir::ModuleArg *> named;
    std::string names;
    for (const ir::ModuleArg &a : m.entry().args)
        if (a.kind == ArgumentKind::Param || a.kind == ArgumentKind::LengthArray) {
            named[a.name] = &a;
            names += (names.empty() ? "" : ", ") + a.name;
        }
    std::vector<TuneSample> samples;
    std::string line;
    for (int line_no = 1; std::getline(in, line); line_no++) {
        auto fail = [&](const auto &...parts) { throw_runtime_error(path, ":", line_no, ": ", parts...); };
        if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        RaggedShape shape;
        RaggedShape::Impl &impl = *shape_impl(shape);
        std::set<std::string> given;
        for (std::string word; words >> word;) {
            const size_t eq = word.find('=');
            if (eq == std::string::npos || eq == 0) fail("expected name=value, got '", word, "'");
            const std::string name = word.substr(0, eq), value = word.substr(eq + 1);
            auto it = named.find(name);
            if (it == named.end())
                fail("'", name, "' is not a param or length array of pipeline '", p.name(),
                     "' (it has: ", names.empty() ? "none" : names, ")");
            if (!given.insert(name).second) fail("'", name, "' is given twice");
            const ir::ModuleArg &arg = *it->second;
            if (arg.kind == ArgumentKind::Param) {
                int64_t v = 0;
                if (!parse_integer(value, &v)) fail("param '", name, "': '", value, "' is not an integer");
                if (v < arg.var->min_value || v > arg.var->max_value)
                    fail("param '", name, "' = ", v, " is outside its declared range [", arg.var->min_value, ", ",
                         arg.var->max_value, "]");
                impl.params[arg.var.get()] = v;
                continue;
            }
            std::vector<int32_t> values;
            std::stringstream items(value);
            for (std::string item; std::getline(items, item, ',');) {
                int64_t v = 0;
                if (!parse_integer(item, &v) || v < INT32_MIN || v > INT32_MAX)
                    fail("length array '", name, "': '", item, "' is not a 32-bit integer");
                values.push_back(int32_t(v));
            }
            try {
                impl.bind_input_array(*arg.uf, std::move(values));
            } catch (const RuntimeError &e) {
                fail(e.what());
            }
        }
        if (given.empty()) continue; // a blank or comment line
        for (const auto &[name, arg] : named)
            if (!given.count(name)) fail("no value for '", name, "' (each line gives every one of: ", names, ")");
        try {
            impl.validate_counts();
        } catch (const RuntimeError &e) {
            fail(e.what());
        }
        samples.emplace_back(shape);
    }
    // A pipeline of constant sizes has one shape, the empty one (its file holds only comments).
    if (samples.empty() && named.empty()) samples.emplace_back(RaggedShape());
    if (samples.empty())
        throw_runtime_error(path, ": no samples (one line per shape, name=value for each of: ", names, ")");
    return samples;
}

} // namespace cora
