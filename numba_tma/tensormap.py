"""Host-side construction of TMA tensor maps (``CUtensorMap``, tile mode) for numba-cuda kernels.

A :class:`TensorMap` describes how the Tensor Memory Accelerator of an sm_90 GPU copies
rectangular boxes between a global-memory array and shared memory.  It is encoded on the
host by ``cuTensorMapEncodeTiled`` and its 128 bytes are then copied to device memory.

Conventions
-----------
* Every shape, ``box``, ``element_strides`` and coordinate is given in the array's own
  (numpy, outermost-first) order: for a ``(rows, cols)`` array, ``box=(64, 32)`` is 64 rows
  by 32 columns.  The driver and PTX count dimensions innermost-first; this module reverses
  the lists for the driver, and numba_tma's TMA intrinsics reverse coordinates for PTX.
* Every rule the driver documents for ``cuTensorMapEncodeTiled`` is checked here first, so a
  bad argument raises a ``ValueError``/``TypeError`` that names it and shows the numbers
  instead of a bare ``CUDA_ERROR_INVALID_VALUE``.  :func:`plan_tensor_map` does all those
  checks without a GPU.
* Signed 8- and 16-bit types (and ``bool``) are described to TMA as unsigned integers of the
  same size: TMA moves them bitwise, which is exact for copies.

Interleaved maps (``interleave=16`` / ``32``)
--------------------------------------------
The array is the interleaved tensor itself, slice innermost: NCHW stored as NC/kHWCk is the
array ``(N, C/k, [D,] H, W, k)`` with ``k * itemsize`` = 16 or 32 bytes (pad C to a multiple of
k).  Measured on the H100 (driver 580): TMA's dimension 0 is **W**, each element one whole
slice (its stride is implicitly the slice size, its bound ``W``); the slice axis is not a TMA
dimension, so the map has ``rank = ndim - 1`` and a load takes ``ndim - 1`` coordinates
``(n, c_slice, [d,] h, w)``.  Element strides apply to W, H, D as in tile mode.  One load copies
a **single** C/k slice whatever ``boxDim`` says for that axis (so ``box[1]`` must be 1).  The
driver still requires ``box_W * itemsize`` to be a multiple of 16 (8 pixels for fp16, 16 for
int8).  Shared memory receives the dense box ``(bN, 1, [bD,] bH, bW, k)`` (32B interleave with
its required 32B swizzle: the usual 32B swizzle of those bytes), ``box_bytes`` of transaction.
Out-of-range and negative coordinates (W, H, C/k) load zeros without faulting.  Giving the slice
as TMA's dimension 0 (the obvious tile-mode reading) makes every load copy 16/32 bytes per
element of it: many times the box, overrunning shared memory (CUDA_ERROR_ILLEGAL_ADDRESS).

The descriptor lives in global memory
-------------------------------------
CUDA C passes a tensor map to a kernel as a ``const __grid_constant__ CUtensorMap`` parameter.
numba cannot pass a 128-byte aligned struct by value yet, so the descriptor is put in a
device allocation instead (``cudaMalloc``'d, so at least 64-byte aligned, as TMA requires).
On sm_90 a generic address that points to global memory is a valid tensor-map operand of
``cp.async.bulk.tensor``; the map is written before the launch, so no tensormap proxy fence
is needed.

Usage::

    import numpy as np
    from numba import cuda
    from numba_tma.tensormap import TensorMap

    a = cuda.to_device(np.zeros((1024, 512), np.float32))
    tmap = TensorMap(a, box=(64, 32), swizzle="128B")   # 64 x 32 tile, 8 KiB per load

    @cuda.jit
    def kernel(tmap, out):
        # ``tmap`` arrives as a 1-D uint64 array of 16 words holding the descriptor; hand it
        # to numba_tma's TMA intrinsics together with array-order coordinates.
        ...

    kernel[grid, block](tmap, out)   # a TensorMap is passed as-is

Keep the ``TensorMap`` alive while kernels use it: it holds a reference to the source array
and owns the device copy of the descriptor.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

import numpy as np
from cuda.bindings import driver

__all__ = [
    "TensorMap",
    "TensorMapPlan",
    "plan_tensor_map",
    "describe_array",
    "resolve_dtype",
    "BFLOAT16",
    "SUPPORTED_DTYPES",
    "TMA_MAX_RANK",
    "TMA_MIN_RANK_INTERLEAVED",
    "TMA_MAX_GLOBAL_DIM",
    "TMA_MAX_GLOBAL_STRIDE",
    "TMA_GLOBAL_ALIGN",
    "TMA_GLOBAL_ALIGN_INTERLEAVE_32B",
    "TMA_MAX_BOX_DIM",
    "TMA_BOX_INNER_ALIGN",
    "TMA_MAX_ELEMENT_STRIDE",
    "TMA_DESC_ALIGN",
    "TMA_DESC_BYTES",
]

# Limits from the cuTensorMapEncodeTiled documentation (CUDA Driver API, "Tensor Map Object
# Management").
TMA_MAX_RANK = 5
TMA_MIN_RANK_INTERLEAVED = 3
TMA_MAX_GLOBAL_DIM = 1 << 32  # inclusive
TMA_MAX_GLOBAL_STRIDE = 1 << 40  # exclusive, bytes
TMA_GLOBAL_ALIGN = 16  # bytes: global address and global strides
TMA_GLOBAL_ALIGN_INTERLEAVE_32B = 32
TMA_MAX_BOX_DIM = 256
TMA_BOX_INNER_ALIGN = 16  # bytes: box[-1] * itemsize
TMA_MAX_ELEMENT_STRIDE = 8
TMA_DESC_ALIGN = 64  # bytes: the CUtensorMap itself
TMA_DESC_BYTES = 128
TMA_DESC_WORDS = TMA_DESC_BYTES // 8

BFLOAT16 = "bfloat16"

_DT = driver.CUtensorMapDataType
_DATA_TYPES = {
    "bool": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "int8": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "uint8": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "int16": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "uint16": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "int32": _DT.CU_TENSOR_MAP_DATA_TYPE_INT32,
    "uint32": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT32,
    "int64": _DT.CU_TENSOR_MAP_DATA_TYPE_INT64,
    "uint64": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT64,
    "float16": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    BFLOAT16: _DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    "float32": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    "float64": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
}
SUPPORTED_DTYPES = tuple(_DATA_TYPES)
_FLOAT_DTYPES = frozenset({"float16", BFLOAT16, "float32", "float64"})
_RAW_BY_ITEMSIZE = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}

_SWIZZLE = {
    0: driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
    32: driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
    64: driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
    128: driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
}
_INTERLEAVE = {
    0: driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
    16: driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B,
    32: driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_32B,
}
_L2_PROMOTION = {
    0: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
    64: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    128: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    256: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
}
_OOB_FILL = {
    "zero": driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    "nan": driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
}

_HOST_ARRAY_HINT = (
    "array must be a CUDA device array (numba device array, CuPy array or torch CUDA tensor); "
)


# ---------------------------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------------------------


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer; got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer; got {value!r}") from None


def _as_int_tuple(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(
            f"{what} must be a sequence of integers, one per array axis; got {values!r}"
        )
    return tuple(_as_int(v, f"{what}[{i}]") for i, v in enumerate(values))


def _dtype_key(spec: Any, what: str = "dtype") -> tuple[Any, str, int]:
    """Return (dtype as exposed to users, table key, itemsize); the key may be unsupported."""
    if isinstance(spec, str) and spec.strip().lower() in (BFLOAT16, "bf16"):
        return BFLOAT16, BFLOAT16, 2
    if not isinstance(spec, (str, np.dtype, type)) and str(spec).startswith("torch."):
        # torch dtypes carry no numpy equivalent object; their names match numpy's.
        name = str(spec)[len("torch.") :]
        if name == BFLOAT16:
            return BFLOAT16, BFLOAT16, 2
        spec = name
    try:
        dt = np.dtype(spec)
    except TypeError:
        raise TypeError(
            f"{what} = {spec!r} is not a data type; supported: {', '.join(SUPPORTED_DTYPES)}"
        ) from None
    if dt.name == BFLOAT16:  # ml_dtypes.bfloat16
        return BFLOAT16, BFLOAT16, 2
    if not dt.isnative:
        raise TypeError(f"{what} = {dt.str!r} is byte-swapped; TMA copies little-endian data only")
    return dt, dt.name, dt.itemsize


def resolve_dtype(spec: Any, what: str = "dtype") -> tuple[Any, int]:
    """Return (dtype, itemsize) for a supported dtype spec, else raise TypeError."""
    dt, key, itemsize = _dtype_key(spec, what)
    if key not in _DATA_TYPES:
        hint = " (for bfloat16 data pass dtype='bfloat16')" if key == "void16" else ""
        raise TypeError(
            f"{what} {key} is not supported by TMA{hint}; supported: "
            f"{', '.join(SUPPORTED_DTYPES)} (or pass dtype= to reinterpret the bytes)"
        )
    return dt, itemsize


def _parse_bytes_option(value: Any, what: str, table: dict[int, Any]) -> int:
    choices = ", ".join(["None"] + [f"{n}/'{n}B'" if n else "0/'none'" for n in table])
    bad = ValueError(f"{what} = {value!r} is not one of {choices}")
    if value is None:
        return 0
    enum_type = type(next(iter(table.values())))
    if isinstance(value, enum_type):
        for n, member in table.items():
            if member == value:
                return n
        raise bad
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "none":
            n = 0
        elif text.endswith("b") and text[:-1].isdigit():
            n = int(text[:-1])
        else:
            raise bad
    elif isinstance(value, bool):
        raise bad
    else:
        try:
            n = operator.index(value)
        except TypeError:
            raise bad from None
    if n not in table:
        raise bad
    return n


def _parse_oob_fill(value: Any) -> str:
    bad = ValueError(f"oob_fill = {value!r} is not one of 'zero', 'nan'")
    if value is None:
        return "zero"
    if isinstance(value, driver.CUtensorMapFloatOOBfill):
        for name, member in _OOB_FILL.items():
            if member == value:
                return name
        raise bad
    if not isinstance(value, str) or value.strip().lower() not in _OOB_FILL:
        raise bad
    return value.strip().lower()


def _fmt_bytes_option(n: int) -> str:
    return f"{n}B" if n else "none"


# ---------------------------------------------------------------------------------------------
# Pure planning: every documented rule, no GPU needed
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TensorMapPlan:
    """Validated arguments of ``cuTensorMapEncodeTiled``.

    ``global_dim``, ``global_strides`` (bytes, rank - 1 entries), ``box_dim`` and
    ``element_strides`` are in the driver's innermost-first order; ``shape``, ``strides``,
    ``box`` and ``smem_shape`` are in the array's order.
    """

    dtype: Any  # numpy dtype, or the string "bfloat16"
    itemsize: int
    data_type: Any  # driver.CUtensorMapDataType
    rank: int
    address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: Any  # driver.CUtensorMapInterleave
    swizzle: Any  # driver.CUtensorMapSwizzle
    l2_promotion: Any  # driver.CUtensorMapL2promotion
    oob_fill: Any  # driver.CUtensorMapFloatOOBfill
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    smem_shape: tuple[int, ...]
    box_bytes: int
    smem_bytes: int
    swizzle_bytes: int
    interleave_bytes: int
    l2_promotion_bytes: int

    @property
    def data_type_name(self) -> str:
        return self.data_type.name

    @property
    def data_type_value(self) -> int:
        return int(self.data_type)

    def encode_args(self) -> tuple:
        """Positional arguments for ``driver.cuTensorMapEncodeTiled``."""
        u32, u64 = driver.cuuint32_t, driver.cuuint64_t
        return (
            self.data_type,
            self.rank,
            self.address,
            [u64(d) for d in self.global_dim],
            # The driver rejects a NULL globalStrides even at rank 1, where it reads none.
            [u64(s) for s in self.global_strides] or [u64(0)],
            [u32(b) for b in self.box_dim],
            [u32(e) for e in self.element_strides],
            self.interleave,
            self.swizzle,
            self.l2_promotion,
            self.oob_fill,
        )

    def describe(self) -> str:
        """One line with everything passed to the driver (driver order)."""
        return (
            f"{self.data_type_name}, rank {self.rank}, address {self.address:#x}, "
            f"globalDim {list(self.global_dim)}, globalStrides {list(self.global_strides)}, "
            f"boxDim {list(self.box_dim)}, elementStrides {list(self.element_strides)}, "
            f"{self.interleave.name}, {self.swizzle.name}, {self.l2_promotion.name}, "
            f"{self.oob_fill.name}"
        )


def plan_tensor_map(
    shape,
    strides_bytes,
    itemsize_or_dtype,
    address,
    box,
    *,
    swizzle=None,
    interleave=None,
    l2_promotion=None,
    oob_fill="zero",
    element_strides=None,
) -> TensorMapPlan:
    """Validate a tile-mode tensor map against every documented rule and return the plan.

    ``shape``, ``strides_bytes`` (``None`` means C-contiguous), ``box`` and
    ``element_strides`` are in the array's order.  ``itemsize_or_dtype`` is a dtype (numpy
    dtype, name, torch dtype or ``"bfloat16"``) or an int itemsize, which means raw unsigned
    words of that size.  Raises ``TypeError``/``ValueError`` naming the offending argument.
    """
    shape = _as_int_tuple(shape, "shape")
    rank = len(shape)
    # Parsed first: with interleave the array carries one more axis (the slice) than the map.
    interleave_bytes = _parse_bytes_option(interleave, "interleave", _INTERLEAVE)
    slice_axis = 1 if interleave_bytes else 0
    if not 1 <= rank <= TMA_MAX_RANK + slice_axis:
        raise ValueError(f"shape {shape} has rank {rank}; TMA supports rank 1..{TMA_MAX_RANK}")

    if isinstance(itemsize_or_dtype, int) and not isinstance(itemsize_or_dtype, bool):
        if itemsize_or_dtype not in _RAW_BY_ITEMSIZE:
            raise ValueError(
                f"itemsize = {itemsize_or_dtype} has no TMA data type; use 1, 2, 4 or 8"
            )
        dtype, itemsize = resolve_dtype(_RAW_BY_ITEMSIZE[itemsize_or_dtype])
    else:
        dtype, itemsize = resolve_dtype(itemsize_or_dtype)
    dtype_name = dtype if isinstance(dtype, str) else dtype.name
    data_type = _DATA_TYPES[dtype_name]

    swizzle_bytes = _parse_bytes_option(swizzle, "swizzle", _SWIZZLE)
    l2_bytes = _parse_bytes_option(l2_promotion, "l2_promotion", _L2_PROMOTION)
    oob = _parse_oob_fill(oob_fill)

    if interleave_bytes and rank < TMA_MIN_RANK_INTERLEAVED + 1:
        raise ValueError(
            f"interleave = {_fmt_bytes_option(interleave_bytes)} needs rank >= "
            f"{TMA_MIN_RANK_INTERLEAVED} plus the slice axis, i.e. an NC/kHWCk array of "
            f"{TMA_MIN_RANK_INTERLEAVED + 1}..{TMA_MAX_RANK + 1} axes "
            f"(N, C/k, [D, H,] W, k); the array has rank {rank}"
        )
    if interleave_bytes == 32 and swizzle_bytes != 32:
        raise ValueError(
            "interleave = 32B requires swizzle = 32B; "
            f"got swizzle = {_fmt_bytes_option(swizzle_bytes)}"
        )
    if oob == "nan" and dtype_name not in _FLOAT_DTYPES:
        raise ValueError(f"oob_fill = 'nan' needs a floating-point dtype; dtype is {dtype_name}")

    align = TMA_GLOBAL_ALIGN_INTERLEAVE_32B if interleave_bytes == 32 else TMA_GLOBAL_ALIGN
    why_align = " (interleave = 32B)" if interleave_bytes == 32 else ""
    address = _as_int(address, "address")
    if address <= 0:
        raise ValueError(f"the array's global address {address:#x} is not a valid device pointer")
    if address % align:
        raise ValueError(
            f"the array's global address {address:#x} is not {align}-byte aligned{why_align} "
            f"(address % {align} = {address % align})"
        )

    for axis, extent in enumerate(shape):
        if not 1 <= extent <= TMA_MAX_GLOBAL_DIM:
            raise ValueError(f"shape[{axis}] = {extent} is outside 1..2^32 ({TMA_MAX_GLOBAL_DIM})")

    if strides_bytes is None:
        strides = tuple(int(itemsize * math.prod(shape[axis + 1 :])) for axis in range(rank))
    else:
        strides = _as_int_tuple(strides_bytes, "strides")
        if len(strides) != rank:
            raise ValueError(f"strides has {len(strides)} entries; the array has rank {rank}")
    inner = rank - 1
    # A single element along the innermost axis makes its stride meaningless.
    if shape[inner] > 1 and strides[inner] != itemsize:
        raise ValueError(
            f"stride of axis {inner} (the innermost) is {strides[inner]} bytes; TMA needs it "
            f"contiguous (stride == itemsize = {itemsize}); copy the array or pick a view whose "
            f"last axis is contiguous"
        )
    for axis in range(inner):
        stride = strides[axis]
        if stride <= 0:
            raise ValueError(
                f"stride of axis {axis} is {stride} bytes; TMA needs positive strides "
                f"(no reversed or broadcast axes)"
            )
        if stride % align:
            raise ValueError(
                f"stride of axis {axis} is {stride} bytes; "
                f"TMA needs a multiple of {align}{why_align}"
            )
        if stride >= TMA_MAX_GLOBAL_STRIDE:
            raise ValueError(f"stride of axis {axis} is {stride} bytes; TMA needs < 2^40")

    box = _as_int_tuple(box, "box")
    if len(box) != rank:
        raise ValueError(
            f"box has {len(box)} entries; the array has rank {rank} "
            "(one entry per axis, array order)"
        )
    for axis, b in enumerate(box):
        if not 1 <= b <= TMA_MAX_BOX_DIM:
            raise ValueError(f"box[{axis}] = {b} is outside 1..{TMA_MAX_BOX_DIM}")

    if element_strides is None:
        estrides = (1,) * rank
    else:
        estrides = _as_int_tuple(element_strides, "element_strides")
        if len(estrides) != rank:
            raise ValueError(
                f"element_strides has {len(estrides)} entries; the array has rank {rank}"
            )
        for axis, e in enumerate(estrides):
            if not 1 <= e <= TMA_MAX_ELEMENT_STRIDE:
                raise ValueError(
                    f"element_strides[{axis}] = {e} is outside 1..{TMA_MAX_ELEMENT_STRIDE}"
                )
        if interleave_bytes and estrides[inner] != 1:
            raise ValueError(
                f"element_strides[{inner}] = {estrides[inner]}: with interleave the last axis is "
                f"the channel slice, copied whole; use 1 (element_strides[{inner - 1}] strides W)"
            )
        # The driver silently ignores it, which would make smem_shape lie.
        if not interleave_bytes and estrides[inner] != 1:
            raise ValueError(
                f"element_strides[{inner}] = {estrides[inner]}: without interleave TMA cannot "
                f"stride along the innermost axis (the driver ignores it); use 1"
            )

    if interleave_bytes:
        _check_interleaved(shape, strides, box, itemsize, interleave_bytes)
    # With interleave the driver applies this rule to W's box instead (_check_interleaved).
    inner_bytes = box[inner] * itemsize
    if not interleave_bytes and inner_bytes % TMA_BOX_INNER_ALIGN:
        raise ValueError(
            f"inner box is box[{inner}] * itemsize = {box[inner]} * {itemsize} = "
            f"{inner_bytes} bytes; TMA needs a multiple of {TMA_BOX_INNER_ALIGN}"
        )
    if not interleave_bytes and swizzle_bytes and inner_bytes > swizzle_bytes:
        raise ValueError(
            f"inner box is box[{inner}] * itemsize = {box[inner]} * {itemsize} = "
            f"{inner_bytes} bytes, wider than the {swizzle_bytes}B swizzle span"
        )

    smem_shape = tuple(-(-b // e) for b, e in zip(box, estrides, strict=True))
    # Dense box rows (the innermost axis), each padded to a whole span when swizzled.
    row_bytes, rows = smem_shape[-1] * itemsize, math.prod(smem_shape[:-1])
    driver_axes = rank
    if interleave_bytes:
        # The slice axis is implicit in the map: TMA's dimension 0 is W, one slice per element.
        driver_axes = inner
        row_bytes, rows = smem_shape[-2] * interleave_bytes, math.prod(smem_shape[:-2])
    if swizzle_bytes:
        row_bytes = -(-row_bytes // swizzle_bytes) * swizzle_bytes
    return TensorMapPlan(
        dtype=dtype,
        itemsize=itemsize,
        data_type=data_type,
        rank=driver_axes,
        address=address,
        global_dim=shape[:driver_axes][::-1],
        global_strides=strides[: driver_axes - 1][::-1],
        box_dim=box[:driver_axes][::-1],
        element_strides=estrides[:driver_axes][::-1],
        interleave=_INTERLEAVE[interleave_bytes],
        swizzle=_SWIZZLE[swizzle_bytes],
        l2_promotion=_L2_PROMOTION[l2_bytes],
        oob_fill=_OOB_FILL[oob],
        shape=shape,
        strides=strides,
        box=box,
        smem_shape=smem_shape,
        box_bytes=math.prod(smem_shape) * itemsize,
        # Swizzled box rows each take a whole span of shared memory (measured on the H100).
        smem_bytes=rows * row_bytes,
        swizzle_bytes=swizzle_bytes,
        interleave_bytes=interleave_bytes,
        l2_promotion_bytes=l2_bytes,
    )


def _check_interleaved(shape, strides, box, itemsize, interleave_bytes):
    """The layout rules of an interleaved (NC/kHWCk) map, measured on the H100 (driver 580)."""
    name = f"interleave = {_fmt_bytes_option(interleave_bytes)}"
    inner, w_axis = len(shape) - 1, len(shape) - 2
    slice_bytes = shape[inner] * itemsize
    if slice_bytes != interleave_bytes:
        raise ValueError(
            f"{name}: the last axis is one channel slice of {interleave_bytes} bytes; got "
            f"shape[{inner}] * itemsize = {shape[inner]} * {itemsize} = {slice_bytes} bytes "
            f"(lay the tensor out as (N, C/k, [D, H,] W, k) with k * itemsize = {interleave_bytes})"
        )
    if shape[w_axis] > 1 and strides[w_axis] != interleave_bytes:
        raise ValueError(
            f"{name}: stride of axis {w_axis} (W) is {strides[w_axis]} bytes; TMA steps W by one "
            f"slice, so the slices of a row must be contiguous (stride {interleave_bytes})"
        )
    if box[inner] != shape[inner]:
        raise ValueError(
            f"{name}: box[{inner}] = {box[inner]}; the box takes the whole slice, "
            f"box[{inner}] = shape[{inner}] = {shape[inner]}"
        )
    if box[1] != 1:
        raise ValueError(
            f"{name}: box[1] = {box[1]} along the C/k axis; one interleaved load copies a single "
            f"channel slice whatever the box says (measured), so use box[1] = 1 and one load "
            f"per slice"
        )
    if (box[w_axis] * itemsize) % TMA_BOX_INNER_ALIGN:
        raise ValueError(
            f"{name}: box[{w_axis}] (W) * itemsize = {box[w_axis]} * {itemsize} = "
            f"{box[w_axis] * itemsize} bytes; the driver needs a multiple of "
            f"{TMA_BOX_INNER_ALIGN} (it applies the element size to the pixel count)"
        )


# ---------------------------------------------------------------------------------------------
# Device arrays, device check, encoding
# ---------------------------------------------------------------------------------------------


def _is_torch_tensor(obj: Any) -> bool:
    # Duck-typed so torch stays optional; torch refuses __cuda_array_interface__ for bfloat16.
    return all(hasattr(obj, a) for a in ("data_ptr", "element_size", "stride", "is_cuda", "dtype"))


def describe_array(array: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None, int, Any, int]:
    """Return (shape, strides in bytes or None, itemsize, dtype spec, address)."""
    if isinstance(array, np.ndarray):
        raise TypeError(
            _HOST_ARRAY_HINT + "got a host numpy.ndarray — copy it with numba.cuda.to_device first"
        )
    if _is_torch_tensor(array):
        if not array.is_cuda:
            raise TypeError(
                _HOST_ARRAY_HINT
                + f"got a torch tensor on {array.device} — move it with .cuda() first"
            )
        itemsize = int(array.element_size())
        shape = tuple(int(n) for n in array.shape)
        strides = tuple(int(s) * itemsize for s in array.stride())
        return shape, strides, itemsize, array.dtype, int(array.data_ptr())
    try:
        cai = array.__cuda_array_interface__
    except AttributeError:
        raise TypeError(
            _HOST_ARRAY_HINT + f"got {type(array).__module__}.{type(array).__qualname__}"
        ) from None
    if cai.get("mask") is not None:
        raise TypeError("array has a __cuda_array_interface__ mask; TMA cannot honour masks")
    typestr = cai["typestr"]
    try:
        itemsize = np.dtype(typestr).itemsize
    except TypeError:
        raise TypeError(f"array's typestr {typestr!r} is not understood") from None
    strides = cai.get("strides")
    return (
        tuple(cai["shape"]),
        (None if strides is None else tuple(strides)),
        itemsize,
        typestr,
        int(cai["data"][0]),
    )



def dtype_name(spec: Any) -> str:
    """A dtype spec from :func:`describe_array` (typestr or torch dtype) as a name that compares
    across libraries: ``"float32"``, ``"int16"``, ``"bfloat16"``."""
    text = str(spec)
    if text.startswith("torch."):
        return text[len("torch."):]
    try:
        return np.dtype(spec).name
    except TypeError:
        return text


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    """Whether ``strides`` (bytes; None = C-contiguous, as the array interface says) lay out
    ``shape`` C-contiguously; extent-1 axes may have any stride."""
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != expect:
            return False
        expect *= n
    return True

def _current_device_id() -> int:
    from numba import cuda  # deferred: importing numba.cuda is slow

    return cuda.get_current_device().id


def _check_device(address: int) -> None:
    """The array must be device memory on numba's current device."""
    try:
        current = _current_device_id()
        err, ordinal = driver.cuPointerGetAttribute(
            driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address
        )
    except Exception as exc:  # no driver, no device, or the driver failed to initialise
        raise RuntimeError(
            "cannot encode a tensor map: no usable CUDA driver/device "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ValueError(
            f"the array's address {address:#x} is not CUDA device memory "
            f"(cuPointerGetAttribute: {getattr(err, 'name', err)})"
        )
    if int(ordinal) != current:
        raise ValueError(
            f"the array lives on device {int(ordinal)} but numba's current device is {current}; "
            f"build the TensorMap inside `with numba.cuda.gpus[{int(ordinal)}]:`"
        )


def _encode(plan: TensorMapPlan) -> list[int]:
    err, tmap = driver.cuTensorMapEncodeTiled(*plan.encode_args())
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(
            f"cuTensorMapEncodeTiled failed with {getattr(err, 'name', err)}; "
            f"plan: {plan.describe()}"
        )
    return [int(word) for word in tmap.opaque]


def _upload(words: list[int]):
    from numba import cuda

    return cuda.to_device(np.array(words, dtype=np.uint64))


def _array_layout(array: Any, dtype: Any = None) -> tuple[tuple[int, ...], Any, Any, int]:
    """(shape, strides in bytes or None, dtype spec, address) of a device ``array`` for a map;
    ``dtype`` (same itemsize) reinterprets its elements. Shared by every map constructor."""
    shape, strides, itemsize, natural, address = describe_array(array)
    if dtype is None:
        dtype_spec, _ = resolve_dtype(natural, "the array's dtype")
    else:
        dtype_spec, override_size = resolve_dtype(dtype)
        if override_size != itemsize:
            raise ValueError(
                f"dtype = {dtype_spec} has itemsize {override_size} but the array's elements "
                f"are {itemsize} bytes"
            )
    return shape, strides, dtype_spec, address


def _store_descriptor(words: list[int]) -> tuple[bytes, Any]:
    """The encoded descriptor's 128 bytes and its device copy, checked to be TMA-aligned."""
    device_array = _upload(words)
    desc_address = device_array.__cuda_array_interface__["data"][0]
    if desc_address % TMA_DESC_ALIGN:
        raise RuntimeError(
            f"the descriptor's device copy at {desc_address:#x} is not "
            f"{TMA_DESC_ALIGN}-byte aligned (is an allocator suballocating?)"
        )
    return np.array(words, dtype="<u8").tobytes(), device_array


class _Descriptor:
    """What every map class holds and answers the same way: the array (kept alive while the map
    is), its plan, the encoded descriptor and its device copy (which is what a kernel receives)."""

    def _hold(self, array, plan, address, encode):
        self._array = array  # keeps the data alive while the map does
        self._plan = plan
        _check_device(address)
        self._encoded, self._device_array = _store_descriptor(encode(plan))

    @property
    def array(self):
        return self._array

    @property
    def plan(self):
        return self._plan

    @property
    def rank(self) -> int:
        return self._plan.rank

    @property
    def shape(self) -> tuple[int, ...]:
        return self._plan.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Array strides in bytes, array order."""
        return self._plan.strides

    @property
    def box_bytes(self) -> int:
        """Bytes one load delivers to shared memory (the mbarrier transaction count)."""
        return self._plan.box_bytes

    @property
    def smem_bytes(self) -> int:
        """Shared memory one box occupies: ``box_bytes``, or with a swizzle ``span`` bytes per box
        row even when the inner dimension is narrower (declare the tile this large)."""
        return self._plan.smem_bytes

    @property
    def dtype(self):
        return self._plan.dtype

    @property
    def itemsize(self) -> int:
        return self._plan.itemsize

    @property
    def swizzle(self) -> int:
        return self._plan.swizzle_bytes

    @property
    def interleave(self) -> int:
        return self._plan.interleave_bytes

    @property
    def l2_promotion(self) -> int:
        return self._plan.l2_promotion_bytes

    @property
    def oob_fill(self) -> str:
        return "nan" if self._plan.oob_fill == _OOB_FILL["nan"] else "zero"

    @property
    def address(self) -> int:
        return self._plan.address

    @property
    def encoded(self) -> bytes:
        return self._encoded

    @property
    def device_array(self):
        return self._device_array

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._device_array.__cuda_array_interface__


class TensorMap(_Descriptor):
    """A tile-mode TMA descriptor for a device array, held in device memory.

    ``box`` and ``element_strides`` are in the array's order.  ``swizzle``: None/0/"none",
    32/"32B", 64/"64B", 128/"128B".  ``interleave``: None/0/"none", 16/"16B", 32/"32B"
    (see "Interleaved maps" in the module docstring: the array is NC/kHWCk, ``rank`` is its
    number of axes minus one, and ``box[1]`` must be 1).
    ``l2_promotion``: None/0, 64, 128, 256 (bytes).  ``oob_fill``: "zero" or "nan" (floats
    only).  ``dtype`` reinterprets the elements (same itemsize), e.g. ``"bfloat16"`` for a
    uint16 array.

    Passed to a ``@cuda.jit`` kernel as-is, a TensorMap arrives as a 1-D array of 16 uint64
    words holding the descriptor in global memory.
    """

    def __init__(
        self,
        array,
        box,
        *,
        swizzle=None,
        interleave=None,
        l2_promotion=None,
        oob_fill="zero",
        element_strides=None,
        dtype=None,
    ):
        shape, strides, dtype_spec, address = _array_layout(array, dtype)
        plan = plan_tensor_map(
            shape,
            strides,
            dtype_spec,
            address,
            box,
            swizzle=swizzle,
            interleave=interleave,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
            element_strides=element_strides,
        )
        # Array order; with interleave the slice axis (not in the driver's list) strides by 1.
        self._element_strides = plan.element_strides[::-1] + ((1,) if plan.interleave_bytes else ())
        self._hold(array, plan, address, _encode)

    @property
    def box(self) -> tuple[int, ...]:
        return self._plan.box

    @property
    def element_strides(self) -> tuple[int, ...]:
        return self._element_strides

    @property
    def smem_shape(self) -> tuple[int, ...]:
        """Shape of the shared-memory tile one load writes, array order."""
        return self._plan.smem_shape

    def __repr__(self) -> str:
        dims = ", ".join(str(n) for n in self.shape)
        extras = "".join(
            f", {name}={_fmt_bytes_option(value)}"
            for name, value in (
                ("swizzle", self.swizzle),
                ("interleave", self.interleave),
                ("l2_promotion", self.l2_promotion),
            )
            if value
        )
        if any(e != 1 for e in self.element_strides):
            extras += f", element_strides={self.element_strides}"
        if self.oob_fill != "zero":
            extras += f", oob_fill={self.oob_fill!r}"
        return (
            f"TensorMap({self.dtype}[{dims}] at {self.address:#x}, box={self.box}{extras}, "
            f"smem_shape={self.smem_shape}, box_bytes={self.box_bytes})"
        )
