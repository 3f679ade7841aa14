"""``matmul(a, b, out=None)``: ``out = alpha * a @ b + beta * out`` on Hopper tensor cores.

``a`` (M, K) and ``b`` (K, N) are float16 or bfloat16 CUDA arrays (numba, CuPy or torch; torch
for bfloat16), each either row-major or column-major contiguous (a transposed view such as
``w.T`` is fine: wgmma reads it through its transpose immediates, the mma.sync rung with
``ldmatrix.trans``). ``out`` (M, N) is row-major float16, bfloat16 or float32; accumulation is
fp32. The kernel is the warp-specialised TMA + ``wgmma`` GEMM of :mod:`numba_tma.kernels.gemm`
(a ``WgmmaConfig``, chosen per shape by :mod:`numba_tma.kernels.gemm.choose`, launched as
:mod:`numba_tma.kernels.gemm.plan` plans); the ``mma.sync`` GEMM stays a rung of the ladder,
run when a ``GemmConfig`` is given. Any M, N, K work (partial tiles are zero-filled on load and clipped on store), but TMA
needs every row pitch to be a multiple of 16 bytes (8 half-precision or 4 float32 elements) and
16-byte-aligned base addresses.
"""

import numbers
import sys
from typing import NamedTuple

import numpy as np

from ._frontend import cuda
from ._arrays import allocate_like, numba_view
from ._calls import BoundedCache, call_stream, operand_key
from ._device import require_hopper
from .launch import context_id_or_none, is_capturing, stream_handle
from .kernels.gemm import GemmConfig, WgmmaConfig, choose
from .kernels.gemm.plan import LaunchPlan, sm_count
from .operands import check_device, device_to_enter, dtype_name, read_operand

__all__ = ["matmul", "matmul_kernels", "MatmulPlan", "plan_matmul"]

TMA_ALIGN = 16
_IN_KINDS = {"float16": "f16", "torch.float16": "f16", "torch.bfloat16": "bf16"}
_OUT_KINDS = {"float16": "f16", "torch.float16": "f16", "torch.bfloat16": "bf16",
              "float32": "f32", "torch.float32": "f32"}
_DTYPE_NAMES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
#: torch's fp8 dtypes, by name, as the kernels name their elements (numba_tma.matmul_fp8).
FP8_TORCH_DTYPES = {"torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2"}


def _dtype_label(array):
    """``str(array.dtype)`` ("float16", "torch.bfloat16"), or for an object that exposes only
    ``__cuda_array_interface__`` its typestr's name."""
    dtype = getattr(array, "dtype", None)
    cai = None if dtype is not None else getattr(array, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and "typestr" in cai:
        return dtype_name(cai["typestr"])
    try:
        label = _labels.get(dtype)
    except TypeError:                   # an unhashable dtype object
        return str(dtype)
    if label is None:                   # (a numpy dtype's str() is Python code: microseconds)
        label = _labels[dtype] = str(dtype)
    return label


_labels = {}


def _kind(array, argname, table):
    name = _dtype_label(array)
    kind = table.get(name)
    if kind is None:
        allowed = sorted({k.replace("torch.", "") for k in table})
        raise TypeError(f"{argname} must have dtype {', '.join(allowed)} (bfloat16 as a torch "
                        f"tensor); got {name}")
    return kind


def _matrix(op, argname, prefer_row=False):
    """``(row_major, storage)`` of a 2-D operand: whether it is row-major (else column-major, read
    as its C-contiguous transpose) and the (rows, cols) of that C-contiguous storage
    (``prefer_row``: a single row or column counts as row-major, as ``out`` must be)."""
    if len(op.shape) != 2:
        raise ValueError(f"{argname} must be 2-D; got shape {op.shape}")
    item = op.itemsize
    rows, cols = op.shape
    s0, s1 = op.strides if op.strides is not None else (cols * item, item)
    row = (s1 == item or cols <= 1) and (s0 == cols * item or rows <= 1)
    col = (s0 == item or rows <= 1) and (s1 == rows * item or cols <= 1)
    if row and col and not prefer_row:
        # A single row or column is both; store it along its long side, so that a K = 1 or
        # N = 1 operand still has a TMA-sized contiguous dimension (the fuzz test found it).
        row = cols >= rows
    if row:
        return True, (rows, cols)
    if col:
        return False, (cols, rows)
    raise ValueError(f"{argname} must be row-major or column-major contiguous; its strides are "
                     f"{(s0, s1)} bytes for shape {op.shape} (make a contiguous copy)")


def _transposed(view):
    """The transpose of a 2-D numba device array as a view (numba's own ``.T`` launches a copy)."""
    from ._frontend import DeviceNDArray   # absent under the simulator

    return DeviceNDArray(shape=view.shape[::-1], strides=view.strides[::-1], dtype=view.dtype,
                         stream=view.stream, gpu_data=view.gpu_data)


def _check_tma(op, storage, argname, layout):
    if op.ptr % TMA_ALIGN:
        raise ValueError(f"{argname}'s data address {op.ptr:#x} must be {TMA_ALIGN}-byte aligned "
                         f"for TMA")
    inner = storage[1]
    if (inner * op.itemsize) % TMA_ALIGN:
        raise ValueError(f"{argname} is {layout}: its contiguous dimension ({inner} elements of "
                         f"{op.itemsize} bytes = {inner * op.itemsize} "
                         f"bytes) must be a multiple of {TMA_ALIGN} bytes for TMA; pad it")


def _span(op):
    return op.ptr, op.ptr + op.size * op.itemsize


def _scalar(value, argname):
    """``value`` as a float: alpha and beta are real numbers (a bool or a string is refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{argname} must be a real number; got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


class MatmulPlan:
    """What ``matmul`` runs for these operands: the numba storage views, the layouts and the
    kernel variant. Built by :func:`plan_matmul` after every check."""

    scale = ""          # (fp8 plans: the scale mode, the kernel's scale arrays, promotion)
    scales = ()
    promote = False
    epilogue = None     # (a user epilogue: its EpilogueFn and the arguments the kernel takes)
    epilogue_args = ()

    def __init__(self, a, b, out, a_kmajor, b_kmajor, in_kind, out_kind, m, n, k, config):
        self.a, self.b, self.out = a, b, out
        self.a_kmajor, self.b_kmajor = a_kmajor, b_kmajor
        self.in_kind, self.out_kind = in_kind, out_kind
        self.m, self.n, self.k = m, n, k
        self.config = config

    def __repr__(self):
        return (f"MatmulPlan(M={self.m}, N={self.n}, K={self.k}, a={'MxK' if self.a_kmajor else 'KxM'}, "
                f"b={'NxK' if self.b_kmajor else 'KxN'}, {self.in_kind}->{self.out_kind}, {self.config})")


class _Checked(NamedTuple):
    """What :func:`check_matmul` found: the layouts, kinds and sizes, and the config."""

    a_row: bool
    b_row: bool
    out_row: bool | None
    in_kind: str
    out_kind: str | None
    m: int
    n: int
    k: int
    ragged: bool        # neither A's nor B's rows in memory are whole 128-byte lines
    config: object      # as given (None: plan_matmul chooses for the GPU)


def check_matmul(a, b, out=None, config=None):
    """Every check of ``matmul``'s operands that needs no GPU (errors are TypeError/ValueError
    naming the argument, the same on a machine without a driver as on an H100); ``out`` None
    checks ``a`` and ``b`` alone. Where numba sees several GPUs, every operand must be on
    ``a``'s device, which the caller made current."""
    ops = {}
    for name, array in (("a", a), ("b", b), ("out", out)):
        if array is not None:
            ops[name] = read_operand(array, name, writable=name == "out")
            check_device(ops[name], name, first="a")
    in_kind = _kind(a, "a", _IN_KINDS)
    if _kind(b, "b", _IN_KINDS) != in_kind:
        raise TypeError(f"a and b must have the same dtype; got {_dtype_label(a)} and "
                        f"{_dtype_label(b)}")
    out_kind = None if out is None else _kind(out, "out", _OUT_KINDS)
    oa, ob = ops["a"], ops["b"]
    a_row, sa = _matrix(oa, "a")
    b_row, sb = _matrix(ob, "b")
    m, k = oa.shape
    if ob.shape[0] != k:
        raise ValueError(f"a is {m} x {k} but b is {ob.shape[0]} x {ob.shape[1]}: b must have "
                         f"{k} rows")
    n = ob.shape[1]
    oo, o_row = ops.get("out"), None
    if oo is not None:
        o_row = check_out_layout(oo, oa, ob, m, n)
    # Rows of A and B in memory (their contiguous dimension) that are not whole 128-byte lines.
    ragged = all(inner * op.itemsize % 128 for op, (_, inner) in ((oa, sa), (ob, sb)))
    if config is not None:
        _check_config(config)
    if m and n and k:
        _check_tma(oa, sa, "a", "M x K row-major" if a_row else "column-major (stored K x M)")
        _check_tma(ob, sb, "b", "N-contiguous (K x N row-major)" if b_row else
                   "column-major (stored N x K)")
    if oo is not None:
        check_out_placement(oo, oa, ob, m, n)
    return _Checked(a_row, b_row, o_row, in_kind, out_kind, m, n, k, ragged, config)


def check_out_layout(oo, oa, ob, m, n, argname="out"):
    """``out`` (an Operand; or another M x N output named ``argname``) has the (M, N) shape of
    ``a @ b`` and is row-major; returns whether it is row-major (a single row or column
    counts)."""
    if oo.shape != (m, n):
        raise ValueError(f"{argname} must have shape ({m}, {n}) for a {oa.shape} @ b "
                         f"{ob.shape}; got {oo.shape}")
    o_row, _ = _matrix(oo, argname, prefer_row=True)
    if not o_row and m > 1 and n > 1:
        raise ValueError(f"{argname} must be row-major (C-contiguous); got a column-major "
                         f"array")
    return o_row


def check_out_placement(oo, oa, ob, m, n, argname="out"):
    """``out``'s (or output ``argname``'s) rows suit TMA and it overlaps neither ``a`` nor
    ``b`` (after :func:`check_out_layout`, so its storage is (M, N))."""
    if m and n:
        _check_tma(oo, (m, n), argname, "row-major")
    lo, hi = _span(oo)
    for name, op in (("a", oa), ("b", ob)):
        vlo, vhi = _span(op)
        if op.size and oo.size and vlo < hi and lo < vhi:
            raise ValueError(f"{argname} overlaps {name}; matmul cannot run in place")


def plan_matmul(a, b, out, config=None):
    """Validate ``a``, ``b``, ``out`` (all required) and return the :class:`MatmulPlan`."""
    c = check_matmul(a, b, out, config)
    require_hopper("matmul")                    # the checks first: the same errors without a GPU
    config = config or choose_config(c.m, c.n, c.k, ragged_rows=c.ragged)
    va, vb, vo = numba_view(a, "a"), numba_view(b, "b"), numba_view(out, "out")
    sa = va if c.a_row else _transposed(va)
    sb = vb if c.b_row else _transposed(vb)
    so = vo if c.out_row else _transposed(vo)
    # A row-major A is K-major; a row-major B (K x N) is N-major.
    return MatmulPlan(sa, sb, so, c.a_row, not c.b_row, c.in_kind, c.out_kind, c.m, c.n, c.k,
                      config)


def choose_config(m, n, k, ragged_rows=False):
    """The config ``matmul()`` runs for an M x N x K problem on the current device
    (:func:`numba_tma.kernels.gemm.choose.choose_config` with its SM count)."""
    return choose.choose_config(m, n, k, sm_count(), ragged_rows)


_CONFIG_TYPES = (WgmmaConfig, GemmConfig)
_NO_ARGS = ()       # (matmul's default epilogue_args: the empty tuple, compared by identity)


def _check_config(cfg):
    if not isinstance(cfg, _CONFIG_TYPES):
        raise TypeError(f"config must be a numba_tma WgmmaConfig (or a ladder's subclass of it) "
                        f"or GemmConfig; got {cfg!r}")


def launch(plan, alpha=1.0, beta=0.0, stream=0):
    """Run the planned GEMM on ``stream`` (asynchronous; anything
    :func:`numba_tma.launch.stream_handle` takes)."""
    LaunchPlan(plan, beta != 0).bind()(alpha, beta, stream_handle(stream))


#: matmul() remembers the launchers of its last operand sets, keyed by the CUDA context and
#: everything its checks looked at (addresses, shapes, strides, dtypes, devices), so a repeated
#: call skips validation and planning and pays only the keys, the lookup and the driver's launch
#: (its cost: docs/host.md).
LAUNCHER_CACHE_SIZE = 64
_launchers = BoundedCache(LAUNCHER_CACHE_SIZE)
#: ... and the planned layouts, keyed by the context, the operands' keys without their
#: addresses, each address modulo 16 (TMA's alignment), config and beta: new buffers of a known
#: layout get their maps moved, not a new plan.
LAYOUT_CACHE_SIZE = 64
_layouts = BoundedCache(LAYOUT_CACHE_SIZE)


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, out_dtype=None, config=None, stream=None,
           scale_a=None, scale_b=None, in_dtype=None, fast_accum=False, epilogue=None,
           epilogue_args=_NO_ARGS, aux=None):
    """``out = alpha * (a @ b) + beta * out`` with fp32 accumulation; returns ``out``.

    ``a`` (M, K), ``b`` (K, N): float16 or bfloat16 (torch), row- or column-major. ``out`` (M, N)
    row-major float16/bfloat16/float32; allocated (like ``a``, dtype ``out_dtype`` or ``a``'s) when
    None, in which case ``beta`` must be 0 (a numba array takes a dropped output's recycled
    block, or one from CUDA's stream-ordered pool, in stream order:
    ``_arrays.stream_ordered_array``;
    ``numba_tma.release_outputs()`` frees the recycled blocks).
    ``config`` forces a kernel: a :class:`~numba_tma.kernels.gemm.WgmmaConfig` (the wgmma
    GEMM, chosen per shape when None; ``kernels.gemm.stream_k.StreamKConfig`` and the ladder's
    ``PingPongConfig`` are such configs too) or a :class:`~numba_tma.kernels.gemm.GemmConfig`
    (the mma.sync rung). Needs an sm_90 GPU.

    Streams: runs asynchronously on ``stream`` (a ``torch.cuda.Stream``, CuPy or numba stream,
    cuda.core stream or raw handle); without one, on torch's current stream for torch tensors
    (so ``with torch.cuda.stream(s):`` orders it like a torch op), CuPy's current stream for
    CuPy arrays, else the default stream.

    Devices: the call runs on the GPU ``a`` lives on (whatever numba's, torch's or CuPy's current
    device), and ``out`` is allocated there; ``b`` and ``out`` on another device are a
    ValueError. Argument errors come before anything touches the GPU, so they read the same on
    a machine without one; there :class:`numba_tma.NoGPUError` follows them.

    fp8: ``a`` and ``b`` float8_e4m3fn / float8_e5m2 (torch; uint8 arrays with ``in_dtype``,
    "e4m3", "e5m2" or a pair), ``a`` row-major and ``b`` the transpose of a row-major (N, K)
    weight, with ``scale_a`` / ``scale_b`` per tensor, per row / column or in blocks (1 x 128,
    128 x 128): ``out = alpha * (scale_a * a) @ (scale_b * b) + beta * out``. Each 128-deep K
    block's product is promoted into fp32 accumulators unless ``fast_accum=True`` (per tensor
    or row/column only: the tensor cores' own fp8 sums, faster, less precise on a long K). The
    shapes and the output dtypes: :mod:`numba_tma.matmul_fp8`.

    Epilogue: ``epilogue`` is a ``@cuda.jit(device=True)`` function ``fn(acc, row, col,
    *epilogue_args)`` compiled into the kernel and applied to every element of C in registers
    before the store: ``acc`` is ``alpha * (a @ b)[row, col]`` (plus ``beta * out[row, col]``)
    in fp32, the result is stored; ``epilogue_args`` are CUDA arrays (float16/32/64, integer)
    and numbers. ``aux``: an (M, N) row-major array of ``out``'s dtype, the auxiliary output
    (such as the pre-activation), stored like C; ``fn`` then returns a pair, the values for
    ``out`` and ``aux``. Ready ones (bias, GELU, SiLU, ReLU, scales, residual, bias + GELU with
    its pre-activation): :mod:`numba_tma.epilogues`; the rules: :mod:`numba_tma.matmul_epilogue`.
    16-bit inputs.

    Repeated calls: the launcher of the last operand sets is cached (by CUDA context, addresses,
    shapes, strides, dtypes, ``config`` and whether ``beta`` is 0), so a repeated call skips
    validation and planning, and new buffers of a layout already planned reuse the plan (its
    tensor maps moved to the new addresses); a cached launch may be captured in a CUDA graph
    (``torch.cuda.graph``). A first call on new buffers uploads tensor maps (a synchronous
    copy), which a capture cannot take: it raises RuntimeError inside a capture, so call once
    on the captured buffers before capturing.
    """
    if type(alpha) is not float or type(beta) is not float:
        alpha, beta = _scalar(alpha, "alpha"), _scalar(beta, "beta")
    fp8 = (in_dtype is not None or scale_a is not None or scale_b is not None
           or _dtype_label(a) in FP8_TORCH_DTYPES)
    if epilogue is not None:
        if fp8:
            raise ValueError("epilogue: fp8 matmul() takes no epilogue yet (16-bit inputs "
                             "only)")
        from .matmul_epilogue import matmul_epilogue

        return _on_device(a, matmul_epilogue, a, b, out, alpha, beta, out_dtype, config,
                          stream, epilogue, epilogue_args, aux)
    if epilogue_args is not _NO_ARGS:
        raise ValueError("epilogue_args given without an epilogue")
    if aux is not None:
        raise ValueError("aux given without an epilogue (aux is the auxiliary output an "
                         "epilogue returning a pair writes)")
    if fp8:
        from .matmul_fp8 import matmul_fp8

        return _on_device(a, matmul_fp8, a, b, out, alpha, beta, out_dtype, config, stream,
                          scale_a, scale_b, in_dtype, fast_accum)
    device = device_to_enter(a)
    if device is not None:
        with cuda.gpus[device]:         # the operands decide where the call runs, as in torch
            return _matmul(a, b, out, alpha, beta, out_dtype, config, stream)
    return _matmul(a, b, out, alpha, beta, out_dtype, config, stream)


def _on_device(a, fn, *args):
    """``fn(*args)`` on the device ``a`` lives on."""
    device = device_to_enter(a)
    if device is None:
        return fn(*args)
    with cuda.gpus[device]:
        return fn(*args)


#: (a's key, b's key, config, out dtype) of operands whose checks passed without ``out``.
_checked_inputs = BoundedCache(256)


def _matmul(a, b, out, alpha, beta, out_dtype, config, stream):
    handle = call_stream(stream, a)
    ctx = None
    known_config = config is None or isinstance(config, _CONFIG_TYPES)   # else: reported below
    cfg_key = config if known_config else None     # (a config is its own key)
    ka, kb = operand_key(a), operand_key(b)
    if out is None and out_dtype is None and beta == 0 and _torch_like(a, b):
        out = a.new_empty((a.shape[0], b.shape[1]))     # a's dtype; checked with a's below
    if out is None:
        out, ctx = allocate_out(a, b, beta, out_dtype, config, handle, ka, kb)
    elif out_dtype is not None:
        raise ValueError("give out or out_dtype, not both")
    ko = operand_key(out)
    key = layout_key = None
    if ka is None or kb is None or ko is None or not known_config:
        ctx = None
    elif ctx is None:
        ctx = context_id_or_none()
    if ctx is not None:
        key = (ctx, ka, kb, ko, cfg_key, beta != 0)
        run = _launchers.get(key)
        if run is not None:
            run(alpha, beta, handle)
            return out
        layout_key = planned_layout_key(ctx, ka, kb, ko, cfg_key, beta != 0)
    run = bound_launch(_layouts, layout_key, (ka, kb, ko), handle, beta,
                       lambda: plan_matmul(a, b, out, config))     # every check, then the GPU's
    if key is not None:
        _launchers.put(key, run)
    run(alpha, beta, handle)
    return out


def planned_layout_key(ctx, ka, kb, ko, *rest):
    """The key a planned layout is remembered by: the context, the operand keys of a, b, out
    without their addresses, each address modulo TMA's alignment, and ``rest`` (config, ...)."""
    return (ctx, ka[1:], kb[1:], ko[1:], ka[0] % TMA_ALIGN, kb[0] % TMA_ALIGN,
            ko[0] % TMA_ALIGN, *rest)


def bound_launch(layouts, layout_key, keys, handle, beta, make_plan, **bind):
    """``run(alpha, beta, stream_handle)``: the layout planned under ``layout_key`` in
    ``layouts`` bound to the buffers of the operand ``keys`` (a, b, out; their maps moved to
    the new addresses), or, where none is (or out would overlap an input), a new plan from
    ``make_plan()`` (remembered there); ``bind``: the rest :meth:`LaunchPlan.bind` takes."""
    layout = None if layout_key is None else layouts.get(layout_key)
    addresses = tuple(key[0] for key in keys) if layout is not None else ()
    if layout is not None and not layout.overlaps(*addresses):
        refuse_capture(handle)
        return layout.bind(*addresses, **bind)
    plan = make_plan()
    refuse_capture(handle)
    layout = LaunchPlan(plan, beta != 0)
    if layout_key is not None:
        layouts.put(layout_key, layout)
    return layout.bind(**bind)


def allocate_out(a, b, beta, out_dtype, config, handle, ka, kb):
    """``(out, context id)``: C allocated like ``a`` (dtype ``out_dtype`` or ``a``'s) after the
    checks of ``a`` and ``b`` (``ka``, ``kb``: their operand keys, None when unknown)."""
    if beta != 0:
        raise ValueError("beta must be 0 when out is None (there is no C to scale)")
    known_config = config is None or isinstance(config, _CONFIG_TYPES)
    in_kind = _kind(a, "a", _IN_KINDS)
    kind = in_kind if out_dtype is None else _OUT_KINDS.get(_dtype_name(out_dtype))
    if kind is None:
        raise TypeError(f"out_dtype must be float16, bfloat16 or float32; got {out_dtype}")
    # The checks before the allocation: a bad a or b gets its own error, on any machine.
    inputs = (ka, kb, config if known_config else None, kind)
    if None in inputs[:2] or not known_config or _checked_inputs.get(inputs) is None:
        check_matmul(a, b, None, config)
        require_hopper("matmul")
        if None not in inputs[:2] and known_config:
            _checked_inputs.put(inputs, True)
    ctx = context_id_or_none()
    return allocate_like(a, _out_shape(a, b), _DTYPE_NAMES[kind], stream=handle,
                         ctx_id=ctx), ctx


def refuse_capture(handle):
    if is_capturing(handle):
        raise RuntimeError("matmul: these operands (addresses, shapes or dtypes) are new, and "
                           "their first call uploads tensor maps, which cannot happen during "
                           "CUDA graph capture; call matmul once on the same buffers before "
                           "capturing (allocate out before the capture, too)")


def _torch_like(a, b):
    """Whether ``a`` and ``b`` are 2-D torch tensors (the cheapest ``out`` to allocate)."""
    return hasattr(a, "new_empty") and getattr(a, "ndim", 0) == 2 and getattr(b, "ndim", 0) == 2


def _out_shape(a, b):
    """(M, N) of ``a @ b`` from the arrays' own 2-D shapes (two numba views built for it would
    cost more than the cached launch itself). Anything else goes through the views, and
    plan_matmul checks it all."""
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    if sa is not None and sb is not None and len(sa) == 2 and len(sb) == 2:
        return (int(sa[0]), int(sb[1]))
    return (numba_view(a, "a").shape[0], numba_view(b, "b").shape[1])


def _dtype_name(spec):
    if str(spec).startswith("torch."):
        return str(spec)
    try:
        return np.dtype(spec).name
    except TypeError:
        return str(spec)


def matmul_kernels():
    """Ordered ``{name: launcher(a, b, out=None, stream=None)}`` of every GEMM kernel: the rungs
    ``matmul()`` runs, forced by their config, then the seed ladders'.

    Each launcher returns ``out`` (allocated when None) and has a ``kind``: ``"shipped"`` (in
    :mod:`numba_tma.kernels.gemm`: the wgmma GEMM's ``WgmmaConfig`` rungs, one block per tile,
    the persistent kernel ``matmul()`` runs, its 2-CTA cluster form and its 256 x 128 tiles,
    its stream-K form (which fp8 chooses for block scales and decode-like products), and the
    ``mma.sync`` ``GemmConfig`` rung) or ``"ladder"`` (in :mod:`numba_tma.ladders`: the
    ping-pong wgmma GEMM, forced through ``matmul()``'s config as the shipped rungs are and
    validated like it; seed 004's SIMT fp32 GEMM, float32 operands only, and seed 002's
    one-warp rungs, 16 x 16 float16 operands only, each checking its own operands); its
    ``module`` names the module of the kernel's config (or function).
    """
    from .kernels.gemm.stream_k import StreamKConfig
    from .ladders import gemm_pingpong, simt_gemm, warp_gemm

    def forced(cfg):
        def launch(a, b, out=None, stream=None):
            return matmul(a, b, out, config=cfg, stream=stream)

        module = sys.modules[type(cfg).__module__]
        launch.__doc__ = f"``matmul(a, b, out, config={cfg!r})``: {module.__doc__}"
        return launch, module.__name__

    def seed(fn):
        def launch(a, b, out=None, stream=None):
            return fn(a, b, out, stream=stream or 0)

        launch.__doc__ = fn.__doc__
        return launch, fn.__module__

    table = {
        "wgmma_tile_per_block": forced(WgmmaConfig(persistent=False)),
        "wgmma_persistent": forced(WgmmaConfig()),
        "wgmma_persistent_c2": forced(WgmmaConfig(cluster_m=2)),
        "wgmma_persistent_m256": forced(choose.TALL),
        "mma_sync": forced(GemmConfig()),
        "wgmma_stream_k": forced(StreamKConfig()),
        "wgmma_pingpong": forced(gemm_pingpong.PingPongConfig(128, stages=6)),
        "simt_fp32": seed(simt_gemm.simt_gemm),
        **{f"warp16_{rung}": seed(fn) for rung, fn in warp_gemm.LADDER.items()},
    }
    kernels = {}
    for name, (launch, module) in table.items():
        launch.__name__ = name
        launch.module = module
        launch.kind = "ladder" if module.startswith("numba_tma.ladders.") else "shipped"
        kernels[name] = launch
    return kernels
