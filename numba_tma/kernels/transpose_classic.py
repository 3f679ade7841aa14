"""Moved to :mod:`numba_tma.ladders.transpose_classic`, the classic shared-memory transpose ladder
v1-v5 (seed 003). This old path keeps working: it is the very same module object (an attribute
set through either name is seen through both)."""

import sys

from ..ladders import transpose_classic

sys.modules[__name__] = transpose_classic
