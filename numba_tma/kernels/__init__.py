"""Kernels built on numba_tma's intrinsics, one module per family."""

from .add_one import add_one
from .grouped_copy import grouped_copy
from .im2col import conv2d_nhwc, im2col
from .reduce import sum_axis0
from .simt_gemm import simt_gemm

__all__ = ["add_one", "conv2d_nhwc", "grouped_copy", "im2col", "simt_gemm", "sum_axis0"]
