"""Generators in Python: the C++ Generator's path (include/cora/Generator.h) for Python definitions.

A generator is a class with compile-time parameters and a ``build()`` that defines the Funcs and
their schedule and returns the outputs; it is built once per target, so a schedule may depend on
``self.target`` and ``self.vector_bits``::

    class Scale(cora.Generator):
        params = {"factor": (2, "the constant to multiply by")}

        def build(self):
            i = cora.Dim("i")
            N = cora.Param("N", 1, 1 << 20)
            A = cora.Tensor("A", [(i, N)])
            Out = cora.Func("Out", [(i, N)])
            Out.compute(lambda j: A(j) * float(self.factor))
            return [Out]

    cora.generate(Scale, "out", "scale", targets="x86-64-v4,x86-64-v3", factor=3)

writes ``out/libscale.so`` and ``out/scale.h``, as the C++ generator command line would. The same
from a shell (cora::generator_main's options)::

    python3 -m cora.generator_main FILE.py[:CLASS] -o DIR [-f FUNCTION] [-t TARGETS] [name=value ...]

FILE.py defines cora.Generator subclasses; CLASS may be left out when it defines exactly one.
FUNCTION defaults to the class name in lower case. A bad command line or definition is one line on
stderr and exit status 2.
"""
from . import _cora


class Generator:
    """Subclass it: set ``params`` ({name: (default, help)}) and define ``build()``."""

    params = {}

    def __init__(self, target="host", **values):
        self.target = target
        for name, (default, _help) in self.params.items():
            setattr(self, name, default)
        for name, value in values.items():
            if name not in self.params:
                known = ", ".join(self.params) or "none"
                raise _cora.CompileError(f"unknown generator parameter '{name}' (known: {known})")
            setattr(self, name, _parse(name, value))

    @property
    def vector_bits(self):
        """The vector width of the target in bits, as the C++ Generator::vector_bits()."""
        if self.target == "x86-64-v4":
            return 512
        if self.target == "x86-64-v3":
            return 256
        if self.target == "host":
            return _cora.host_vector_bits()
        return 128

    def build(self):
        raise NotImplementedError("a Generator defines build(), returning its output Funcs")


def _parse(name, value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    text = str(value)
    if text in ("true", "false"):
        return int(text == "true")
    try:
        return int(text, 0)
    except ValueError:
        raise _cora.CompileError(f"generator parameter '{name}': '{text}' is not an integer or true/false") from None


def generate(generator_class, output_dir, function_name=None, targets="host", keep_sources=False, **params):
    """Build ``generator_class`` once per target (comma-separated, as the C++ generators' -t) and write
    lib<function_name>.so and <function_name>.h to ``output_dir``; returns the AotResult."""
    if not (isinstance(generator_class, type) and issubclass(generator_class, Generator)):
        raise TypeError(f"generate: expected a cora.Generator subclass, got {generator_class!r}")
    name = function_name or generator_class.__name__.lower()
    pipelines = []
    for target in targets.split(","):
        outputs = generator_class(target=target, **params).build()
        if not isinstance(outputs, (list, tuple)) or not outputs:
            raise _cora.CompileError(f"{generator_class.__name__}.build() must return a non-empty list of Funcs")
        pipelines.append(_cora.Pipeline(list(outputs), name))
    return _cora.compile_to_library(pipelines, str(output_dir), name, targets, keep_sources)
