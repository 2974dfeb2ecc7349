"""Block-sparse weights from PyTorch: a BSR tensor's arrays (crow_indices, int64 col_indices, values)
bound to a BsrMatrix's symbols as they are, the product checked against the dense one."""
import numpy as np
import pytest

import cora
from conftest import close, ragged

torch = pytest.importorskip("torch")


def bsr_linear(rows, cols, block, index_type, order=cora.BlockOrder.RowMajor):
    batch, seq, B, length = ragged(max_len=64, max_batch=16)
    r, n = cora.Dim("r"), cora.Dim("n")
    W = cora.BsrMatrix("W", rows, cols, block, block, order=order, index_type=index_type)
    X = cora.Tensor("X", [(batch, B), (seq, length(batch)), (r, cols)])
    Y = cora.Func("Y", [(batch, B), (seq, length(batch)), (n, rows)])
    k = cora.Dim("k")
    Y.compute(lambda b, s, o: W.row_times(k, o, lambda kk: X(b, s, kk)))
    return cora.Pipeline([Y], f"py_bsr_{index_type}").compile(), W, X, Y, B, length


@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_torch_bsr_arrays_bind_without_copies(density, rng):
    rows, cols, block = 64, 96, 32
    kernel, W, X, Y, B, length = bsr_linear(rows, cols, block, cora.int64)
    gen = torch.Generator().manual_seed(int(density * 10))
    dense = torch.randn(rows, cols, generator=gen)
    keep = torch.rand(rows // block, cols // block, generator=gen) < density
    dense *= keep.repeat_interleave(block, 0).repeat_interleave(block, 1)
    bsr = dense.to_sparse_bsr((block, block))
    lengths = [0, 1, 17, 40]
    shape = (cora.RaggedShape().set(B, len(lengths)).set(length, lengths)
             .set_offsets(W.blocks_per_row, bsr.crow_indices()))
    x = torch.randn(sum(lengths), cols)
    y = torch.full((sum(lengths), rows), float("nan"))
    kernel.run(shape, {X: x, W.col: bsr.col_indices(), W.values: bsr.values(), Y: y})
    close(y.numpy(), (x.double() @ dense.double().T).numpy(), 1e-5)


@pytest.mark.parametrize("order", [cora.BlockOrder.RowMajor, cora.BlockOrder.ColumnMajor])
@pytest.mark.parametrize("lengths", [[0], [1], [24, 25, 0, 7], [64] * 3, [64] * 3 + [1]])
def test_blocks_take_the_default_tiles(lengths, order, rng):
    """PyTorch's values() as they are (row-major blocks: the default copies each block's rows,
    transposed, into a stack tile once per 192-token chunk; 192 and 193 tokens are one chunk and
    one past), or each block stored transposed (values().transpose(1, 2).contiguous(), one copy
    per weight): the product with no schedule gets the default's block-sparse register tiles; X,
    Y and the weight stay the caller's tensors."""
    rows, cols, block = 96, 64, 32
    kernel, W, X, Y, B, length = bsr_linear(rows, cols, block, cora.int64, order)
    assert "Y_tile" in kernel.source
    assert ("W_values_cache" in kernel.source) == (order == cora.BlockOrder.RowMajor)
    gen = torch.Generator().manual_seed(len(lengths))
    dense = torch.randn(rows, cols, generator=gen)
    keep = torch.rand(rows // block, cols // block, generator=gen) < 0.5
    keep[0, 0] = True
    dense *= keep.repeat_interleave(block, 0).repeat_interleave(block, 1)
    bsr = dense.to_sparse_bsr((block, block))
    shape = (cora.RaggedShape().set(B, len(lengths)).set(length, lengths)
             .set_offsets(W.blocks_per_row, bsr.crow_indices()))
    x = torch.randn(sum(lengths), cols, generator=gen)
    y = torch.full((sum(lengths), rows), float("nan"))
    values = bsr.values()
    if order == cora.BlockOrder.ColumnMajor:
        values = values.transpose(1, 2).contiguous()
    kernel.run(shape, {X: x, W.col: bsr.col_indices(), W.values: values, Y: y})
    close(y.numpy(), (x.double() @ dense.double().T).numpy(), 1e-5)


def test_bad_block_columns_are_refused(rng):
    kernel, W, X, Y, B, length = bsr_linear(64, 64, 32, cora.int64)
    bsr = torch.ones(64, 64).to_sparse_bsr((32, 32))
    shape = cora.RaggedShape().set(B, 1).set(length, [3]).set_offsets(W.blocks_per_row, bsr.crow_indices())
    x, y = torch.ones(3, 64), torch.full((3, 64), 5.0)
    with pytest.raises(cora.RuntimeError, match="argument 'W_col' .* expected int64 elements, got a int32"):
        kernel.run(shape, {X: x, W.col: bsr.col_indices().to(torch.int32), W.values: bsr.values(), Y: y})
    bad = bsr.col_indices().clone()
    bad[1] = 7  # past the 2 column blocks
    with pytest.raises(cora.RuntimeError, match="W_col"):
        kernel.run(shape, {X: x, W.col: bad, W.values: bsr.values(), Y: y})
    assert (y == 5.0).all()
    with pytest.raises(cora.CompileError, match="index type float32; block columns are int32 or int64"):
        cora.BsrMatrix("W", 64, 64, 32, 32, index_type=cora.float32)
