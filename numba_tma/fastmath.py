"""Fast fp32 transcendentals for device code: ``fastmath.tanh_approx(x)``.

``tanh.approx.f32`` is one ``MUFU.TANH`` (the special-function unit: 16 results per clock per
SM against 128 FMAs), with a maximum relative error of about 2^-11 (PTX ISA), where
``math.tanh`` compiles to libdevice's accurate polynomial. Epilogues that apply an activation
to every element of a GEMM's tile are bound by the SFU; this halves GELU's share of it
(``epilogues.gelu_tanh``). Any thread; the argument is converted to float32.
"""

from ._frontend import errors, overload, types

from ._bridge import declare, host_call

__all__ = ["tanh_approx"]

_f32 = types.float32
_tanh = declare("fastmath", "numba_tma_tanh_approx", _f32(_f32))


def tanh_approx(x):
    """``tanh(x)`` in float32 to about 2^-11 relative (``tanh.approx.f32``)."""
    host_call("fastmath.tanh_approx")


@overload(tanh_approx)
def _ov_tanh(x):
    if not isinstance(x, (types.Float, types.Integer)):
        raise errors.TypingError(f"fastmath.tanh_approx: x must be a number, got {x}")
    return lambda x: _tanh(_f32(x))
