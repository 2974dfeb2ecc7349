"""Shared helpers of the Python tests (tests/python, run by ctest through pytest with
PYTHONPATH=<build>/python, one ctest entry per test function)."""
import numpy as np
import pytest

import cora


def ragged(name="len", max_len=512, max_batch=1024):
    """The README's ragged 2-D setting: dims batch and seq, B, len, and a tensor A over them."""
    batch, seq = cora.Dim("batch"), cora.Dim("seq")
    B = cora.Param("B", 1, max_batch)
    length = cora.LengthArray(name, B, 0, max_len)
    return batch, seq, B, length


def jagged_softmax(name, max_len=512, max_batch=1024):
    """Softmax over each item's own values, with E = exp(V - max) an intermediate Func (read by Sum
    and Out): (kernel, V, Out, B, length)."""
    batch, seq, B, length = ragged(max_len=max_len, max_batch=max_batch)
    k = cora.Dim("k")
    V = cora.Tensor("V", [(batch, B), (seq, length(batch))])
    Mx = cora.Func("Mx", [(batch, B)])
    E = cora.Func("E", [(batch, B), (seq, length(batch))])
    Sum = cora.Func("Sum", [(batch, B)])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    Mx.compute(lambda b: cora.maximum(k, length(b), V(b, k)))
    E.compute(lambda b, s: cora.exp(V(b, s) - Mx(b)))
    Sum.compute(lambda b: cora.sum(k, length(b), E(b, k)))
    Out.compute(lambda b, s: E(b, s) / Sum(b))
    return cora.Pipeline([Out], name).compile(), V, Out, B, length


def shape_of(B, length, lengths):
    return cora.RaggedShape().set(B, len(lengths)).set(length, lengths)


def close(got, want, tol=1e-5):
    """Max relative error within tol; fails on NaN or inf anywhere (a NaN never compares <= tol)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.size == 0:
        return
    assert np.isfinite(got).all(), "non-finite output"
    err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0))
    assert err <= tol, f"max relative error {err}"


# Lengths with the edge cases: empty items, one, a multiple of a vector and one past, the maximum.
EDGE_LENGTHS = [[0], [1], [5, 0, 17], [16, 17, 32, 33], [512], [3] * 9, [0, 0, 0]]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
