/** \file Packed buffers. Packing/unpacking walks the logical elements and places each at its
 * flat storage offset (the same flattening the compiler uses); storage padding is left as is
 * (zero in a fresh buffer, `fill` in padded output). */
#include <cstring>
#include <new>

#include "analysis/Interpreter.h"
#include "cora/Runtime.h"
#include "cora_runtime.h"
#include "formats/ragged/StorageLayout.h"
#include "ir/IRPrinter.h"
#include "runtime/RaggedShapeImpl.h"
#include "util/Error.h"

namespace cora {

using namespace ir;

namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t> &dims) {
    std::vector<int64_t> s(dims.size(), 1);
    for (int k = (int)dims.size() - 2; k >= 0; k--)
        s[k] = s[k + 1] * dims[k + 1];
    return s;
}

/** Calls f(storage offset, padded offset) for every logical element. */
void walk(const Tensor &t, const RaggedShape &shape, const std::vector<int64_t> &padded_dims,
          const std::function<void(int64_t, int64_t)> &f) {
    const Layout &l = t.node()->domain;
    if (padded_dims.size() != l.size())
        throw_runtime_error("tensor '", t.name(), "' has ", l.size(), " dims, padded shape has ", padded_dims.size());
    std::vector<int64_t> strides = strides_of(padded_dims);
    // Check extents first (per row), so nothing is written when the padded shape is too small.
    Interpreter in = shape_impl(shape)->interpreter();
    shape_impl(shape)->validate_counts();
    std::function<void(size_t)> check = [&](size_t k) {
        if (k == l.size()) return;
        int64_t n = in.eval_int(l[k].extent);
        if (n > padded_dims[k])
            throw_runtime_error("tensor '", t.name(), "': dim '", l[k].dim->name, "' has extent ", n,
                                " at this index, more than the padded size ", padded_dims[k]);
        if (k + 1 == l.size()) return;
        const VarNode *v = l[k].dim->var.get();
        for (int64_t i = 0; i < n; i++) {
            in.ints[v] = i;
            check(k + 1);
        }
        in.ints.erase(v);
    };
    check(0);
    shape_impl(shape)->for_each_element(*t.node(), [&](const std::vector<int64_t> &idx, int64_t offset) {
        int64_t p = 0;
        for (size_t j = 0; j < idx.size(); j++)
            p += idx[j] * strides[j];
        f(offset, p);
    });
}

int64_t product(const std::vector<int64_t> &d) {
    int64_t p = 1;
    for (int64_t x : d) {
        if (x < 0) throw_runtime_error("padded shape has a negative dim ", x);
        if (__builtin_mul_overflow(p, x, &p)) throw_runtime_error("padded shape's element count overflows 64 bits");
    }
    return p;
}

} // namespace

Buffer::Buffer(Type t, int64_t count) : type_(t), count_(count) {
    if (count < 0) throw_runtime_error("buffer size must be non-negative, got ", count);
    if (!(t == Float32 || t == Float64 || t == Float16 || t == Int32 || t == Int64))
        throw_runtime_error("unsupported buffer element type ", t.str());
    // The byte count must fit where pointer offsets do (ptrdiff_t), or indexing would wrap.
    int64_t bytes = 0;
    if (__builtin_mul_overflow(std::max<int64_t>(count, 1), (int64_t)t.bytes(), &bytes))
        throw_runtime_error("buffer of ", count, " ", t.str(), " elements: its size in bytes overflows 64 bits");
    try {
        // A cache line. With malloc's 16 bytes, a memory-bound kernel's speed depended on where its
        // buffers fell: the same token-wise kernel took 0.59-0.92 ms (1 thread, AVX-512 Zen 5)
        // by placement, 0.50-0.65 ms aligned (bench/default_schedules: tokenwise).
        constexpr std::align_val_t kBufferAlignment{64};
        uint8_t *p = static_cast<uint8_t *>(::operator new[]((size_t)bytes, kBufferAlignment));
        std::memset(p, 0, (size_t)bytes);
        data_ = std::shared_ptr<uint8_t[]>(p, [](uint8_t *q) { ::operator delete[](q, kBufferAlignment); });
    } catch (const std::bad_alloc &) {
        throw_runtime_error("cannot allocate a buffer of ", count, " ", t.str(), " elements (", bytes, " bytes)");
    }
}

Buffer Buffer::alloc(const Tensor &t, const RaggedShape &shape) { return Buffer(t.type(), shape.size_of(t)); }

Buffer Buffer::make_view(const Tensor &t, const RaggedShape &shape, Type elem, void *data, int64_t count,
                         bool read_only) {
    auto fail = [&](auto &&...msg) { throw_runtime_error("Buffer::view of tensor '", t.name(), "': ", msg...); };
    if (elem != t.type()) fail("the data is ", elem.str(), ", the tensor's elements are ", t.type().str());
    int64_t need = shape.size_of(t);
    if (count != need)
        fail(count, " elements given, the tensor has ", need,
             " in this shape (its packed size; Kernel::arguments() and the AOT header give the layout)");
    if (count > 0 && !data) fail("null data for ", count, " elements");
    if ((uintptr_t)data % (uintptr_t)elem.bytes() != 0)
        fail("data at ", data, " is not aligned to its ", elem.bytes(), "-byte elements");
    Buffer b;
    b.type_ = elem;
    b.count_ = count;
    b.owned_ = false;
    b.read_only_ = read_only;
    b.data_ = std::shared_ptr<uint8_t[]>(static_cast<uint8_t *>(data), [](uint8_t *) {}); // the caller's memory
    return b;
}

#define CORA_BUFFER_VIEW(T, elem)                                                                                      \
    Buffer Buffer::view(const Tensor &t, const RaggedShape &shape, T *data, int64_t count) {                           \
        return make_view(t, shape, elem, data, count, false);                                                          \
    }                                                                                                                  \
    Buffer Buffer::view(const Tensor &t, const RaggedShape &shape, const T *data, int64_t count) {                     \
        return make_view(t, shape, elem, const_cast<T *>(data), count, true);                                          \
    }
CORA_BUFFER_VIEW(float, Float32)
CORA_BUFFER_VIEW(double, Float64)
CORA_BUFFER_VIEW(int32_t, Int32)
CORA_BUFFER_VIEW(int64_t, Int64)
CORA_BUFFER_VIEW(uint16_t, Float16)
#undef CORA_BUFFER_VIEW

void Buffer::require_float32(const char *what) const {
    if (type_ != Float32) throw_runtime_error("Buffer::", what, ": the buffer holds ", type_.str(), ", not float32");
}

int64_t Buffer::alignment() const {
    uintptr_t a = (uintptr_t)data_.get();
    int64_t al = 1;
    while (al < 64 && a % (uintptr_t)(al * 2) == 0)
        al *= 2;
    return a == 0 ? 64 : al;
}

Buffer Buffer::from_padded(const Tensor &t, const RaggedShape &shape, const std::vector<float> &padded,
                           const std::vector<int64_t> &padded_dims) {
    if (t.type() != Float32 && t.type() != Float16)
        throw_runtime_error("from_padded: tensor '", t.name(), "' is ", t.type().str(), ", not float32 or float16");
    if ((int64_t)padded.size() != product(padded_dims))
        throw_runtime_error("from_padded: tensor '", t.name(), "': padded data has ", padded.size(),
                            " elements, its shape needs ", product(padded_dims));
    Buffer b = alloc(t, shape);
    if (t.type() == Float16) {
        uint16_t *d = b.data<uint16_t>();
        walk(t, shape, padded_dims, [&](int64_t packed, int64_t p) { d[packed] = cora_float_to_half(padded[p]); });
    } else {
        float *d = b.data<float>();
        walk(t, shape, padded_dims, [&](int64_t packed, int64_t p) { d[packed] = padded[p]; });
    }
    return b;
}

std::vector<float> Buffer::to_padded(const Tensor &t, const RaggedShape &shape, const std::vector<int64_t> &padded_dims,
                                     float fill) const {
    if (type_ != Float32 && type_ != Float16)
        throw_runtime_error("to_padded: buffer holds ", type_.str(), ", not float32 or float16");
    int64_t want = shape.size_of(t);
    if (count_ != want)
        throw_runtime_error("to_padded: buffer has ", count_, " elements, tensor '", t.name(), "' needs ", want);
    std::vector<float> out((size_t)product(padded_dims), fill);
    if (type_ == Float16) {
        const uint16_t *d = data<uint16_t>();
        walk(t, shape, padded_dims, [&](int64_t packed, int64_t p) { out[p] = cora_half_to_float(d[packed]); });
    } else {
        const float *d = data<float>();
        walk(t, shape, padded_dims, [&](int64_t packed, int64_t p) { out[p] = d[packed]; });
    }
    return out;
}

} // namespace cora
