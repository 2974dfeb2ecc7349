/** \file Types, expressions and their leaves: Type, Expr, Dim, Param, LengthArray, ShapeTensor, the
 * arithmetic and comparison operators (on Expr, Dim and Param alike, with ints and floats on either
 * side), the math functions and the reductions. As in C++, `/` on integers rounds down and `%`
 * pairs with it; Python's `//` is the same floor division. `&`, `|` and `~` are the logical and,
 * or and not (Python's `and`/`or` cannot build expressions: an Expr in a truth test is a TypeError
 * that says so). */
#include "bindings.h"

#include <pybind11/stl.h>

namespace cora::python {

namespace {

template <typename T> bool is(py::handle h) { return py::isinstance<T>(h); }

/** The operators, bound on each class whose values act as expressions. */
template <typename Class> void add_operators(Class &c) {
    using py::handle;
    auto binary = [&](const char *name, Expr (*op)(const Expr &, const Expr &), bool reflected) {
        c.def(name, [op, reflected](handle a, handle b) {
            Expr x = to_expr(a, "left operand"), y = to_expr(b, "right operand");
            return reflected ? op(y, x) : op(x, y);
        });
    };
    struct Op {
        const char *name, *rname;
        Expr (*fn)(const Expr &, const Expr &);
    };
    const Op ops[] = {
        {"__add__", "__radd__", [](const Expr &a, const Expr &b) { return a + b; }},
        {"__sub__", "__rsub__", [](const Expr &a, const Expr &b) { return a - b; }},
        {"__mul__", "__rmul__", [](const Expr &a, const Expr &b) { return a * b; }},
        {"__truediv__", "__rtruediv__", [](const Expr &a, const Expr &b) { return a / b; }},
        {"__floordiv__", "__rfloordiv__", [](const Expr &a, const Expr &b) { return a / b; }},
        {"__mod__", "__rmod__", [](const Expr &a, const Expr &b) { return a % b; }},
        {"__and__", "__rand__", [](const Expr &a, const Expr &b) { return a && b; }},
        {"__or__", "__ror__", [](const Expr &a, const Expr &b) { return a || b; }},
    };
    for (const Op &op : ops) {
        binary(op.name, op.fn, false);
        binary(op.rname, op.fn, true);
    }
    const Op comparisons[] = {
        {"__eq__", nullptr, [](const Expr &a, const Expr &b) { return a == b; }},
        {"__ne__", nullptr, [](const Expr &a, const Expr &b) { return a != b; }},
        {"__lt__", nullptr, [](const Expr &a, const Expr &b) { return a < b; }},
        {"__le__", nullptr, [](const Expr &a, const Expr &b) { return a <= b; }},
        {"__gt__", nullptr, [](const Expr &a, const Expr &b) { return a > b; }},
        {"__ge__", nullptr, [](const Expr &a, const Expr &b) { return a >= b; }},
    };
    for (const Op &op : comparisons)
        binary(op.name, op.fn, false);
    c.def("__neg__", [](handle a) { return -to_expr(a); });
    c.def("__invert__", [](handle a) { return !to_expr(a); });
    c.def("__bool__", [](handle) -> bool {
        throw py::type_error("a cora expression has no truth value while it is being defined: use cora.select(cond, "
                             "a, b) for a conditional and & | ~ for and, or, not (chained comparisons such as "
                             "0 <= x < n need (0 <= x) & (x < n))");
    });
    // __eq__ builds an expression, so these objects hash by identity (as Python objects that
    // define __eq__ otherwise would not hash at all).
    c.def("__hash__", [](handle self) { return py::hash(py::int_(reinterpret_cast<intptr_t>(self.ptr()))); });
}

Type to_type(py::handle h) {
    if (is<Type>(h)) return h.cast<Type>();
    if (is<py::str>(h)) {
        std::string s = h.cast<std::string>();
        for (Type t : {Float32, Float64, Float16, Int32, Int64, Bool})
            if (s == t.str()) return t;
        throw py::value_error("unknown element type '" + s + "' (float32, float64, float16, int32, int64, bool)");
    }
    throw py::type_error("an element type is a cora.Type (cora.float32, ...) or its name, got " +
                         std::string(py::str(h.get_type().attr("__name__"))));
}

} // namespace

Expr to_expr(py::handle v, const char *what) {
    if (is<Expr>(v)) return v.cast<Expr>();
    if (is<Dim>(v)) return v.cast<Dim>().var();
    if (is<Param>(v)) return v.cast<Param>().expr();
    if (is<py::bool_>(v))
        throw py::type_error(std::string(what) + ": a Python bool is not a cora expression (use 1 or 0, or a "
                                                 "comparison)");
    if (is<py::int_>(v)) return Expr(v.cast<int64_t>());
    if (is<py::float_>(v)) return Expr(v.cast<double>());
    // NumPy scalars and other numbers: by their Python value.
    if (py::hasattr(v, "dtype") && py::hasattr(v, "item") && py::len(v.attr("shape")) == 0)
        return to_expr(v.attr("item")(), what);
    throw py::type_error(std::string(what) + ": a " + std::string(py::str(v.get_type().attr("__name__"))) +
                         " is not a cora expression (an Expr, Dim, Param, int or float)");
}

std::vector<Dim> to_dims(py::handle seq, const char *what) {
    std::vector<Dim> dims;
    for (py::handle d : seq) {
        if (!is<Dim>(d))
            throw py::type_error(std::string(what) + ": expected Dims, got a " +
                                 std::string(py::str(d.get_type().attr("__name__"))));
        dims.push_back(d.cast<Dim>());
    }
    return dims;
}

Shape to_shape(py::handle seq, const char *what) {
    Shape shape;
    for (py::handle item : seq) {
        if (!py::isinstance<py::tuple>(item) && !py::isinstance<py::list>(item))
            throw py::type_error(std::string(what) + ": each dim is a (Dim, extent) pair");
        py::sequence pair = py::reinterpret_borrow<py::sequence>(item);
        if (py::len(pair) != 2 || !is<Dim>(pair[0]))
            throw py::type_error(std::string(what) + ": each dim is a (Dim, extent) pair");
        shape.emplace_back(pair[0].cast<Dim>(), to_expr(pair[1], "extent"));
    }
    return shape;
}

void bind_expressions(py::module_ &m) {
    py::class_<Type>(m, "Type", "An element type: cora.float32, float64, float16 (storage only), int32, int64, bool_.")
        .def(py::init([](py::handle h) { return to_type(h); }), py::arg("name"))
        .def_property_readonly("bits", [](const Type &t) { return t.bits; })
        .def("is_float", &Type::is_float)
        .def("is_int", &Type::is_int)
        .def("__str__", &Type::str)
        .def("__repr__", [](const Type &t) { return "cora." + (t.is_bool() ? std::string("bool_") : t.str()); })
        .def("__eq__", [](const Type &a, py::handle b) { return is<Type>(b) && a == b.cast<Type>(); })
        .def("__hash__", [](const Type &t) { return py::hash(py::str(t.str())); });
    py::implicitly_convertible<py::str, Type>();
    m.attr("float32") = Float32;
    m.attr("float64") = Float64;
    m.attr("float16") = Float16;
    m.attr("int32") = Int32;
    m.attr("int64") = Int64;
    m.attr("bool_") = Bool;

    py::class_<Expr> expr(m, "Expr", "An immutable expression: index arithmetic (int64) or values (float32, ...).");
    expr.def(py::init([](py::handle v) { return to_expr(v, "Expr()"); }), py::arg("value"))
        .def_property_readonly("type", &Expr::type)
        .def("__str__", [](const Expr &e) { return to_string(e); })
        .def("__repr__", [](const Expr &e) { return "<cora.Expr " + to_string(e) + ">"; });
    add_operators(expr);

    py::class_<Dim> dim(m, "Dim", "A named dimension: loops and tensor dims that share it are linked by it.");
    dim.def(py::init<const std::string &>(), py::arg("name"))
        .def_property_readonly("name", &Dim::name)
        .def("var", &Dim::var, "The index variable of this dimension.")
        .def("same_as", &Dim::same_as)
        .def("__repr__", [](const Dim &d) { return "<cora.Dim " + d.name() + ">"; });
    add_operators(dim);

    py::class_<Param> param(m, "Param", "A symbolic integer supplied at run time, with an inclusive range.");
    param
        .def(py::init<const std::string &, int64_t, int64_t>(), py::arg("name"), py::arg("min_value"),
             py::arg("max_value"))
        .def_property_readonly("name", &Param::name)
        .def_property_readonly("min_value", &Param::min_value)
        .def_property_readonly("max_value", &Param::max_value)
        .def("expr", &Param::expr)
        .def("__repr__", [](const Param &p) {
            return "<cora.Param " + p.name() + " in [" + std::to_string(p.min_value()) + ", " +
                   std::to_string(p.max_value()) + "]>";
        });
    add_operators(param);

    py::class_<LengthArray>(m, "LengthArray",
                            "An input int32 array of lengths, one per index of a dim of extent `count`, each in "
                            "[min_value, max_value]. len(b) reads it.")
        .def(py::init([](const std::string &name, py::handle count, int64_t lo, int64_t hi) {
                 return LengthArray(name, to_expr(count, "count"), lo, hi);
             }),
             py::arg("name"), py::arg("count"), py::arg("min_value"), py::arg("max_value"))
        .def_static("constant", &LengthArray::constant, py::arg("name"), py::arg("values"), py::arg("min_value"),
                    py::arg("max_value"))
        .def_property_readonly("name", &LengthArray::name)
        .def_property_readonly("count", &LengthArray::count)
        .def_property_readonly("min_value", &LengthArray::min_value)
        .def_property_readonly("max_value", &LengthArray::max_value)
        .def("__call__", [](const LengthArray &l, py::handle i) { return l(to_expr(i, "index")); })
        .def("__repr__", [](const LengthArray &l) { return "<cora.LengthArray " + l.name() + ">"; });

    py::class_<ShapeTensor>(m, "ShapeTensor",
                            "An input int32 tensor that belongs to a batch's shape (a mask, a coordinate list), "
                            "bound with RaggedShape.set.")
        .def(py::init([](const std::string &name, py::iterable dims, int64_t lo, int64_t hi) {
                 std::vector<Expr> d;
                 for (py::handle h : dims)
                     d.push_back(to_expr(h, "dim"));
                 return ShapeTensor(name, d, lo, hi);
             }),
             py::arg("name"), py::arg("dims"), py::arg("min_value"), py::arg("max_value"))
        .def_property_readonly("name", &ShapeTensor::name)
        .def_property_readonly("count", &ShapeTensor::count)
        .def("__call__",
             [](const ShapeTensor &t, py::args index) {
                 std::vector<Expr> i;
                 for (py::handle h : index)
                     i.push_back(to_expr(h, "index"));
                 return t(i);
             })
        .def("__repr__", [](const ShapeTensor &t) { return "<cora.ShapeTensor " + t.name() + ">"; });

    auto unary = [&](const char *name, Expr (*fn)(const Expr &), const char *doc) {
        m.def(
            name, [fn](py::handle a) { return fn(to_expr(a, "argument")); }, doc);
    };
    unary("exp", &cora::exp, "e to the power of a float expression.");
    unary("log", &cora::log, "Natural logarithm.");
    unary("sqrt", &cora::sqrt, "Square root.");
    unary("tanh", &cora::tanh, "Hyperbolic tangent.");
    unary("erf", &cora::erf, "The error function.");
    unary("abs", &cora::abs, "Absolute value.");
    m.def(
        "min", [](py::handle a, py::handle b) { return cora::min(to_expr(a), to_expr(b)); }, "The smaller of two.");
    m.def(
        "max", [](py::handle a, py::handle b) { return cora::max(to_expr(a), to_expr(b)); }, "The larger of two.");
    m.def(
        "select",
        [](py::handle c, py::handle t, py::handle f) {
            return cora::select(to_expr(c, "condition"), to_expr(t, "true value"), to_expr(f, "false value"));
        },
        py::arg("cond"), py::arg("true_value"), py::arg("false_value"), "cond ? true_value : false_value, lazily.");
    m.def(
        "cast", [](py::handle t, py::handle e) { return cora::cast(to_type(t), to_expr(e)); }, py::arg("type"),
        py::arg("value"));
    m.def("ceil_mult", [](py::handle e, int64_t k) { return cora::ceil_mult(to_expr(e), k); });
    m.def("floor_mult", [](py::handle e, int64_t k) { return cora::floor_mult(to_expr(e), k); });
    m.def("ceil_div", [](py::handle e, int64_t k) { return cora::ceil_div(to_expr(e), k); });
    auto reduction = [&](const char *name, Expr (*fn)(const Dim &, const Expr &, const Expr &), const char *doc) {
        m.def(
            name,
            [fn](const Dim &k, py::handle extent, py::handle body) {
                return fn(k, to_expr(extent, "extent"), to_expr(body, "body"));
            },
            py::arg("k"), py::arg("extent"), py::arg("body"), doc);
    };
    reduction("sum", &cora::sum, "The sum of `body` over k in [0, extent); the extent may depend on outer dims.");
    reduction("maximum", &cora::maximum, "The largest `body` over k in [0, extent).");
    reduction("minimum", &cora::minimum, "The smallest `body` over k in [0, extent).");
}

} // namespace cora::python
