/** \file ArrayArg (array_arg.h). DLPack is preferred where an object offers it and the buffer
 * protocol is the fallback: NumPy's `__dlpack__` refuses read-only arrays, which the buffer
 * protocol describes exactly. */
#include "array_arg.h"

#include <cstring>
#include <tuple>

namespace cora::python {

namespace {

/** Whether `shape`/`strides` (in elements; null: compact) describe a packed row-major array. */
bool packed_row_major(int32_t ndim, const int64_t *shape, const int64_t *strides) {
    if (strides == nullptr) return true;
    int64_t expected = 1;
    for (int32_t d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 0) return true; // an empty array has no stride to get wrong
        if (shape[d] != 1 && strides[d] != expected) return false;
        expected *= shape[d];
    }
    return true;
}

const char *device_name(int32_t type) {
    switch (type) {
    case dlpack::kCPU: return "cpu";
    case dlpack::kCUDA: return "cuda";
    case dlpack::kCUDAHost: return "cuda-host";
    case dlpack::kCUDAManaged: return "cuda-managed";
    default: return "an unknown device";
    }
}

/** Whether `obj` is a torch.Tensor (or a subclass, e.g. nn.Parameter), without importing torch. */
bool is_torch_tensor(py::handle obj) {
    for (py::handle base : py::reinterpret_borrow<py::tuple>(obj.get_type().attr("__mro__"))) {
        PyTypeObject *t = reinterpret_cast<PyTypeObject *>(base.ptr());
        if (std::strcmp(t->tp_name, "torch._C._TensorBase") == 0 || std::strcmp(t->tp_name, "torch._C.TensorBase") == 0)
            return true; // PyTorch 1.x, 2.x
    }
    return false;
}

} // namespace

std::string numpy_dtype_name(const Type &t) { return t.is_bool() ? "bool" : t.str(); }

ArrayArg::ArrayArg(py::handle obj, const std::string &name) : name_(name) {
    if (PyCapsule_CheckExact(obj.ptr())) {
        from_dlpack(obj);
        return;
    }
    if (PyObject_CheckBuffer(obj.ptr())) {
        from_buffer(obj);
        return;
    }
    if (is_torch_tensor(obj)) {
        from_torch(obj);
        return;
    }
    if (py::hasattr(obj, "__dlpack__")) {
        py::object capsule;
        try {
            capsule = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
        } catch (py::error_already_set &e) {
            if (!e.matches(PyExc_TypeError)) throw;
            capsule = obj.attr("__dlpack__")(); // DLPack < 1.0 (PyTorch 1.13): no max_version
        }
        from_dlpack(capsule);
        return;
    }
    throw py::type_error("argument '" + name_ + "': expected an array (a NumPy array, a PyTorch tensor, an object " +
                         "with __dlpack__ or the buffer protocol), got " +
                         std::string(py::str(obj.get_type().attr("__name__"))));
}

ArrayArg::~ArrayArg() {
    if (has_view_) PyBuffer_Release(&view_);
    if (managed_ && managed_->deleter) managed_->deleter(managed_);
    if (managed_versioned_ && managed_versioned_->deleter) managed_versioned_->deleter(managed_versioned_);
}

void ArrayArg::set_type(char kind, int64_t bytes, const char *format) {
    if (kind == 'f' && bytes == 4)
        type_ = Float32;
    else if (kind == 'f' && bytes == 8)
        type_ = Float64;
    else if (kind == 'f' && bytes == 2)
        type_ = Float16;
    else if (kind == 'i' && bytes == 4)
        type_ = Int32;
    else if (kind == 'i' && bytes == 8)
        type_ = Int64;
    else if ((kind == 'u' || kind == 'b') && bytes == 1)
        bytes_ = true;
    else
        throw py::value_error("argument '" + name_ + "': elements of type " + format +
                              " have no cora storage type (float32, float64, float16, int32, int64; uint8 or bool "
                              "for masks)");
}

void ArrayArg::from_buffer(py::handle obj) {
    read_only_ = false;
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE) != 0) {
        PyErr_Clear();
        read_only_ = true;
        if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_STRIDES | PyBUF_FORMAT) != 0) throw py::error_already_set();
    }
    has_view_ = true;
    if (!PyBuffer_IsContiguous(&view_, 'C'))
        throw py::value_error("argument '" + name_ +
                              "': the array is not packed (C-contiguous); cora reads packed storage without a copy: "
                              "pass a contiguous array (numpy.ascontiguousarray, tensor.contiguous())");
    const char *f = view_.format ? view_.format : "B";
    while (*f == '<' || *f == '@' || *f == '=' || *f == '!') // byte order: cora runs little-endian only
        f++;
    char kind = 0;
    switch (*f) {
    case 'f':
    case 'd':
    case 'e': kind = 'f'; break;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n': kind = 'i'; break;
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N': kind = 'u'; break;
    case '?': kind = 'b'; break;
    default: break;
    }
    if (f[0] != 0 && f[1] != 0) kind = 0; // a struct or a repeated field
    set_type(kind, view_.itemsize, view_.format ? view_.format : "B");
    data_ = view_.buf;
    count_ = view_.itemsize > 0 ? view_.len / view_.itemsize : 0;
}

void ArrayArg::from_torch(py::handle t) {
    py::object device = t.attr("device");
    const std::string device_type = py::str(device.attr("type"));
    device_type_ = device_type == "cpu" ? dlpack::kCPU : device_type == "cuda" ? dlpack::kCUDA : -1;
    if (device_type_ < 0)
        throw py::value_error("argument '" + name_ + "': a tensor on " + device_type +
                              ", which cora cannot address (cpu or cuda)");
    py::object index = device.attr("index");
    device_id_ = index.is_none() ? 0 : index.cast<int32_t>();
    const std::string dtype = py::str(t.attr("dtype"));
    static const std::pair<const char *, std::pair<char, int>> kinds[] = {
        {"torch.float32", {'f', 4}}, {"torch.float64", {'f', 8}}, {"torch.float16", {'f', 2}},
        {"torch.int32", {'i', 4}},   {"torch.int64", {'i', 8}},   {"torch.uint8", {'u', 1}},
        {"torch.bool", {'b', 1}}};
    char kind = 0;
    int bytes = 0;
    for (const auto &[name, kb] : kinds)
        if (dtype == name) std::tie(kind, bytes) = kb;
    set_type(kind, bytes, dtype.c_str());
    if (!t.attr("is_contiguous")().cast<bool>())
        throw py::value_error("argument '" + name_ +
                              "': the tensor is not packed (its strides are not row-major contiguous); cora reads "
                              "packed storage without a copy: pass tensor.contiguous()");
    count_ = t.attr("numel")().cast<int64_t>();
    data_ = reinterpret_cast<void *>(t.attr("data_ptr")().cast<uintptr_t>());
}

void ArrayArg::from_dlpack(py::handle capsule) {
    const char *capsule_name = PyCapsule_GetName(capsule.ptr());
    const dlpack::Tensor *t = nullptr;
    if (capsule_name && std::strcmp(capsule_name, "dltensor_versioned") == 0) {
        managed_versioned_ =
            static_cast<dlpack::ManagedTensorVersioned *>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
        if (!managed_versioned_) throw py::error_already_set();
        PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned"); // ours now: released by ~ArrayArg
        if (managed_versioned_->version.major > 1)
            throw py::value_error("argument '" + name_ + "': DLPack version " +
                                  std::to_string(managed_versioned_->version.major) + " is newer than cora reads (1)");
        read_only_ = (managed_versioned_->flags & dlpack::kFlagReadOnly) != 0;
        t = &managed_versioned_->dl_tensor;
    } else if (capsule_name && std::strcmp(capsule_name, "dltensor") == 0) {
        managed_ = static_cast<dlpack::ManagedTensor *>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
        if (!managed_) throw py::error_already_set();
        PyCapsule_SetName(capsule.ptr(), "used_dltensor");
        t = &managed_->dl_tensor;
    } else {
        throw py::type_error("argument '" + name_ + "': a capsule that is not a DLPack tensor (named '" +
                             std::string(capsule_name ? capsule_name : "") +
                             "'; expected 'dltensor' or 'dltensor_versioned': was it used already?)");
    }
    device_type_ = t->device.device_type;
    device_id_ = t->device.device_id;
    if (t->dtype.lanes != 1)
        throw py::value_error("argument '" + name_ + "': vector elements (" + std::to_string(t->dtype.lanes) +
                              " lanes) have no cora storage type");
    char kind = t->dtype.code == dlpack::kFloat  ? 'f'
                : t->dtype.code == dlpack::kInt  ? 'i'
                : t->dtype.code == dlpack::kUInt ? 'u'
                : t->dtype.code == dlpack::kBool ? 'b'
                                                 : 0;
    std::string format =
        (t->dtype.code == dlpack::kBfloat ? std::string("bfloat") : std::string(1, kind ? kind : '?')) +
        std::to_string(t->dtype.bits);
    set_type(kind, t->dtype.bits / 8, format.c_str());
    if (!packed_row_major(t->ndim, t->shape, t->strides))
        throw py::value_error("argument '" + name_ +
                              "': the tensor is not packed (its strides are not row-major contiguous); cora reads "
                              "packed storage without a copy: pass tensor.contiguous()");
    count_ = 1;
    for (int32_t d = 0; d < t->ndim; d++)
        count_ *= t->shape[d];
    data_ = static_cast<char *>(t->data) + t->byte_offset;
}

std::string ArrayArg::describe() const {
    std::string type = bytes_ ? std::string("uint8") : numpy_dtype_name(type_);
    std::string where = device_name(device_type_);
    if (device_type_ != dlpack::kCPU) where += ":" + std::to_string(device_id_);
    return type + " array of " + std::to_string(count_) + " elements on " + where;
}

} // namespace cora::python
