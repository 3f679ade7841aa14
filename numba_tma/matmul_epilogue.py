"""``matmul(a, b, out, epilogue=fn, epilogue_args=(...))``: the GEMM with the user's element
function applied in registers before the store (:mod:`numba_tma.kernels.gemm.user_epilogue`;
shipped ones: :mod:`numba_tma.epilogues`).

The checks, before anything reaches the driver: ``epilogue`` is a ``@cuda.jit(device=True)``
function that types for ``(float32, int64, int64, *argument types)`` and returns a number
(compiled once per function and argument types, its errors naming it); each of
``epilogue_args`` is a CUDA array (numba, CuPy or torch; float16/32/64 or integer, any
strides) on ``a``'s device, or a Python number, and matches the function's ``arg_shapes``
when it declares them. With ``aux`` (the auxiliary-output form) ``epilogue`` returns a pair,
C's value and ``aux``'s, and ``aux`` is an M x N row-major array of ``out``'s dtype on ``a``'s
device, TMA-aligned like ``out`` and overlapping no other operand. Launches are cached like
``matmul()``'s, by the operands, the function and its arguments' addresses and values.
"""

import numbers

import numpy as np

from ._frontend import cuda, from_dtype, types
from ._arrays import InterfaceView, numba_view
from ._calls import BoundedCache, call_stream, operand_key
from ._device import require_hopper
from .kernels.gemm import GemmConfig
from .kernels.gemm.plan import MAP_TYPE, output_map
from .kernels.gemm.user_epilogue import EpilogueFn
from .launch import context_id_or_none
from .offline.toolchain import target_device
from .operands import check_device, is_c_contiguous, read_operand

__all__ = ["matmul_epilogue", "check_epilogue"]


def _is_device_function(fn):
    return (hasattr(fn, "py_func") and hasattr(fn, "targetoptions")
            and bool(fn.targetoptions.get("device")))


def _element_dtype(op):
    """The numpy dtype of an argument array a numba kernel reads: float16/32/64, integer or
    bool; None for any other (bfloat16, fp8, complex, a raw void type)."""
    try:
        dt = np.dtype(op.dtype)
    except TypeError:
        return None
    return dt if dt.kind in "iub" or (dt.kind == "f" and dt.itemsize <= 8) else None


def _argument(value, i):
    """``(numba type, value as the kernel takes it)`` of ``epilogue_args[i]``."""
    name = f"epilogue_args[{i}]"
    if isinstance(value, (bool, np.bool_)):
        return types.boolean, bool(value)
    if isinstance(value, (numbers.Integral, np.integer)):
        v = int(value)
        if not -2 ** 63 <= v < 2 ** 63:
            raise ValueError(f"{name} = {v} does not fit in int64")
        return types.int64, v
    if isinstance(value, np.float32):
        return types.float32, float(value)
    if isinstance(value, (numbers.Real, np.floating)):
        return types.float64, float(value)
    if isinstance(value, (tuple, list, dict, str)) or value is None:
        raise TypeError(f"{name} must be a CUDA array or a number; got {type(value).__name__}")
    op = read_operand(value, name)
    dt = _element_dtype(op)
    if dt is None:
        hint = (" (numba reads no bfloat16 arrays: pass a float32 copy, e.g. bias.float())"
                if "bfloat16" in op.dtype or str(op.spec) == "<V2" else "")
        raise TypeError(f"{name} has dtype {op.dtype}; an epilogue argument array must be "
                        f"float16/32/64, integer or bool{hint}")
    check_device(op, name, first="a")
    ndim = len(op.shape)
    if ndim == 0:
        raise ValueError(f"{name} is a 0-d array; pass a Python number (or a 1-element "
                         f"array)")
    # A C-contiguous array is typed so: its addresses are then sums of constants and the
    # index (one load per column of a bias, where a run-time stride costs a multiply each).
    layout = "C" if is_c_contiguous(op.shape, op.strides, dt.itemsize) else "A"
    return (types.Array(from_dtype(dt), ndim, layout),
            InterfaceView(op.ptr, op.shape, op.strides, dt.str))


def _check_shapes(fn, values, m, n):
    shapes = getattr(fn, "arg_shapes", None)
    if shapes is None:
        return
    name = fn.py_func.__qualname__
    if len(values) != len(shapes):
        raise TypeError(f"epilogue_args: {name} takes {len(shapes)} argument(s) "
                        f"({', '.join(shapes)}); got {len(values)}")
    sizes = {"M": m, "N": n}
    for i, (want, value) in enumerate(zip(shapes, values)):
        shape = tuple(getattr(value, "shape", ()))
        expect = tuple(sizes[c] for c in want)
        if shape != expect:
            raise ValueError(f"epilogue_args[{i}] must have shape "
                             f"({', '.join(want)}) = {expect} for {name} on this "
                             f"{m} x {n} output; got {shape}")


_typed = {}


def _is_number(t):
    return isinstance(t, (types.Number, types.Boolean))


def _check_types(fn, argtypes, aux=False):
    """Compile ``fn`` for ``(float32, int64, int64, *argtypes)`` once: its typing errors and a
    result other than a number (a pair of numbers with ``aux``) are reported as the user's,
    not as the GEMM kernel's."""
    key = (fn, argtypes, aux)
    if key in _typed:
        return
    name = fn.py_func.__qualname__
    sig = (types.float32, types.int64, types.int64) + argtypes
    shown = ", ".join(["acc: float32", "row: int64", "col: int64"]
                      + [f"{t}" for t in argtypes])
    try:
        # numba asks the current device's compute capability for each device function fn
        # calls, cc= notwithstanding: typing answers for sm_90 whatever the GPU (or none).
        # (LTO-IR, not PTX: numba-cuda-mlir's NVRTC asks the driver whether it can load the
        # PTX of a source it links, such as numba's fp16 support for a 16-bit array.)
        with target_device((9, 0)):
            _, resty = cuda.compile(fn.py_func, sig, device=True, cc=(9, 0), abi="numba",
                                    output="ltoir")
    except Exception as e:          # numba's TypingError and its kin
        first = str(e).strip().splitlines()
        raise TypeError(f"epilogue: {name}({shown}) does not compile: "
                        f"{' '.join(first[:12])}") from None
    pair = (isinstance(resty, types.BaseTuple) and len(resty) == 2
            and all(_is_number(t) for t in resty))
    if aux and not pair:
        raise TypeError(f"epilogue: {name}({shown}) returns {resty}; with aux= it must return "
                        f"a pair of numbers (the value to store in out, the value to store in "
                        f"aux)")
    if not aux and not _is_number(resty):
        hint = " (a pair is the auxiliary-output form: give aux=)" if pair else ""
        raise TypeError(f"epilogue: {name}({shown}) returns {resty}; it must return a number "
                        f"(the value to store){hint}")
    _typed[key] = resty


def check_epilogue(epilogue, epilogue_args, m, n, aux=False):
    """``(EpilogueFn, the values the kernel takes)`` after every check of
    ``epilogue`` and ``epilogue_args`` for an ``m x n`` output (``aux``: the auxiliary-output
    form, whose tensor map the caller puts before those values)."""
    if not _is_device_function(epilogue):
        hint = (" (decorate it with @numba.cuda.jit(device=True))"
                if callable(epilogue) else "")
        raise TypeError(f"epilogue must be a @cuda.jit(device=True) function "
                        f"fn(acc, row, col, *epilogue_args); got {epilogue!r}{hint}")
    if not isinstance(epilogue_args, (tuple, list)):
        raise TypeError(f"epilogue_args must be a tuple of the epilogue's extra arguments "
                        f"(e.g. (bias,)); got {type(epilogue_args).__name__}")
    parts = [_argument(v, i) for i, v in enumerate(epilogue_args)]
    _check_shapes(epilogue, epilogue_args, m, n)
    argtypes = tuple(p[0] for p in parts)
    _check_types(epilogue, argtypes, aux)
    if aux:
        return EpilogueFn(epilogue, (MAP_TYPE,) + argtypes, True), tuple(p[1] for p in parts)
    return EpilogueFn(epilogue, argtypes), tuple(p[1] for p in parts)


def check_aux(aux, a, b, out):
    """The auxiliary output ``aux`` (an Operand after the checks): ``out``'s dtype, and the
    checks of an output (:func:`.matmul_api.check_out_layout`, ``check_out_placement``: the
    (M, N) shape, row-major, TMA-aligned, overlapping neither ``a`` nor ``b``), on ``a``'s
    device, not overlapping ``out``."""
    from .matmul_api import (_OUT_KINDS, _dtype_label, _kind, _span, check_out_layout,
                             check_out_placement)

    ox = read_operand(aux, "aux", writable=True)
    check_device(ox, "aux", first="a")
    if _kind(aux, "aux", _OUT_KINDS) != _kind(out, "out", _OUT_KINDS):
        raise TypeError(f"aux must have out's dtype ({_dtype_label(out)}): it is stored "
                        f"through C's boxes; got {_dtype_label(aux)}")
    oa, ob, oo = read_operand(a, "a"), read_operand(b, "b"), read_operand(out, "out")
    m, n = oo.shape
    check_out_layout(ox, oa, ob, m, n, "aux")
    check_out_placement(ox, oa, ob, m, n, "aux")
    (lo, hi), (vlo, vhi) = _span(ox), _span(oo)
    if ox.size and oo.size and vlo < hi and lo < vhi:
        raise ValueError("aux overlaps out")
    return ox


_launchers = BoundedCache(64)
_layouts = BoundedCache(64)


def _quick_key(value):
    """A cheap key of one epilogue argument (its type and value, or the array's operand key),
    None where only the full check can tell."""
    if isinstance(value, (numbers.Number, np.generic)):
        return (type(value), value)
    return operand_key(value)


def matmul_epilogue(a, b, out, alpha, beta, out_dtype, config, stream, epilogue,
                    epilogue_args, aux=None):
    """``matmul()`` with an epilogue (16-bit inputs; ``a``'s device is current); ``aux``: the
    auxiliary output, or None."""
    from .matmul_api import (_OUT_KINDS, _kind, allocate_out, bound_launch, planned_layout_key,
                             plan_matmul)

    if isinstance(config, GemmConfig):
        raise ValueError("epilogue: the mma.sync rung (config=GemmConfig) takes no epilogue; "
                         "leave config out or give a WgmmaConfig")
    handle = call_stream(stream, a)
    ka, kb = operand_key(a), operand_key(b)
    if out is None:
        out, _ = allocate_out(a, b, beta, out_dtype, config, handle, ka, kb)
    elif out_dtype is not None:
        raise ValueError("give out or out_dtype, not both")
    ko = operand_key(out)
    quick = (tuple(_quick_key(v) for v in epilogue_args)
             if type(epilogue_args) is tuple else (None,))
    if aux is not None:
        quick += (operand_key(aux),)
    ctx = None if None in (ka, kb, ko) or None in quick else context_id_or_none()
    key = None if ctx is None else (ctx, ka, kb, ko, config, beta != 0, epilogue, quick)
    run = None if key is None else _launchers.get(key)
    if run is None:
        m, n = int(out.shape[0]), int(out.shape[1])
        if aux is not None:
            check_aux(aux, a, b, out)
        epi, values = check_epilogue(epilogue, epilogue_args, m, n, aux is not None)
        if aux is not None:     # its tensor map: the kernel's first epilogue argument
            require_hopper("matmul")        # (the checks first: the same errors without a GPU)
            xmap = output_map(numba_view(aux, "aux"), _kind(out, "out", _OUT_KINDS)) \
                if m and n else None
            values = (None if xmap is None else xmap.device_array,) + values
        layout_key = None if key is None else planned_layout_key(ctx, ka, kb, ko, config,
                                                                 beta != 0, epi)

        def make_plan():
            plan = plan_matmul(a, b, out, config)
            if epi.aux and config is None and plan.config.overlap_epilogue:
                # (the overlapped epilogue has no registers for a second packed tile)
                plan.config = plan.config.replace(overlap_epilogue=False)
            plan.epilogue, plan.epilogue_args = epi, values
            return plan

        run = bound_launch(_layouts, layout_key, (ka, kb, ko), handle, beta, make_plan,
                           epilogue_args=values)
        if key is not None:
            _launchers.put(key, run)
    run(alpha, beta, handle)
    return out
