#include "util/Hash.h"

#include <cstdio>

namespace cora::util {

std::string content_hash(std::string_view text) {
    uint64_t h1 = 14695981039346656037ull, h2 = 0x9e3779b97f4a7c15ull;
    for (unsigned char c : text) {
        h1 = (h1 ^ c) * 1099511628211ull;
        h2 = (h2 ^ c) * 0x100000001b3ull;
        h2 ^= h2 >> 29;
    }
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
    return buf;
}

} // namespace cora::util
