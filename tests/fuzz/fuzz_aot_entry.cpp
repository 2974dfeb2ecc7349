// Fuzz target: the C entry points of AOT libraries (tests/aot: aot_projection with fusion maps
// and bulk padding; aot_scores with nested raggedness, longest-first order and CPU dispatch) fed
// arbitrary params, lengths, counts, NULL pointers and error buffers. Arrays are exact-size
// allocations, so an access a check should have prevented is an AddressSanitizer report. A call
// that succeeds must compute the right values (all-ones operands: known results).
#include <algorithm>
#include <cstring>
#include <vector>

#include "aot_projection.h"
#include "aot_scores.h"
#include "fuzz_input.h"

namespace {

[[noreturn]] void finding() { __builtin_trap(); }

/** `count` elements (bounded by the fuzzer so allocations stay small), or NULL. */
template <typename T> struct Array {
    std::vector<T> v;
    T *ptr = nullptr;
    int64_t count = 0;
    void make(cora::fuzz::FuzzInput &in, int64_t right_count, T fill) {
        switch (in.take<uint8_t>() % 8) {
        case 0: count = in.in_range(0, 4096); break;
        case 1: count = right_count + in.in_range(-2, 2); break;
        case 2: count = in.interesting_int64(); break; // passed with NULL data below when unusable
        default: count = right_count; break;
        }
        if (count < 0 || count > (1 << 20) || in.take<uint8_t>() % 16 == 0) {
            ptr = nullptr;
            return;
        }
        v.assign((size_t)count, fill);
        ptr = v.empty() ? nullptr : v.data();
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cora::fuzz::FuzzInput in(data, size);
    const bool scores = in.take<uint8_t>() % 2;
    const int64_t b = in.take<uint8_t>() % 8 == 0 ? in.interesting_int64() : in.in_range(1, 6);
    std::vector<int32_t> len((size_t)in.in_range(0, 8));
    const int32_t max_len = scores ? 64 : 100;
    for (int32_t &l : len)
        l = in.take<uint8_t>() % 8 == 0 ? in.interesting_int32() : (int32_t)in.in_range(0, max_len);
    const int64_t len_count = in.take<uint8_t>() % 8 == 0 ? in.in_range(0, 8) : (int64_t)len.size();
    const int32_t *len_ptr = len_count > (int64_t)len.size() ? nullptr : len.data(); // never read past `len`
    char message[128];
    char *error = in.take<uint8_t>() % 4 == 0 ? nullptr : message;
    int32_t error_size = error ? (int32_t)in.in_range(0, 128) : (int32_t)in.in_range(-2, 64);

    // What a correct caller would pass, when the shape is valid.
    // Sized by the headers' counts: the query writes every array argument (tensors, then `len`).
    constexpr int kSizes = std::max((int)aot_scores_size_count, (int)aot_projection_size_count);
    int64_t sizes[kSizes] = {};
    bool shape_ok = scores ? aot_scores_buffer_sizes(b, len_ptr, len_count, sizes, error, error_size) == 0
                           : aot_projection_buffer_sizes(b, len_ptr, len_count, sizes, error, error_size) == 0;
    if (shape_ok)
        for (int64_t s : sizes)
            if (s < 0) finding();

    Array<float> x, w, out;
    x.make(in, sizes[0], 1.0f);
    w.make(in, sizes[1], 1.0f);
    out.make(in, sizes[2], -7.0f);
    int32_t status = scores ? aot_scores(b, len_ptr, len_count, x.ptr, x.count, w.ptr, w.count, out.ptr, out.count,
                                         error, error_size)
                            : aot_projection(b, len_ptr, len_count, x.ptr, x.count, w.ptr, w.count, out.ptr, out.count,
                                             error, error_size);
    if (status != 0) {
        for (float v : out.v) // rejected: nothing written
            if (v != -7.0f) finding();
        return 0;
    }
    if (!shape_ok) finding(); // the size query rejected a shape the kernel accepted
    // All-ones operands: projection rows sum 12 products; scores are scale (1/8) * 8 products.
    const float want = scores ? 1.0f : 12.0f;
    for (float v : out.v)
        if (v != want && !(v == -7.0f && !scores)) finding(); // (projection storage has padding rows)
    return 0;
}
