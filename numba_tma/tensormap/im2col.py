"""Host-side im2col-mode TMA descriptors (``cuTensorMapEncodeIm2col``) for numba-cuda kernels.

An im2col map describes an NWC, NHWC or NDHWC tensor (rank 3, 4 or 5; the driver's dimensions
innermost-first are C, W, (H), (D), N). One ``tma.load_im2col`` then gathers
``pixels_per_column`` pixels of ``channels_per_pixel`` channels each into a dense
``(pixels_per_column, channels_per_pixel)`` shared tile: the rows of an im2col (implicit-GEMM)
matrix for one filter tap.

The pixel box
-------------
``pixel_box_lower_corner`` and ``pixel_box_upper_corner`` (array order: ``(w,)``, ``(h, w)`` or
``(d, h, w)``) bound the *filter base* positions a load walks: along a spatial axis of extent
``E`` they run from ``lower`` to ``E - 1 + upper`` inclusive, stepping by ``element_strides``.
A load's spatial coordinates give its first base position (inside the box); consecutive pixels
advance W fastest, wrap back to the lower corner at the box's end and carry into H, D, then N.
Each pixel reads at base + the load's im2col offsets (the filter tap); reads outside the tensor
are filled with zeros (or NaN). For a K-wide filter with padding ``p`` and dilation 1 (the CUTLASS
convention): ``lower = -p``, ``upper = p - (K - 1)``; the base positions then enumerate the output
pixels, ``E + 2p - K + 1`` of them at stride 1.

Every rule ``cuTensorMapEncodeIm2col`` documents is checked before the driver sees the arguments
(:func:`plan_im2col_tensor_map`, no GPU needed); the rules shared with tile mode (dtype, address,
shape, strides, element strides, interleave, swizzle, L2 promotion, OOB fill) are
:func:`numba_tma.tensormap.rules.check_layout`'s, so both modes report them identically.
Only tile-mode maps can be modified on the device (``numba_tma.tensormap.device``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cuda.bindings import driver

from . import driver as _drv
from .driver import Descriptor
from .rules import (
    _L2_PROMOTION,
    _OOB_FILL,
    _SWIZZLE,
    _INTERLEAVE,
    TMA_MAX_RANK,
    as_int,
    as_int_tuple,
    check_layout,
    check_row_bytes,
    fmt_bytes_option,
)
from .tile import _array_layout

__all__ = [
    "Im2colTensorMap",
    "Im2colPlan",
    "plan_im2col_tensor_map",
    "IM2COL_MIN_RANK",
    "IM2COL_CORNER_RANGE",
    "IM2COL_MAX_CHANNELS_PER_PIXEL",
    "IM2COL_MAX_PIXELS_PER_COLUMN",
]

# Limits from the cuTensorMapEncodeIm2col documentation (CUDA Driver API, "Tensor Map Object
# Management") and the PTX ISA ("im2col mode: Bounding Box").
IM2COL_MIN_RANK = 3
#: Inclusive (low, high) of each pixel-box corner coordinate, by tensor rank (16-bit fields).
IM2COL_CORNER_RANGE = {3: (-(1 << 15), (1 << 15) - 1), 4: (-(1 << 7), (1 << 7) - 1),
                       5: (-(1 << 4), (1 << 4) - 1)}
IM2COL_MAX_CHANNELS_PER_PIXEL = 256
IM2COL_MAX_PIXELS_PER_COLUMN = 1024
_LAYOUT = {3: "NWC", 4: "NHWC", 5: "NDHWC"}
_SPATIAL_NAMES = {3: ("W",), 4: ("H", "W"), 5: ("D", "H", "W")}


@dataclasses.dataclass(frozen=True)
class Im2colPlan:
    """Validated arguments of ``cuTensorMapEncodeIm2col``.

    ``global_dim``, ``global_strides``, ``lower_corner``, ``upper_corner`` and ``element_strides``
    are in the driver's innermost-first order; ``shape``, ``strides``,
    ``pixel_box_lower_corner``, ``pixel_box_upper_corner`` and ``smem_shape`` in the array's.
    """

    dtype: Any
    itemsize: int
    data_type: Any
    rank: int
    address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    element_strides: tuple[int, ...]
    interleave: Any
    swizzle: Any
    l2_promotion: Any
    oob_fill: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    pixel_box_lower_corner: tuple[int, ...]
    pixel_box_upper_corner: tuple[int, ...]
    filter_positions: tuple[int, ...]
    smem_shape: tuple[int, int]
    box_bytes: int
    smem_bytes: int
    swizzle_bytes: int
    interleave_bytes: int
    l2_promotion_bytes: int

    def encode_args(self) -> tuple:
        """Positional arguments for ``driver.cuTensorMapEncodeIm2col``."""
        u32, u64 = driver.cuuint32_t, driver.cuuint64_t
        return (
            self.data_type,
            self.rank,
            self.address,
            [u64(d) for d in self.global_dim],
            [u64(s) for s in self.global_strides],
            list(self.lower_corner),
            list(self.upper_corner),
            self.channels_per_pixel,
            self.pixels_per_column,
            [u32(e) for e in self.element_strides],
            self.interleave,
            self.swizzle,
            self.l2_promotion,
            self.oob_fill,
        )

    def describe(self) -> str:
        """One line with everything passed to the driver (driver order)."""
        return (
            f"{self.data_type.name}, rank {self.rank}, address {self.address:#x}, "
            f"globalDim {list(self.global_dim)}, globalStrides {list(self.global_strides)}, "
            f"pixelBoxLowerCorner {list(self.lower_corner)}, "
            f"pixelBoxUpperCorner {list(self.upper_corner)}, channelsPerPixel "
            f"{self.channels_per_pixel}, pixelsPerColumn {self.pixels_per_column}, "
            f"elementStrides {list(self.element_strides)}, {self.interleave.name}, "
            f"{self.swizzle.name}, {self.l2_promotion.name}, {self.oob_fill.name}"
        )


def _corners(values, what, rank, spatial):
    corners = as_int_tuple(values, what)
    names = ", ".join(_SPATIAL_NAMES[rank])
    if len(corners) != spatial:
        raise ValueError(
            f"{what} has {len(corners)} entries; a rank-{rank} ({_LAYOUT[rank]}) map has "
            f"{spatial} spatial axes ({names}), array order"
        )
    lo, hi = IM2COL_CORNER_RANGE[rank]
    for i, v in enumerate(corners):
        if not lo <= v <= hi:
            raise ValueError(
                f"{what}[{i}] = {v} is outside {lo}..{hi}, the corner range of a rank-{rank} "
                f"im2col map"
            )
    return corners


def plan_im2col_tensor_map(
    shape,
    strides_bytes,
    itemsize_or_dtype,
    address,
    *,
    pixel_box_lower_corner,
    pixel_box_upper_corner,
    channels_per_pixel,
    pixels_per_column,
    swizzle=None,
    interleave=None,
    l2_promotion=None,
    oob_fill="zero",
    element_strides=None,
) -> Im2colPlan:
    """Validate an im2col-mode tensor map against every documented rule and return the plan.

    ``shape`` is ``(N, W, C)``, ``(N, H, W, C)`` or ``(N, D, H, W, C)``; ``strides_bytes``
    (``None``: C-contiguous), the corners and ``element_strides`` are in the array's order.
    ``itemsize_or_dtype`` as for :func:`numba_tma.tensormap.plan_tensor_map`. Raises
    ``TypeError``/``ValueError`` naming the offending argument.
    """
    shape = as_int_tuple(shape, "shape")
    rank = len(shape)
    if not IM2COL_MIN_RANK <= rank <= TMA_MAX_RANK:
        raise ValueError(
            f"shape {shape} has rank {rank}; im2col maps need rank {IM2COL_MIN_RANK}.."
            f"{TMA_MAX_RANK} (NWC, NHWC or NDHWC)"
        )
    spatial = rank - 2
    lower = _corners(pixel_box_lower_corner, "pixel_box_lower_corner", rank, spatial)
    upper = _corners(pixel_box_upper_corner, "pixel_box_upper_corner", rank, spatial)
    channels = as_int(channels_per_pixel, "channels_per_pixel")
    if not 1 <= channels <= IM2COL_MAX_CHANNELS_PER_PIXEL:
        raise ValueError(
            f"channels_per_pixel = {channels} is outside 1..{IM2COL_MAX_CHANNELS_PER_PIXEL}"
        )
    pixels = as_int(pixels_per_column, "pixels_per_column")
    if not 1 <= pixels <= IM2COL_MAX_PIXELS_PER_COLUMN:
        raise ValueError(
            f"pixels_per_column = {pixels} is outside 1..{IM2COL_MAX_PIXELS_PER_COLUMN}"
        )

    tiled = check_layout(shape, strides_bytes, itemsize_or_dtype, address, swizzle=swizzle,
                         interleave=interleave, l2_promotion=l2_promotion, oob_fill=oob_fill,
                         element_strides=element_strides)
    if tiled.interleave_bytes:
        raise ValueError(
            f"interleave = {fmt_bytes_option(tiled.interleave_bytes)}: numba_tma's im2col maps "
            f"take no interleave (NC/kHWCk im2col has not been measured); use interleave=None"
        )
    itemsize = tiled.itemsize
    channel_bytes = check_row_bytes("channels_per_pixel * itemsize", channels, itemsize,
                                    tiled.swizzle_bytes)

    estrides = tiled.element_strides
    positions = []
    for i in range(spatial):
        extent, lo, up, step = shape[1 + i], lower[i], upper[i], estrides[1 + i]
        span = extent + up - lo
        if span < 1:
            axis = _SPATIAL_NAMES[rank][i]
            raise ValueError(
                f"the pixel box is empty along {axis} (axis {1 + i}): extent {extent} + "
                f"pixel_box_upper_corner[{i}] ({up}) - pixel_box_lower_corner[{i}] ({lo}) = "
                f"{span} filter positions; it needs at least one"
            )
        positions.append(-(-span // step))

    swz = tiled.swizzle_bytes
    return Im2colPlan(
        dtype=tiled.dtype,
        itemsize=itemsize,
        data_type=tiled.data_type,
        rank=rank,
        address=tiled.address,
        global_dim=shape[::-1],
        global_strides=tiled.strides[:-1][::-1],
        lower_corner=lower[::-1],
        upper_corner=upper[::-1],
        channels_per_pixel=channels,
        pixels_per_column=pixels,
        element_strides=estrides[::-1],
        interleave=_INTERLEAVE[0],
        swizzle=_SWIZZLE[swz],
        l2_promotion=_L2_PROMOTION[tiled.l2_promotion_bytes],
        oob_fill=_OOB_FILL[tiled.oob_fill],
        shape=shape,
        strides=tiled.strides,
        pixel_box_lower_corner=lower,
        pixel_box_upper_corner=upper,
        filter_positions=tuple(positions),
        smem_shape=(pixels, channels),
        box_bytes=pixels * channel_bytes,
        # Swizzled rows each take a whole span, as in tile mode.
        smem_bytes=pixels * (swz if swz else channel_bytes),
        swizzle_bytes=swz,
        interleave_bytes=tiled.interleave_bytes,
        l2_promotion_bytes=tiled.l2_promotion_bytes,
    )


class Im2colTensorMap(Descriptor):
    """An im2col-mode TMA descriptor for an NWC/NHWC/NDHWC device array, held in device memory.

    ``pixel_box_lower_corner``/``pixel_box_upper_corner``: the filter-base box, array order
    (``(w,)``, ``(h, w)``, ``(d, h, w)``), each coordinate in -2^15..2^15-1 (rank 3), -128..127
    (rank 4) or -16..15 (rank 5). ``channels_per_pixel`` (1..256, a multiple of 16 bytes) and
    ``pixels_per_column`` (1..1024) shape the ``(pixels, channels)`` shared tile one load fills.
    ``element_strides`` (array order) are the traversal (convolution) strides of the spatial
    axes. ``swizzle``, ``interleave``, ``l2_promotion``, ``oob_fill``, ``dtype`` as for
    :class:`numba_tma.TensorMap`. Passed to a kernel as-is (16 ``uint64`` words in global
    memory); load with ``numba_tma.tma.load_im2col``.
    """

    def __init__(
        self,
        array,
        *,
        pixel_box_lower_corner,
        pixel_box_upper_corner,
        channels_per_pixel,
        pixels_per_column,
        swizzle=None,
        interleave=None,
        l2_promotion=None,
        oob_fill="zero",
        element_strides=None,
        dtype=None,
    ):
        shape, strides, dtype_spec, address = _array_layout(array, dtype)
        plan = plan_im2col_tensor_map(
            shape,
            strides,
            dtype_spec,
            address,
            pixel_box_lower_corner=pixel_box_lower_corner,
            pixel_box_upper_corner=pixel_box_upper_corner,
            channels_per_pixel=channels_per_pixel,
            pixels_per_column=pixels_per_column,
            swizzle=swizzle,
            interleave=interleave,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
            element_strides=element_strides,
        )
        self._hold(array, plan, address, _drv.encode_im2col)

    pixel_box_lower_corner = property(lambda self: self._plan.pixel_box_lower_corner)
    pixel_box_upper_corner = property(lambda self: self._plan.pixel_box_upper_corner)
    channels_per_pixel = property(lambda self: self._plan.channels_per_pixel)
    pixels_per_column = property(lambda self: self._plan.pixels_per_column)
    filter_positions = property(
        lambda self: self._plan.filter_positions,
        doc="Filter-base positions the pixel box holds per spatial axis (array order).")
    element_strides = property(lambda self: self._plan.element_strides[::-1])
    smem_shape = property(lambda self: self._plan.smem_shape,
                          doc="(pixels_per_column, channels_per_pixel): the tile one load fills.")

    def __repr__(self) -> str:
        dims = ", ".join(str(n) for n in self.shape)
        extras = "".join(
            f", {name}={fmt_bytes_option(value)}"
            for name, value in (("swizzle", self.swizzle), ("interleave", self.interleave))
            if value
        )
        if any(e != 1 for e in self.element_strides):
            extras += f", element_strides={self.element_strides}"
        return (
            f"Im2colTensorMap({self.dtype}[{dims}] at {self.address:#x}, "
            f"pixel_box=({self.pixel_box_lower_corner}, {self.pixel_box_upper_corner}), "
            f"channels_per_pixel={self.channels_per_pixel}, "
            f"pixels_per_column={self.pixels_per_column}{extras}, box_bytes={self.box_bytes})"
        )

