"""Kernels built on numba_tma's intrinsics, one module per family."""

from .add_one import add_one

__all__ = ["add_one"]
