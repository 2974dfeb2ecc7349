// Fuzz target: the apps' data-file readers (apps/common/data_files.h). Any byte string either
// parses into values inside their declared ranges, exactly as many as asked for, or is rejected
// with a UsageError; nothing else may happen (no other exception, no crash, no sanitizer report).
#include <sstream>

#include "common/data_files.h"
#include "fuzz_input.h"

using cora::apps::UsageError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cora::fuzz::FuzzInput in(data, size);
    const int64_t count = in.in_range(0, 40), start = in.in_range(0, 5);
    const int32_t lo = (int32_t)in.in_range(-5, 5), hi = lo + (int32_t)in.in_range(0, 600);
    const std::string text = in.rest();
    {
        std::istringstream s(text);
        try {
            std::vector<int32_t> l = cora::apps::parse_lengths(s, "fuzz", count, lo, hi);
            if ((int64_t)l.size() != count) __builtin_trap();
            for (int32_t v : l)
                if (v < lo || v > hi) __builtin_trap();
        } catch (const UsageError &e) {
            if (std::string(e.what()).rfind("fuzz", 0) != 0) __builtin_trap(); // names the source
        }
    }
    {
        std::istringstream s(text);
        try {
            const int32_t max_dim = hi < 0 ? 0 : hi;
            auto shapes = cora::apps::parse_gemm_shapes(s, "fuzz", count, start, max_dim);
            if ((int64_t)shapes.size() != count) __builtin_trap();
            for (auto &sh : shapes)
                for (int32_t v : sh)
                    if (v < 0 || v > max_dim) __builtin_trap();
        } catch (const UsageError &e) {
            if (std::string(e.what()).rfind("fuzz", 0) != 0) __builtin_trap();
        }
    }
    return 0;
}
