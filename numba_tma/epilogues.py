"""Fused GEMM epilogues for ``matmul(a, b, epilogue=fn, epilogue_args=(...))``.

Each is a ``@cuda.jit(device=True)`` function ``fn(acc, row, col, *args)``: ``acc`` is the
element's fp32 value (``alpha * (A @ B)``, plus ``beta`` times the old C), ``row`` and ``col``
its place in C, and the result is what is stored (as C's dtype). ``matmul()`` compiles it into
its kernel, where it runs in registers before the store, only on elements inside C. They are a
few lines each: copy one and change it. Habits that keep them fast: constants as
``np.float32`` (a bare Python float makes numba compute in float64), vectors read once per
element (``bias[col]``), ``libdevice.fast_expf`` / ``fast_fdividef`` where a few ulp of
fp32 will do (an IEEE fp32 division calls a slow-path subroutine), and
``fastmath.tanh_approx`` where 2^-11 will (an activation on every element is bound by the SFU,
which these share). A function that returns a pair, with ``matmul(..., aux=x)`` storing the
second value in ``x`` (``bias_gelu_aux``: the pre-activation), is the auxiliary-output form.

``arg_shapes`` on a function lists its arguments' shapes in terms of C's ``M`` and ``N``;
``matmul()`` checks the arguments against it before the launch (set it on your own functions
too). Arrays may be float32, float16 or integer (numba reads no bfloat16 arrays: pass
``bias.float()``).
"""

import math

import numpy as np

from ._frontend import cuda, libdevice
from . import fastmath

__all__ = ["bias", "bias_relu", "bias_gelu", "bias_gelu_erf", "bias_silu", "row_scale",
           "col_scale", "residual", "bias_gelu_aux", "gelu_tanh", "gelu_tanh_accurate", "gelu_erf",
           "silu", "SHIPPED"]

_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_TWO = np.float32(2.0)
_ZERO = np.float32(0.0)
_GELU_K = np.float32(0.7978845608028654)       # sqrt(2 / pi)
_GELU_C = np.float32(0.044715)
_GELU_KC = np.float32(0.7978845608028654 * 0.044715)
_RSQRT2 = np.float32(0.7071067811865476)


def _shapes(*shapes):
    def tag(fn):
        fn.arg_shapes = shapes
        return fn
    return tag


# ---------------------------------------------------------------- activations (fp32 in, out)

@cuda.jit(device=True)
def gelu_tanh(x):
    """GELU, tanh approximation (``F.gelu(x, approximate="tanh")``):
    ``x / 2 * (1 + tanh(y))``, ``y = sqrt(2 / pi) (x + 0.044715 x^3)``, with the SFU's
    ``tanh.approx`` (one ``MUFU.TANH``): an absolute error under ``3e-4 * |x|``, below
    bf16's rounding and about fp16's where the result is not near 0. For fp32 outputs that
    need more, :func:`gelu_tanh_accurate`."""
    y = x * (_GELU_K + _GELU_KC * (x * x))         # (the same y in two FMULs and an FFMA)
    h = _HALF * x
    return h + h * fastmath.tanh_approx(y)


@cuda.jit(device=True)
def gelu_tanh_accurate(x):
    """GELU, tanh approximation, as ``x * sigmoid(2 y)`` (``1 + tanh(y) = 2 sigmoid(2 y)``)
    with the fast ``exp`` and division (``MUFU.EX2``, ``MUFU.RCP``): a few ulp of fp32 for any
    ``x``, at twice :func:`gelu_tanh`'s SFU work."""
    y = _GELU_K * (x + _GELU_C * x * x * x)
    return x * libdevice.fast_fdividef(_ONE, _ONE + libdevice.fast_expf(-_TWO * y))


@cuda.jit(device=True)
def gelu_erf(x):
    """GELU, exact (``F.gelu(x)``), with libdevice's ``erff``."""
    return _HALF * x * (_ONE + math.erf(x * _RSQRT2))


@cuda.jit(device=True)
def silu(x):
    """SiLU (``F.silu(x)``): ``x * sigmoid(x)``, with the fast ``exp`` and division."""
    return libdevice.fast_fdividef(x, _ONE + libdevice.fast_expf(-x))


# ---------------------------------------------------------------- epilogues

@_shapes("N")
@cuda.jit(device=True)
def bias(acc, row, col, b):
    """``acc + b[col]``: a bias of N."""
    return acc + np.float32(b[col])


@_shapes("N")
@cuda.jit(device=True)
def bias_relu(acc, row, col, b):
    """``relu(acc + b[col])``."""
    return max(acc + np.float32(b[col]), _ZERO)


@_shapes("N")
@cuda.jit(device=True)
def bias_gelu(acc, row, col, b):
    """``gelu_tanh(acc + b[col])``."""
    return gelu_tanh(acc + np.float32(b[col]))


@_shapes("N")
@cuda.jit(device=True)
def bias_gelu_erf(acc, row, col, b):
    """``gelu_erf(acc + b[col])``."""
    return gelu_erf(acc + np.float32(b[col]))


@_shapes("N")
@cuda.jit(device=True)
def bias_silu(acc, row, col, b):
    """``silu(acc + b[col])``."""
    return silu(acc + np.float32(b[col]))


@_shapes("M")
@cuda.jit(device=True)
def row_scale(acc, row, col, s):
    """``acc * s[row]``: a scale per row of C (per token)."""
    return acc * np.float32(s[row])


@_shapes("N")
@cuda.jit(device=True)
def col_scale(acc, row, col, s):
    """``acc * s[col]``: a scale per column of C (per channel)."""
    return acc * np.float32(s[col])


@_shapes("MN")
@cuda.jit(device=True)
def residual(acc, row, col, r):
    """``acc + r[row, col]``: a residual (M, N) added."""
    return acc + np.float32(r[row, col])


@_shapes("N")
@cuda.jit(device=True)
def bias_gelu_aux(acc, row, col, b):
    """``(gelu_tanh(x), x)`` of ``x = acc + b[col]``: with ``matmul(..., aux=pre)``, C gets the
    GELU and ``pre`` the pre-activation (cuBLASLt's GELU_AUX: what the backward pass needs)."""
    x = acc + np.float32(b[col])
    return gelu_tanh(x), x


#: The shipped epilogues by name (benches, tests).
SHIPPED = {"bias": bias, "bias_relu": bias_relu, "bias_gelu": bias_gelu,
           "bias_gelu_erf": bias_gelu_erf, "bias_silu": bias_silu, "row_scale": row_scale,
           "col_scale": col_scale, "residual": residual, "bias_gelu_aux": bias_gelu_aux}
