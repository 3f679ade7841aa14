"""CPU-only tests of the tensor-map split: the pure rules (numba_tma.tensormap.rules) that tile
and im2col mode share report a bad argument identically, one rule per function; the driver side
and the array description live apart, and the numba_tma.tensormap package gathers the names."""

import re

import numpy as np
import pytest

from numba_tma import tensormap
from numba_tma.tensormap import driver as drv, rules
from numba_tma.tensormap import plan_im2col_tensor_map, plan_tensor_map

ADDR = 0x7F00_0000_0000
SHAPE = (2, 9, 16, 64)                  # NHWC: a valid shape for both modes


def tile(shape=SHAPE, strides=None, dtype=np.float16, address=ADDR, **kw):
    return plan_tensor_map(shape, strides, dtype, address, (1, 1, 8, 16), **kw)


def im2col(shape=SHAPE, strides=None, dtype=np.float16, address=ADDR, **kw):
    return plan_im2col_tensor_map(shape, strides, dtype, address, pixel_box_lower_corner=(0, 0),
                                  pixel_box_upper_corner=(0, 0), channels_per_pixel=16,
                                  pixels_per_column=8, **kw)


# Arguments both modes take, each wrong in one way.
SHARED = {
    "address_misaligned": dict(address=ADDR + 8),
    "address_null": dict(address=0),
    "address_past_64_bits": dict(address=1 << 64),
    "dtype": dict(dtype=np.complex64),
    "itemsize_0": dict(dtype=0),
    "itemsize_3": dict(dtype=3),
    "byte_swapped": dict(dtype=np.dtype(">f2")),
    "extent_0": dict(shape=(2, 9, 0, 64)),
    "strides_len": dict(strides=(128, 128)),
    "strides_inner": dict(strides=(9 * 16 * 256, 16 * 256, 256, 4)),
    "strides_negative": dict(strides=(-9 * 16 * 128, 16 * 128, 128, 2)),
    "strides_misaligned": dict(strides=(9 * 16 * 136, 16 * 136, 136, 2)),
    "strides_2_40": dict(strides=(1 << 40, 16 * 128, 128, 2)),
    "element_strides_range": dict(element_strides=(1, 9, 1, 1)),
    "element_strides_inner": dict(element_strides=(1, 1, 1, 2)),
    "element_strides_len": dict(element_strides=(1, 1)),
    "swizzle": dict(swizzle=48),
    "l2_promotion": dict(l2_promotion=100),
    "oob_fill": dict(oob_fill="inf"),
    "oob_nan_int": dict(oob_fill="nan", dtype=np.int16),
    "interleave_32_swizzle": dict(interleave=32),
}


def _error(build, kw):
    with pytest.raises((TypeError, ValueError)) as info:
        build(**kw)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("kw", SHARED.values(), ids=SHARED.keys())
def test_both_modes_report_a_shared_rule_identically(kw):
    assert _error(tile, kw) == _error(im2col, kw)


@pytest.mark.parametrize("kw, message", [
    (dict(address=1 << 64), "global address 0x10000000000000000 does not fit in 64 bits"),
    (dict(dtype=0), "itemsize = 0 has no TMA data type; use 1, 2, 4 or 8"),
])
def test_messages_name_the_argument_and_the_numbers(kw, message):
    for build in (tile, im2col):
        with pytest.raises(ValueError, match=re.escape(message)):
            build(**kw)


def test_im2col_refuses_interleave_by_name():
    shape = (2, 4, 8, 16)
    with pytest.raises(ValueError, match=r"interleave = 16B: numba_tma's im2col maps take no "):
        im2col(shape=(2, 4, 16, 8), interleave=16)
    # A 32B interleave still reports its swizzle rule first, as in tile mode.
    with pytest.raises(ValueError, match=r"interleave = 32B requires swizzle = 32B"):
        im2col(shape=shape, interleave=32)


def test_row_bytes_rule_labels_its_operand():
    with pytest.raises(ValueError, match=re.escape("inner box is box[1] * itemsize = 3 * 4 = 12 "
                                                   "bytes; TMA needs a multiple of 16")):
        rules.check_row_bytes("inner box is box[1] * itemsize", 3, 4, 0)
    with pytest.raises(ValueError, match=re.escape("channels_per_pixel * itemsize = 32 * 2 = 64 "
                                                   "bytes, wider than the 32B swizzle span")):
        rules.check_row_bytes("channels_per_pixel * itemsize", 32, 2, 32)
    assert rules.check_row_bytes("x", 64, 2, 128) == 128


def test_layout_returns_what_the_rules_accepted():
    lay = rules.check_layout((4, 8, 32), None, np.float32, ADDR, (2, 4, 8), swizzle="64B",
                             l2_promotion=128, element_strides=(2, 1, 1))
    assert lay.strides == (1024, 128, 4) and lay.box == (2, 4, 8) and lay.itemsize == 4
    assert lay.element_strides == (2, 1, 1) and lay.swizzle_bytes == 64
    assert lay.l2_promotion_bytes == 128 and lay.oob_fill == "zero" and lay.interleave_bytes == 0
    assert rules.check_layout((4, 8), None, 2, ADDR).box is None      # im2col passes no box


def test_the_package_gathers_the_names():
    for name in tensormap.__all__:
        assert hasattr(tensormap, name), name
    for name in ("TensorMap", "plan_tensor_map", "Im2colTensorMap", "plan_im2col_tensor_map",
                 "describe_array", "dtype_name", "is_c_contiguous", "resolve_dtype",
                 "TMA_DESC_WORDS", "device"):
        assert name in tensormap.__all__, name
    from numba_tma.operands import describe_array

    assert tensormap.describe_array is describe_array
    assert tensormap.Im2colTensorMap.__mro__[1] is drv.Descriptor
    assert tensormap.TensorMap.__mro__[1] is drv.Descriptor
