"""The user's epilogue in a GEMM kernel: a ``@cuda.jit(device=True)`` function applied to each
element of C in registers, before the store (``matmul(..., epilogue=fn, epilogue_args=...)``).

``fn(acc, row, col, *args)`` gets the element's fp32 value (``alpha * (A @ B)``, plus ``beta``
times the old C when given), its row and column in C (int64) and the call's ``epilogue_args``
(device arrays and scalars, as numba types them), and returns the value to store (any number;
cast to float32, then to C's dtype). It is compiled into the kernel (inlined: no call, no
stack) and runs only for elements inside the M x N matrix, so it may index vectors of M or N
without bounds checks. It may also write other arrays itself (one store per element).

The auxiliary-output form (``matmul(..., aux=x)``): ``fn`` returns a pair, the value to store
in C and the value to store in ``x`` (an M x N array of C's dtype, such as the pre-activation
the backward pass needs), and the kernel stores both through its staging boxes and TMA: the
auxiliary output's tensor map is then the kernel's first epilogue argument (:data:`AUX_MAP`).

:class:`EpilogueFn` is what a kernel's :class:`~.config.KernelSpec` carries: the function, the
numba types of the arguments the kernel takes for it and whether it has the auxiliary output
(hashable, so it keys the kernel caches; the disk cache keys it by the function's bytecode and
captured values, :func:`stable`).
"""

import functools
import types as pytypes
import typing

import numpy as np

from ..._bridge import generated_device, inline_device

__all__ = ["EpilogueFn", "AUX_MAP", "element_epilogue", "stable"]

#: The kernel's epilogue argument that is the auxiliary output's tensor map (``aux=``), before
#: the user's own.
AUX_MAP = 0


class EpilogueFn(typing.NamedTuple):
    """A user epilogue as a kernel sees it: ``fn``, the ``@cuda.jit(device=True)`` dispatcher;
    ``argtypes``, the numba types of the kernel's epilogue arguments (``epilogue_args``',
    after the auxiliary output's tensor map when ``aux``); ``aux``: ``fn`` returns a pair,
    C's value and the auxiliary output's."""

    fn: object
    argtypes: tuple
    aux: bool = False

    @property
    def name(self):
        """The function's name, for messages."""
        py = getattr(self.fn, "py_func", self.fn)
        return getattr(py, "__qualname__", repr(py))


def _spread(user, first, nargs):
    """``call(v, row, col, args)`` -> ``user(v, row, col, args[first], ..., args[nargs - 1])``,
    written out: numba-cuda-mlir cannot call a closure with ``*args``."""
    spread = "".join(f", args[{i}]" for i in range(first, nargs))
    return generated_device("call", ["def call(v, row, col, args):",
                                     f"    return user(v, row, col{spread})"], {"user": user})


@functools.cache        # one per function and argument types: every kernel of it shares it
def element_epilogue(epi):
    """``(apply, apply_inside)``: ``apply(v, row, col, m, n, args)`` -> float32 is
    ``epi.fn(v, row, col, *args)`` where ``row < m`` and ``col < n``, else ``v`` (a box's
    elements past C's edge are never stored); ``apply_inside(v, row, col, m, n, args)`` the
    same for an element known to be inside, without the test (the writers take it for whole
    boxes inside C: no branch around each element, so their loads issue together). With
    ``epi.aux`` each returns the pair (C's value, the auxiliary output's) as float32."""
    # (the user's code, forceinlined into the kernel)
    call = _spread(inline_device(epi.fn.py_func), AUX_MAP + 1 if epi.aux else 0,
                   len(epi.argtypes))
    if epi.aux:
        @inline_device
        def apply_pair(v, row, col, m, n, args):
            if row < m and col < n:
                y, x = call(v, row, col, args)
                return np.float32(y), np.float32(x)
            return v, v

        @inline_device
        def apply_pair_inside(v, row, col, m, n, args):
            y, x = call(v, row, col, args)
            return np.float32(y), np.float32(x)
        return apply_pair, apply_pair_inside

    @inline_device
    def apply(v, row, col, m, n, args):
        if row < m and col < n:
            return np.float32(call(v, row, col, args))
        return v

    @inline_device
    def apply_inside(v, row, col, m, n, args):
        return np.float32(call(v, row, col, args))
    return apply, apply_inside


_SIMPLE = (int, float, complex, bool, str, bytes, type(None))


def stable(fn, depth=0, seen=None):
    """Whether ``fn``'s code is all its compiled kernel depends on, so the disk cache may key it
    by bytecode: everything it captures or names is a number, string, tuple of those, module,
    or a function (or device function) that is itself stable. A captured array or object is
    not: its contents are baked into the code but not into the key."""
    seen = set() if seen is None else seen
    func = getattr(fn, "py_func", fn)
    if not isinstance(func, pytypes.FunctionType):
        return False
    if id(func) in seen:
        return True
    if depth > 4:
        return False
    seen.add(id(func))
    values = []
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            return False
    code_names = set(func.__code__.co_names)
    for c in func.__code__.co_consts:
        if isinstance(c, pytypes.CodeType):
            code_names.update(c.co_names)
    values += [func.__globals__[name] for name in code_names if name in func.__globals__]
    return all(_stable_value(v, depth, seen) for v in values)


def _stable_value(value, depth, seen):
    if isinstance(value, _SIMPLE) or isinstance(value, pytypes.ModuleType):
        return True
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return True
    if isinstance(value, tuple):
        return all(_stable_value(v, depth, seen) for v in value)
    if isinstance(value, type):                  # (np.float32 and the like)
        return True
    return stable(value, depth + 1, seen)
