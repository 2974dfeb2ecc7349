"""Ahead-of-time libraries from Python.

``cora.load_library(path)`` loads a library written by ``cora_add_library``, a generator or
``cora.compile_to_library``, reads the arguments it describes (its exported ``<fn>_signature()``,
the same order, kinds, ranges and layouts as its C header) and calls its generic entry on arrays
(NumPy, PyTorch, anything with ``__dlpack__`` or the buffer protocol) without copies::

    lib = cora.load_library("build/tests/cora_aot_scores/libaot_scores.so")
    sizes = lib.buffer_sizes(B=2, len=lengths)          # element counts, by argument name
    S = numpy.zeros(sizes["S"], numpy.float32)
    lib(B=2, len=lengths, Q=q, K=k, S=S)               # cora.RuntimeError on bad input, S untouched

Every argument is passed by name. Arrays are checked for element type, memory (host) and layout
(packed) before the call; the library checks each array's element count against the shape and
every length against its range, so a wrong size is a cora.RuntimeError with the library's message
and nothing written.
"""
import ctypes
import json
import os
from collections import namedtuple

from . import _cora

_TYPE_CODES = {"int32": 1, "int64": 2, "float32": 3, "float64": 4, "float16": 5}

Argument = namedtuple("Argument", "name kind type min max size_index shape_index layout")
Argument.__doc__ = "One argument of an AOT library, in ABI order (kind: param, length_array, input, output)."


class _Arg(ctypes.Structure):  # cora_arg_t (prelude/cora_runtime.h)
    _fields_ = [("name", ctypes.c_char_p), ("type_code", ctypes.c_int32), ("is_scalar", ctypes.c_int32),
                ("scalar", ctypes.c_int64), ("data", ctypes.c_void_p), ("count", ctypes.c_int64)]


class AotLibrary:
    """A loaded AOT library: call it with every argument by name."""

    def __init__(self, path, function_name=None):
        path = os.path.abspath(os.fspath(path))
        if function_name is None:
            base = os.path.basename(path)
            if not (base.startswith("lib") and base.endswith(".so")):
                raise _cora.RuntimeError(
                    f"load_library: cannot tell the function of '{path}' (not lib<function>.so): "
                    "pass function_name")
            function_name = base[3:-3]
        if not os.path.isfile(path):
            raise _cora.RuntimeError(f"load_library: no library at '{path}'")
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as e:
            raise _cora.RuntimeError(f"load_library: '{path}' did not load: {e}") from None
        fn = function_name
        try:
            signature = getattr(self._lib, fn + "_signature")
        except AttributeError:
            raise _cora.RuntimeError(
                f"load_library: '{path}' exports no {fn}_signature(): not a cora CPU library for function "
                f"'{fn}', or one built by an older cora (rebuild it)") from None
        signature.restype = ctypes.c_char_p
        signature.argtypes = []
        meta = json.loads(signature().decode())
        if meta.get("format") != 1:
            raise _cora.RuntimeError(f"load_library: '{path}' describes itself in format {meta.get('format')}; "
                                     "this cora reads format 1")
        if meta["device"] != "cpu":
            raise _cora.RuntimeError(f"load_library: '{path}' is a {meta['device']} library; Python loads CPU "
                                     "libraries (compile the pipeline with backend='cuda' instead)")
        self.path, self.function = path, fn
        self.arguments = [Argument(a["name"], a["kind"], a["type"], a.get("min"), a.get("max"), a["size_index"],
                                   a["shape_index"], a["layout"]) for a in meta["arguments"]]
        self._size_count = meta["size_count"]
        self._names = [a.name.encode() for a in self.arguments]
        self._shape_arguments = sorted((a for a in self.arguments if a.shape_index >= 0),
                                       key=lambda a: a.shape_index)
        self._entry = getattr(self._lib, fn + "_argv")
        self._entry.argtypes = [ctypes.POINTER(_Arg), ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32]
        self._entry.restype = ctypes.c_int32
        self._sizes = getattr(self._lib, fn + "_buffer_sizes_argv")
        self._sizes.argtypes = [ctypes.POINTER(_Arg), ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
                                ctypes.c_char_p, ctypes.c_int32]
        self._sizes.restype = ctypes.c_int32

    def __repr__(self):
        args = ", ".join(f"{a.name}: {a.kind} {a.type}" for a in self.arguments)
        return f"<cora.AotLibrary {self.function}({args})>"

    def _pack(self, arguments, values, keep):
        known = {a.name for a in arguments}
        unknown = [k for k in values if k not in known]
        if unknown:
            raise TypeError(f"{self.function}: unknown argument(s) {', '.join(unknown)} "
                            f"(it takes {', '.join(a.name for a in arguments)})")
        missing = [a.name for a in arguments if a.name not in values]
        if missing:
            raise TypeError(f"{self.function}: missing argument(s) {', '.join(missing)}")
        packed = (_Arg * max(len(arguments), 1))()
        for i, a in enumerate(arguments):
            v, slot = values[a.name], packed[i]
            slot.name = a.name.encode()
            slot.type_code = _TYPE_CODES[a.type]
            if a.kind == "param":
                if isinstance(v, bool) or not hasattr(v, "__index__"):
                    raise _cora.RuntimeError(f"{self.function}: param '{a.name}' is an integer, got "
                                             f"{type(v).__name__}")
                slot.is_scalar, slot.scalar = 1, v.__index__()
                continue
            if a.kind == "length_array" and isinstance(v, (list, tuple, range)):
                v = (ctypes.c_int32 * len(v))(*v)
            address, count, dtype, read_only, on_host = _cora._array_info(v, a.name)
            keep.append(v)
            if dtype != a.type:
                raise _cora.RuntimeError(f"{self.function}: argument '{a.name}' holds {a.type}, got a {dtype} array")
            if not on_host:
                raise _cora.RuntimeError(f"{self.function}: argument '{a.name}' is not in host memory")
            if a.kind == "output" and read_only:
                raise _cora.RuntimeError(f"{self.function}: output '{a.name}' is a read-only array")
            slot.data, slot.count = address, count
        return packed

    def __call__(self, **arguments):
        """Run the kernel; every argument by name. cora.RuntimeError, nothing written, on bad input."""
        keep = []
        packed = self._pack(self.arguments, arguments, keep)
        error = ctypes.create_string_buffer(512)
        status = self._entry(packed, len(self.arguments), error, len(error))
        if status != 0:
            raise _cora.RuntimeError(error.value.decode(errors="replace"))

    def buffer_sizes(self, **shape):
        """The element count of every array argument (by name) for these params and length arrays."""
        keep = []
        packed = self._pack(self._shape_arguments, shape, keep)
        sizes = (ctypes.c_int64 * max(self._size_count, 1))()
        error = ctypes.create_string_buffer(512)
        status = self._sizes(packed, len(self._shape_arguments), sizes, error, len(error))
        if status != 0:
            raise _cora.RuntimeError(error.value.decode(errors="replace"))
        return {a.name: sizes[a.size_index] for a in self.arguments if a.size_index >= 0}


def load_library(path, function_name=None):
    """Load an AOT library (lib<function>.so) written by cora; see AotLibrary."""
    return AotLibrary(path, function_name)
