/** \file The extension module `cora._cora`; the package `cora` (python/cora/__init__.py) re-exports
 * it with the pure-Python parts (loading AOT libraries, the PyTorch encoder). */
#include "bindings.h"

PYBIND11_MODULE(_cora, m) {
    m.doc() = "cora: ragged, block-sparse and spatially sparse tensor kernels (the C++ library's API).";
    using namespace cora::python;
    bind_errors(m);
    bind_expressions(m);
    bind_tensors(m);
    bind_spatial(m);
    bind_sparse(m);
    bind_runtime(m);
    bind_pipeline(m);
}
