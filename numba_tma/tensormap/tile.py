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
* Every rule the driver documents for ``cuTensorMapEncodeTiled`` is checked first, so a
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
    from .._frontend import cuda
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

Where things live: the rules are :mod:`numba_tma.tensormap.rules` (pure, shared with im2col
mode), the device check, encoding and upload :mod:`numba_tma.tensormap.driver`, the reading of
device arrays :mod:`numba_tma.operands`; this module plans and builds tile-mode maps, and
:mod:`numba_tma.tensormap` gathers the names (``TensorMap``, ``describe_array``,
``resolve_dtype``, the ``TMA_*`` limits).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from cuda.bindings import driver

from ..operands import describe_array
from . import driver as _drv
from .driver import Descriptor as _Descriptor
from .rules import (
    _INTERLEAVE,
    _L2_PROMOTION,
    _OOB_FILL,
    _SWIZZLE,
    check_interleaved,
    check_layout,
    check_row_bytes,
    fmt_bytes_option,
    resolve_dtype,
)

__all__ = ["TensorMap", "TensorMapPlan", "plan_tensor_map"]


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
    lay = check_layout(shape, strides_bytes, itemsize_or_dtype, address, box, swizzle=swizzle,
                       interleave=interleave, l2_promotion=l2_promotion, oob_fill=oob_fill,
                       element_strides=element_strides)
    shape, strides, box, estrides, itemsize = (lay.shape, lay.strides, lay.box,
                                               lay.element_strides, lay.itemsize)
    rank, inner = len(shape), len(shape) - 1
    interleave_bytes, swizzle_bytes = lay.interleave_bytes, lay.swizzle_bytes
    if interleave_bytes:
        # With interleave the driver applies the inner-box rule to W's box instead.
        check_interleaved(shape, strides, box, itemsize, interleave_bytes)
    else:
        check_row_bytes(f"inner box is box[{inner}] * itemsize", box[inner], itemsize,
                        swizzle_bytes)

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
        dtype=lay.dtype,
        itemsize=itemsize,
        data_type=lay.data_type,
        rank=driver_axes,
        address=lay.address,
        global_dim=shape[:driver_axes][::-1],
        global_strides=strides[: driver_axes - 1][::-1],
        box_dim=box[:driver_axes][::-1],
        element_strides=estrides[:driver_axes][::-1],
        interleave=_INTERLEAVE[interleave_bytes],
        swizzle=_SWIZZLE[swizzle_bytes],
        l2_promotion=_L2_PROMOTION[lay.l2_promotion_bytes],
        oob_fill=_OOB_FILL[lay.oob_fill],
        shape=shape,
        strides=strides,
        box=box,
        smem_shape=smem_shape,
        box_bytes=math.prod(smem_shape) * itemsize,
        # Swizzled box rows each take a whole span of shared memory (measured on the H100).
        smem_bytes=rows * row_bytes,
        swizzle_bytes=swizzle_bytes,
        interleave_bytes=interleave_bytes,
        l2_promotion_bytes=lay.l2_promotion_bytes,
    )


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
        self._hold(array, plan, address, _drv.encode_tiled)

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
            f", {name}={fmt_bytes_option(value)}"
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
