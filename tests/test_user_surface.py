"""The public calls as a user meets them without a GPU: every bad argument gets its own message
before anything needs the driver (the message a GPU machine gives too), and where the arguments
are fine the one error is numba_tma.NoGPUError, in one line. And which device the operands
decide on, with several GPUs (faked)."""

import re

import numpy as np
import pytest
from fake_devices import fake_two_gpus

import numba_tma
from numba_tma import NoGPUError, matmul, matmul_api, operands, transpose

BASE, OTHER = 1 << 40, 2 << 40          # device 0 and device 1 in the two-GPU fixture


def _cuda_available():
    from numba_tma._frontend import cuda

    return cuda.is_available()


no_gpu = pytest.mark.skipif(_cuda_available(), reason="checks a machine without a CUDA driver")


@pytest.fixture(autouse=True)
def one_gpu(monkeypatch):
    """The fake addresses below are no memory: on a host with several GPUs the device check
    would ask the driver about them (the two-GPU tests fake their own answers)."""
    monkeypatch.setattr(operands, "_device_count", lambda: 1)


class Cai:
    """An array exposing only a __cuda_array_interface__ (never dereferenced here)."""

    def __init__(self, shape, typestr="<f2", ptr=BASE, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides, "version": 3}


MB = 1 << 20
BAD_MATMUL = [
    ("k_mismatch", lambda: matmul(Cai((64, 64)), Cai((32, 64), ptr=BASE + MB)), ValueError,
     "a is 64 x 64 but b is 32 x 64: b must have 64 rows"),
    ("k_7", lambda: matmul(Cai((64, 7)), Cai((7, 64), ptr=BASE + MB)), ValueError,
     "a is M x K row-major: its contiguous dimension (7 elements of 2 bytes = 14 bytes) must be "
     "a multiple of 16 bytes for TMA; pad it"),
    ("alpha_str", lambda: matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB), alpha="2"),
     TypeError, "alpha must be a real number; got '2' (str)"),
    ("beta_bool", lambda: matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB),
                                 Cai((64, 64), ptr=BASE + 2 * MB), beta=True),
     TypeError, "beta must be a real number; got True (bool)"),
    ("dtype", lambda: matmul(Cai((64, 64), "<f4"), Cai((64, 64), "<f4", BASE + MB)), TypeError,
     "a must have dtype bfloat16, float16 (bfloat16 as a torch tensor); got float32"),
    ("host", lambda: matmul(np.ones((8, 8), np.float16), np.ones((8, 8), np.float16)),
     TypeError, "a must be a CUDA device array"),
    ("out_shape", lambda: matmul(Cai((64, 64)), Cai((64, 32), ptr=BASE + MB),
                                 Cai((64, 64), ptr=BASE + 2 * MB)), ValueError,
     "out must have shape (64, 32) for a (64, 64) @ b (64, 32); got (64, 64)"),
    ("in_place", lambda: matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB), Cai((64, 64))),
     ValueError, "out overlaps a; matmul cannot run in place"),
    ("strided", lambda: matmul(Cai((64, 64), strides=(256, 4)), Cai((64, 64), ptr=BASE + MB)),
     ValueError, "a must be row-major or column-major contiguous; its strides are (256, 4) "
                 "bytes for shape (64, 64)"),
]


@pytest.mark.parametrize("call, exc, message", [c[1:] for c in BAD_MATMUL],
                         ids=[c[0] for c in BAD_MATMUL])
def test_bad_arguments_are_reported_before_the_driver(call, exc, message, monkeypatch):
    # Whatever the machine: the checks never reach the GPU (a call that did would raise here).
    monkeypatch.setattr(matmul_api, "require_hopper",
                        lambda what: pytest.fail("reached the GPU check"))
    monkeypatch.setattr(matmul_api, "allocate_like",
                        lambda *a, **k: pytest.fail("allocated before the checks"))
    with pytest.raises(exc, match=re.escape(message)):
        call()


@no_gpu
@pytest.mark.parametrize("call", [
    lambda: matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB)),
    lambda: matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB), Cai((64, 64), "<f4", BASE + 2 * MB)),
    lambda: transpose(Cai((64, 64), "<f4")),
    lambda: transpose(Cai((0, 5), "<f4")),
    lambda: transpose(Cai((64, 64), "<f4"), Cai((64, 64), "<f4", BASE + MB)),
    lambda: numba_tma.TensorMap(Cai((64, 64), "<f4"), (16, 16)),
], ids=["matmul", "matmul_out", "transpose", "transpose_empty", "transpose_out", "tensor_map"])
def test_without_a_gpu_every_call_raises_no_gpu_error(call):
    with pytest.raises(NoGPUError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and text.endswith(
        "needs an NVIDIA GPU; no NVIDIA driver (R580 or newer) or CUDA device was found") or \
        text.endswith("needs an NVIDIA GPU of compute capability 9.0 or newer; no NVIDIA driver "
                      "(R580 or newer) or CUDA device was found"), text
    assert isinstance(err.value, RuntimeError) and type(err.value).__module__ == "numba_tma"


def test_bad_transpose_arguments_come_before_the_gpu_check(monkeypatch):
    from numba_tma import transpose_api

    monkeypatch.setattr(transpose_api, "require_gpu",
                        lambda what: pytest.fail("reached the GPU check"))
    with pytest.raises(TypeError, match="src must be a CUDA device array"):
        transpose(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match=re.escape("out must have shape")):
        transpose(Cai((64, 32), "<f4"), Cai((64, 32), "<f4", BASE + MB))


# -- several GPUs: the operands decide --------------------------------------------------------

class _TorchLike:
    def __init__(self, index):
        self.device = type("device", (), {"index": index, "type": "cuda"})()


class _CupyLike:
    def __init__(self, ordinal):
        self.device = type("Device", (), {"id": ordinal})()


def test_operand_device_reads_torch_cupy_and_pointers(monkeypatch):
    assert operands.operand_device(_TorchLike(1)) is None       # one GPU: nothing to decide
    asked = fake_two_gpus(monkeypatch, ((BASE, 0), (OTHER, 1)), 1 << 30)
    assert operands.operand_device(_TorchLike(1)) == 1
    assert operands.operand_device(_CupyLike(1)) == 1
    assert operands.operand_device(Cai((4, 4), ptr=OTHER + 64)) == 1
    assert operands.operand_device(Cai((4, 4), ptr=BASE)) == 0
    assert operands.operand_device(np.ones(3)) is None          # the checks report it
    assert asked == [OTHER + 64, BASE]                          # torch and CuPy name theirs


def test_operands_on_two_devices_are_refused_naming_both(monkeypatch):
    fake_two_gpus(monkeypatch, ((BASE, 0), (OTHER, 1)), 1 << 30)
    with pytest.raises(ValueError, match=re.escape(
            "b lives on device 1 but a lives on device 0; every operand of one call must be on "
            "the same device (move b there)")):
        matmul_api.check_matmul(Cai((64, 64)), Cai((64, 64), ptr=OTHER))
    with pytest.raises(ValueError, match=re.escape("out lives on device 1 but a lives on device 0")):
        matmul_api.check_matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB),
                                Cai((64, 64), ptr=OTHER))
    checked = matmul_api.check_matmul(Cai((64, 64)), Cai((64, 64), ptr=BASE + MB),
                                      Cai((64, 64), ptr=BASE + 2 * MB))
    assert (checked.m, checked.n, checked.k, checked.a_row, checked.b_row) == (64, 64, 64, True,
                                                                                True)


def test_front_end_choice_names_the_variable_and_the_packages(monkeypatch):
    # The choice at import: NUMBA_TMA_FRONT_END when set (an unknown name refused, naming the
    # known ones); unset, numba-cuda, else numba-cuda-mlir, else an error naming both.
    import importlib.util

    from numba_tma import _frontend

    monkeypatch.setenv("NUMBA_TMA_FRONT_END", "numba-cuda-mlir")
    assert _frontend._choose() == "numba-cuda-mlir"
    monkeypatch.setenv("NUMBA_TMA_FRONT_END", "numba")
    with pytest.raises(ImportError, match="NUMBA_TMA_FRONT_END='numba': expected one of"):
        _frontend._choose()
    monkeypatch.delenv("NUMBA_TMA_FRONT_END")
    installed = {"numba_cuda", "numba_cuda_mlir"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name in installed else None)
    assert _frontend._choose() == "numba-cuda"
    installed.discard("numba_cuda")
    assert _frontend._choose() == "numba-cuda-mlir"
    installed.clear()
    with pytest.raises(ImportError, match="numba-cuda.*numba-cuda-mlir.*neither is installed"):
        _frontend._choose()
