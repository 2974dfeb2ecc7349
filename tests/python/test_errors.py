"""Errors from Python: cora's exception classes with the C++ messages, each naming what is wrong;
bad arguments change nothing."""
import ctypes

import numpy as np
import pytest

import cora
from conftest import ragged, shape_of
from test_dsl import scale_kernel


def test_exception_classes():
    assert issubclass(cora.CompileError, cora.Error) and issubclass(cora.RuntimeError, cora.Error)
    assert issubclass(cora.RuntimeError, RuntimeError)  # builtins.RuntimeError too
    assert issubclass(cora.EnvironmentError, OSError)
    assert cora.CompileError.__module__ == "cora"


def test_schedule_error_names_the_dim():
    batch, seq, B, length = ragged()
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    with pytest.raises(cora.CompileError, match=r"split of 'zz' in Func 'Out': not a loop of this Func"):
        Out.split(cora.Dim("zz"), cora.Dim("a"), cora.Dim("b"), 4)


def test_a_second_dim_with_the_same_name_is_another_dim():
    batch, seq, B, length = ragged()
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    with pytest.raises(cora.CompileError, match=r"its dim 'seq' is another Dim with the same name"):
        Out.vectorize(cora.Dim("seq"))


def test_compute_arity_error_is_the_cpp_message():
    batch, seq, B, length = ragged()
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    with pytest.raises(cora.CompileError, match=r"compute\(\) lambda of 'Out' takes 1 argument\(s\) but its domain "
                                                r"has 2 dim\(s\)"):
        Out.compute(lambda b: b * 1.0)


def test_expressions_have_no_truth_value():
    i = cora.Dim("i")
    with pytest.raises(TypeError, match="no truth value.*cora.select"):
        if i < 3:
            pass
    with pytest.raises(TypeError, match="not a cora expression"):
        cora.exp([1.0])
    with pytest.raises(TypeError, match="Python bool"):
        i + True


def test_bad_arrays_name_the_argument_and_write_nothing():
    k, A, Out, B, length = scale_kernel()
    shape = shape_of(B, length, [3, 2])
    a = np.ones(5, np.float32)
    out = np.full(5, 7.0, np.float32)
    with pytest.raises(cora.RuntimeError, match=r"argument 'A' of kernel 'py_scale': expected float32 elements, got "
                                                r"a float64 array of 5 elements on cpu"):
        k.run(shape, {A: a.astype(np.float64), Out: out})
    with pytest.raises(cora.RuntimeError, match=r"tensor 'A': 4 elements given, the tensor has 5"):
        k.run(shape, {A: a[:4], Out: out})
    with pytest.raises(ValueError, match=r"argument 'A': the array is not packed"):
        k.run(shape, {A: np.ones(10, np.float32)[::2], Out: out})
    with pytest.raises(TypeError, match=r"argument 'A': expected an array .* got list"):
        k.run(shape, {A: [1.0] * 5, Out: out})
    frozen = np.zeros(5, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(cora.RuntimeError, match="read only|read-only"):
        k.run(shape, {A: a, Out: frozen})
    with pytest.raises(cora.RuntimeError, match="'A'"):
        k.run(shape, {Out: out})  # a missing input
    assert (out == 7.0).all()


def test_bad_lengths_and_offsets():
    k, A, Out, B, length = scale_kernel()
    with pytest.raises(cora.RuntimeError, match=r"length array 'len': element 1 is 513, expected a value in \[0, 512\]"):
        cora.RaggedShape().set(B, 2).set(length, [1, 513])
    with pytest.raises(cora.RuntimeError, match="param 'B'"):
        cora.RaggedShape().set(B, 0)
    with pytest.raises(cora.RuntimeError, match="does not fit int32"):
        cora.RaggedShape().set(length, [2**40])
    with pytest.raises(cora.RuntimeError, match="offsets"):
        cora.RaggedShape().set(B, 2).set_offsets(length, np.array([0, 5, 3], np.int64))
    with pytest.raises(cora.RuntimeError, match="expected int32 or int64"):
        cora.RaggedShape().set(B, 2).set_offsets(length, np.array([0.0, 1.0, 2.0]))


def test_compile_options_and_backends():
    k, A, Out, B, length = scale_kernel()
    with pytest.raises(TypeError, match="unknown option 'fast'"):
        cora.Pipeline([Out]).compile(fast=True)
    with pytest.raises(cora.RuntimeError, match="backend"):
        cora.Pipeline([Out]).compile("tpu")


def test_dlpack_versioned_capsule_and_read_only_flag():
    """A DLPack 1.0 capsule ("dltensor_versioned"), built by hand as a producer would: its data is
    read in place, its deleter runs once, and its read-only flag keeps it from being an output."""
    k, A, Out, B, length = scale_kernel()
    shape = shape_of(B, length, [2, 2])

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                    ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    class Versioned(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", Deleter), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

    deleted = []
    deleter = Deleter(lambda p: deleted.append(p))
    keep = []

    def capsule(array, read_only):
        dims = (ctypes.c_int64 * 1)(array.size)
        m = Versioned(1, 0, None, deleter, 1 if read_only else 0,
                      DLTensor(array.ctypes.data, 1, 0, 1, 2, 32, 1, dims, None, 0))
        keep.extend([dims, m])
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(m), b"dltensor_versioned", None)

    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    k.run(shape, {A: capsule(a, True), Out: out})
    assert out.tolist() == [1.5, 3.5, 5.5, 7.5] and len(deleted) == 1
    with pytest.raises(cora.RuntimeError, match="read only|read-only"):
        k.run(shape, {A: a, Out: capsule(out, True)})
    assert len(deleted) == 2
    used = capsule(a, False)
    k.run(shape, {A: used, Out: out})
    with pytest.raises(TypeError, match="was it used already"):
        k.run(shape, {A: used, Out: out})


def test_bad_torch_tensors_name_the_argument_and_write_nothing():
    torch = pytest.importorskip("torch")
    k, A, Out, B, length = scale_kernel()
    shape = shape_of(B, length, [3, 2])
    out = torch.full((5,), 7.0)
    with pytest.raises(ValueError, match=r"argument 'A': the tensor is not packed"):
        k.run(shape, {A: torch.ones(10)[::2], Out: out})
    with pytest.raises(ValueError, match=r"argument 'A': elements of type torch.bfloat16 have no cora storage type"):
        k.run(shape, {A: torch.ones(5, dtype=torch.bfloat16), Out: out})
    with pytest.raises(cora.RuntimeError, match=r"argument 'Out' of kernel 'py_scale': expected float32 elements, "
                                                r"got a int64 array"):
        k.run(shape, {A: torch.ones(5), Out: torch.zeros(5, dtype=torch.int64)})
    assert (out == 7.0).all()
    weights = torch.nn.Parameter(torch.arange(5.0))  # a torch.Tensor subclass
    k.run(shape, {A: weights, Out: out})
    assert out.tolist() == [1.5, 3.5, 5.5, 7.5, 9.5]


def test_gpu_axes_take_one_to_three_dims():
    batch, seq, B, length = ragged()
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    with pytest.raises(TypeError, match="gpu_blocks takes 1 to 3 Dims, got 0"):
        Out.gpu_blocks()
    with pytest.raises(TypeError, match="gpu_threads takes 1 to 3 Dims, got 4"):
        Out.gpu_threads(batch, seq, cora.Dim("a"), cora.Dim("b"))
    with pytest.raises(TypeError, match="gpu_blocks: expected Dims, got a int"):
        Out.gpu_blocks(3)


def test_an_unprovable_read_says_what_was_needed():
    batch, seq, B, length = ragged(max_len=40)
    A = cora.Tensor("A", [(batch, B), (seq, length(batch))])
    Out = cora.Func("Out", [(batch, B), (seq, length(batch))])
    Out.compute(lambda b, s: A(b, s + 1))
    with pytest.raises(cora.CompileError, match=r"test_errors.py:\d+\): read of 'A' in dim 'seq': index \(seq \+ 1\) "
                                                r"may reach or pass the extent len\(batch\) \(needed \(\(len\(batch\) - "
                                                r"seq\) - 2\) >= 0, but it can be as low as -1\)"):
        cora.Pipeline([Out]).compile(use_z3=False)
