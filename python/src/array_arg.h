/** \file A Python array passed to a kernel without a copy: its memory, element type and device,
 * from DLPack (`__dlpack__`, PyTorch and NumPy tensors, either capsule version) or the buffer
 * protocol (NumPy arrays, array.array, memoryview); a PyTorch tensor's own accessors, which read the
 * same facts as its `__dlpack__` in a third of the time. Held for the duration of one call. */
#pragma once

#include "bindings.h"
#include "dlpack.h"

#include <Python.h>

#include <memory>
#include <string>

namespace cora::python {

class ArrayArg {
public:
    /** Reads `obj` as the array for argument `name`: TypeError for an object that is no array,
     * ValueError for an element type cora has no storage for, or strides that are not those of a
     * packed (C-contiguous) array. Both messages name the argument. */
    ArrayArg(py::handle obj, const std::string &name);
    ~ArrayArg();
    ArrayArg(const ArrayArg &) = delete;
    ArrayArg &operator=(const ArrayArg &) = delete;

    void *data() const { return data_; }
    int64_t count() const { return count_; }
    /** The element type; uint8 and bool arrays (masks) have none: `is_bytes()`. */
    Type type() const { return type_; }
    bool is_bytes() const { return bytes_; }
    bool read_only() const { return read_only_; }
    /** Where the memory is: dlpack::kCPU (host memory) or a CUDA device. */
    int32_t device_type() const { return device_type_; }
    int32_t device_id() const { return device_id_; }
    bool on_host() const { return device_type_ == dlpack::kCPU || device_type_ == dlpack::kCUDAHost; }
    /** "float32 array of 12 elements on cpu", for messages. */
    std::string describe() const;

private:
    void from_buffer(py::handle obj);
    void from_torch(py::handle tensor);
    void from_dlpack(py::handle capsule);
    void set_type(char kind, int64_t bytes, const char *format);

    std::string name_;
    void *data_ = nullptr;
    int64_t count_ = 0;
    Type type_ = Float32;
    bool bytes_ = false, read_only_ = false;
    int32_t device_type_ = dlpack::kCPU, device_id_ = 0;
    Py_buffer view_{};
    bool has_view_ = false;
    dlpack::ManagedTensor *managed_ = nullptr;
    dlpack::ManagedTensorVersioned *managed_versioned_ = nullptr;
};

/** The element type's name as NumPy spells it ("float32", "int64", "float16"). */
std::string numpy_dtype_name(const Type &t);

} // namespace cora::python
