"""32-bit unsigned division for device code: ``intmath.div_u32(a, b)``, ``intmath.rem_u32(a, b)``.

numba types integer arithmetic as 64-bit, and a 64-bit division by a run-time value compiles to a
called subroutine (``CALL.REL.NOINC`` in SASS, ~70 instructions). Tile schedulers divide block
and tile indices that fit in 32 bits; these wrappers divide in 32 bits (inlined, no call).
Operands are converted to uint32 (values must be below 2^32; ``b`` non-zero). Any thread.
"""

from ._frontend import overload, types

from ._bridge import declare, host_call, require_int

__all__ = ["div_u32", "rem_u32"]

_u32 = types.uint32
_div = declare("intmath", "numba_tma_div_u32", _u32(_u32, _u32))
_rem = declare("intmath", "numba_tma_rem_u32", _u32(_u32, _u32))


def div_u32(a, b):
    """``a // b`` in 32-bit unsigned arithmetic."""
    host_call("intmath.div_u32")


def rem_u32(a, b):
    """``a % b`` in 32-bit unsigned arithmetic."""
    host_call("intmath.rem_u32")


@overload(div_u32)
def _ov_div(a, b):
    require_int("intmath.div_u32", "a", a)
    require_int("intmath.div_u32", "b", b)
    return lambda a, b: _div(_u32(a), _u32(b))


@overload(rem_u32)
def _ov_rem(a, b):
    require_int("intmath.rem_u32", "a", a)
    require_int("intmath.rem_u32", "b", b)
    return lambda a, b: _rem(_u32(a), _u32(b))
