/** \file The run-time objects: RaggedShape (params, lengths or offsets, masks) and packed storage as
 * NumPy arrays: cora.alloc returns an array that owns cora's zeroed storage (torch.from_numpy
 * shares it), and the padded conversions pack and unpack a padded batch. */
#include "array_arg.h"
#include "bindings.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <limits>

namespace cora::python {

namespace {

/** Integers from an array (int32 or int64, host memory) or a Python sequence, for `what`. */
std::vector<int64_t> integers(py::handle values, const std::string &what) {
    std::vector<int64_t> out;
    if (PyObject_CheckBuffer(values.ptr()) || py::hasattr(values, "__dlpack__") || PyCapsule_CheckExact(values.ptr())) {
        ArrayArg a(values, what);
        if (!a.on_host())
            throw RuntimeError(what + ": the values are on " + a.describe() + "; pass them in host memory");
        if (!a.is_bytes() && a.type() == Int32) {
            const int32_t *p = static_cast<const int32_t *>(a.data());
            out.assign(p, p + a.count());
        } else if (!a.is_bytes() && a.type() == Int64) {
            const int64_t *p = static_cast<const int64_t *>(a.data());
            out.assign(p, p + a.count());
        } else {
            throw RuntimeError(what + ": expected int32 or int64 values, got a " + a.describe());
        }
        return out;
    }
    for (py::handle v : values) {
        if (!py::isinstance<py::int_>(v) && !(py::hasattr(v, "__index__") && !py::isinstance<py::float_>(v)))
            throw RuntimeError(what + ": expected integers, got a " +
                               std::string(py::str(v.get_type().attr("__name__"))));
        out.push_back(py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>());
    }
    return out;
}

std::vector<int32_t> int32_values(py::handle values, const std::string &what) {
    std::vector<int64_t> v = integers(values, what);
    std::vector<int32_t> out(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i] < std::numeric_limits<int32_t>::min() || v[i] > std::numeric_limits<int32_t>::max())
            throw RuntimeError(what + ": value " + std::to_string(v[i]) + " at index " + std::to_string(i) +
                               " does not fit int32");
        out[i] = (int32_t)v[i];
    }
    return out;
}

py::dtype dtype_of(const Type &t) {
    if (t == Float32) return py::dtype::of<float>();
    if (t == Float64) return py::dtype::of<double>();
    if (t == Int32) return py::dtype::of<int32_t>();
    if (t == Int64) return py::dtype::of<int64_t>();
    if (t == Float16) return py::dtype("float16");
    throw RuntimeError("no NumPy element type for " + t.str());
}

} // namespace

/** A NumPy array over `buffer`'s storage, keeping the storage alive (shared by both). */
py::array as_numpy(const Buffer &buffer) {
    auto *keep = new Buffer(buffer);
    py::capsule owner(keep, [](void *p) { delete static_cast<Buffer *>(p); });
    return py::array(dtype_of(buffer.type()), {buffer.size()}, {buffer.type().bytes()}, keep->raw(), owner);
}

void bind_runtime(py::module_ &m) {
    py::class_<RaggedShape>(m, "RaggedShape",
                            "The values of a batch's params, lengths and shape tensors. Builds the aux arrays on "
                            "first use and shares them with every kernel run on it.")
        .def(py::init<>())
        .def(
            "set",
            [](RaggedShape &s, py::handle key, py::handle value) -> RaggedShape & {
                if (py::isinstance<Param>(key)) {
                    const Param &p = key.cast<const Param &>();
                    if (!py::isinstance<py::int_>(value) && !py::hasattr(value, "__index__"))
                        throw RuntimeError("param '" + p.name() + "': expected an integer value");
                    return s.set(p, py::int_(py::reinterpret_borrow<py::object>(value)).cast<int64_t>());
                }
                if (py::isinstance<LengthArray>(key)) {
                    const LengthArray &l = key.cast<const LengthArray &>();
                    return s.set(l, int32_values(value, "lengths '" + l.name() + "'"));
                }
                if (py::isinstance<ShapeTensor>(key)) {
                    const ShapeTensor &t = key.cast<const ShapeTensor &>();
                    const std::string what = "shape tensor '" + t.name() + "'";
                    if (PyObject_CheckBuffer(value.ptr()) || py::hasattr(value, "__dlpack__")) {
                        ArrayArg a(value, what);
                        if (a.is_bytes()) {
                            if (!a.on_host())
                                throw RuntimeError(what + ": the values are on " + a.describe() +
                                                   "; pass them in host memory");
                            return s.set(t, static_cast<const uint8_t *>(a.data()), a.count());
                        }
                    }
                    return s.set(t, int32_values(value, what));
                }
                throw py::type_error("RaggedShape.set: the key is a Param, LengthArray or ShapeTensor, got a " +
                                     std::string(py::str(key.get_type().attr("__name__"))));
            },
            py::arg("key"), py::arg("value"), py::return_value_policy::reference_internal,
            "Bind a param (an int), lengths (a list or int array) or a shape tensor (a mask: uint8/bool or int "
            "values). RuntimeError, naming it, for a value outside the declared range.")
        .def(
            "set_offsets",
            [](RaggedShape &s, const LengthArray &l, py::handle offsets) -> RaggedShape & {
                return s.set_offsets(l, integers(offsets, "offsets of '" + l.name() + "'"));
            },
            py::arg("lengths"), py::arg("offsets"), py::return_value_policy::reference_internal,
            "Bind lengths given as B+1 offsets (int32 or int64, as cu_seqlens and nested jagged tensors carry them).")
        .def("value", &RaggedShape::value)
        .def("lengths", &RaggedShape::lengths)
        .def("offsets", &RaggedShape::offsets)
        .def("values", &RaggedShape::values)
        .def("size_of", &RaggedShape::size_of, "Packed element count of a tensor's storage in this shape.")
        .def("eval", [](const RaggedShape &s, py::handle e) { return s.eval(to_expr(e, "expression")); })
        .def("active_tiles", &RaggedShape::active_tiles)
        .def("aux_array_count", &RaggedShape::aux_array_count);

    m.def(
        "_array_info",
        [](py::handle obj, const std::string &name) {
            ArrayArg a(obj, name);
            return py::make_tuple(reinterpret_cast<uintptr_t>(a.data()), a.count(),
                                  a.is_bytes() ? std::string("uint8") : numpy_dtype_name(a.type()), a.read_only(),
                                  a.on_host());
        },
        py::arg("array"), py::arg("name"),
        "(address, element count, element type, read only, in host memory) of an array, as Kernel.run reads "
        "it; the address is valid while the array lives. For the AOT loader (cora.aot).");
    m.def(
        "alloc", [](const Tensor &t, const RaggedShape &s) { return as_numpy(Buffer::alloc(t, s)); }, py::arg("tensor"),
        py::arg("shape"),
        "Zeroed packed storage of the tensor in this shape, as a 1-D NumPy array (torch.from_numpy shares it).");
    m.def(
        "from_padded",
        [](const Tensor &t, const RaggedShape &s,
           py::array_t<float, py::array::c_style | py::array::forcecast> padded) {
            std::vector<float> data(padded.data(), padded.data() + padded.size());
            std::vector<int64_t> dims(padded.shape(), padded.shape() + padded.ndim());
            return as_numpy(Buffer::from_padded(t, s, data, dims));
        },
        py::arg("tensor"), py::arg("shape"), py::arg("padded"),
        "Pack a padded dense batch (its dims the tensor's, each at least the extent) into packed storage.");
    m.def(
        "to_padded",
        [](const Tensor &t, const RaggedShape &s, py::handle packed, std::vector<int64_t> dims, float fill) {
            ArrayArg a(packed, t.name());
            if (!a.on_host() || a.is_bytes() || a.type() != t.type())
                throw RuntimeError("to_padded: '" + t.name() + "' holds " + t.type().str() + " in host memory, got a " +
                                   a.describe());
            Buffer view = t.type() == Float32 ? Buffer::view(t, s, static_cast<const float *>(a.data()), a.count())
                          : t.type() == Float16
                              ? Buffer::view(t, s, static_cast<const uint16_t *>(a.data()), a.count())
                              : throw RuntimeError("to_padded: '" + t.name() + "' is " + t.type().str() +
                                                   "; only float32 and float16 tensors unpack");
            std::vector<float> out = view.to_padded(t, s, dims, fill);
            py::array_t<float> result(dims);
            std::copy(out.begin(), out.end(), result.mutable_data());
            return result;
        },
        py::arg("tensor"), py::arg("shape"), py::arg("packed"), py::arg("padded_dims"), py::arg("fill") = 0.0f,
        "Unpack packed storage into a padded dense float32 array of `padded_dims`, padding set to `fill`.");
}

} // namespace cora::python
