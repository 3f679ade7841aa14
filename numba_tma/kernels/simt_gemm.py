"""Moved to :mod:`numba_tma.ladders.simt_gemm`, the tiled SIMT fp32 GEMM (seed 004). This old path
keeps working: it is the very same module object (an attribute set through either name is seen
through both)."""

import sys

from ..ladders import simt_gemm

sys.modules[__name__] = simt_gemm
