"""Ahead-of-time libraries from Python: compile_to_library writes one, load_library reads its
self-description and calls it on arrays, checked against the JIT kernel of the same pipeline."""
import os

import numpy as np
import pytest

import cora
from conftest import close, ragged, shape_of


def scores_pipeline():
    batch, i, j, d = ragged(max_len=64, max_batch=64)[0], cora.Dim("i"), cora.Dim("j"), cora.Dim("d")
    B = cora.Param("B", 1, 64)
    length = cora.LengthArray("len", B, 0, 64)
    Q = cora.Tensor("Q", [(batch, B), (i, length(batch)), (d, 8)])
    K = cora.Tensor("K", [(batch, B), (j, length(batch)), (d, 8)])
    S = cora.Func("S", [(batch, B), (i, length(batch)), (j, length(batch))])
    r = cora.Dim("r")
    S.compute(lambda b, x, y: cora.sum(r, 8, Q(b, x, r) * K(b, y, r)))
    return cora.Pipeline([S], "py_scores"), B, length, Q, K, S


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    pipeline, *_ = scores_pipeline()
    out = tmp_path_factory.mktemp("aot")
    result = cora.compile_to_library(pipeline, str(out), "py_scores")
    assert os.path.isfile(result.library) and os.path.isfile(result.header)
    return cora.load_library(result.library)


def test_signature_matches_the_header(library):
    assert [(a.name, a.kind, a.type) for a in library.arguments] == [
        ("B", "param", "int64"), ("len", "length_array", "int32"), ("Q", "input", "float32"),
        ("K", "input", "float32"), ("S", "output", "float32")]
    assert library.arguments[0].min == 1 and library.arguments[0].max == 64
    assert "element count" in library.arguments[4].layout


@pytest.mark.parametrize("lengths", [[1], [0, 3], [16, 17, 0, 64], [5] * 11])
def test_library_agrees_with_jit(library, lengths, rng):
    pipeline, B, length, Q, K, S = scores_pipeline()
    kernel = pipeline.compile()
    shape = shape_of(B, length, lengths)
    sizes = library.buffer_sizes(B=len(lengths), len=lengths)
    assert sizes == {"len": len(lengths), "Q": 8 * sum(lengths), "K": 8 * sum(lengths),
                     "S": sum(n * n for n in lengths)}
    q = rng.standard_normal(sizes["Q"]).astype(np.float32)
    k = rng.standard_normal(sizes["K"]).astype(np.float32)
    s_aot = np.full(sizes["S"], np.nan, np.float32)
    library(B=len(lengths), len=np.array(lengths, np.int32), Q=q, K=k, S=s_aot)
    s_jit = cora.alloc(S, shape)
    kernel.run(shape, {Q: q, K: k, S: s_jit})
    close(s_aot, s_jit, 1e-6)


def test_library_errors_write_nothing(library):
    q = np.ones(16, np.float32)
    s = np.full(8, 3.0, np.float32)
    with pytest.raises(TypeError, match="missing argument.*K"):
        library(B=1, len=[2], Q=q, S=s)
    with pytest.raises(TypeError, match="unknown argument.*X"):
        library(B=1, len=[2], Q=q, K=q, S=s, X=q)
    with pytest.raises(cora.RuntimeError, match="'Q' holds float32, got a float64"):
        library(B=1, len=[2], Q=q.astype(np.float64), K=q, S=s)
    with pytest.raises(cora.RuntimeError, match="S"):  # 8 elements where the shape needs 4
        library(B=1, len=[2], Q=q, K=q, S=s)
    with pytest.raises(cora.RuntimeError, match="len"):
        library(B=1, len=[65], Q=q, K=q, S=s)
    with pytest.raises(cora.RuntimeError, match="param 'B' is an integer"):
        library(B=1.5, len=[2], Q=q, K=q, S=s)
    assert (s == 3.0).all()


def test_load_library_errors(tmp_path):
    with pytest.raises(cora.RuntimeError, match="no library at"):
        cora.load_library(tmp_path / "libnothing.so")
    with pytest.raises(cora.RuntimeError, match="cannot tell the function"):
        cora.load_library(tmp_path / "nothing.dll")
    bad = tmp_path / "libfake.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(cora.RuntimeError, match="did not load"):
        cora.load_library(bad)
