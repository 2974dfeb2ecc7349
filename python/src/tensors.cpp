/** \file Tensor and Func: definitions (`compute` with a Python function of the domain's index
 * variables), storage transforms and the schedule primitives, with the C++ names and errors. The
 * primitives return the Func, so calls chain as in C++. */
#include "bindings.h"

#include <pybind11/stl.h>

namespace cora::python {

namespace {

/** Where the Python caller is: the file and line that compute() errors quote. */
std::pair<std::string, int> caller_location() {
    py::object frame = py::module_::import("sys").attr("_getframe")(0);
    if (frame.is_none()) return {"<python>", 0};
    return {py::str(frame.attr("f_code").attr("co_filename")), frame.attr("f_lineno").cast<int>()};
}

/** Calls `f` with one index variable per domain dim (or none when it takes none). */
Expr call_over_dims(const Func &func, py::handle f) {
    std::vector<Expr> vars;
    for (const DimExtent &d : func.domain())
        vars.push_back(d.dim.var());
    if (py::hasattr(f, "__code__")) {
        py::object code = f.attr("__code__");
        const int flags = code.attr("co_flags").cast<int>();
        const bool varargs = (flags & 0x04) != 0; // CO_VARARGS
        int64_t takes = code.attr("co_argcount").cast<int64_t>();
        if (py::hasattr(f, "__self__")) takes -= 1; // a bound method
        if (!varargs && takes != 0 && takes != (int64_t)vars.size())
            throw CompileError("compute() lambda of '" + func.name() + "' takes " + std::to_string(takes) +
                               " argument(s) but its domain has " + std::to_string(vars.size()) + " dim(s)");
        if (!varargs && takes == 0) return to_expr(f(), "compute() result");
    }
    py::tuple args(vars.size());
    for (size_t i = 0; i < vars.size(); i++)
        args[i] = py::cast(vars[i]);
    return to_expr(f(*args), "compute() result");
}

std::vector<Dim> dims_of(py::args args, const char *what) {
    if (args.size() == 1 && (py::isinstance<py::list>(args[0]) || py::isinstance<py::tuple>(args[0])))
        return to_dims(args[0], what);
    return to_dims(args, what);
}

/** gpu_blocks / gpu_threads (three C++ overloads each: x; x, y; x, y, z) from 1 to 3 Dims. */
using Axis1 = Func &(Func::*)(const Dim &);
using Axis2 = Func &(Func::*)(const Dim &, const Dim &);
using Axis3 = Func &(Func::*)(const Dim &, const Dim &, const Dim &);
struct GpuAxes {
    Axis1 one;
    Axis2 two;
    Axis3 three;
    const char *what;
};
const GpuAxes kBlocks{&Func::gpu_blocks, &Func::gpu_blocks, &Func::gpu_blocks, "gpu_blocks"};
const GpuAxes kThreads{&Func::gpu_threads, &Func::gpu_threads, &Func::gpu_threads, "gpu_threads"};
Func &bind_gpu_axes(Func &f, py::args dims, const GpuAxes &axes) {
    std::vector<Dim> d = dims_of(dims, axes.what);
    if (d.size() == 1) return (f.*axes.one)(d[0]);
    if (d.size() == 2) return (f.*axes.two)(d[0], d[1]);
    if (d.size() == 3) return (f.*axes.three)(d[0], d[1], d[2]);
    throw py::type_error(std::string(axes.what) + " takes 1 to 3 Dims, got " + std::to_string(d.size()));
}

} // namespace

void bind_tensors(py::module_ &m) {
    py::class_<DimExtent>(m, "DimExtent", "One dim of a shape: a Dim and its extent.")
        .def_property_readonly("dim", [](const DimExtent &d) { return d.dim; })
        .def_property_readonly("extent", [](const DimExtent &d) { return d.extent; })
        .def("__iter__", [](const DimExtent &d) { return py::iter(py::make_tuple(d.dim, d.extent)); })
        .def("__repr__", [](const DimExtent &d) { return "(" + d.dim.name() + ", " + to_string(d.extent) + ")"; });

    py::class_<Tensor> tensor(m, "Tensor",
                              "An input tensor with a ragged or dense shape: a list of (Dim, extent) pairs, outermost "
                              "first; an extent may use the dims before it.");
    tensor
        .def(py::init([](const std::string &name, py::handle shape, py::handle type) {
                 return Tensor(name, to_shape(shape, "Tensor shape"), py::cast<Type>(type));
             }),
             py::arg("name"), py::arg("shape"), py::arg("type") = Float32)
        .def_property_readonly("name", &Tensor::name)
        .def_property_readonly("type", &Tensor::type)
        .def("dimensions", &Tensor::dimensions)
        .def("shape", &Tensor::shape, "The storage layout, outermost dim first.")
        .def("__call__",
             [](const Tensor &t, py::args indices) {
                 std::vector<Expr> i;
                 for (py::handle h : indices)
                     i.push_back(to_expr(h, "index"));
                 return t.access(i);
             })
        .def("same_as", &Tensor::same_as)
        .def("index_range", &Tensor::index_range, py::arg("min_value"), py::arg("max_value"))
        .def("index_values", &Tensor::index_values, py::arg("values"))
        .def("pad_storage", &Tensor::pad_storage, py::arg("dim"), py::arg("multiple"))
        .def("fuse_storage", &Tensor::fuse_storage, py::arg("outer"), py::arg("inner"), py::arg("fused"),
             py::arg("bulk_pad") = 1)
        .def("split_storage", &Tensor::split_storage, py::arg("dim"), py::arg("outer"), py::arg("inner"),
             py::arg("factor"))
        .def("reorder_storage",
             [](Tensor &t, py::args dims) -> Tensor & { return t.reorder_storage(dims_of(dims, "reorder_storage")); })
        .def("__repr__", [](const Tensor &t) { return "<cora.Tensor " + t.name() + ">"; });

    // The chaining methods return the Func itself (the same handle), as the C++ references do.
    const auto self = py::return_value_policy::reference_internal;
    py::class_<Func, Tensor> func(m, "Func", "A computed tensor: a loop domain (its shape) and a definition.");
    func.def(py::init([](const std::string &name, py::handle domain, py::handle type) {
                 return Func(name, to_shape(domain, "Func domain"), py::cast<Type>(type));
             }),
             py::arg("name"), py::arg("domain"), py::arg("type") = Float32)
        .def(
            "compute",
            [](Func &f, py::handle value) -> Func & {
                auto [file, line] = caller_location();
                Expr e = py::isinstance<py::function>(value) ||
                                 (py::hasattr(value, "__call__") && !py::isinstance<Expr>(value) &&
                                  !py::isinstance<Tensor>(value))
                             ? call_over_dims(f, value)
                             : to_expr(value, "compute() value");
                return f.compute(e, file.c_str(), line);
            },
            py::arg("definition"), self,
            "Define every element: a function taking one index variable per domain dim, or an expression.")
        .def(
            "store_in", [](Func &f, py::handle shape) -> Func & { return f.store_in(to_shape(shape, "store_in")); },
            self)
        .def("defined", &Func::defined)
        .def("domain", &Func::domain)
        .def("split", &Func::split, py::arg("dim"), py::arg("outer"), py::arg("inner"), py::arg("factor"), self)
        .def("fuse", &Func::fuse, py::arg("outer"), py::arg("inner"), py::arg("fused"), self)
        .def("pad_loop", &Func::pad_loop, py::arg("dim"), py::arg("multiple"), self)
        .def("remap", &Func::remap, py::arg("dim"), py::arg("rank"), py::arg("permutation"), self)
        .def(
            "remap_longest_first",
            [](Func &f, const Dim &d, const Dim &rank, py::handle cost) -> Func & {
                return f.remap_longest_first(d, rank, to_expr(cost, "cost"));
            },
            py::arg("dim"), py::arg("rank"), py::arg("cost"), self)
        .def("over_active_tiles", &Func::over_active_tiles, py::arg("tiles"), py::arg("n"), py::arg("y"), py::arg("x"),
             py::arg("tile"), py::arg("yi"), py::arg("xi"), self)
        .def("fill_inactive_tiles", [](Func &f, py::handle v) { return f.fill_inactive_tiles(to_expr(v, "value")); })
        .def(
            "hfuse", [](Func &f, const std::vector<Func> &others) -> Func & { return f.hfuse(others); }, self)
        .def(
            "split_op", [](Func &f, const Dim &d, py::handle point) { return f.split_op(d, to_expr(point, "point")); },
            py::arg("dim"), py::arg("point"))
        .def("compute_inline", &Func::compute_inline, self)
        .def("compute_root", &Func::compute_root, self)
        .def("compute_at", &Func::compute_at, py::arg("consumer"), py::arg("dim"), self)
        .def("cache_write", &Func::cache_write, py::arg("at"), self)
        .def(
            "cache_read",
            [](Func &f, const Tensor &t, const Dim &at, const std::vector<Dim> &tile_order) -> Func & {
                return f.cache_read(t, at, tile_order);
            },
            py::arg("tensor"), py::arg("at"), py::arg("tile_order") = std::vector<Dim>{}, self)
        .def("pad_storage", &Func::pad_storage, py::arg("dim"), py::arg("multiple"), self)
        .def("fuse_storage", &Func::fuse_storage, py::arg("outer"), py::arg("inner"), py::arg("fused"),
             py::arg("bulk_pad") = 1, self)
        .def("split_storage", &Func::split_storage, py::arg("dim"), py::arg("outer"), py::arg("inner"),
             py::arg("factor"), self)
        .def(
            "reorder_storage",
            [](Func &f, py::args dims) -> Func & { return f.reorder_storage(dims_of(dims, "reorder_storage")); }, self)
        .def(
            "reorder", [](Func &f, py::args dims) -> Func & { return f.reorder(dims_of(dims, "reorder")); }, self,
            "Reorder loops: the given loops take the positions they occupy, outermost first.")
        .def("parallel", &Func::parallel, py::arg("dim"), self)
        .def("vectorize", &Func::vectorize, py::arg("dim"), self)
        .def("unroll", &Func::unroll, py::arg("dim"), self)
        .def("dismantle", &Func::dismantle, py::arg("dim"), self)
        .def("specialize_interior", &Func::specialize_interior, py::arg("dim"), self)
        .def(
            "gpu_blocks", [](Func &f, py::args dims) -> Func & { return bind_gpu_axes(f, dims, kBlocks); }, self)
        .def(
            "gpu_threads", [](Func &f, py::args dims) -> Func & { return bind_gpu_axes(f, dims, kThreads); }, self)
        .def("gpu_mma", &Func::gpu_mma, py::arg("k"), self)
        .def("__repr__", [](const Func &f) { return "<cora.Func " + f.name() + ">"; });
}

} // namespace cora::python
