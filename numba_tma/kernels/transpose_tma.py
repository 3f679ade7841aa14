"""Moved to :mod:`numba_tma.ladders.transpose_tma`, the TMA transposes (seed 000). This old path
keeps working: it is the very same module object (an attribute set through either name is seen
through both)."""

import sys

from ..ladders import transpose_tma

sys.modules[__name__] = transpose_tma
