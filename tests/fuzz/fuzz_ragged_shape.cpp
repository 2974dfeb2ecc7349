// Fuzz target: the ragged shape (the host prelude) built from arbitrary params, lengths and
// offsets. Either a call is rejected with cora::RuntimeError, or every size it reports equals the
// brute-force count from the lengths, and packing/unpacking padded data round-trips.
#include <cora/cora.h>

#include <numeric>

#include "fuzz_input.h"

using namespace cora;

namespace {

struct Shapes {
    Dim batch{"batch"}, seq{"seq"}, i{"i"}, j{"j"}, k{"k"}, tok{"tok"};
    Param B{"B", 1, 16};
    LengthArray len{"len", B, 0, 50};
    Tensor flat{"flat", {{batch, B}, {seq, len(batch)}}};
    Tensor square{"square", {{batch, B}, {i, len(batch)}, {j, len(batch)}}};
    Tensor triangle{"triangle", {{batch, B}, {i, len(batch)}, {j, min(i + 1, len(batch))}}};
    Tensor packed{"packed", {{batch, B}, {seq, len(batch)}, {k, 7}}};
    Shapes() { packed.fuse_storage(batch, seq, tok, 16); }
};

[[noreturn]] void finding() { __builtin_trap(); }

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static Shapes s; // definitions are not what is fuzzed: build them once
    cora::fuzz::FuzzInput in(data, size);
    RaggedShape shape;
    try {
        const int64_t b = in.take<uint8_t>() % 4 == 0 ? in.interesting_int64() : in.in_range(1, 16);
        const size_t n = (size_t)in.in_range(0, 20);
        switch (in.take<uint8_t>() % 3) {
        case 0: {
            std::vector<int32_t> l(n);
            for (int32_t &x : l)
                x = in.take<uint8_t>() % 3 == 0 ? in.interesting_int32() : (int32_t)in.in_range(0, 50);
            shape.set(s.len, l);
            break;
        }
        case 1: {
            std::vector<int32_t> o(n);
            int32_t acc = 0;
            for (int32_t &x : o)
                x = in.take<uint8_t>() % 4 == 0 ? in.interesting_int32() : (acc += (int32_t)in.in_range(0, 50));
            if (!o.empty() && in.take<uint8_t>() % 2) o[0] = 0;
            shape.set_offsets(s.len, o);
            break;
        }
        default: {
            std::vector<int64_t> o(n);
            int64_t acc = 0;
            for (int64_t &x : o)
                x = in.take<uint8_t>() % 4 == 0 ? in.interesting_int64() : (acc += in.in_range(0, 50));
            if (!o.empty() && in.take<uint8_t>() % 2) o[0] = 0;
            shape.set_offsets(s.len, o);
            break;
        }
        }
        shape.set(s.B, b);
    } catch (const RuntimeError &) {
        return 0; // rejected input: fine
    }
    // Accepted: the lengths are in range; sizes must match a brute-force count.
    const std::vector<int32_t> &l = shape.lengths(s.len);
    for (int32_t x : l)
        if (x < 0 || x > 50) finding();
    int64_t flat = 0, square = 0, triangle = 0;
    for (int32_t x : l) {
        flat += x;
        square += (int64_t)x * x;
        triangle += (int64_t)x * (x + 1) / 2;
    }
    // A batch size that disagrees with the number of lengths must be reported, not read past.
    const bool consistent = (int64_t)l.size() == shape.value(s.B);
    try {
        if (shape.size_of(s.flat) != flat || shape.size_of(s.square) != square ||
            shape.size_of(s.triangle) != triangle || shape.size_of(s.packed) != (flat + 15) / 16 * 16 * 7)
            finding();
        if (!consistent) finding();
        std::vector<int64_t> off = shape.offsets(s.len);
        if (off.size() != l.size() + 1 || off[0] != 0) finding();
        for (size_t x = 0; x < l.size(); x++)
            if (off[x + 1] - off[x] != l[x]) finding();
        // Pack padded data into the fused storage and back.
        int64_t max_len = l.empty() ? 0 : *std::max_element(l.begin(), l.end());
        std::vector<int64_t> dims{(int64_t)l.size(), max_len, 7};
        std::vector<float> padded((size_t)(dims[0] * dims[1] * dims[2]));
        std::iota(padded.begin(), padded.end(), 1.0f);
        Buffer p = Buffer::from_padded(s.packed, shape, padded, dims);
        std::vector<float> back = p.to_padded(s.packed, shape, dims, 0.0f);
        for (int64_t bb = 0; bb < dims[0]; bb++)
            for (int64_t q = 0; q < dims[1]; q++)
                for (int64_t c = 0; c < 7; c++) {
                    size_t at = (size_t)((bb * dims[1] + q) * 7 + c);
                    if (back[at] != (q < l[(size_t)bb] ? padded[at] : 0.0f)) finding();
                }
    } catch (const RuntimeError &) {
        if (consistent) finding(); // a consistent shape must give its sizes
    }
    return 0;
}
