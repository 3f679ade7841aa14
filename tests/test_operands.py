"""CPU-only tests of the one validation of array operands (numba_tma.operands), shared by
TensorMap, transpose() and matmul(): each bad interface is refused with an error naming the
argument before any driver call; the device check runs on monkeypatched probes."""

import importlib
import os
import re

import numpy as np
import pytest
from fake_devices import fake_two_gpus

from numba_tma import operands
from numba_tma.operands import Operand, check_device, read_operand
from numba_tma.tensormap import TensorMap, plan_im2col_tensor_map

api = importlib.import_module("numba_tma.transpose_api")     # the module, not the function
mm = importlib.import_module("numba_tma.matmul_api")

BASE = 1 << 40
OTHER = 2 << 40


class Fake:
    """An object exposing only a __cuda_array_interface__ (never dereferenced)."""

    def __init__(self, shape, typestr="<f4", ptr=BASE, strides=None, readonly=False, **extra):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, readonly), "strides": strides,
                                         "version": 3, **extra}


def without(key, **kw):
    fake = Fake((8, 8), **kw)
    del fake.__cuda_array_interface__[key]
    return fake


class FakeTorch:
    """Duck-typed torch CUDA tensor (strides in elements)."""

    def __init__(self, shape, index=0, ptr=BASE, dtype="torch.float16"):
        self.shape, self._ptr, self.dtype = tuple(shape), ptr, dtype
        self.is_cuda = True
        self.device = type("Device", (), {"index": index, "__str__": lambda s: f"cuda:{index}"})()

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return 2

    def stride(self):
        return tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """The launch device is unknown (as without a GPU) unless a test sets it; no driver call."""
    monkeypatch.setattr(operands, "launch_device", lambda: None)
    monkeypatch.setattr(operands, "_query_pointer",
                        lambda ptr: pytest.fail("asked the driver about a pointer"))


# (id, the operand, writable, exception, literal text of the message)
BAD = [
    ("null", Fake((8, 8), ptr=0), False, ValueError,
     "src's global address 0x0 is not a valid device pointer"),
    ("negative", Fake((8, 8), ptr=-4096), False, ValueError,
     "src's global address -0x1000 is not a valid device pointer"),
    ("past_2_64", Fake((8, 8), ptr=1 << 64), False, ValueError,
     "src's global address 0x10000000000000000 does not fit in 64 bits"),
    ("misaligned_f4", Fake((8, 8), ptr=BASE + 2), False, ValueError,
     "src's global address 0x10000000002 is not aligned to its 4-byte elements "
     "(address % 4 = 2)"),
    ("misaligned_f8", Fake((8, 8), "<f8", ptr=BASE + 4), False, ValueError,
     "(address % 8 = 4)"),
    ("big_endian", Fake((8, 8), ">f4"), False, TypeError,
     "src's typestr '>f4' is byte-swapped (big-endian)"),
    ("object", Fake((8, 8), "|O8"), False, TypeError,
     "src's typestr '|O8' is a Python object type"),
    ("unknown_typestr", Fake((8, 8), "<q7"), False, TypeError,
     "src's typestr '<q7' is not understood"),
    ("strides_rank", Fake((8, 8, 8), strides=(32, 4)), False, ValueError,
     "src: strides has 2 entries; the array has rank 3"),
    ("negative_shape", Fake((8, -3)), False, ValueError,
     "src's shape (8, -3) has a negative extent, shape[1] = -3"),
    ("read_only_out", Fake((8, 8), readonly=True), True, ValueError,
     "src is read-only (its __cuda_array_interface__ data is (0x10000000000, True)) but the "
     "kernel writes it"),
    ("version_4", Fake((8, 8), version=4), False, TypeError,
     "src's __cuda_array_interface__ has version 4; numba_tma reads versions 0..3"),
    ("version_str", Fake((8, 8), version="3"), False, TypeError, "has version '3'"),
    ("no_typestr", without("typestr"), False, TypeError,
     "src's __cuda_array_interface__ has no 'typestr' entry"),
    ("no_data", without("data"), False, TypeError,
     "src's __cuda_array_interface__ has no 'data' entry"),
    ("no_shape", without("shape"), False, TypeError,
     "src's __cuda_array_interface__ has no 'shape' entry"),
    ("pointer_not_int", Fake((8, 8), ptr=None), False, TypeError,
     "src's data pointer None is not an integer"),
    ("data_not_pair", Fake((8, 8), data=(BASE,)), False, TypeError,
     "src's __cuda_array_interface__ data is (1099511627776,); it must be a (pointer, "
     "read_only) pair"),
    ("mask", Fake((8, 8), mask=object()), False, TypeError, "src has a __cuda_array_interface__ mask"),
    ("host", np.zeros((8, 8), np.float32), False, TypeError,
     "src must be a CUDA device array (numba device array, CuPy array or torch CUDA tensor); "
     "got a host numpy.ndarray"),
]


@pytest.mark.parametrize("array, writable, exc, message", [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_read_operand_refuses(array, writable, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        read_operand(array, "src", writable=writable)


def test_read_operand_accepts_what_kernels_take():
    op = read_operand(Fake((3, 8), "<f2", strides=(16, 2)), "a")
    assert op == Operand((3, 8), (16, 2), 2, "<f2", BASE, False, None)
    assert op.dtype == "float16" and op.size == 24
    # Empty arrays may export NULL (numba does); a read-only input is fine when not written.
    assert read_operand(Fake((0, 8), ptr=0), "a", writable=True).ptr == 0
    assert read_operand(Fake((8, 8), readonly=True), "a").readonly
    assert read_operand(without("version"), "a").shape == (8, 8)    # some exporters omit it
    # Elements are aligned as numpy aligns them: complex64 to 4 bytes, bfloat16 bytes to 2.
    assert read_operand(Fake((8,), "<c8", ptr=BASE + 4), "a").ptr == BASE + 4
    with pytest.raises(ValueError, match=re.escape("(address % 2 = 1)")):
        read_operand(Fake((8,), "<V2", ptr=BASE + 1), "a")
    t = read_operand(FakeTorch((4, 8), index=1), "a")
    assert t.device == 1 and t.strides == (16, 2) and t.dtype == "float16"


# ---- the same checks through each public path ---------------------------------------------

not_on_simulator = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                      reason="the simulator's arrays take the numba-view path")

TRANSPOSE_CASES = [c for c in BAD if c[0] not in ("read_only_out", "host")]


@not_on_simulator
@pytest.mark.parametrize("array, message", [(c[1], c[4]) for c in TRANSPOSE_CASES],
                         ids=[c[0] for c in TRANSPOSE_CASES])
def test_transpose_validates_src(array, message):
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        api._validate(array, Fake((8, 8), ptr=OTHER))


@not_on_simulator
def test_transpose_refuses_a_read_only_out():
    with pytest.raises(ValueError, match=re.escape("out is read-only")):
        api._validate(Fake((8, 16)), Fake((16, 8), ptr=OTHER, readonly=True))
    api._validate(Fake((8, 16), readonly=True), Fake((16, 8), ptr=OTHER))   # a read-only src


@not_on_simulator
def test_transpose_refuses_a_big_endian_src_with_a_little_endian_out():
    with pytest.raises(TypeError, match=re.escape("src's typestr '>f4' is byte-swapped")):
        api._validate(Fake((8, 16), ">f4"), Fake((16, 8), "<f4", ptr=OTHER))


@pytest.mark.parametrize("case", ["null", "misaligned_f4", "big_endian", "object", "strides_rank",
                                  "negative_shape", "no_typestr", "no_data", "version_4"])
def test_matmul_validates_before_any_driver_call(case):
    array, _, exc, message = next(c[1:] for c in BAD if c[0] == case)
    good = Fake((8, 8), "<f2", ptr=OTHER)
    with pytest.raises(exc, match=re.escape(message.replace("src", "a"))):
        mm.plan_matmul(array, good, Fake((8, 8), ptr=3 << 40))


def test_matmul_refuses_a_read_only_out():
    a, b = Fake((8, 8), "<f2"), Fake((8, 8), "<f2", ptr=OTHER)
    with pytest.raises(ValueError, match=re.escape("out is read-only")):
        mm.plan_matmul(a, b, Fake((8, 8), ptr=3 << 40, readonly=True))


def test_matmul_reads_the_dtype_from_the_typestr():
    # An object exposing only the interface: its '<f2' is float16 (it was "got None").
    assert mm._kind(Fake((8, 8), "<f2"), "a", mm._IN_KINDS) == "f16"
    assert mm._kind(Fake((8, 8), "<f4"), "out", mm._OUT_KINDS) == "f32"
    with pytest.raises(TypeError, match=r"b must have dtype .*; got float32"):
        mm.plan_matmul(Fake((8, 8), "<f2"), Fake((8, 8), "<f4", ptr=OTHER),
                       Fake((8, 8), ptr=3 << 40))


def test_tensormap_validates_its_array():
    with pytest.raises(TypeError, match=re.escape("array's typestr '|O8' is a Python object")):
        TensorMap(Fake((64, 64), "|O8"), (8, 8))
    with pytest.raises(TypeError, match=re.escape("array's __cuda_array_interface__ has no "
                                                  "'data' entry")):
        TensorMap(without("data"), (8, 8))
    with pytest.raises(ValueError, match=re.escape("does not fit in 64 bits")):
        TensorMap(Fake((64, 64), ptr=1 << 64), (8, 8))


def test_im2col_itemsize_0_is_refused_by_name():
    with pytest.raises(ValueError, match=re.escape("itemsize = 0 has no TMA data type")):
        plan_im2col_tensor_map((2, 9, 14, 64), None, 0, BASE, pixel_box_lower_corner=(0, 0),
                               pixel_box_upper_corner=(0, 0), channels_per_pixel=16,
                               pixels_per_column=8)


# ---- the device check ----------------------------------------------------------------------

@pytest.fixture
def two_gpus(monkeypatch):
    """Device 0 launches; allocations at BASE.. (1 MiB) live on 0, at OTHER.. on 1."""
    return fake_two_gpus(monkeypatch, ((BASE, 0), (OTHER, 1)), 1 << 20)


def test_device_check_asks_once_per_allocation(two_gpus):
    for offset in (0, 4096, 65536):
        check_device(read_operand(Fake((8, 8), ptr=BASE + offset), "src"), "src")
    assert two_gpus == [BASE]


@not_on_simulator
def test_array_on_another_device_is_refused(two_gpus):
    with pytest.raises(ValueError, match=re.escape("out lives on device 1 but src lives on "
                                                   "device 0; every operand of one call must "
                                                   "be on the same device (move out there)")):
        api._validate(Fake((8, 16)), Fake((16, 8), ptr=OTHER))
    with pytest.raises(ValueError, match=re.escape("a lives on device 1")):
        mm.plan_matmul(FakeTorch((8, 8), index=1), Fake((8, 8), "<f2"), Fake((8, 8), ptr=BASE))
    with pytest.raises(ValueError, match=re.escape("src's address 0x30000000000 is not CUDA "
                                                   "device memory")):
        check_device(read_operand(Fake((8, 8), ptr=3 << 40), "src"), "src")


def test_torch_tensors_name_their_device_without_a_driver_call(two_gpus):
    check_device(read_operand(FakeTorch((8, 8), index=0), "a"), "a")
    with pytest.raises(ValueError, match="a lives on device 1"):
        check_device(read_operand(FakeTorch((8, 8), index=1), "a"), "a")
    assert two_gpus == []


def test_one_gpu_or_none_asks_nothing(monkeypatch):
    op = read_operand(Fake((8, 8)), "src")
    check_device(op, "src")                         # no GPU: launch_device() is None
    monkeypatch.setattr(operands, "launch_device", lambda: 0)
    monkeypatch.setattr(operands, "_device_count", lambda: 1)
    check_device(op, "src")                         # one GPU: all device memory is on it


def test_stale_range_is_asked_again_before_refusing(two_gpus, monkeypatch):
    operands._starts[:] = [OTHER]
    operands._ranges[OTHER] = (OTHER + (1 << 20), 1)     # freed on device 1, now on device 0
    monkeypatch.setattr(operands, "_query_pointer", lambda ptr: (0, OTHER, 1 << 20))
    check_device(read_operand(Fake((8, 8), ptr=OTHER), "src"), "src")
    assert operands._ranges[OTHER] == (OTHER + (1 << 20), 0)
