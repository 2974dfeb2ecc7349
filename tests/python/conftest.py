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
