"""``matmul()`` on fp8 operands: ``out = alpha * (scale_a * a) @ (scale_b * b) + beta * out``.

``a`` (M, K) and ``b`` (K, N) hold float8 e4m3 or e5m2 values, any of the four pairs: torch
``float8_e4m3fn`` / ``float8_e5m2`` tensors, or uint8/int8 arrays of any library with
``in_dtype`` naming what their bytes are. fp8 ``wgmma`` reads both operands K-major, so ``a`` is
row-major (K contiguous) and ``b`` the transpose of a row-major (N, K) weight (``w.t()``), as
``torch._scaled_mm`` takes them. The scales (float32 device arrays, any strides, or Python
numbers) select the kernel's mode (:mod:`numba_tma.kernels.gemm.scales`):

- per tensor: a number, or a one-element array (0-d, (1,), (1, 1)), for each operand;
- per row / column: ``scale_a`` of M values ((M,) or (M, 1)), ``scale_b`` of N ((N,), (1, N) or
  (N, 1)); a per-tensor scale on the other side is broadcast;
- block (DeepSeek-V3, DeepGEMM): ``scale_a`` (M, ceil(K/128)), one per row and 128-deep K block
  (1 x 128), ``scale_b`` (ceil(N/128), ceil(K/128)), one per 128 x 128 block of the (N, K)
  weight. Either layout of each (row-major, or DeepGEMM's and torch's column-major
  "TMA-aligned" one). The kernel's producer copies each slice's A scales into shared memory
  beside its tiles in one bulk copy, from K block by row order: ``scale_a`` M-contiguous, its
  K blocks 16 bytes apart (a multiple), its address 16-byte aligned, and M a multiple of 4 is
  read in place; any other ``scale_a`` (row-major, an odd M, a per-tensor scale beside block
  ``scale_b``) is copied into that order by a small kernel before each launch. B's scale of a
  slice comes in the 16 bytes that hold it: ``scale_b`` row-major with 16-byte aligned rows and
  ceil(K/128) a multiple of 4 is read in place, any other is copied likewise.

Accumulation is fp32, in two levels: each 128-deep K block's product (the tensor cores' fp8
sum, which keeps fewer bits than fp32) is promoted into fp32 registers of its own, times its
block scales (DeepGEMM's recipe, the precision of ``torch._scaled_mm``'s default
``use_fast_accum=False``). ``fast_accum=True`` (per tensor or per row/column) lets the tensor
cores' accumulator carry the whole K sum instead, as ``use_fast_accum=True`` does: wider tiles,
faster, and on a long K of same-signed values a sum short by a large part. Output: bfloat16,
float16 or float32 (``out`` or ``out_dtype``; bfloat16 by default for torch, float32
otherwise).
"""

import numbers
from typing import NamedTuple

import numpy as np

from ._arrays import InterfaceView, allocate_like, numba_view
from ._calls import BoundedCache, call_stream, operand_key
from ._device import require_hopper
from .kernels.gemm import WgmmaConfig, choose
from .kernels.gemm.plan import LaunchPlan, sm_count
from .kernels.gemm.scales import BLOCK_K, stage_grid, stage_scales
from .launch import context_id_or_none
from .matmul_api import (_DTYPE_NAMES, FP8_TORCH_DTYPES, MatmulPlan, _check_config, _check_tma,
                         _dtype_label, _dtype_name, _OUT_KINDS as _OUT_KINDS_16, refuse_capture,
                         _transposed, check_out_layout, check_out_placement)
from .operands import check_device, read_operand

__all__ = ["matmul_fp8", "check_fp8", "Fp8Checked", "choose_config"]

_IN_DTYPES = {"e4m3": "e4m3", "float8_e4m3fn": "e4m3", "torch.float8_e4m3fn": "e4m3",
              "e5m2": "e5m2", "float8_e5m2": "e5m2", "torch.float8_e5m2": "e5m2"}
_RAW_BYTES = ("uint8", "int8", "torch.uint8", "torch.int8")
#: out's kinds: the 16-bit path's, and out_dtype="bfloat16" by name (fp8's default for torch)
_OUT_KINDS = {**_OUT_KINDS_16, "bfloat16": "bf16"}


_label = _dtype_label


def _fp8_kinds(a, b, in_dtype):
    """``"e4m3_e5m2"``-style kind of the pair (A's element, B's)."""
    if in_dtype is None:
        kinds = []
        for name, x in (("a", a), ("b", b)):
            kind = FP8_TORCH_DTYPES.get(_label(x))
            if kind is None:
                raise TypeError(f"{name} must be float8_e4m3fn or float8_e5m2 (torch), or raw "
                                f"bytes with in_dtype= naming them; got {_label(x)} (fp8 "
                                f"matmul: scale_a/scale_b given, or the other operand is fp8)")
            kinds.append(kind)
        return "_".join(kinds)
    names = tuple(in_dtype) if isinstance(in_dtype, (tuple, list)) else (in_dtype, in_dtype)
    if len(names) != 2 or any(_IN_DTYPES.get(str(v)) is None for v in names):
        raise ValueError(f"in_dtype must be 'e4m3' or 'e5m2' (float8_e4m3fn, float8_e5m2), or "
                         f"a pair of them (a's, b's); got {in_dtype!r}")
    kinds = []
    for name, x, want in (("a", a, names[0]), ("b", b, names[1])):
        kind, label = _IN_DTYPES[str(want)], _label(x)
        if label in FP8_TORCH_DTYPES:
            if FP8_TORCH_DTYPES[label] != kind:
                raise TypeError(f"{name} is {label} but in_dtype says {want}")
        elif label not in _RAW_BYTES:
            raise TypeError(f"{name} must hold fp8 bytes (uint8/int8, or a torch float8 "
                            f"tensor) for in_dtype={in_dtype!r}; got {label}")
        kinds.append(kind)
    return "_".join(kinds)


def _elements(op):
    """An operand's strides in elements (C-contiguous when the interface gives none)."""
    if op.strides is None:
        return tuple(int(np.prod(op.shape[i + 1:], dtype=np.int64)) for i in range(len(op.shape)))
    return tuple(s // op.itemsize for s in op.strides)


def _check_kmajor(op, argname, k_axis):
    """fp8 operands are K-major: ``a`` (M, K) row-major, ``b`` (K, N) the transpose of a
    row-major (N, K) array."""
    if len(op.shape) != 2:
        raise ValueError(f"{argname} must be 2-D; got shape {op.shape}")
    if op.size == 0:
        return                      # (nothing is loaded: any strides)
    st = _elements(op)
    other = 1 - k_axis
    kmajor = ((op.shape[k_axis] <= 1 or st[k_axis] == 1)
              and (op.shape[other] <= 1 or st[other] == op.shape[k_axis]))
    if kmajor:
        return
    if argname == "a":
        raise ValueError(f"a must be row-major (M x K, K contiguous) for fp8: wgmma reads fp8 "
                         f"A K-major; its strides are {st} elements for shape {op.shape} "
                         f"(pass a.contiguous())")
    raise ValueError(f"b must be the transpose of a row-major (N, K) weight (w.t(), as "
                     f"torch._scaled_mm takes it) for fp8: wgmma reads fp8 B K-major; its "
                     f"strides are {st} elements for shape {op.shape} (pass "
                     f"b.t().contiguous().t())")


def _scale_view(ptr, shape, strides):
    """A float32 scale array as the kernel reads it: 2-D, strides in bytes (0 broadcasts)."""
    return InterfaceView(ptr, shape, strides, "<f4")


_ones = {}


def _one(ctx):
    """A device float32 1 per context: the scale array of a side given as a number."""
    if ctx not in _ones:
        from ._frontend import cuda

        _ones[ctx] = cuda.to_device(np.ones(1, np.float32))
    return _ones[ctx]


def _classify(scale, argname, m_or_n, kb, nb):
    """``(kind, operand or value)`` of one scale: "none", "number", "tensor", "row" or
    "block"."""
    if scale is None:
        return "none", 1.0
    if isinstance(scale, numbers.Real) and not isinstance(scale, (bool, np.bool_)):
        return "number", float(scale)
    op = read_operand(scale, argname)
    if _label(scale) not in ("float32", "torch.float32"):
        raise TypeError(f"{argname} must be float32; got {_label(scale)}")
    check_device(op, argname, first="a")
    shape = op.shape
    if op.size == 1 and len(shape) <= 2:
        return "tensor", op
    rows = [(m_or_n,), (m_or_n, 1)] + ([(1, m_or_n)] if argname == "scale_b" else [])
    block = (m_or_n, kb) if argname == "scale_a" else (nb, kb)
    if shape in rows:
        # scale_a's M values with one K block are both: the other side decides (check_fp8)
        return ("row or block" if argname == "scale_a" and kb == 1 else "row"), op
    if shape == block:
        return "block", op
    what = "M" if argname == "scale_a" else "N"
    rowshapes = f"({m_or_n},) or ({m_or_n}, 1)" + (f" or (1, {m_or_n})"
                                                   if argname == "scale_b" else "")
    raise ValueError(f"{argname} has shape {shape}; it must be one value (per tensor), "
                     f"{rowshapes} (one per {'row of a' if what == 'M' else 'column of b'}), "
                     f"or {block} (block scales: "
                     f"{'1 x 128 along K' if what == 'M' else '128 x 128 of the (N, K) weight'})")


def _view(kind, op, shape, ctx):
    """The 2-D ``shape`` view the kernel reads of one side's scale: broadcast (strides 0) for a
    per-tensor scale, the array's own strides otherwise (a vector as a column)."""
    if kind in ("none", "number"):
        return _scale_view(_one(ctx).__cuda_array_interface__["data"][0], shape, (0, 0))
    if kind == "tensor":
        return _scale_view(op.ptr, shape, (0, 0))
    st = tuple(op.itemsize * e for e in _elements(op))
    if kind == "row":               # (R,), (R, 1) or (1, R): the stride along R, as a column
        long = max(range(len(op.shape)), key=lambda i: op.shape[i])
        return _scale_view(op.ptr, shape, (st[long] if op.shape[long] > 1 else 0, 0))
    return _scale_view(op.ptr, shape, tuple(st) if len(st) == 2 else (st[0], 0))


class Fp8Checked(NamedTuple):
    """What :func:`check_fp8` found."""

    in_kind: str        # "e4m3_e5m2": a's element, b's
    out_kind: object    # None when out is None
    m: int
    n: int
    k: int
    mode: str           # "", "tensor", "row" or "block"
    sides: tuple        # ((kind, operand or value) of scale_a, of scale_b)


def check_fp8(a, b, out, scale_a, scale_b, in_dtype, config=None, fast_accum=False):
    """Every check of an fp8 ``matmul`` that needs no GPU (errors name the argument)."""
    in_kind = _fp8_kinds(a, b, in_dtype)
    oa, ob = read_operand(a, "a"), read_operand(b, "b")
    check_device(ob, "b", first="a")
    _check_kmajor(oa, "a", 1)
    _check_kmajor(ob, "b", 0)
    m, k = oa.shape
    if ob.shape[0] != k:
        raise ValueError(f"a is {m} x {k} but b is {ob.shape[0]} x {ob.shape[1]}: b must have "
                         f"{k} rows")
    n = ob.shape[1]
    out_kind = None
    if out is not None:
        oo = read_operand(out, "out", writable=True)
        check_device(oo, "out", first="a")
        label = _label(out)
        out_kind = _OUT_KINDS.get(label)
        if out_kind is None:
            raise TypeError(f"out must be bfloat16, float16 or float32 for fp8 inputs; got "
                            f"{label} (fp8 output is not supported)")
        check_out_layout(oo, oa, ob, m, n)
        check_out_placement(oo, oa, ob, m, n)
    if m and n and k:
        _check_tma(oa, (m, k), "a", "M x K row-major (fp8: one byte per element)")
        _check_tma(ob, (n, k), "b", "the transpose of an (N, K) row-major weight (fp8: one "
                                    "byte per element)")
    kb, nb = -(-k // BLOCK_K), -(-n // BLOCK_K)
    sides = (_classify(scale_a, "scale_a", m, kb, nb), _classify(scale_b, "scale_b", n, kb, nb))
    kinds = {kind for kind, _ in sides}
    if "row or block" in kinds:
        either = "block" if "block" in kinds else "row"
        sides = tuple((either if kind == "row or block" else kind, v) for kind, v in sides)
        kinds = {kind for kind, _ in sides}
    if "block" in kinds:
        if kinds - {"block", "none", "number", "tensor"}:
            raise ValueError(f"scale_a is {sides[0][0]}-wise but scale_b is {sides[1][0]}-wise: "
                             f"block scales go with block scales (or a per-tensor scale) on "
                             f"the other side; scale_a ({m}, {kb}), scale_b ({nb}, {kb})")
        mode = "block"
    elif "row" in kinds:
        mode = "row"
    elif "tensor" in kinds:
        mode = "tensor"
    else:
        mode = ""           # numbers or nothing: folded into alpha
    if fast_accum and mode == "block":
        raise ValueError("fast_accum=True: block scales apply per K block, so their "
                         "accumulation is always promoted; leave fast_accum False")
    if config is not None:
        _check_config(config)
        if not isinstance(config, WgmmaConfig):
            raise TypeError(f"config: fp8 runs the wgmma GEMM (a WgmmaConfig); got {config!r}")
    return Fp8Checked(in_kind, out_kind, m, n, k, mode, sides)


def _factor(scale_a, scale_b):
    """The product of the scales given as numbers (folded into alpha)."""
    f = 1.0
    for s in (scale_a, scale_b):
        if isinstance(s, numbers.Real):
            f *= float(s)
    return f


def _scale_key(scale):
    if scale is None or isinstance(scale, numbers.Real):
        return "number"             # (its value is read per call: _factor)
    return operand_key(scale)


def choose_config(m, n, k, mode, promote=True):
    """The config an fp8 ``matmul()`` runs on the current device."""
    return choose.choose_fp8_config(m, n, k, sm_count(), mode, promote)


#: fp8 launchers of the last operand sets, keyed by the context, every operand's and scale's
#: key, ``in_dtype``, config, whether beta is 0 and ``fast_accum`` (as matmul()'s:
#: docs/host.md).
_launchers = BoundedCache(64)
#: ((M, N), out dtype name) of inputs (keys of a, b and the scales, in_dtype, config, out_dtype,
#: fast_accum) whose checks passed without ``out``: a repeated call allocates at once.
_checked_inputs = BoundedCache(256)


def matmul_fp8(a, b, out, alpha, beta, out_dtype, config, stream, scale_a, scale_b, in_dtype,
               fast_accum=False):
    """``matmul()``'s fp8 path (the module docstring); the caller entered ``a``'s device."""
    handle = call_stream(stream, a)
    ctx = context_id_or_none()
    inputs = (operand_key(a), operand_key(b), _scale_key(scale_a), _scale_key(scale_b))
    known = None not in inputs and (config is None or isinstance(config, WgmmaConfig))
    if out is None:
        # (the checks before the allocation; inputs that passed them once skip them)
        checked_key = (inputs, str(in_dtype), config, str(out_dtype), bool(fast_accum))
        checked = _checked_inputs.get(checked_key) if known else None
        if checked is None:
            c = check_fp8(a, b, None, scale_a, scale_b, in_dtype, config, fast_accum)
            if beta != 0:
                raise ValueError("beta must be 0 when out is None (there is no C to scale)")
            if out_dtype is None:
                kind = "bf16" if hasattr(a, "new_empty") else "f32"
            else:
                kind = _OUT_KINDS.get(_dtype_name(out_dtype))
                if kind is None:
                    raise TypeError(f"out_dtype must be bfloat16, float16 or float32 for fp8 "
                                    f"inputs; got {out_dtype}")
            require_hopper("matmul")
            checked = ((c.m, c.n), _DTYPE_NAMES[kind])
            if known:
                _checked_inputs.put(checked_key, checked)
        elif beta != 0:
            raise ValueError("beta must be 0 when out is None (there is no C to scale)")
        out = allocate_like(a, checked[0], checked[1], stream=handle, ctx_id=ctx)
    elif out_dtype is not None:
        raise ValueError("give out or out_dtype, not both")
    ko = operand_key(out)
    key = None
    if ctx is not None and known and ko is not None:
        key = (ctx, inputs, ko, str(in_dtype), config, beta != 0, bool(fast_accum))
    run = None if key is None else _launchers.get(key)
    if run is None:
        c = check_fp8(a, b, out, scale_a, scale_b, in_dtype, config, fast_accum)
        require_hopper("matmul")
        refuse_capture(handle)         # (a new layout uploads tensor maps)
        run = _bind(a, b, out, c, config, beta, ctx, fast_accum)
        if key is not None:
            _launchers.put(key, run)
    run(alpha * _factor(scale_a, scale_b), beta, handle)
    return out


def _staged(view, m, kb):
    """``(buffer, stage)``: a (kb, m') buffer, m' the next multiple of 4, and ``stage(stream)``,
    which copies ``view``'s (m, kb) block scales into it K block by row."""
    from ._frontend import cuda

    rows = -(-m // 4) * 4
    buffer = cuda.device_array((kb, rows), np.float32)
    return buffer, stage_scales().prepare(*stage_grid(rows, kb), view, buffer, m)


def _bulk_rows(view, shape, transposed):
    """``(view, stage)``: block scales as the kernel's producer bulk-copies them, a ``shape``
    (rows, cols) float32 matrix of rows in whole 16 bytes from 16-byte aligned addresses (A's
    (kb, M): K block by row; B's (nb, kb): N block by row), given ``view``, the same scales with
    any strides, as they are or (``transposed``) as their transpose (cols, rows). In place
    where ``view`` already has that layout (``stage`` None), else a buffer and
    ``stage(stream)``, which copies the scales into it (:func:`_staged`)."""
    rows, cols = shape
    ptr = view.__cuda_array_interface__["data"][0]
    strides = view.__cuda_array_interface__["strides"]
    srow, scol = strides[::-1] if transposed else strides
    if cols % 4 == 0 and ptr % 16 == 0 and scol == 4 and (rows == 1 or (srow and srow % 16 == 0)):
        return _scale_view(ptr, shape, (srow if rows > 1 else 4 * cols, 4)), None
    return _staged(_scale_view(ptr, (cols, rows), (scol, srow)), cols, rows)


def _bind(a, b, out, c, config, beta, ctx, fast_accum):
    promote = not fast_accum
    cfg = config or choose_config(c.m, c.n, c.k, c.mode, promote)
    va, vb, vo = numba_view(a, "a"), numba_view(b, "b"), numba_view(out, "out")
    kb, nb = -(-c.k // BLOCK_K), -(-c.n // BLOCK_K)
    shapes = {"": None, "tensor": ((1, 1), (1, 1)), "row": ((c.m, 1), (c.n, 1)),
              "block": ((c.m, kb), (nb, kb))}[c.mode]
    scales = () if shapes is None else tuple(
        _view(kind, op, shape, ctx) for (kind, op), shape in zip(c.sides, shapes))
    plan = MatmulPlan(va, _transposed(vb), vo, True, True, c.in_kind, c.out_kind, c.m, c.n, c.k,
                      cfg)
    stages = ()
    if c.mode == "block" and c.m and c.n and c.k:
        (rows, stage_a), (cols, stage_b) = (_bulk_rows(scales[0], (kb, c.m), True),
                                            _bulk_rows(scales[1], (nb, kb), False))
        scales = (rows, cols)
        stages = tuple(stage for stage in (stage_a, stage_b) if stage is not None)
    plan.scale, plan.scales, plan.promote = c.mode, scales, promote
    run = LaunchPlan(plan, beta != 0).bind()
    if not stages:
        return run

    def staged_run(alpha, beta, stream, buffers=scales):     # (buffers: kept while bound)
        for stage in stages:
            stage(stream)
        run(alpha, beta, stream)
    return staged_run
