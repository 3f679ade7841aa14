"""TMA tensor maps (``CUtensorMap``): built and checked on the host, edited on the device.

- :mod:`~numba_tma.tensormap.rules` every documented encoding rule, as pure functions (no GPU)
- :mod:`~numba_tma.tensormap.driver` the device check, ``cuTensorMapEncode*`` and the upload
- :mod:`~numba_tma.tensormap.tile` :class:`TensorMap` (tile mode) and :func:`plan_tensor_map`
- :mod:`~numba_tma.tensormap.im2col` :class:`Im2colTensorMap` (im2col mode)
- :mod:`~numba_tma.tensormap.cache` the library's tile-mode maps, cached by what they encode
- :mod:`~numba_tma.tensormap.device` ``tensormap.replace`` and the tensormap-proxy fences: device
  intrinsics, called inside ``@cuda.jit`` kernels

The host names are gathered here: ``from numba_tma.tensormap import TensorMap``.
"""

from ..operands import describe_array, dtype_name, is_c_contiguous
from . import device
from .im2col import (
    IM2COL_CORNER_RANGE,
    IM2COL_MAX_CHANNELS_PER_PIXEL,
    IM2COL_MAX_PIXELS_PER_COLUMN,
    IM2COL_MIN_RANK,
    Im2colPlan,
    Im2colTensorMap,
    plan_im2col_tensor_map,
)
from .rules import (
    BFLOAT16,
    SUPPORTED_DTYPES,
    TMA_BOX_INNER_ALIGN,
    TMA_DESC_ALIGN,
    TMA_DESC_BYTES,
    TMA_DESC_WORDS,
    TMA_GLOBAL_ALIGN,
    TMA_GLOBAL_ALIGN_INTERLEAVE_32B,
    TMA_MAX_BOX_DIM,
    TMA_MAX_ELEMENT_STRIDE,
    TMA_MAX_GLOBAL_DIM,
    TMA_MAX_GLOBAL_STRIDE,
    TMA_MAX_RANK,
    TMA_MIN_RANK_INTERLEAVED,
    resolve_dtype,
)
from .tile import TensorMap, TensorMapPlan, plan_tensor_map

__all__ = [
    "TensorMap",
    "TensorMapPlan",
    "plan_tensor_map",
    "Im2colTensorMap",
    "Im2colPlan",
    "plan_im2col_tensor_map",
    "describe_array",
    "dtype_name",
    "is_c_contiguous",
    "resolve_dtype",
    "device",
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
    "TMA_DESC_WORDS",
    "IM2COL_MIN_RANK",
    "IM2COL_CORNER_RANGE",
    "IM2COL_MAX_CHANNELS_PER_PIXEL",
    "IM2COL_MAX_PIXELS_PER_COLUMN",
]
