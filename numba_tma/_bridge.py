"""The bridge between ptx/*.cu and numba: where the sources live, how a C function is declared,
the argument checks of the intrinsics' overloads, and how a numba array becomes the pointer
operand a PTX wrapper takes (``address_of``, with ``tail``: IR of the front end's own, from
:mod:`numba_tma._frontend`).

Every intrinsic is an ``extern "C" __device__`` function in ``ptx/<unit>.cu`` holding inline PTX.
numba links the ``.cu`` file into any kernel that calls it (NVRTC compiles it to LTO-IR) and LTO
inlines the call, so a kernel's SASS shows the instruction itself (``UTMALDG``, ``SYNCS.*``), never
a ``CALL``.
"""

import os
from importlib import resources

from ._frontend import UNROLL_IN_SOURCE, address_of, cuda, errors, tail, types
from ._unroll import unrolled

# (address_of and tail are IR of the front end's own: numba_tma._frontend)
__all__ = ["PTX_DIR", "ptx_source", "declare", "address_of", "tail", "require_array",
           "require_int", "literal_int", "host_call", "inline_device", "generated_device"]


def _ptx_dir():
    # Installed: ptx/ ships inside the wheel as the package numba_tma.ptx.
    # Source checkout: it sits beside numba_tma/.
    try:
        return str(resources.files("numba_tma.ptx"))
    except ModuleNotFoundError:
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ptx")


PTX_DIR = _ptx_dir()


def ptx_source(unit):
    """Absolute path of ``ptx/<unit>.cu``."""
    path = os.path.join(PTX_DIR, f"{unit}.cu")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"numba_tma's CUDA-C source {path} is missing; reinstall numba_tma")
    return path


def declare(unit, name, sig):
    """Declare ``extern "C"`` function ``name`` of ``ptx/<unit>.cu`` for use in numba kernels."""
    return cuda.declare_device(name, sig, link=ptx_source(unit), abi="c")


def require_array(fname, argname, ty, *, dtypes=None, ndim=None):
    """Typing-time check of an array operand; raises a TypingError naming the argument."""
    if not isinstance(ty, types.Array):
        raise errors.TypingError(f"{fname}: {argname} must be an array (a cuda.shared.array for "
                                 f"shared-memory operands), got {ty}")
    if dtypes is not None and ty.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        raise errors.TypingError(f"{fname}: {argname} must have dtype {names}, got {ty.dtype}")
    if ndim is not None and ty.ndim != ndim:
        raise errors.TypingError(f"{fname}: {argname} must be {ndim}-D, got {ty.ndim}-D")


def require_int(fname, argname, ty):
    if not isinstance(ty, types.Integer):
        raise errors.TypingError(f"{fname}: {argname} must be an integer, got {ty}")


def literal_int(fname, argname, ty, lo, hi):
    """Value of a compile-time integer argument (PTX immediates), checked to lie in lo..hi."""
    if isinstance(ty, types.IntegerLiteral):
        value = ty.literal_value
    elif isinstance(ty, types.Omitted) and isinstance(ty.value, int):
        value = ty.value
    elif isinstance(ty, int) and not isinstance(ty, bool):   # an overload's omitted default
        value = ty
    else:
        raise errors.TypingError(f"{fname}: {argname} must be a compile-time integer constant "
                                 f"(it is a PTX immediate), got {ty}")
    if not lo <= value <= hi:
        raise errors.TypingError(f"{fname}: {argname} = {value} is outside {lo}..{hi}")
    return value


def host_call(name):
    raise RuntimeError(f"numba_tma.{name} is a device intrinsic: call it inside a @cuda.jit kernel")


def inline_device(func):
    """``@inline_device``: a device function that NVVM inlines into its callers (``forceinline``),
    compiled once per argument *types*: integer and boolean constants at a call site are typed
    as plain ``int64`` / ``bool`` rather than one specialization per literal value.

    Why: numba's ``inline="always"`` copies the callee's IR into every call site and types it
    again there, nested callees included (most of a GEMM kernel's build went there); a plain
    device function is typed once, but numba compiles it anew for each literal it is called
    with (``f(acc, 0)``, ``f(acc, 1)`` ...). After NVVM inlines the body,
    LLVM folds the constants as before, so the machine code is the same. A function whose body
    needs the literal itself (a PTX immediate taken from an argument) is still compiled for the
    literal: when typing with plain types fails, the call falls back to numba's rule."""
    from ._frontend import config

    if config.ENABLE_CUDASIM:                   # the simulator runs Python: nothing to inline
        return cuda.jit(device=True)(func)
    if UNROLL_IN_SOURCE:
        func = unrolled(func)
    dispatcher = cuda.jit(device=True, forceinline=True)(func)
    dispatcher.__class__ = _unliteral_dispatcher_class(type(dispatcher))
    return dispatcher


def generated_device(name, lines, env):
    """The ``@inline_device`` function ``name`` whose source is ``lines``, run in ``env``: code
    written out for its constants, where a loop would keep an index dynamic on either front end
    (numba-cuda's LLVM does not unroll a loop whose body holds a user epilogue, and
    :mod:`numba_tma._unroll` writes loops out on numba-cuda-mlir only; an accumulator index not
    constant sends every accumulator to local memory), or where the code's shape depends on
    a count (a call spreading that many arguments)."""
    namespace = {"__name__": __name__, **env}
    exec(compile("\n".join(lines) + "\n", f"<numba_tma: {name}>", "exec"), namespace)
    return inline_device(namespace[name])


_UNLITERAL_CLASSES = {}


def _unliteral_dispatcher_class(base):
    # numba-cuda's CUDADispatcher compiles a device function for the exact argument types of a
    # call (get_call_template -> compile_device); this subclass asks for the unliteral types
    # first. The one seam into numba-cuda's dispatcher internals.
    cls = _UNLITERAL_CLASSES.get(base)
    if cls is None:
        def get_call_template(self, args, kws):
            plain = tuple(_unliteral(a) for a in args)
            if plain != tuple(args):
                try:
                    return base.get_call_template(self, plain, kws)
                except errors.TypingError:
                    pass
            return base.get_call_template(self, args, kws)

        cls = _UNLITERAL_CLASSES[base] = type("Inline" + base.__name__, (base,),
                                              {"get_call_template": get_call_template})
    return cls


def _unliteral(ty):
    if isinstance(ty, (types.IntegerLiteral, types.BooleanLiteral)):
        return types.unliteral(ty)
    return ty
