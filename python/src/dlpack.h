/** \file The DLPack structures cora reads (DLPack 0.6's DLManagedTensor, which PyTorch 1.13's
 * `__dlpack__` returns in a capsule named "dltensor", and 1.0's DLManagedTensorVersioned, capsule
 * "dltensor_versioned"). Defined here from the published ABI: Debian ships DLPack 0.6 headers only,
 * and cora needs both layouts. */
#pragma once

#include <cstdint>

namespace cora::python::dlpack {

enum DeviceType : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kComplex = 5, kBool = 6 };

struct Device {
    int32_t device_type;
    int32_t device_id;
};
struct DataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
};
struct Tensor {
    void *data;
    Device device;
    int32_t ndim;
    DataType dtype;
    int64_t *shape;
    int64_t *strides; ///< in elements; null: compact row-major
    uint64_t byte_offset;
};
struct ManagedTensor { ///< DLPack < 1.0
    Tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(ManagedTensor *self);
};
struct Version {
    uint32_t major;
    uint32_t minor;
};
inline constexpr uint64_t kFlagReadOnly = 1ull << 0;
struct ManagedTensorVersioned { ///< DLPack >= 1.0
    Version version;
    void *manager_ctx;
    void (*deleter)(ManagedTensorVersioned *self);
    uint64_t flags;
    Tensor dl_tensor;
};

} // namespace cora::python::dlpack
