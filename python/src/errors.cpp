/** \file cora's exceptions as Python classes with the C++ messages: cora.Error (an Exception) and
 * its subclasses CompileError, RuntimeError (also a builtins.RuntimeError), EnvironmentError (also
 * an OSError) and InternalError. The translator looks the classes up in the module when an error
 * crosses, so the module keeps no state of its own. */
#include "bindings.h"

namespace cora::python {

namespace {

py::object make_class(py::module_ &m, const char *name, py::tuple bases, const char *doc) {
    std::string qualified = std::string("cora.") + name;
    PyObject *cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    py::object obj = py::reinterpret_steal<py::object>(cls);
    m.attr(name) = obj;
    return obj;
}

void raise(const char *cls, const std::exception &e) {
    py::object type = py::module_::import("cora._cora").attr(cls);
    PyErr_SetString(type.ptr(), e.what());
}

} // namespace

void bind_errors(py::module_ &m) {
    py::object base =
        make_class(m, "Error", py::make_tuple(py::handle(PyExc_Exception)), "Base of every exception cora raises.");
    make_class(m, "CompileError", py::make_tuple(base),
               "A mistake in a definition, layout or schedule; the message names the dim or tensor at fault.");
    make_class(m, "RuntimeError", py::make_tuple(base, py::handle(PyExc_RuntimeError)),
               "Bad input at run time (lengths, offsets, buffer sizes, element types). Nothing was written.");
    make_class(m, "EnvironmentError", py::make_tuple(base, py::handle(PyExc_OSError)),
               "The environment stops cora: no C++ compiler, an untrusted kernel cache directory.");
    make_class(m, "InternalError", py::make_tuple(base), "A bug in cora itself.");
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const CompileError &e) {
            raise("CompileError", e);
        } catch (const RuntimeError &e) {
            raise("RuntimeError", e);
        } catch (const EnvironmentError &e) {
            raise("EnvironmentError", e);
        } catch (const InternalError &e) {
            raise("InternalError", e);
        } catch (const Error &e) {
            raise("Error", e);
        }
    });
}

} // namespace cora::python
