"""Moved to :mod:`numba_tma.ladders.add_one`, the TMA introduction kernel (seed 000). This old path
keeps working: it is the very same module object (an attribute set through either name is seen
through both).

``numba_tma.kernels.add_one`` itself is the function (``kernels/__init__.py`` binds it over
this module's name, as before the move)."""

import sys

from ..ladders import add_one

sys.modules[__name__] = add_one
