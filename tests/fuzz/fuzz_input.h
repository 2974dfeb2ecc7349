/** \file Reading structured values out of a fuzzer's byte string: each call consumes bytes and
 * returns zero once they run out, so every input decodes to something. */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cora::fuzz {

class FuzzInput {
public:
    FuzzInput(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}

    bool empty() const { return p_ == end_; }
    size_t left() const { return (size_t)(end_ - p_); }

    template <typename T> T take() {
        T v{};
        size_t n = std::min(sizeof(T), left());
        std::memcpy(&v, p_, n);
        p_ += n;
        return v;
    }
    /** An integer in [lo, hi] (hi - lo < 2^63). */
    int64_t in_range(int64_t lo, int64_t hi) {
        uint64_t span = (uint64_t)(hi - lo) + 1;
        uint64_t r = take<uint64_t>();
        return span == 0 ? (int64_t)r : lo + (int64_t)(r % span);
    }
    /** Mostly small values, sometimes extreme ones: the edges where checks go wrong. */
    int64_t interesting_int64() {
        switch (take<uint8_t>() % 8) {
        case 0: return take<int64_t>();
        case 1: return INT64_MAX - in_range(0, 3);
        case 2: return INT64_MIN + in_range(0, 3);
        case 3: return (int64_t)1 << in_range(0, 62);
        case 4: return -in_range(0, 10);
        default: return in_range(0, 40);
        }
    }
    int32_t interesting_int32() {
        switch (take<uint8_t>() % 6) {
        case 0: return take<int32_t>();
        case 1: return INT32_MAX - (int32_t)in_range(0, 3);
        case 2: return (int32_t)-in_range(0, 5);
        default: return (int32_t)in_range(0, 40);
        }
    }
    std::string rest() {
        std::string s(reinterpret_cast<const char *>(p_), left());
        p_ = end_;
        return s;
    }

private:
    const uint8_t *p_, *end_;
};

} // namespace cora::fuzz
