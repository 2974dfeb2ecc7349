"""The DSL from Python: definitions, reductions, schedules and the data path, checked against NumPy
references on edge-case and random shapes."""
import numpy as np
import pytest

import cora
from conftest import EDGE_LENGTHS, close, jagged_softmax, ragged, shape_of


def scale_kernel():
    batch, seq, B, length = ragged()
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    Out.compute(lambda b, s: 2 * A(b, s) + 1.5)
    return cora.Pipeline([Out], "py_scale").compile(), A, Out, B, length


@pytest.mark.parametrize("lengths", EDGE_LENGTHS)
def test_elementwise_on_ragged_batches(lengths, rng):
    k, A, Out, B, length = scale_kernel()
    shape = shape_of(B, length, lengths)
    assert shape.size_of(A) == sum(lengths)
    a = rng.standard_normal(sum(lengths)).astype(np.float32)
    out = cora.alloc(Out, shape)
    k.run(shape, {A: a, Out: out})
    close(out, 2 * a + 1.5, 0)


def test_row_reductions_over_own_lengths(rng):
    batch, seq, B, length = ragged()
    k_ = cora.Dim("k")
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    Sum = cora.Func("Sum", [(batch, B)])
    Max = cora.Func("Max", [(batch, B)])
    Sum.compute(lambda b: cora.sum(k_, length(b), A(b, k_)))
    Max.compute(lambda b: cora.maximum(k_, length(b), A(b, k_)))
    kernel = cora.Pipeline([Sum, Max], "py_rows").compile()
    for lengths in ([1], [7, 1, 64, 65], list(rng.integers(1, 100, 40))):
        shape = shape_of(B, length, lengths)
        a = rng.standard_normal(sum(lengths)).astype(np.float32)
        s, m = cora.alloc(Sum, shape), cora.alloc(Max, shape)
        kernel.run(shape, {A: a, Sum: s, Max: m})
        parts = np.split(a, np.cumsum(lengths)[:-1])
        close(s, [p.sum() for p in parts])
        close(m, [p.max() for p in parts], 0)


def token_gemm():
    """Out(b, s, n) = sum_r X(b, s, r) W(r, n) over ragged tokens, K and N run-time params."""
    batch, seq, B, length = ragged(max_len=128, max_batch=64)
    n, r = cora.Dim("n"), cora.Dim("r")
    K, N = cora.Param("K", 1, 256), cora.Param("N", 1, 256)
    X = cora.Tensor("X", [(batch, B), (seq, length(batch)), (r, K)])
    W = cora.Tensor("W", [(r, K), (n, N)])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch)), (n, N)])
    Out.compute(lambda b, s, j: cora.sum(r, K, X(b, s, r) * W(r, j)))
    return dict(batch=batch, seq=seq, B=B, len=length, n=n, r=r, K=K, N=N, X=X, W=W, Out=Out)


def schedule(name, d):
    f, tok, no, ni = d["Out"], cora.Dim("tok"), cora.Dim("no"), cora.Dim("ni")
    if name == "default":
        return
    if name == "fused_parallel":
        f.fuse(d["batch"], d["seq"], tok).parallel(tok)
    elif name == "split_vectorize":
        f.split(d["n"], no, ni, 8).vectorize(ni).parallel(d["batch"])
    elif name == "register_tile":
        to, ti = cora.Dim("to"), cora.Dim("ti")
        (f.fuse(d["batch"], d["seq"], tok).split(tok, to, ti, 4).split(d["n"], no, ni, 16)
         .reorder(to, no, d["r"], ti, ni).vectorize(ni).unroll(ti).cache_write(no))


@pytest.mark.parametrize("name", ["default", "fused_parallel", "split_vectorize", "register_tile"])
def test_schedules_agree_with_reference(name, rng):
    d = token_gemm()
    schedule(name, d)
    kernel = cora.Pipeline([d["Out"]], "py_gemm_" + name).compile()
    for lengths, K, N in [([1], 1, 1), ([0, 5, 17], 9, 33), ([16, 16], 64, 16), (list(rng.integers(0, 128, 9)), 37, 70)]:
        shape = shape_of(d["B"], d["len"], lengths).set(d["K"], K).set(d["N"], N)
        T = sum(lengths)
        x = rng.standard_normal((T, K)).astype(np.float32)
        w = rng.standard_normal((K, N)).astype(np.float32)
        out = np.full(shape.size_of(d["Out"]), np.nan, np.float32)
        kernel.run(shape, {d["X"]: x, d["W"]: w, d["Out"]: out})
        close(out.reshape(T, N), x.astype(np.float64) @ w, 1e-4)


def test_integer_arithmetic_is_floor_division_as_in_python():
    i = cora.Dim("i")
    N = cora.Param("N", 1, 100)
    Q = cora.Func("Q", [(i, N)], cora.int64)
    R = cora.Func("R", [(i, N)], cora.int64)
    Q.compute(lambda x: (x - 7) // 3 + (x - 7) / 4)
    R.compute(lambda x: (x - 7) % 3 + cora.select(x > 5, cora.min(x, 9), cora.max(x, 2)))
    k = cora.Pipeline([Q, R], "py_ints").compile()
    shape = cora.RaggedShape().set(N, 20)
    q, r = cora.alloc(Q, shape), cora.alloc(R, shape)
    k.run(shape, {Q: q, R: r})
    x = np.arange(20)
    assert (q == (x - 7) // 3 + (x - 7) // 4).all()
    assert (r == (x - 7) % 3 + np.where(x > 5, np.minimum(x, 9), np.maximum(x, 2))).all()


def test_jagged_softmax_from_torch_offsets(rng):
    torch = pytest.importorskip("torch")
    kernel, V, Out, B, length = jagged_softmax("py_softmax")
    lengths = torch.tensor([3, 0, 1, 100, 17], dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(torch.int32)  # cu_seqlens
    values = torch.randn(int(lengths.sum()))
    shape = cora.RaggedShape().set(B, len(lengths)).set_offsets(length, offsets)
    assert shape.lengths(length) == lengths.tolist()
    assert shape.offsets(length) == offsets.tolist()
    out = torch.empty_like(values)
    pointer = out.data_ptr()
    kernel.run(shape, {V: values, Out: out})
    assert out.data_ptr() == pointer  # written in place
    want = torch.cat([torch.softmax(p, 0) for p in torch.split(values, lengths.tolist())])
    close(out.numpy(), want.numpy(), 1e-5)


def test_alloc_shares_memory_with_torch():
    torch = pytest.importorskip("torch")
    k, A, Out, B, length = scale_kernel()
    shape = shape_of(B, length, [4, 2])
    out = cora.alloc(Out, shape)
    view = torch.from_numpy(out)
    k.run(shape, {A: torch.ones(6), Out: out})
    assert view.tolist() == [3.5] * 6


def test_masks_from_numpy_bool_arrays(rng):
    n, y, x = cora.Dim("n"), cora.Dim("y"), cora.Dim("x")
    N, H, W = cora.Param("N", 1, 8), cora.Param("H", 1, 64), cora.Param("W", 1, 64)
    mask = cora.ShapeTensor("mask", [N, H, W], 0, 1)
    X = cora.Tensor("X", [(n, N), (y, H), (x, W)])
    Out = cora.Func("Out", [(n, N), (y, H), (x, W)])
    Out.compute(lambda a, b, c: cora.select(mask(a, b, c) > 0, X(a, b, c), 0.0))
    k = cora.Pipeline([Out], "py_mask").compile()
    m = rng.random((2, 5, 7)) < 0.4
    shape = cora.RaggedShape().set(N, 2).set(H, 5).set(W, 7).set(mask, m)
    assert shape.values(mask) == m.astype(np.int32).reshape(-1).tolist()
    xs = rng.standard_normal((2, 5, 7)).astype(np.float32)
    out = cora.alloc(Out, shape)
    k.run(shape, {X: xs, Out: out})
    close(out.reshape(2, 5, 7), np.where(m, xs, 0), 0)


def test_float16_storage(rng):
    i = cora.Dim("i")
    N = cora.Param("N", 1, 1000)
    A = cora.Tensor("A", [(i, N)], cora.float16)
    Out = cora.Func("Out", [(i, N)], cora.float16)
    Out.compute(lambda j: A(j) * 2.0)
    k = cora.Pipeline([Out], "py_half").compile()
    shape = cora.RaggedShape().set(N, 33)
    a = rng.standard_normal(33).astype(np.float16)
    out = cora.alloc(Out, shape)
    assert out.dtype == np.float16
    k.run(shape, {A: a, Out: out})
    close(out, a.astype(np.float32) * 2, 1e-3)


def test_padded_round_trip(rng):
    batch, seq, B, length = ragged()
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    shape = shape_of(B, length, [2, 0, 3])
    padded = rng.standard_normal((3, 4)).astype(np.float32)
    packed = cora.from_padded(A, shape, padded)
    close(packed, np.concatenate([padded[0, :2], padded[2, :3]]), 0)
    back = cora.to_padded(A, shape, packed, [3, 4], fill=-1.0)
    want = np.full((3, 4), -1.0)
    want[0, :2], want[2, :3] = padded[0, :2], padded[2, :3]
    close(back, want, 0)


def test_schedule_primitives_chain_and_return_the_func():
    d = token_gemm()
    f = d["Out"]
    ni = cora.Dim("ni")
    assert f.split(d["n"], cora.Dim("no"), ni, 8) is f
    assert f.parallel(d["batch"]).vectorize(ni) is f
    assert "Out" in cora.Pipeline([f]).lower_to_string()


def test_lowered_and_source_are_visible():
    k, *_ = scale_kernel()
    assert k.backend == "cpu" and k.name == "py_scale"
    assert "py_scale" in k.source
    assert [(a.kind, a.name) for a in k.arguments if a.kind in ("input", "output")] == [("input", "A"),
                                                                                          ("output", "Out")]


@pytest.mark.parametrize("keep", [False, True])
def test_a_producer_read_once_is_inlined_unless_compute_root(keep, rng):
    batch, seq, B, length = ragged()
    c = cora.Dim("c")
    X = cora.Tensor("X", [(batch, B), (seq, length(batch)), (c, 32)])
    bias = cora.Tensor("bias", [(c, 32)])
    Biased = cora.Func("Biased", [(batch, B), (seq, length(batch)), (c, 32)])
    Y = cora.Func("Y", [(batch, B), (seq, length(batch)), (c, 32)])
    Biased.compute(lambda b, s, f: X(b, s, f) + bias(f))
    Y.compute(lambda b, s, f: cora.max(Biased(b, s, f), 0.0))
    if keep:
        assert Biased.compute_root() is Biased
        with pytest.raises(cora.CompileError, match="it is marked compute_root"):
            Biased.compute_inline()
    k = cora.Pipeline([Y], "py_inline_default_%d" % keep).compile()
    assert ("Biased[" in k.lowered) == keep
    lengths = [0, 5, 17]
    shape = shape_of(B, length, lengths)
    x = rng.standard_normal((sum(lengths), 32)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    y = cora.alloc(Y, shape)
    k.run(shape, {X: x, bias: b, Y: y})
    close(y.reshape(-1, 32), np.maximum(x + b, 0), 0)


def test_a_gemm_left_unscheduled_gets_register_tiles_for_the_vector_width(rng):
    t, r, n = cora.Dim("t"), cora.Dim("r"), cora.Dim("n")
    M = cora.Param("M", 1, 4096)
    A = cora.Tensor("A", [(t, M), (r, 300)])
    W = cora.Tensor("W", [(r, 300), (n, 64)])
    Y = cora.Func("Y", [(t, M), (n, 64)])
    Y.compute(lambda i, j: cora.sum(r, 300, A(i, r) * W(r, j)))
    tiled = cora.Pipeline([Y], "py_default_gemm").compile(vector_bits=256)
    assert "Y_tile" in tiled.lowered and "W_cache" in tiled.lowered
    untiled = cora.Pipeline([Y], "py_default_gemm").compile(vector_bits=-1)
    assert "Y_tile" not in untiled.lowered
    for m in (1, 4, 7):
        shape = cora.RaggedShape().set(M, m)
        a = rng.standard_normal((m, 300)).astype(np.float32)
        w = rng.standard_normal((300, 64)).astype(np.float32)
        for k in (tiled, untiled):
            y = cora.alloc(Y, shape)
            k.run(shape, {A: a, W: w, Y: y})
            close(y.reshape(m, 64), a.astype(np.float64) @ w, 1e-4)


def test_nn_linear_weight_as_it_is_gets_register_tiles(rng):
    """Y = X W^T with W [out, in] (torch.nn.Linear's weight, not transposed by the caller): the
    default copies W's panels transposed inside the kernel and tiles the product; the caller's
    tensors are used as they are."""
    torch = pytest.importorskip("torch")
    batch, seq, B, length = ragged(max_len=64, max_batch=16)
    r, n = cora.Dim("r"), cora.Dim("n")
    linear = torch.nn.Linear(96, 64, bias=True)
    X = cora.Tensor("X", [(batch, B), (seq, length(batch)), (r, 96)])
    W = cora.Tensor("W", [(n, 64), (r, 96)])
    bias = cora.Tensor("bias", [(n, 64)])
    Y = cora.Func("Y", [(batch, B), (seq, length(batch)), (n, 64)])
    Y.compute(lambda b, s, o: cora.sum(r, 96, X(b, s, r) * W(o, r)) + bias(o))
    kernel = cora.Pipeline([Y], "py_nn_linear_default").compile(vector_bits=512)
    assert "Y_tile" in kernel.lowered and "W_cache" in kernel.lowered
    for lengths in ([0], [1], [5, 0, 64], [17] * 4):
        shape = shape_of(B, length, lengths)
        x = torch.randn(sum(lengths), 96)
        y = torch.full((sum(lengths), 64), float("nan"))
        with torch.no_grad():
            kernel.run(shape, {X: x, W: linear.weight, bias: linear.bias, Y: y})
            close(y.numpy(), linear(x.double().float()).double().numpy(), 1e-4)


def test_emulated_gpu_schedule_from_python(rng):
    i, bo, bi = cora.Dim("i"), cora.Dim("bo"), cora.Dim("bi")
    N = cora.Param("N", 1, 4096)
    A = cora.Tensor("A", [(i, N)])
    Out = cora.Func("Out", [(i, N)])
    Out.compute(lambda j: A(j) * A(j))
    Out.split(i, bo, bi, 32).gpu_blocks(bo).gpu_threads(bi)
    k = cora.Pipeline([Out], "py_gpu_square").compile("cuda-emulated")
    assert k.backend == "cuda-emulated"
    shape = cora.RaggedShape().set(N, 100)
    a = rng.standard_normal(100).astype(np.float32)
    out = cora.alloc(Out, shape)
    k.run(shape, {A: a, Out: out})
    close(out, a * a, 0)


def test_cuda_source_on_cpu_threads_uses_the_arrays_as_device_memory(rng):
    """Backend cuda-cpu-threads runs a GPU schedule's CUDA source on CPU threads, with host memory as
    device memory: Kernel.run passes the arrays as device views (Kernel::view, the path a CUDA tensor
    takes on a GPU), and the results are there when it returns."""
    batch, seq, B, length = ragged(max_len=300, max_batch=16)
    so, si = cora.Dim("so"), cora.Dim("si")
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    Out.compute(lambda b, s: cora.exp(A(b, s)) + 1.0)
    Out.split(seq, so, si, 32).gpu_blocks(batch, so).gpu_threads(si)
    k = cora.Pipeline([Out], "py_gpu_exp").compile("cuda-cpu-threads")
    assert k.backend == "cuda-cpu-threads"
    for lengths in ([1], [0, 33, 64, 65], list(rng.integers(0, 300, 7))):
        shape = shape_of(B, length, lengths)
        a = rng.standard_normal(sum(lengths)).astype(np.float32)
        out = np.full(sum(lengths), np.nan, np.float32)
        k.run(shape, {A: a, Out: out})
        close(out, np.exp(a.astype(np.float64)) + 1.0, 1e-5)
    frozen = np.zeros(sum(lengths), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(cora.RuntimeError, match="'Out' .* is an output, but the array is read only"):
        k.run(shape, {A: a, Out: frozen})
    assert k.time_ms(shape, {A: a, Out: out}, 3) > 0
    # The GPU code generation switched off (64-bit integers, element copies): the same results.
    plain = cora.Pipeline([Out], "py_gpu_exp").compile(
        "cuda-cpu-threads", narrow_gpu_indices=False, vector_gpu_copies=False, gpu_copy_stages=1)
    wide_out = np.full(sum(lengths), np.nan, np.float32)
    plain.run(shape, {A: a, Out: wide_out})
    np.testing.assert_array_equal(wide_out, out)


WORKSPACE_CHECK = '''
import concurrent.futures, sys
import cora
import numpy as np
sys.path.insert(0, sys.argv[2])
from conftest import jagged_softmax
kernel, V, Out, B, length = jagged_softmax("py_workspace_" + sys.argv[1], max_len=100000, max_batch=64)
assert "cora_workspace_acquire" in kernel.source  # its intermediate E takes a workspace

def check(lengths, seed):
    rng = np.random.default_rng(seed)
    shape = cora.RaggedShape().set(B, len(lengths)).set(length, lengths)
    v = rng.standard_normal(sum(lengths)).astype(np.float32)
    out = np.full_like(v, np.nan)
    kernel.run(shape, {V: v, Out: out})
    at = 0
    for n in lengths:
        part = v[at:at + n].astype(np.float64)
        want = np.exp(part - part.max()) / np.exp(part - part.max()).sum() if n else part
        assert np.allclose(out[at:at + n], want, rtol=1e-5, atol=1e-7), (lengths, seed)
        at += n

# Growing, shrinking and empty calls: a kept block larger than needed is reused, a smaller one replaced.
for i, lengths in enumerate([[5, 3], [90000, 7], [1], [0], [60000, 60000], [2, 0, 9]]):
    check(lengths, i)
# Concurrent calls (the GIL is released while kernels run): each finds the block or makes its own.
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    list(pool.map(lambda i: check([1000 * (i % 7) + 1, 77 * i], i), range(32)))
print("workspace OK")
'''


@pytest.mark.parametrize("setting", ["default", "off"])
def test_intermediates_reused_across_calls_and_threads(setting, tmp_path):
    """An intermediate's block is kept between calls (CORA_WORKSPACE=off: allocated each call):
    results stay right when calls grow, shrink, are empty or run concurrently."""
    import os
    import subprocess
    import sys
    script = tmp_path / "workspace.py"
    script.write_text(WORKSPACE_CHECK)
    env = dict(os.environ)
    if setting == "off":
        env["CORA_WORKSPACE"] = "off"
    tests = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, str(script), setting, tests], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "workspace OK" in r.stdout, r.stdout + r.stderr
