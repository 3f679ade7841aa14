"""Kernels built on numba_tma's intrinsics, one module per family (``kernels.simt_gemm``,
``kernels.im2col``, ``kernels.grouped_copy``, ... are the modules; their functions share the
module's name, so import them from there)."""

from .add_one import add_one
from .reduce import sum_axis0

__all__ = ["add_one", "sum_axis0"]
