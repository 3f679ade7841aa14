"""Public kernel launchers reject bad input before anything reaches the GPU (runs without one)."""

import numpy as np
import pytest

from numba_tma.ladders.add_one import add_one


class FakeDeviceArray:
    """Just enough __cuda_array_interface__ to reach the launcher's checks; never dereferenced."""

    def __init__(self, shape, typestr="<i4"):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                         "strides": None, "data": (0x10000, False)}


def test_add_one_rejects_bad_swizzle():
    with pytest.raises(ValueError, match=r"swizzle must be 0, 32, 64 or 128 \(bytes\), got 16"):
        add_one(FakeDeviceArray((8, 8)), swizzle=16)


def test_add_one_rejects_host_array():
    with pytest.raises(TypeError, match="array must be a CUDA device array"):
        add_one(np.zeros((8, 8), np.int32))


def test_add_one_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"array must be 2-D, got 3-D"):
        add_one(FakeDeviceArray((2, 8, 8)))


def test_add_one_rejects_unsupported_dtype():
    with pytest.raises(TypeError, match="complex"):
        add_one(FakeDeviceArray((8, 8), "<c8"))
