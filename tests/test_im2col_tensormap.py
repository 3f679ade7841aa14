"""CPU-only tests of numba_tma.tensormap.im2col: every cuTensorMapEncodeIm2col rule is checked
before the driver, errors name the argument with its numbers; plans are in the driver's order."""

import numpy as np
import pytest
from cuda.bindings import driver

from numba_tma.kernels.im2col import im2col_numpy, load_im2col_model, output_size
from numba_tma.tensormap import Im2colTensorMap, plan_im2col_tensor_map

ADDR = 0x7F00_0000_0000


def plan(shape=(2, 9, 14, 64), dtype=np.float16, address=ADDR, strides=None, **kw):
    args = dict(pixel_box_lower_corner=(-1, -1), pixel_box_upper_corner=(-1, -1),
                channels_per_pixel=16, pixels_per_column=64)
    args.update(kw)
    return plan_im2col_tensor_map(shape, strides, dtype, address, **args)


def test_plan_is_in_driver_order():
    p = plan(element_strides=(1, 2, 1, 1))
    assert p.rank == 4
    assert p.global_dim == (64, 14, 9, 2)                      # C, W, H, N
    assert p.global_strides == (128, 14 * 128, 9 * 14 * 128)
    assert p.lower_corner == (-1, -1) and p.upper_corner == (-1, -1)
    assert p.element_strides == (1, 1, 2, 1)
    assert p.smem_shape == (64, 16) and p.box_bytes == 64 * 16 * 2 == p.smem_bytes
    assert p.filter_positions == (5, 14)                      # ceil(9 / 2), 14
    assert p.data_type == driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    args = p.encode_args()
    assert args[5:9] == ([-1, -1], [-1, -1], 16, 64)


def test_corners_are_reversed_for_the_driver():
    p = plan(shape=(1, 4, 5, 6, 16), dtype=np.float32, pixel_box_lower_corner=(-1, -2, -3),
             pixel_box_upper_corner=(0, 1, 2))
    assert p.lower_corner == (-3, -2, -1) and p.upper_corner == (2, 1, 0)
    assert p.pixel_box_lower_corner == (-1, -2, -3)


def test_swizzled_rows_take_a_span():
    p = plan(channels_per_pixel=16, swizzle=64)
    assert p.smem_bytes == 64 * 64 and p.box_bytes == 64 * 32


@pytest.mark.parametrize("kw,error,message", [
    (dict(shape=(4, 64)), ValueError, r"shape \(4, 64\) has rank 2; im2col maps need rank 3..5"),
    (dict(shape=(1, 2, 3, 4, 5, 16)), ValueError, r"has rank 6; im2col maps need rank 3..5"),
    (dict(pixel_box_lower_corner=(-1,)), ValueError,
     r"pixel_box_lower_corner has 1 entries; a rank-4 \(NHWC\) map has 2 spatial axes \(H, W\)"),
    (dict(pixel_box_upper_corner=(0, 128)), ValueError,
     r"pixel_box_upper_corner\[1\] = 128 is outside -128..127, the corner range of a rank-4"),
    (dict(shape=(1, 4, 5, 6, 16), pixel_box_lower_corner=(-17, 0, 0),
          pixel_box_upper_corner=(0, 0, 0)), ValueError,
     r"pixel_box_lower_corner\[0\] = -17 is outside -16..15"),
    (dict(shape=(2, 100, 16), pixel_box_lower_corner=(-32769,), pixel_box_upper_corner=(0,)),
     ValueError, r"pixel_box_lower_corner\[0\] = -32769 is outside -32768..32767"),
    (dict(pixel_box_lower_corner=(1.5, 0)), TypeError,
     r"pixel_box_lower_corner\[0\] must be an integer; got 1.5"),
    (dict(pixel_box_lower_corner=5), TypeError, r"pixel_box_lower_corner must be a sequence"),
    (dict(channels_per_pixel=0), ValueError, r"channels_per_pixel = 0 is outside 1..256"),
    (dict(channels_per_pixel=257), ValueError, r"channels_per_pixel = 257 is outside 1..256"),
    (dict(pixels_per_column=1025), ValueError, r"pixels_per_column = 1025 is outside 1..1024"),
    (dict(pixels_per_column=True), TypeError, r"pixels_per_column must be an integer"),
    (dict(channels_per_pixel=12), ValueError,
     r"channels_per_pixel \* itemsize = 12 \* 2 = 24 bytes; TMA needs a multiple of 16"),
    (dict(channels_per_pixel=32, swizzle=32), ValueError,
     r"= 64 bytes, wider than the 32B swizzle span"),
    (dict(pixel_box_lower_corner=(5, 0), pixel_box_upper_corner=(-5, 0)), ValueError,
     r"the pixel box is empty along H \(axis 1\): extent 9 \+ pixel_box_upper_corner\[0\] "
     r"\(-5\) - pixel_box_lower_corner\[0\] \(5\) = -1 filter positions"),
    # Rules shared with tile mode come from plan_tensor_map, named the same way.
    (dict(address=ADDR + 8), ValueError, r"global address 0x7f0000000008 is not 16-byte aligned"),
    (dict(shape=(2, 9, 14, 12)), ValueError, r"stride of axis 2 is 24 bytes; TMA needs a multiple"),
    (dict(dtype=np.complex64), TypeError, r"complex64 is not supported by TMA"),
    (dict(element_strides=(1, 9, 1, 1)), ValueError, r"element_strides\[1\] = 9 is outside 1..8"),
    (dict(element_strides=(1, 1, 1, 2)), ValueError, r"element_strides\[3\] = 2: without interl"),
    (dict(oob_fill="nan", dtype=np.int16), ValueError, r"oob_fill = 'nan' needs a floating"),
    (dict(swizzle=48), ValueError, r"swizzle = 48 is not one of"),
    (dict(interleave=32), ValueError, r"interleave = 32B requires swizzle = 32B"),
    (dict(l2_promotion=100), ValueError, r"l2_promotion = 100 is not one of"),
])
def test_plan_errors_name_the_argument(kw, error, message):
    with pytest.raises(error, match=message):
        plan(**kw)


class FakeDeviceArray:
    def __init__(self, shape, typestr="<f2", ptr=ADDR):
        self.__cuda_array_interface__ = {"version": 3, "shape": tuple(shape), "strides": None,
                                         "typestr": typestr, "data": (ptr, False)}


def test_class_validates_before_touching_the_driver():
    with pytest.raises(ValueError, match=r"channels_per_pixel = 300 is outside 1..256"):
        Im2colTensorMap(FakeDeviceArray((2, 9, 14, 64)), pixel_box_lower_corner=(-1, -1),
                        pixel_box_upper_corner=(-1, -1), channels_per_pixel=300,
                        pixels_per_column=64)
    with pytest.raises(TypeError, match=r"host numpy.ndarray"):
        Im2colTensorMap(np.zeros((2, 9, 14, 64), np.float16), pixel_box_lower_corner=(-1, -1),
                        pixel_box_upper_corner=(-1, -1), channels_per_pixel=16,
                        pixels_per_column=64)


def test_class_encodes_the_plan(monkeypatch):
    from numba_tma.tensormap import driver as drv

    seen = {}

    def fake_encode(*args):
        seen["args"] = args
        return driver.CUresult.CUDA_SUCCESS, type("M", (), {"opaque": list(range(16))})()

    monkeypatch.setattr(drv, "check_device", lambda address: None)   # the maps share it
    monkeypatch.setattr(driver, "cuTensorMapEncodeIm2col", fake_encode)
    desc = FakeDeviceArray((16,), "<u8", 0x7F10_0000_0000)
    monkeypatch.setattr(drv, "upload", lambda words: desc)
    m = Im2colTensorMap(FakeDeviceArray((2, 9, 14, 64)), pixel_box_lower_corner=(-1, -1),
                        pixel_box_upper_corner=(-1, -1), channels_per_pixel=16,
                        pixels_per_column=32)
    assert seen["args"][5:9] == ([-1, -1], [-1, -1], 16, 32)
    assert m.smem_shape == (32, 16) and m.box_bytes == 1024
    assert "pixels_per_column=32" in repr(m)


# ---- the numpy models the GPU tests compare against ----------------------------------------

def test_model_walks_like_the_ptx_example():
    # PTX ISA im2col example 1 shape (C=64, W=9, H=14, N=64 there; smaller N here): box
    # corners -1/-1, base (h=4, w=7) with offsets 0: pixels run along W, wrap to w=-1, next row.
    x = np.arange(2 * 14 * 9 * 8, dtype=np.int32).reshape(2, 14, 9, 8)
    tile = load_im2col_model(x, (0, 4, 7, 0), (0, 0), (-1, -1), (-1, -1), 4, 8)
    np.testing.assert_array_equal(tile[0], x[0, 4, 7])
    np.testing.assert_array_equal(tile[1], np.zeros(8, np.int32))   # w = -1 is padding
    np.testing.assert_array_equal(tile[2], x[0, 5, 0])
    np.testing.assert_array_equal(tile[3], x[0, 5, 1])


def test_model_gives_the_im2col_matrix():
    rng = np.random.default_rng(1)
    x = rng.integers(-99, 99, size=(2, 5, 7, 8)).astype(np.int32)
    k, p = 3, 1
    ho, wo = output_size(5, k, p), output_size(7, k, p)
    cols = im2col_numpy(x, k, p)
    for r in range(k):
        for s in range(k):
            tile = load_im2col_model(x, (0, -p, -p, 0), (r, s), (-p, -p), (p - k + 1,) * 2,
                                     2 * ho * wo, 8)
            np.testing.assert_array_equal(tile, cols[:, (r * k + s) * 8:(r * k + s + 1) * 8])
