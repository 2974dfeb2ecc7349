/** \file Run-time objects: the ragged shape of a batch and packed buffers.
 *
 * A RaggedShape binds params, length arrays and shape tensors (a mask) to values for one batch. It builds every aux
 * array (prefix-sum offsets) on first use and keeps it, so all kernels and layers that share
 * the shape share the arrays. A Buffer owns packed storage sized by the library, or is a view of
 * the caller's memory (Buffer::view: no copy). */
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cora/Expr.h"
#include "cora/Spatial.h"
#include "cora/Tensor.h"

namespace cora {

class RaggedShape {
public:
    RaggedShape();

    /** Bind a param; RuntimeError when outside its declared range. */
    RaggedShape &set(const Param &p, int64_t value);
    /** Bind lengths; RuntimeError when a value is outside the declared range. */
    RaggedShape &set(const LengthArray &len, std::vector<int32_t> lengths);
    /** Bind lengths given as offsets (int32, B+1 entries, offsets[0] = 0, non-decreasing). */
    RaggedShape &set_offsets(const LengthArray &len, const std::vector<int32_t> &offsets);
    RaggedShape &set_offsets(const LengthArray &len, const std::vector<int64_t> &offsets);

    /** Bind a shape tensor (a mask, coordinates), its elements row-major; RuntimeError when a
     * value is outside the declared range. The element count must equal the product of its dims
     * (checked, naming the tensor, before anything reads it). Formats that read it (an active-tile
     * list built from a mask) are rebuilt when it changes. */
    RaggedShape &set(const ShapeTensor &t, std::vector<int32_t> values);
    /** The same from bytes (a uint8 mask, as NumPy and PyTorch store boolean masks). */
    RaggedShape &set(const ShapeTensor &t, const uint8_t *values, int64_t count);

    int64_t value(const Param &p) const;
    const std::vector<int32_t> &values(const ShapeTensor &t) const;
    const std::vector<int32_t> &lengths(const LengthArray &len) const;
    /** Exclusive prefix sums of the lengths (B+1 entries), the cu_seqlens convention. */
    std::vector<int64_t> offsets(const LengthArray &len) const;

    /** Packed element count of a tensor's storage in this shape. */
    int64_t size_of(const Tensor &t) const;
    /** Evaluate an integer expression of params and length arrays. */
    int64_t eval(const Expr &e) const;

    /** The active tiles of `tiles` in this shape, (batch, tile row, tile column) each, in the
     * order kernels run them: built from the bound mask (or coordinates, tile origins) on first
     * use and shared by every kernel on the shape, as a kernel run would build it (a RuntimeError
     * for a bad mask or list, naming the entry). For inspection, and to time the build. */
    std::vector<std::array<int32_t, 3>> active_tiles(const ActiveTiles &tiles) const;

    /** How many aux arrays this shape has built so far (each built on first use, thread-safe, and
     * shared by every kernel run on the shape). */
    size_t aux_array_count() const;

    struct Impl; ///< private to the library (src/runtime/RaggedShapeImpl.h)

private:
    friend const std::shared_ptr<Impl> &shape_impl(const RaggedShape &shape);
    std::shared_ptr<Impl> impl_;
};

/** Packed storage of one tensor (fp32, fp64, fp16, int32 or int64 elements): owned, or a view of
 * memory the caller owns. Copies share the storage. fp16 elements are IEEE binary16 bits
 * (uint16_t; cora_half_to_float / cora_float_to_half in cora_runtime.h convert them). */
class Buffer {
public:
    Buffer() = default;
    /** Owned storage of `count` zeroed elements of type `t`. To use data you already have, take a
     * view() of it instead (no allocation, no copy). */
    Buffer(Type t, int64_t count);

    /** A view of `count` elements of the caller's memory at `data`, packed as `t` is stored in
     * `shape` (the layout Kernel::arguments() and the AOT header describe); nothing is copied or
     * freed, and the memory must outlive every use of the view. RuntimeError, naming the tensor,
     * when `count` is not exactly shape.size_of(t), when T is not t's element type, or when `data`
     * is null (with count > 0) or not aligned to the element size. A view of const memory is read
     * only: binding it to a kernel's output is a RuntimeError. alignment() tells how `data` is
     * aligned (vector loads are fastest at 32 or 64). */
    static Buffer view(const Tensor &t, const RaggedShape &shape, float *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, double *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, int32_t *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, int64_t *data, int64_t count);
    /** A float16 tensor's storage: binary16 bits. */
    static Buffer view(const Tensor &t, const RaggedShape &shape, uint16_t *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, const float *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, const double *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, const int32_t *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, const int64_t *data, int64_t count);
    static Buffer view(const Tensor &t, const RaggedShape &shape, const uint16_t *data, int64_t count);

    /** Zeroed storage of exactly the tensor's packed size in `shape`, 64-byte aligned. */
    static Buffer alloc(const Tensor &t, const RaggedShape &shape);
    /** Pack padded dense data (row-major with dims `padded_dims`) into the tensor's storage (a
     * float32 or float16 tensor; float16 rounds to nearest even). RuntimeError when an extent
     * exceeds its padded dim or sizes disagree. */
    static Buffer from_padded(const Tensor &t, const RaggedShape &shape, const std::vector<float> &padded,
                              const std::vector<int64_t> &padded_dims);
    /** Unpack into padded dense data of dims `padded_dims`, padding filled with `fill` (float16
     * widens exactly). */
    std::vector<float> to_padded(const Tensor &t, const RaggedShape &shape, const std::vector<int64_t> &padded_dims,
                                 float fill = 0.0f) const;

    Type type() const { return type_; }
    int64_t size() const { return count_; }
    /** Whether the storage belongs to this buffer (false for a view). */
    bool owns_data() const { return owned_; }
    /** Whether the storage may not be written (a view of const memory). */
    bool read_only() const { return read_only_; }
    /** The largest power of two, up to 64, that divides the data address (bytes). */
    int64_t alignment() const;
    void *raw() { return data_.get(); }
    const void *raw() const { return data_.get(); }
    template <typename T> T *data() { return static_cast<T *>(raw()); }
    template <typename T> const T *data() const { return static_cast<const T *>(raw()); }
    /** Element i of a float32 buffer (RuntimeError for any other element type). */
    float &at(int64_t i) {
        require_float32("at");
        return data<float>()[i];
    }
    float at(int64_t i) const {
        require_float32("at");
        return data<float>()[i];
    }

private:
    void require_float32(const char *what) const;
    static Buffer make_view(const Tensor &t, const RaggedShape &shape, Type elem, void *data, int64_t count,
                            bool read_only);
    Type type_ = Float32;
    int64_t count_ = 0;
    bool owned_ = true, read_only_ = false;
    std::shared_ptr<uint8_t[]> data_;
};

class Kernel;

/** Memory on a kernel's device for one tensor, sized by the library for a shape (Kernel::alloc),
 * released when the last copy of the handle goes; or a view of the caller's device memory
 * (Kernel::view), never released by cora. It knows its device: it is a valid argument of the
 * kernel that made it and of the kernels sharing that kernel's device (Kernel::share_device_with),
 * of no other. */
class DeviceBuffer {
public:
    Type type() const;
    int64_t size() const; ///< elements
    /** The device address (a CUdeviceptr on the backend "cuda"; host memory on "cuda-cpu-threads"). */
    void *device_pointer() const;
    /** The backend whose device holds it ("cuda", "cuda-cpu-threads") and the device's ordinal. */
    const std::string &backend() const;
    int device() const;
    /** Copies `host` (the same type and size, else RuntimeError) to the device; returns when done. */
    void upload(const Buffer &host);
    /** Copies the device data into `host` (the same type and size); waits for the kernel's work. */
    void download(Buffer &host) const;

    struct Impl; ///< private to the backend that made it
    explicit DeviceBuffer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

private:
    friend const std::shared_ptr<Impl> &device_buffer_impl(const DeviceBuffer &b);
    std::shared_ptr<Impl> impl_;
};

/** A tensor bound to device memory. */
struct DeviceBinding {
    Tensor tensor;
    DeviceBuffer *buffer;
    DeviceBinding(const Tensor &t, DeviceBuffer &b) : tensor(t), buffer(&b) {}
};

} // namespace cora
