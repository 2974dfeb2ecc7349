#include "driver/Compiler.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "driver/Subprocess.h"
#include "util/Error.h"

namespace cora::driver {

namespace fs = std::filesystem;

namespace {

bool on_path(const std::string &prog) {
    const char *path = std::getenv("PATH");
    if (!path) return false;
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        fs::path cand = fs::path(p.substr(start, end - start)) / prog;
        if (access(cand.c_str(), X_OK) == 0) return true;
        start = end + 1;
    }
    return false;
}

} // namespace

std::string default_cxx() {
    if (const char *c = std::getenv("CORA_CXX"); c && *c) return c;
    return on_path("clang++") ? "clang++" : "c++";
}

std::vector<std::string> compiler_command(const std::string &cxx) {
    std::vector<std::string> words = split_words(cxx.empty() ? default_cxx() : cxx);
    if (words.empty()) throw EnvironmentError("cora: the C++ compiler command (CORA_CXX) is empty");
    return words;
}

std::vector<std::string> sanitizer_flags() {
#ifdef CORA_KERNEL_SANITIZE_FLAGS
    return split_words(CORA_KERNEL_SANITIZE_FLAGS);
#else
    return {};
#endif
}

std::vector<std::string> with_args(const std::vector<std::string> &compiler, const std::vector<std::string> &args) {
    std::vector<std::string> v = compiler;
    v.insert(v.end(), args.begin(), args.end());
    return v;
}

std::string toolchain_identity(const std::vector<std::string> &compiler) {
    static std::mutex mu;
    static std::map<std::vector<std::string>, std::string> known;
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find(compiler);
    if (it != known.end()) return it->second;
    ProcessResult r = run_process(with_args(compiler, {"--version"}));
    if (!r.ok())
        throw EnvironmentError(concat("cora: the C++ compiler '", format_command(compiler),
                                      "' does not run (`--version` failed): ", r.output.substr(0, 1000)));
    std::string id = r.output;
    std::ifstream cpu("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpu, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) id += line + "\n";
        if (line.empty()) break; // the first processor is enough
    }
    return known[compiler] = id;
}

} // namespace cora::driver
