/** \file The pieces of the Python module `cora._cora`, one per part of the public C++ API, and
 * the conversions they share. Each bind_* adds its classes and functions to the module. */
#pragma once

#include <pybind11/pybind11.h>

#include <cora/cora.h>

#include <string>
#include <vector>

namespace cora::python {

namespace py = pybind11;

void bind_errors(py::module_ &m);      // errors.cpp: the exception classes
void bind_expressions(py::module_ &m); // expressions.cpp: Type, Expr, Dim, Param, LengthArray, ShapeTensor
void bind_tensors(py::module_ &m);     // tensors.cpp: Tensor, Func and the schedule primitives
void bind_spatial(py::module_ &m);     // spatial.cpp: ActiveTiles
void bind_sparse(py::module_ &m);      // sparse.cpp: BsrMatrix, BlockOrder
void bind_runtime(py::module_ &m);     // runtime.cpp: RaggedShape, alloc, padded conversions
void bind_pipeline(py::module_ &m);    // pipeline.cpp: Pipeline, Kernel, ahead-of-time libraries

/** A Python value as an expression: an Expr, a Dim (its index variable), a Param, an int (int64),
 * a float (float32, as in C++) or a NumPy scalar of those kinds. TypeError naming `what` otherwise. */
Expr to_expr(py::handle value, const char *what = "operand");
/** The Dims of a Python list or tuple (TypeError naming `what` for anything else in it). */
std::vector<Dim> to_dims(py::handle sequence, const char *what);
/** A shape from a list of (Dim, extent) pairs. */
Shape to_shape(py::handle sequence, const char *what);

} // namespace cora::python
