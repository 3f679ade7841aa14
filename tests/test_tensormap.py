"""CPU-only tests of numba_tma.tensormap: validation, driver-order planning, host plumbing.

No GPU or libcuda is needed: device arrays are faked with ``__cuda_array_interface__`` and,
where a test must get past the device check, the driver calls are monkeypatched.
"""

import re

import numpy as np
import pytest
from cuda.bindings import driver

from numba_tma import tensormap as tm
from numba_tma.tensormap import driver as drv, rules
from numba_tma.tensormap import TensorMap, TensorMapPlan, plan_tensor_map

ADDR = 0x7F00_0000_0000  # 256-byte aligned, like cudaMalloc
DESC_ADDR = 0x7F10_0000_0000
DT = driver.CUtensorMapDataType


class FakeDeviceArray:
    """Just enough of a CuPy/numba device array: a version-3 __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=ADDR, mask=None):
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": tuple(shape),
            "strides": strides,
            "typestr": typestr,
            "data": (ptr, False),
        }
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


class FakeTorchDevice:
    def __init__(self, kind, index):
        self.type, self.index = kind, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class FakeTorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class FakeTorchTensor:
    """Duck-typed torch tensor; strides are in elements, as torch reports them."""

    def __init__(self, shape, dtype="bfloat16", itemsize=2, stride=None, ptr=ADDR, cuda=True):
        self.shape = tuple(shape)
        self.dtype = FakeTorchDtype(dtype)
        self.is_cuda = cuda
        self.device = FakeTorchDevice("cuda", 0) if cuda else FakeTorchDevice("cpu", None)
        self._itemsize = itemsize
        self._stride = stride or tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
        self._ptr = ptr

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride

    def element_size(self):
        return self._itemsize


def make_plan(shape=(64, 128), strides=None, dtype=np.float32, address=ADDR, box=(16, 32), **kw):
    return plan_tensor_map(shape, strides, dtype, address, box, **kw)


def make_map(shape=(64, 128), strides=None, dtype=np.float32, address=ADDR, box=(16, 32), **kw):
    typestr = np.dtype(dtype).str
    return TensorMap(FakeDeviceArray(shape, typestr, strides, address), box, **kw)


@pytest.fixture
def no_driver(monkeypatch):
    """Any step past pure validation fails the test loudly."""

    def reached(*args, **kwargs):
        raise AssertionError("validation let a bad argument reach the device check / driver")

    monkeypatch.setattr(drv, "check_device", reached)
    monkeypatch.setattr(drv, "encode_tiled", reached)
    monkeypatch.setattr(drv, "upload", reached)


class FakeEncoded:
    def __init__(self, words):
        self.opaque = [driver.cuuint64_t(w) for w in words]


WORDS = [0x0123_4567_89AB_CDEF + 0x1111 * i for i in range(16)]


@pytest.fixture
def fake_driver(monkeypatch):
    """Device check, encoder and upload replaced; records what reached them."""
    calls = {}

    def check_device(address):
        calls["device_check"] = address

    def encode(*args):
        calls["encode_args"] = args
        return driver.CUresult.CUDA_SUCCESS, FakeEncoded(WORDS)

    def upload(words):
        calls["upload"] = list(words)
        return FakeDeviceArray((16,), "<u8", None, DESC_ADDR)

    monkeypatch.setattr(drv, "check_device", check_device)
    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", encode)
    monkeypatch.setattr(drv, "upload", upload)
    return calls


# ---------------------------------------------------------------------------------------------
# Every bad input, through plan_tensor_map and through TensorMap
# ---------------------------------------------------------------------------------------------

# (id, arguments for make_plan/make_map, exception, literal text the message must contain)
BAD_INPUTS = [
    ("rank0", dict(shape=(), box=()), ValueError, "rank 0; TMA supports rank 1..5"),
    (
        "rank6",
        dict(shape=(2,) * 5 + (4,), box=(1,) * 5 + (4,)),
        ValueError,
        "rank 6; TMA supports rank 1..5",
    ),
    (
        "complex",
        dict(dtype=np.complex64, box=(16, 2)),
        TypeError,
        "dtype complex64 is not supported by TMA",
    ),
    (
        "float128",
        dict(dtype=np.longdouble, box=(16, 1)),
        TypeError,
        "is not supported by TMA; supported: bool",
    ),
    ("swizzle_48", dict(swizzle=48), ValueError, "swizzle = 48 is not one of"),
    ("swizzle_256B", dict(swizzle="256B"), ValueError, "swizzle = '256B' is not one of"),
    ("swizzle_bool", dict(swizzle=True), ValueError, "swizzle = True is not one of"),
    ("swizzle_word", dict(swizzle="wide"), ValueError, "swizzle = 'wide' is not one of"),
    ("interleave_8", dict(interleave=8), ValueError, "interleave = 8 is not one of"),
    ("l2_512", dict(l2_promotion=512), ValueError, "l2_promotion = 512 is not one of"),
    ("oob_inf", dict(oob_fill="inf"), ValueError, "oob_fill = 'inf' is not one of 'zero', 'nan'"),
    (
        "interleave_rank2",
        dict(interleave=16),
        ValueError,
        "interleave = 16B needs rank >= 3 plus the slice axis",
    ),
    (
        "interleave32_swizzle_none",
        dict(shape=(2, 4, 8, 16), dtype=np.float16, box=(1, 1, 8, 16), interleave="32B"),
        ValueError,
        "interleave = 32B requires swizzle = 32B; got swizzle = none",
    ),
    (
        "interleave32_swizzle_128",
        dict(shape=(2, 4, 8, 16), dtype=np.float16, box=(1, 1, 8, 16), interleave=32, swizzle=128),
        ValueError,
        "interleave = 32B requires swizzle = 32B; got swizzle = 128B",
    ),
    (
        "nan_fill_int",
        dict(dtype=np.int32, oob_fill="nan"),
        ValueError,
        "oob_fill = 'nan' needs a floating-point dtype; dtype is int32",
    ),
    ("nan_fill_uint8", dict(dtype=np.uint8, oob_fill="nan"), ValueError, "dtype is uint8"),
    (
        "address_4",
        dict(address=ADDR + 4),
        ValueError,
        "global address 0x7f0000000004 is not 16-byte aligned (address % 16 = 4)",
    ),
    ("address_8", dict(address=ADDR + 8), ValueError, "address % 16 = 8"),
    (
        "address_null",
        dict(address=0),
        ValueError,
        "global address 0x0 is not a valid device pointer",
    ),
    (
        "address_32_interleave",
        dict(
            shape=(2, 4, 8, 16),
            dtype=np.float16,
            box=(1, 1, 8, 16),
            interleave=32,
            swizzle=32,
            address=ADDR + 16,
        ),
        ValueError,
        "0x7f0000000010 is not 32-byte aligned (interleave = 32B) (address % 32 = 16)",
    ),
    ("dim_0", dict(shape=(0, 128)), ValueError, "shape[0] = 0 is outside 1..2^32"),
    (
        "dim_2^32+1",
        dict(shape=(2**32 + 1, 16), box=(16, 16)),
        ValueError,
        "shape[0] = 4294967297 is outside 1..2^32",
    ),
    (
        "strides_len",
        dict(strides=(512,)),
        ValueError,
        "strides has 1 entries; the array has rank 2",
    ),
    (
        "inner_not_contiguous",
        dict(strides=(1024, 8)),
        ValueError,
        "stride of axis 1 (the innermost) is 8 bytes; "
        "TMA needs it contiguous (stride == itemsize = 4)",
    ),
    (
        "inner_reversed",
        dict(strides=(512, -4)),
        ValueError,
        "stride of axis 1 (the innermost) is -4 bytes",
    ),
    (
        "stride_100",
        dict(shape=(64, 25), strides=(100, 4), box=(16, 16)),
        ValueError,
        "stride of axis 0 is 100 bytes; TMA needs a multiple of 16",
    ),
    (
        "stride_8",
        dict(shape=(64, 2), strides=(8, 4), box=(16, 4)),
        ValueError,
        "stride of axis 0 is 8 bytes; TMA needs a multiple of 16",
    ),
    (
        "stride_negative",
        dict(strides=(-512, 4)),
        ValueError,
        "stride of axis 0 is -512 bytes; TMA needs positive strides",
    ),
    (
        "stride_zero",
        dict(strides=(0, 4)),
        ValueError,
        "stride of axis 0 is 0 bytes; TMA needs positive strides",
    ),
    (
        "stride_2^40",
        dict(strides=(2**40, 4)),
        ValueError,
        "stride of axis 0 is 1099511627776 bytes; TMA needs < 2^40",
    ),
    (
        "stride_3d_middle",
        dict(shape=(4, 8, 32), strides=(4096, 136, 4), box=(1, 8, 32)),
        ValueError,
        "stride of axis 1 is 136 bytes; TMA needs a multiple of 16",
    ),
    (
        "stride_48_interleave32",
        dict(
            shape=(2, 4, 8, 16),
            strides=(1536, 48, 32, 2),
            dtype=np.float16,
            box=(1, 1, 8, 16),
            interleave=32,
            swizzle=32,
        ),
        ValueError,
        "stride of axis 1 is 48 bytes; TMA needs a multiple of 32 (interleave = 32B)",
    ),
    ("box_len", dict(box=(16,)), ValueError, "box has 1 entries; the array has rank 2"),
    ("box_0", dict(box=(0, 32)), ValueError, "box[0] = 0 is outside 1..256"),
    ("box_300", dict(box=(300, 32)), ValueError, "box[0] = 300 is outside 1..256"),
    (
        "box_257_inner",
        dict(shape=(64, 512), dtype=np.uint8, box=(16, 257)),
        ValueError,
        "box[1] = 257 is outside 1..256",
    ),
    ("box_float", dict(box=(16.0, 32)), TypeError, "box[0] must be an integer; got 16.0"),
    (
        "box_scalar",
        dict(box=16),
        TypeError,
        "box must be a sequence of integers, one per array axis; got 16",
    ),
    (
        "inner_box_12B",
        dict(box=(16, 3)),
        ValueError,
        "inner box is box[1] * itemsize = 3 * 4 = 12 bytes; TMA needs a multiple of 16",
    ),
    (
        "inner_box_8B_fp16",
        dict(dtype=np.float16, box=(16, 4)),
        ValueError,
        "inner box is box[1] * itemsize = 4 * 2 = 8 bytes",
    ),
    # Interleaved (NC/kHWCk) maps: rules measured on the H100 (see tensormap's docstring).
    (
        "interleave_slice_bytes",
        dict(shape=(2, 3, 8, 16), dtype=np.float16, box=(1, 1, 8, 16), interleave=16),
        ValueError,
        "interleave = 16B: the last axis is one channel slice of 16 bytes; got "
        "shape[3] * itemsize = 16 * 2 = 32 bytes",
    ),
    (
        "interleave_w_stride",
        dict(
            shape=(2, 3, 8, 8),
            strides=(768, 256, 32, 2),
            dtype=np.float16,
            box=(1, 1, 8, 8),
            interleave=16,
        ),
        ValueError,
        "interleave = 16B: stride of axis 2 (W) is 32 bytes",
    ),
    (
        "interleave_partial_slice",
        dict(shape=(2, 3, 8, 8), dtype=np.float16, box=(1, 1, 8, 4), interleave=16),
        ValueError,
        "interleave = 16B: box[3] = 4; the box takes the whole slice, box[3] = shape[3] = 8",
    ),
    (
        "interleave_two_slices",
        dict(shape=(2, 3, 8, 8), dtype=np.float16, box=(1, 2, 8, 8), interleave=16),
        ValueError,
        "interleave = 16B: box[1] = 2 along the C/k axis; one interleaved load copies a single",
    ),
    (
        "interleave_w_box_8B",
        dict(shape=(2, 3, 8, 8), dtype=np.float16, box=(1, 1, 4, 8), interleave=16),
        ValueError,
        "interleave = 16B: box[2] (W) * itemsize = 4 * 2 = 8 bytes; the driver needs a "
        "multiple of 16",
    ),
    (
        "interleave_slice_stride",
        dict(
            shape=(2, 3, 8, 8),
            dtype=np.float16,
            box=(1, 1, 8, 8),
            interleave=16,
            element_strides=(1, 1, 1, 2),
        ),
        ValueError,
        "element_strides[3] = 2: with interleave the last axis is the channel slice",
    ),
    (
        "swizzle128_span",
        dict(box=(16, 64), swizzle=128),
        ValueError,
        "inner box is box[1] * itemsize = 64 * 4 = 256 bytes, wider than the 128B swizzle span",
    ),
    (
        "swizzle64_span",
        dict(box=(16, 32), swizzle="64B"),
        ValueError,
        "= 128 bytes, wider than the 64B swizzle span",
    ),
    (
        "swizzle32_span",
        dict(box=(16, 16), swizzle=32),
        ValueError,
        "= 64 bytes, wider than the 32B swizzle span",
    ),
    (
        "estrides_len",
        dict(element_strides=(1,)),
        ValueError,
        "element_strides has 1 entries; the array has rank 2",
    ),
    (
        "estride_9",
        dict(element_strides=(9, 1)),
        ValueError,
        "element_strides[0] = 9 is outside 1..8",
    ),
    (
        "estride_0",
        dict(element_strides=(0, 1)),
        ValueError,
        "element_strides[0] = 0 is outside 1..8",
    ),
    (
        "estride_inner",
        dict(element_strides=(1, 2)),
        ValueError,
        "element_strides[1] = 2: without interleave TMA cannot stride along the innermost axis",
    ),
    ("byte_swapped", dict(dtype=np.dtype(">f4")), TypeError, "is byte-swapped"),
]


@pytest.mark.parametrize("via", ["plan", "tensormap"])
@pytest.mark.parametrize(
    "kwargs, exc, message", [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS]
)
def test_bad_input_is_rejected_before_the_driver(no_driver, via, kwargs, exc, message):
    build = make_plan if via == "plan" else make_map
    with pytest.raises(exc, match=re.escape(message)):
        build(**kwargs)


def test_bad_input_without_a_driver_raises_the_validation_error_not_a_driver_error():
    # No monkeypatching: on a machine without libcuda any driver call would raise RuntimeError.
    with pytest.raises(ValueError, match=re.escape("box[1] = 300 is outside 1..256")):
        make_map(box=(16, 300))
    with pytest.raises(ValueError, match=re.escape("not 16-byte aligned")):
        make_map(address=ADDR + 4)


def test_plan_itemsize_without_a_data_type_is_rejected():
    with pytest.raises(
        ValueError, match=re.escape("itemsize = 3 has no TMA data type; use 1, 2, 4 or 8")
    ):
        make_plan(dtype=3)


# ---------------------------------------------------------------------------------------------
# What TensorMap accepts as an array
# ---------------------------------------------------------------------------------------------


def test_host_numpy_array_is_rejected(no_driver):
    host = np.zeros((64, 128), np.float32)
    with pytest.raises(
        TypeError, match=r"array must be a CUDA device array .*host numpy\.ndarray.*to_device"
    ):
        TensorMap(host, (16, 32))


def test_object_without_device_interface_is_rejected(no_driver):
    with pytest.raises(TypeError, match=r"array must be a CUDA device array .*got builtins\.list"):
        TensorMap([[1.0] * 128] * 64, (16, 32))


def test_torch_cpu_tensor_is_rejected(no_driver):
    with pytest.raises(TypeError, match=r"array must be a CUDA device array .*torch tensor on cpu"):
        TensorMap(FakeTorchTensor((64, 64), cuda=False), (16, 32))


def test_masked_interface_is_rejected(no_driver):
    with pytest.raises(TypeError, match="mask"):
        TensorMap(FakeDeviceArray((64, 128), mask=object()), (16, 32))


def test_bfloat16_bytes_without_override_ask_for_dtype(no_driver):
    # What a bfloat16 array without a numpy dtype exports: two raw bytes.
    with pytest.raises(
        TypeError,
        match=r"dtype void16 is not supported by TMA \(for bfloat16 data pass dtype='bfloat16'\)",
    ):
        TensorMap(FakeDeviceArray((64, 128), "<V2"), (16, 32))


def test_dtype_override_must_keep_the_itemsize(no_driver):
    with pytest.raises(
        ValueError,
        match=re.escape("dtype = bfloat16 has itemsize 2 but the array's elements are 4 bytes"),
    ):
        TensorMap(FakeDeviceArray((64, 128), "<f4"), (16, 32), dtype="bfloat16")


def test_unknown_dtype_override_is_rejected(no_driver):
    with pytest.raises(TypeError, match=re.escape("dtype = 'quux' is not a data type")):
        TensorMap(FakeDeviceArray((64, 128), "<f4"), (16, 32), dtype="quux")


# ---------------------------------------------------------------------------------------------
# Valid plans: driver order, strides, smem shape
# ---------------------------------------------------------------------------------------------


def test_2d_float32_plan_is_reversed_to_driver_order():
    plan = make_plan(shape=(100, 64), box=(16, 32))
    assert isinstance(plan, TensorMapPlan)
    assert plan.rank == 2
    assert plan.data_type == DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    assert plan.data_type_name == "CU_TENSOR_MAP_DATA_TYPE_FLOAT32"
    assert plan.data_type_value == int(DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
    assert plan.global_dim == (64, 100)
    assert plan.global_strides == (256,)
    assert plan.box_dim == (32, 16)
    assert plan.element_strides == (1, 1)
    assert plan.shape == (100, 64) and plan.strides == (256, 4) and plan.box == (16, 32)
    assert plan.smem_shape == (16, 32)
    assert plan.box_bytes == 16 * 32 * 4
    assert plan.interleave == driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert plan.swizzle == driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
    assert plan.l2_promotion == driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE
    assert plan.oob_fill == driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE


def test_padded_rows_keep_their_stride():
    # A (64, 32) view of a (64, 40) float32 array: 160-byte rows, a multiple of 16.
    plan = make_plan(shape=(64, 32), strides=(160, 4), box=(16, 32))
    assert plan.global_dim == (32, 64)
    assert plan.global_strides == (160,)


def test_explicit_c_strides_match_none():
    assert make_plan(strides=(512, 4)) == make_plan(strides=None)


def test_3d_plan():
    plan = make_plan(shape=(4, 6, 8), dtype=np.float16, box=(2, 3, 8))
    assert plan.global_dim == (8, 6, 4)
    assert plan.global_strides == (16, 96)
    assert plan.box_dim == (8, 3, 2)
    assert plan.smem_shape == (2, 3, 8)
    assert plan.box_bytes == 2 * 3 * 8 * 2


def test_5d_plan():
    plan = make_plan(shape=(2, 3, 4, 5, 8), box=(1, 2, 3, 4, 8))
    assert plan.rank == 5
    assert plan.global_dim == (8, 5, 4, 3, 2)
    assert plan.global_strides == (32, 160, 640, 1920)
    assert plan.box_dim == (8, 4, 3, 2, 1)
    assert plan.box_bytes == 1 * 2 * 3 * 4 * 8 * 4


def test_1d_plan_has_no_global_strides_but_passes_a_placeholder_to_the_driver():
    plan = make_plan(shape=(1000,), box=(64,))
    assert plan.global_strides == ()
    args = plan.encode_args()
    assert len(args[4]) == 1  # the driver rejects a NULL globalStrides


def test_element_strides_shrink_the_smem_tile():
    plan = make_plan(shape=(64, 64, 32), box=(8, 30, 32), element_strides=(2, 4, 1))
    assert plan.element_strides == (1, 4, 2)
    assert plan.smem_shape == (4, 8, 32)  # ceil(8/2), ceil(30/4), 32
    assert plan.box_bytes == 4 * 8 * 32 * 4


def test_interleave_maps_w_to_dimension_0():
    # NC/8HWC8 fp16 (2, 24, 5, 7) as (N, C/8, H, W, 8): the slice axis is not a TMA dimension.
    plan = make_plan(
        shape=(2, 3, 5, 7, 8),
        dtype=np.float16,
        box=(1, 1, 4, 8, 8),
        interleave="16B",
        element_strides=(1, 1, 1, 2, 1),
    )
    assert plan.interleave == driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B
    assert plan.rank == 4
    assert plan.global_dim == (7, 5, 3, 2)
    assert plan.global_strides == (112, 560, 1680)
    assert plan.box_dim == (8, 4, 1, 1)
    assert plan.element_strides == (2, 1, 1, 1)
    assert plan.smem_shape == (1, 1, 4, 4, 8)
    assert plan.box_bytes == plan.smem_bytes == 4 * 4 * 16


def test_interleave_32b_with_32b_swizzle_is_accepted():
    plan = make_plan(
        shape=(2, 4, 8, 16), dtype=np.float16, box=(1, 1, 8, 16), interleave=32, swizzle="32B"
    )
    assert plan.interleave_bytes == 32 and plan.swizzle_bytes == 32
    assert plan.rank == 3 and plan.global_dim == (8, 4, 2)
    assert plan.global_strides == (256, 1024)
    assert plan.box_bytes == plan.smem_bytes == 8 * 32


def test_innermost_axis_of_one_element_may_have_any_stride():
    plan = make_plan(shape=(64, 1), strides=(16, 8), box=(16, 4))
    assert plan.global_strides == (16,)


def test_limits_are_inclusive_where_the_driver_says_so():
    plan = make_plan(
        shape=(2**32, 16), strides=(2**40 - 16, 4), box=(256, 16), element_strides=(8, 1)
    )
    assert plan.global_dim == (16, 2**32)
    assert plan.global_strides == (2**40 - 16,)


def test_swizzle_span_may_be_filled_exactly():
    assert make_plan(box=(16, 32), swizzle=128).swizzle_bytes == 128
    assert make_plan(box=(16, 16), swizzle=64).swizzle_bytes == 64
    assert make_plan(box=(16, 8), swizzle=32).swizzle_bytes == 32


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, 0),
        (0, 0),
        ("none", 0),
        ("NONE", 0),
        (32, 32),
        ("32B", 32),
        (np.int64(64), 64),
        ("64b", 64),
        (128, 128),
        (driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B, 128),
    ],
)
def test_swizzle_spellings(value, expected):
    box = (16, 8) if expected == 32 else (16, 16)
    plan = make_plan(box=box, swizzle=value)
    assert plan.swizzle_bytes == expected
    assert plan.swizzle == rules._SWIZZLE[expected]


@pytest.mark.parametrize(
    "value, expected", [(None, 0), (0, 0), (64, 64), ("128B", 128), (256, 256)]
)
def test_l2_promotion_spellings(value, expected):
    plan = make_plan(l2_promotion=value)
    assert plan.l2_promotion_bytes == expected
    assert plan.l2_promotion == rules._L2_PROMOTION[expected]


def test_nan_fill_for_floats():
    plan = make_plan(oob_fill="NaN")
    assert (
        plan.oob_fill
        == driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    )
    assert make_plan(dtype="bfloat16", box=(16, 8), oob_fill="nan").data_type_name.endswith(
        "BFLOAT16"
    )


DTYPE_MAP = [
    (np.bool_, "UINT8"),
    (np.int8, "UINT8"),
    (np.uint8, "UINT8"),
    (np.int16, "UINT16"),
    (np.uint16, "UINT16"),
    (np.int32, "INT32"),
    (np.uint32, "UINT32"),
    (np.int64, "INT64"),
    (np.uint64, "UINT64"),
    (np.float16, "FLOAT16"),
    ("bfloat16", "BFLOAT16"),
    (np.float32, "FLOAT32"),
    (np.float64, "FLOAT64"),
]


@pytest.mark.parametrize(
    "dtype, name", DTYPE_MAP, ids=[str(np.dtype(d)) if d != "bfloat16" else d for d, _ in DTYPE_MAP]
)
def test_dtype_mapping(dtype, name):
    itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    plan = make_plan(dtype=dtype, box=(16, 64 // itemsize))
    assert plan.data_type == getattr(DT, "CU_TENSOR_MAP_DATA_TYPE_" + name)
    assert plan.itemsize == itemsize
    assert plan.box_bytes == 16 * 64


@pytest.mark.parametrize(
    "itemsize, name", [(1, "UINT8"), (2, "UINT16"), (4, "UINT32"), (8, "UINT64")]
)
def test_bare_itemsize_means_raw_unsigned_words(itemsize, name):
    plan = make_plan(dtype=itemsize, box=(16, 16 // itemsize))
    assert plan.data_type_name == "CU_TENSOR_MAP_DATA_TYPE_" + name


def test_dtype_names_and_torch_dtypes_are_understood():
    assert make_plan(dtype="float32").data_type_name.endswith("FLOAT32")
    assert make_plan(dtype=FakeTorchDtype("float16"), box=(16, 8)).data_type_name.endswith(
        "FLOAT16"
    )
    plan = make_plan(dtype=FakeTorchDtype("bfloat16"), box=(16, 8))
    assert plan.dtype == "bfloat16" and plan.data_type_name.endswith("BFLOAT16")


def test_encode_args_are_driver_typed_and_ordered():
    plan = make_plan(shape=(100, 64), box=(16, 32), swizzle=128, element_strides=(2, 1))
    args = plan.encode_args()
    assert args[0] == DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    assert args[1] == 2 and args[2] == ADDR
    assert all(isinstance(v, driver.cuuint64_t) for v in args[3] + args[4])
    assert all(isinstance(v, driver.cuuint32_t) for v in args[5] + args[6])
    assert [int(v) for v in args[3]] == [64, 100]
    assert [int(v) for v in args[4]] == [256]
    assert [int(v) for v in args[5]] == [32, 16]
    assert [int(v) for v in args[6]] == [1, 2]
    assert args[7:] == (plan.interleave, plan.swizzle, plan.l2_promotion, plan.oob_fill)


# ---------------------------------------------------------------------------------------------
# TensorMap past validation
# ---------------------------------------------------------------------------------------------


def test_valid_map_reaches_the_device_check_then_encodes_and_uploads(fake_driver):
    array = FakeDeviceArray((100, 64), "<f4")
    tmap = TensorMap(array, (16, 32), swizzle="128B", l2_promotion=256)
    assert fake_driver["device_check"] == ADDR
    args = fake_driver["encode_args"]
    assert [int(v) for v in args[3]] == [64, 100]
    assert [int(v) for v in args[5]] == [32, 16]
    assert args[8] == driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert fake_driver["upload"] == WORDS
    assert tmap.encoded == np.array(WORDS, dtype="<u8").tobytes()
    assert len(tmap.encoded) == tm.TMA_DESC_BYTES
    assert tmap.__cuda_array_interface__ is tmap.device_array.__cuda_array_interface__
    assert tmap.__cuda_array_interface__["shape"] == (16,)
    assert tmap.array is array
    assert tmap.rank == 2 and tmap.shape == (100, 64) and tmap.box == (16, 32)
    assert tmap.element_strides == (1, 1) and tmap.smem_shape == (16, 32)
    assert tmap.box_bytes == 2048 and tmap.itemsize == 4 and tmap.dtype == np.float32
    assert tmap.swizzle == 128 and tmap.interleave == 0 and tmap.l2_promotion == 256
    assert tmap.oob_fill == "zero"
    assert tmap.plan.global_dim == (64, 100)
    text = repr(tmap)
    assert "float32[100, 64]" in text and "box=(16, 32)" in text and "swizzle=128B" in text


def test_element_strides_are_reported_in_array_order(fake_driver):
    tmap = TensorMap(FakeDeviceArray((64, 64, 32)), (8, 30, 32), element_strides=(2, 4, 1))
    assert tmap.element_strides == (2, 4, 1)
    assert tmap.smem_shape == (4, 8, 32)
    assert "element_strides=(2, 4, 1)" in repr(tmap)


def test_bfloat16_override_on_uint16_array(fake_driver):
    tmap = TensorMap(FakeDeviceArray((64, 128), "<u2"), (16, 64), dtype="bfloat16", oob_fill="nan")
    assert tmap.dtype == "bfloat16"
    assert fake_driver["encode_args"][0] == DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert tmap.oob_fill == "nan"


def test_torch_bfloat16_tensor_is_duck_typed(fake_driver):
    # Padded rows: 80 elements = 160 bytes between rows of 64 bfloat16.
    tensor = FakeTorchTensor((32, 64), stride=(80, 1), ptr=ADDR + 256)
    tmap = TensorMap(tensor, (16, 64), swizzle=128)
    assert tmap.dtype == "bfloat16"
    assert fake_driver["device_check"] == ADDR + 256
    assert tmap.plan.global_strides == (160,)
    assert fake_driver["encode_args"][0] == DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16


def test_encode_failure_names_the_cuda_error_and_the_plan(fake_driver, monkeypatch):
    monkeypatch.setattr(
        driver,
        "cuTensorMapEncodeTiled",
        lambda *a: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, None),
    )
    with pytest.raises(
        RuntimeError, match=r"CUDA_ERROR_INVALID_VALUE.*globalDim \[128, 64\].*boxDim \[32, 16\]"
    ):
        make_map()


def test_misaligned_descriptor_copy_is_reported(fake_driver, monkeypatch):
    monkeypatch.setattr(
        drv, "upload", lambda words: FakeDeviceArray((16,), "<u8", None, DESC_ADDR + 32)
    )
    with pytest.raises(RuntimeError, match="not 64-byte aligned"):
        make_map()


def _bindings_answer(monkeypatch):
    """The device check asks cuda-bindings (patched below) instead of libcuda's C API."""
    from numba_tma import operands

    monkeypatch.setattr(operands, "_libcuda", [None])


def test_array_on_another_device_is_rejected(monkeypatch):
    _bindings_answer(monkeypatch)
    monkeypatch.setattr(drv, "current_device_id", lambda: 0)
    monkeypatch.setattr(
        driver, "cuPointerGetAttribute", lambda attr, ptr: (driver.CUresult.CUDA_SUCCESS, 1)
    )
    monkeypatch.setattr(
        drv, "encode_tiled", lambda plan: pytest.fail("encoded an array of another device")
    )
    with pytest.raises(ValueError, match="lives on device 1 but numba's current device is 0"):
        make_map()


def test_pointer_that_is_not_device_memory_is_rejected(monkeypatch):
    _bindings_answer(monkeypatch)
    monkeypatch.setattr(drv, "current_device_id", lambda: 0)
    monkeypatch.setattr(
        driver,
        "cuPointerGetAttribute",
        lambda attr, ptr: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, 0),
    )
    with pytest.raises(
        ValueError,
        match=r"address 0x7f0000000000 is not CUDA device memory .*CUDA_ERROR_INVALID_VALUE",
    ):
        make_map()


def test_device_check_asks_for_the_device_ordinal(monkeypatch):
    _bindings_answer(monkeypatch)
    seen = {}

    def get_attribute(attr, ptr):
        seen["attr"], seen["ptr"] = attr, ptr
        return driver.CUresult.CUDA_SUCCESS, 0

    monkeypatch.setattr(drv, "current_device_id", lambda: 0)
    monkeypatch.setattr(driver, "cuPointerGetAttribute", get_attribute)
    drv.check_device(ADDR)
    assert seen == {
        "attr": driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        "ptr": ADDR,
    }


def _cuda_available():
    from numba_tma._frontend import cuda

    return cuda.is_available()


@pytest.mark.skipif(
    _cuda_available(), reason="checks the behaviour on a machine without a CUDA driver"
)
def test_valid_map_without_a_driver_fails_cleanly_at_the_device_check():
    from numba_tma import NoGPUError

    with pytest.raises(NoGPUError) as err:
        make_map(box=(16, 32), swizzle=128)
    assert str(err.value) == ("a TensorMap needs an NVIDIA GPU; no NVIDIA driver (R580 or "
                              "newer) or CUDA device was found")


def test_swizzled_rows_occupy_a_whole_span():
    # 8 rows of 16 float32 (64 B) under the 128B swizzle: 512 bytes delivered, 1024 occupied.
    plan = plan_tensor_map((64, 64), None, np.float32, 0x10000, (8, 16), swizzle=128)
    assert plan.box_bytes == 512 and plan.smem_bytes == 1024
    plan = plan_tensor_map((64, 64), None, np.float32, 0x10000, (8, 16))
    assert plan.smem_bytes == plan.box_bytes == 512
