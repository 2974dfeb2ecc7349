"""Pipeline.tune from Python: candidates measured, the winner recorded and taken from the table
next time, contraction tiles given by hand, errors."""
import numpy as np
import pytest

import cora
from conftest import close


def grouped_gemm(name):
    e, t, r, n = (cora.Dim(x) for x in ("e", "t", "r", "n"))
    E = cora.Param("E", 1, 16)
    count = cora.LengthArray("count", E, 0, 64)
    X = cora.Tensor("X", [(e, E), (t, count(e)), (r, 300)])
    W = cora.Tensor("W", [(e, E), (r, 300), (n, 32)])
    Y = cora.Func("Y", [(e, E), (t, count(e)), (n, 32)])
    Y.compute(lambda a, b, c: cora.sum(r, 300, X(a, b, r) * W(a, r, c)))
    return cora.Pipeline([Y], name), X, W, Y, E, count


def test_tune_records_the_winner_and_reuses_it(tmp_path, rng):
    p, X, W, Y, E, count = grouped_gemm("py_tune")
    counts = [17, 0, 33, 5]
    shape = cora.RaggedShape().set(E, len(counts)).set(count, counts)
    table = str(tmp_path / "tuning.txt")
    first = p.tune([shape], table=table, reps=1, vector_bits=256)
    assert first.measured >= 3 and first.from_table == 0 and not first.table_rebuilt
    assert "Y" in first.contraction_tiles and "untiled" in first.report
    second = p.tune([shape], table=table, reps=1, vector_bits=256)
    assert second.measured == 0 and second.from_table == 1
    assert second.contraction_tiles == first.contraction_tiles
    assert second.kernel.lowered == first.kernel.lowered
    x = rng.standard_normal((sum(counts), 300)).astype(np.float32)
    w = rng.standard_normal((len(counts), 300, 32)).astype(np.float32)
    y = cora.alloc(Y, shape)
    second.kernel.run(shape, {X: x, W: w, Y: y})
    want, start = np.zeros((sum(counts), 32)), 0
    for i, c in enumerate(counts):
        want[start:start + c] = x[start:start + c].astype(np.float64) @ w[i]
        start += c
    close(y.reshape(-1, 32), want, 1e-4)
    # A corrupt table is rebuilt, not trusted.
    with open(table, "w") as f:
        f.write("cora-tuning-table 1\nY|x\t1 4 1 256 1.0\n")
    third = p.tune([shape], table=table, reps=1, vector_bits=256)
    assert third.table_rebuilt and "is corrupt" in third.report and third.measured >= 3


def test_contraction_tiles_by_hand_and_errors(tmp_path):
    p, X, W, Y, E, count = grouped_gemm("py_tiles")
    k = p.compile(vector_bits=256, contraction_tiles={"Y": cora.ContractionTile(rows=8, vectors=1, panel=128)})
    assert "unrolled for t_i in [0, 0 + 8)" in k.lowered
    assert cora.ContractionTile() == cora.ContractionTile(True, 4, 0, 256)
    with pytest.raises(cora.CompileError, match="vectors is 3; expected 0"):
        p.compile(vector_bits=256, contraction_tiles={"Y": cora.ContractionTile(vectors=3)})
    with pytest.raises(cora.RuntimeError, match="no samples to measure on"):
        p.tune([], table=str(tmp_path / "t.txt"))
    with pytest.raises(TypeError, match="unknown option 'tiles'"):
        p.tune([cora.RaggedShape().set(E, 1).set(count, [1])], tiles={})
