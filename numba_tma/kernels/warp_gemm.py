"""Moved to :mod:`numba_tma.ladders.warp_gemm`, the one-warp 16x16x16 half-GEMM ladder (seed 002).
This old path keeps working: it is the very same module object (an attribute set through either
name is seen through both)."""

import sys

from ..ladders import warp_gemm

sys.modules[__name__] = warp_gemm
