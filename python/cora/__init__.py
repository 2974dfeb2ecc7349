"""cora: kernels for ragged, block-sparse and spatially sparse tensors, defined and scheduled in
Python, compiled to C++ (or CUDA) and run on NumPy arrays and PyTorch tensors without copies.

    import cora, numpy as np
    batch, seq = cora.Dim("batch"), cora.Dim("seq")
    B = cora.Param("B", 1, 1024)
    length = cora.LengthArray("len", B, 0, 512)
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    Out.compute(lambda b, s: 2 * A(b, s))
    k = cora.Pipeline([Out], "scale").compile()
    shape = cora.RaggedShape().set(B, 3).set(length, [5, 0, 17])
    a = np.ones(shape.size_of(A), np.float32)
    out = cora.alloc(Out, shape)
    k.run(shape, {A: a, Out: out})

The names and errors are the C++ API's (include/cora/*.h); docs/user-guide.md has a Python section.
"""
from ._cora import *  # noqa: F401,F403  (the C++ API)
from ._cora import Error, CompileError, RuntimeError, EnvironmentError, InternalError  # noqa: F401
from .aot import load_library, AotLibrary  # noqa: F401
from .generator import Generator, generate  # noqa: F401

__all__ = [name for name in dir() if not name.startswith("_")]
