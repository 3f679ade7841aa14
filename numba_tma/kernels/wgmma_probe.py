"""Moved to :mod:`numba_tma.ladders.wgmma_probe`, the one-warpgroup wgmma probe (the wgmma GEMM
ladder's first rung). This old path keeps working: it is the very same module object (an
attribute set through either name is seen through both)."""

import sys

from ..ladders import wgmma_probe

sys.modules[__name__] = wgmma_probe
