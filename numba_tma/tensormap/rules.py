"""The rules of a TMA tensor map, as pure functions: no GPU, no driver call.

Every rule ``cuTensorMapEncodeTiled`` and ``cuTensorMapEncodeIm2col`` document (and the ones
measured on the H100), one function per rule, each raising a ``TypeError``/``ValueError`` that
names the argument and shows its numbers. Both planners (:func:`numba_tma.tensormap.plan_tensor_map`
for tile mode, :func:`numba_tma.tensormap.im2col.plan_im2col_tensor_map` for im2col mode) check
the rules they share (data type, address, extents, strides, element strides, swizzle,
interleave, L2 promotion, OOB fill) through :func:`check_layout`, in one order, so both modes
report a bad argument identically; the box rules are tile mode's own.

Shapes, strides, boxes and element strides are in the array's (numpy, outermost-first) order.
The tables map the accepted values to the driver's enums (the enum types only: nothing here
calls the driver).
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np
from cuda.bindings import driver

__all__ = [
    "BFLOAT16",
    "SUPPORTED_DTYPES",
    "TMA_MAX_RANK",
    "TMA_MIN_RANK_INTERLEAVED",
    "TMA_MAX_GLOBAL_DIM",
    "TMA_MAX_GLOBAL_STRIDE",
    "TMA_MAX_ADDRESS",
    "TMA_GLOBAL_ALIGN",
    "TMA_GLOBAL_ALIGN_INTERLEAVE_32B",
    "TMA_MAX_BOX_DIM",
    "TMA_BOX_INNER_ALIGN",
    "TMA_MAX_ELEMENT_STRIDE",
    "TMA_DESC_ALIGN",
    "TMA_DESC_BYTES",
    "Layout",
    "as_int",
    "as_int_tuple",
    "resolve_dtype",
    "check_data_type",
    "parse_swizzle",
    "parse_interleave",
    "parse_l2_promotion",
    "parse_oob_fill",
    "check_rank",
    "check_interleave_rank",
    "check_interleave_swizzle",
    "check_oob_fill",
    "check_address",
    "check_extents",
    "check_strides",
    "check_box",
    "check_element_strides",
    "check_interleaved",
    "check_row_bytes",
    "check_layout",
    "fmt_bytes_option",
]

# Limits from the cuTensorMapEncodeTiled documentation (CUDA Driver API, "Tensor Map Object
# Management").
TMA_MAX_RANK = 5
TMA_MIN_RANK_INTERLEAVED = 3
TMA_MAX_GLOBAL_DIM = 1 << 32  # inclusive
TMA_MAX_GLOBAL_STRIDE = 1 << 40  # exclusive, bytes
TMA_MAX_ADDRESS = 1 << 64  # exclusive: globalAddress is a 64-bit pointer
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


# ---------------------------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------------------------


def as_int(value: Any, what: str) -> int:
    """``value`` as an int (``bool`` refused), else a TypeError naming ``what``."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer; got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer; got {value!r}") from None


def as_int_tuple(values: Any, what: str) -> tuple[int, ...]:
    """``values`` as a tuple of ints, each named ``what[i]`` in its error."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(
            f"{what} must be a sequence of integers, one per array axis; got {values!r}"
        )
    return tuple(as_int(v, f"{what}[{i}]") for i, v in enumerate(values))


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


def parse_swizzle(value: Any) -> int:
    """The swizzle span in bytes (0, 32, 64, 128) of None/0/'none', 32/'32B', ... or an enum."""
    return _parse_bytes_option(value, "swizzle", _SWIZZLE)


def parse_interleave(value: Any) -> int:
    """The interleave slice in bytes (0, 16, 32)."""
    return _parse_bytes_option(value, "interleave", _INTERLEAVE)


def parse_l2_promotion(value: Any) -> int:
    """The L2 promotion in bytes (0, 64, 128, 256)."""
    return _parse_bytes_option(value, "l2_promotion", _L2_PROMOTION)


def parse_oob_fill(value: Any) -> str:
    """'zero' or 'nan' (the fill of out-of-bounds elements)."""
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


def fmt_bytes_option(n: int) -> str:
    return f"{n}B" if n else "none"


# ---------------------------------------------------------------------------------------------
# The rules, one function each
# ---------------------------------------------------------------------------------------------


def check_data_type(itemsize_or_dtype: Any) -> tuple[Any, int, str]:
    """(dtype, itemsize, data-type name) of a dtype spec, or of an int itemsize (raw unsigned
    words of that size)."""
    if isinstance(itemsize_or_dtype, int) and not isinstance(itemsize_or_dtype, bool):
        if itemsize_or_dtype not in _RAW_BY_ITEMSIZE:
            raise ValueError(
                f"itemsize = {itemsize_or_dtype} has no TMA data type; use 1, 2, 4 or 8"
            )
        dtype, itemsize = resolve_dtype(_RAW_BY_ITEMSIZE[itemsize_or_dtype])
    else:
        dtype, itemsize = resolve_dtype(itemsize_or_dtype)
    return dtype, itemsize, (dtype if isinstance(dtype, str) else dtype.name)


def check_rank(shape: tuple[int, ...], interleave_bytes: int) -> None:
    """Tile mode: 1..5 axes (one more with interleave: the slice axis is not a map dimension)."""
    rank = len(shape)
    if not 1 <= rank <= TMA_MAX_RANK + (1 if interleave_bytes else 0):
        raise ValueError(f"shape {shape} has rank {rank}; TMA supports rank 1..{TMA_MAX_RANK}")


def check_interleave_rank(interleave_bytes: int, rank: int) -> None:
    if interleave_bytes and rank < TMA_MIN_RANK_INTERLEAVED + 1:
        raise ValueError(
            f"interleave = {fmt_bytes_option(interleave_bytes)} needs rank >= "
            f"{TMA_MIN_RANK_INTERLEAVED} plus the slice axis, i.e. an NC/kHWCk array of "
            f"{TMA_MIN_RANK_INTERLEAVED + 1}..{TMA_MAX_RANK + 1} axes "
            f"(N, C/k, [D, H,] W, k); the array has rank {rank}"
        )


def check_interleave_swizzle(interleave_bytes: int, swizzle_bytes: int) -> None:
    if interleave_bytes == 32 and swizzle_bytes != 32:
        raise ValueError(
            "interleave = 32B requires swizzle = 32B; "
            f"got swizzle = {fmt_bytes_option(swizzle_bytes)}"
        )


def check_oob_fill(oob: str, dtype_name: str) -> None:
    if oob == "nan" and dtype_name not in _FLOAT_DTYPES:
        raise ValueError(f"oob_fill = 'nan' needs a floating-point dtype; dtype is {dtype_name}")


def _global_align(interleave_bytes: int) -> tuple[int, str]:
    if interleave_bytes == 32:
        return TMA_GLOBAL_ALIGN_INTERLEAVE_32B, " (interleave = 32B)"
    return TMA_GLOBAL_ALIGN, ""


def check_address(address: Any, interleave_bytes: int = 0) -> int:
    """A 64-bit, non-NULL global address aligned to 16 bytes (32 with a 32B interleave)."""
    align, why_align = _global_align(interleave_bytes)
    address = as_int(address, "address")
    if address <= 0:
        raise ValueError(f"the array's global address {address:#x} is not a valid device pointer")
    if address >= TMA_MAX_ADDRESS:
        raise ValueError(
            f"the array's global address {address:#x} does not fit in 64 bits; it is not a "
            f"device pointer"
        )
    if address % align:
        raise ValueError(
            f"the array's global address {address:#x} is not {align}-byte aligned{why_align} "
            f"(address % {align} = {address % align})"
        )
    return address


def check_extents(shape: tuple[int, ...]) -> None:
    for axis, extent in enumerate(shape):
        if not 1 <= extent <= TMA_MAX_GLOBAL_DIM:
            raise ValueError(f"shape[{axis}] = {extent} is outside 1..2^32 ({TMA_MAX_GLOBAL_DIM})")


def check_strides(strides_bytes: Any, shape: tuple[int, ...], itemsize: int,
                  interleave_bytes: int = 0) -> tuple[int, ...]:
    """The byte strides (``None``: C-contiguous): one per axis, the innermost contiguous, the
    others positive, aligned like the address and below 2^40."""
    rank = len(shape)
    if strides_bytes is None:
        strides = tuple(int(itemsize * math.prod(shape[axis + 1 :])) for axis in range(rank))
    else:
        strides = as_int_tuple(strides_bytes, "strides")
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
    align, why_align = _global_align(interleave_bytes)
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
    return strides


def check_box(box: Any, rank: int) -> tuple[int, ...]:
    """Tile mode: one box extent per axis, each 1..256."""
    box = as_int_tuple(box, "box")
    if len(box) != rank:
        raise ValueError(
            f"box has {len(box)} entries; the array has rank {rank} "
            "(one entry per axis, array order)"
        )
    for axis, b in enumerate(box):
        if not 1 <= b <= TMA_MAX_BOX_DIM:
            raise ValueError(f"box[{axis}] = {b} is outside 1..{TMA_MAX_BOX_DIM}")
    return box


def check_element_strides(element_strides: Any, rank: int,
                          interleave_bytes: int = 0) -> tuple[int, ...]:
    """One traversal stride per axis, each 1..8; the innermost 1 (the driver ignores it, which
    would make the shared tile's shape lie; with interleave it is the slice, copied whole)."""
    if element_strides is None:
        return (1,) * rank
    estrides = as_int_tuple(element_strides, "element_strides")
    if len(estrides) != rank:
        raise ValueError(
            f"element_strides has {len(estrides)} entries; the array has rank {rank}"
        )
    for axis, e in enumerate(estrides):
        if not 1 <= e <= TMA_MAX_ELEMENT_STRIDE:
            raise ValueError(
                f"element_strides[{axis}] = {e} is outside 1..{TMA_MAX_ELEMENT_STRIDE}"
            )
    inner = rank - 1
    if interleave_bytes and estrides[inner] != 1:
        raise ValueError(
            f"element_strides[{inner}] = {estrides[inner]}: with interleave the last axis is "
            f"the channel slice, copied whole; use 1 (element_strides[{inner - 1}] strides W)"
        )
    if not interleave_bytes and estrides[inner] != 1:
        raise ValueError(
            f"element_strides[{inner}] = {estrides[inner]}: without interleave TMA cannot "
            f"stride along the innermost axis (the driver ignores it); use 1"
        )
    return estrides


def check_interleaved(shape, strides, box, itemsize, interleave_bytes) -> None:
    """Tile mode: the layout rules of an interleaved (NC/kHWCk) map, measured on the H100
    (driver 580)."""
    name = f"interleave = {fmt_bytes_option(interleave_bytes)}"
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


def check_row_bytes(label: str, count: int, itemsize: int, swizzle_bytes: int) -> int:
    """A shared-memory row of ``count`` elements (tile mode: the inner box; im2col: the channels
    of a pixel) is a multiple of 16 bytes and, swizzled, no wider than the span. ``label`` names
    it: ``"inner box is box[1] * itemsize"``, ``"channels_per_pixel * itemsize"``."""
    nbytes = count * itemsize
    if nbytes % TMA_BOX_INNER_ALIGN:
        raise ValueError(
            f"{label} = {count} * {itemsize} = {nbytes} bytes; TMA needs a multiple of "
            f"{TMA_BOX_INNER_ALIGN}"
        )
    if swizzle_bytes and nbytes > swizzle_bytes:
        raise ValueError(
            f"{label} = {count} * {itemsize} = {nbytes} bytes, wider than the {swizzle_bytes}B "
            f"swizzle span"
        )
    return nbytes


# ---------------------------------------------------------------------------------------------
# The rules both modes share, in one order
# ---------------------------------------------------------------------------------------------


class Layout(NamedTuple):
    """What the shared rules accepted (array order)."""

    dtype: Any  # numpy dtype, or the string "bfloat16"
    itemsize: int
    data_type: Any  # driver.CUtensorMapDataType
    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...] | None  # tile mode only
    element_strides: tuple[int, ...]
    swizzle_bytes: int
    interleave_bytes: int
    l2_promotion_bytes: int
    oob_fill: str


def check_layout(shape, strides_bytes, itemsize_or_dtype, address, box=None, *, swizzle=None,
                  interleave=None, l2_promotion=None, oob_fill="zero",
                 element_strides=None) -> Layout:
    """Every rule tile and im2col maps share, in the order both report them: rank (tile mode's
    1..5; im2col checks its narrower 3..5 first), data type, swizzle, L2 promotion, OOB fill,
    interleave, address, extents, strides, the tile box when given (im2col maps have none),
    element strides."""
    shape = as_int_tuple(shape, "shape")
    # Parsed first: with interleave the array carries one more axis (the slice) than the map.
    interleave_bytes = parse_interleave(interleave)
    check_rank(shape, interleave_bytes)
    rank = len(shape)
    dtype, itemsize, dtype_name = check_data_type(itemsize_or_dtype)
    swizzle_bytes = parse_swizzle(swizzle)
    l2_bytes = parse_l2_promotion(l2_promotion)
    oob = parse_oob_fill(oob_fill)
    check_interleave_rank(interleave_bytes, rank)
    check_interleave_swizzle(interleave_bytes, swizzle_bytes)
    check_oob_fill(oob, dtype_name)
    address = check_address(address, interleave_bytes)
    check_extents(shape)
    strides = check_strides(strides_bytes, shape, itemsize, interleave_bytes)
    if box is not None:
        box = check_box(box, rank)
    estrides = check_element_strides(element_strides, rank, interleave_bytes)
    return Layout(dtype, itemsize, _DATA_TYPES[dtype_name], address, shape, strides, box,
                  estrides, swizzle_bytes, interleave_bytes, l2_bytes, oob)
