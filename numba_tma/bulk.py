"""Non-tensor bulk copies, reductions and L2 prefetches through the TMA unit (sm_90).

PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk", "cp.reduce.async.bulk",
"cp.async.bulk.prefetch".

A bulk operation moves ``nbytes`` contiguous bytes between a global array and a shared array
with no tensor map: one thread issues it and the TMA unit does the copying. The global operand is
a numba device array passed to the kernel, or a slice of one (its first element is the address);
the shared operand is a ``cuda.shared.array`` (its first element). numba cannot tell a global
array from a shared one at compile time: passing them the wrong way round is undefined.

Rules (PTX ISA; a violation is undefined behaviour, on the H100 typically a TMA fault that kills
the context with ``CUDA_ERROR_ILLEGAL_INSTRUCTION``):
- ``nbytes`` is a positive multiple of 16 (``BULK_ALIGN``) and fits in 32 bits; a compile-time
  constant ``nbytes`` that is not is refused when the kernel compiles (a ``ValueError``: numba
  would retry a ``TypingError`` with the constant as a plain int64 and accept it);
- both addresses are 16-byte aligned: a global slice must start at an element whose byte offset
  is a multiple of 16 (``a[4:]`` of a float32 array, not ``a[1:]``), a shared array needs
  ``alignment=16`` or more (numba's default for shared arrays is 16 on sm_90, TMA tiles use 128);
- ``[addr, addr + nbytes)`` stays inside each array (nothing checks it on the device);
- a global -> shared copy completes on an mbarrier whose phase expects exactly ``nbytes``
  (``mbarrier.arrive_expect_tx``; ``load`` does both), at most 2**20 - 1 bytes per phase;
- shared -> global copies and reductions complete through the issuing thread's bulk async-group:
  ``tma.commit_group()`` then ``tma.wait_group_read(0)`` before the shared source is rewritten
  (or the block exits), ``tma.wait_group(0)`` before this thread relies on the global result.
  Threads that wrote the shared source run ``fence.proxy_async_shared()`` and the block
  synchronises before the issuing thread starts the copy.

The host helper :func:`check_operand` validates a device array and a byte count against these
rules before a launch::

    @cuda.jit
    def roundtrip(src, dst):
        buf = cuda.shared.array(1024, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            bulk.load(buf, src[256:], 4096, bar)          # arrive_expect_tx(4096) + copy
        mbarrier.wait(bar, 0)
        ...                                              # every thread may read buf
        fence.proxy_async_shared(); cuda.syncthreads()   # after ordinary writes to buf
        if cuda.threadIdx.x == 0:
            bulk.copy_shared_to_global(dst, buf, 4096)
            bulk.reduce(dst[1024:], buf, 4096, "add")    # dst[1024 + i] += buf[i]
            tma.commit_group()
            tma.wait_group_read(0)                       # buf may be rewritten after this
"""

import numpy as np

from ._frontend import errors, overload, types
from . import mbarrier
from ._bridge import address_of, declare, host_call, require_array, require_int
from .tma import commit_group, wait_group, wait_group_read

__all__ = ["copy_global_to_shared", "copy_shared_to_global", "reduce", "prefetch", "load",
           "check_operand", "reduce_ptx_type", "reduce_reference", "commit_group", "wait_group",
           "wait_group_read",
           "BULK_ALIGN", "MAX_BULK_BYTES", "MAX_TX_BYTES", "REDUCE_OPS", "REDUCE_TYPES"]

#: Bulk sizes and addresses are multiples of this many bytes.
BULK_ALIGN = 16
#: The size operand is a 32-bit register.
MAX_BULK_BYTES = 2**32 - 16
#: An mbarrier phase's transaction count is 20 bits: the most bytes one phase can expect.
MAX_TX_BYTES = 2**20 - 1

#: The PTX element types each reduction takes with a .global destination (the ISA's table in
#: "cp.reduce.async.bulk"). f16/bf16 add is emitted as add.noftz (the only form the ISA has).
REDUCE_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
    "min": ("u32", "s32", "u64", "s64", "f16", "bf16"),
    "max": ("u32", "s32", "u64", "s64", "f16", "bf16"),
    "inc": ("u32",),
    "dec": ("u32",),
    "and": ("b32", "b64"),
    "or": ("b32", "b64"),
    "xor": ("b32", "b64"),
}
REDUCE_OPS = tuple(REDUCE_TYPES)
_TYPE_BYTES = {"u32": 4, "s32": 4, "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8,
               "f16": 2, "bf16": 2}

_vp, _u32 = types.voidptr, types.uint32
_g2s = declare("bulk", "numba_tma_cp_async_bulk_shared_cluster_global_mbarrier",
               types.void(_vp, _vp, _u32, _vp))
_s2g = declare("bulk", "numba_tma_cp_async_bulk_global_shared_cta_bulk_group",
               types.void(_vp, _vp, _u32))
_prefetch = declare("bulk", "numba_tma_cp_async_bulk_prefetch_L2_global", types.void(_vp, _u32))
_reduce = {(op, ty): declare("bulk", f"numba_tma_cp_reduce_async_bulk_global_shared_cta_{op}_{ty}",
                             types.void(_vp, _vp, _u32))
           for op, tys in REDUCE_TYPES.items() for ty in tys}

_BARRIER_DTYPES = (types.uint64, types.int64)


def reduce_ptx_type(op, dtype, ptx_type=None):
    """The PTX type token ``bulk.reduce`` uses for ``op`` on elements of ``dtype``.

    Pure Python (also used at typing time). ``dtype`` is a numpy dtype (or name); ``ptx_type``
    overrides the deduction (``"bf16"`` for bfloat16 bits in a uint16/int16 array, ``"f16"`` for
    float16 bits) and must have the dtype's size. Raises ValueError naming the rule.

    Deduction: float16/32/64 -> f16/f32/f64; int32/uint32 -> s32/u32 (b32 for and/or/xor);
    int64/uint64 -> s64/u64 (b64 for and/or/xor), except int64 add, which uses .u64 (the
    two's-complement sum is the same; the ISA has no add.s64).
    """
    if op not in REDUCE_TYPES:
        raise ValueError(f"op = {op!r} is not a bulk reduction; choose from "
                         f"{', '.join(REDUCE_OPS)}")
    dt = np.dtype(dtype)
    allowed = REDUCE_TYPES[op]
    if ptx_type is not None:
        if ptx_type not in _TYPE_BYTES:
            raise ValueError(f"ptx_type = {ptx_type!r} is not a reduction type; choose from "
                             f"{', '.join(_TYPE_BYTES)}")
        if _TYPE_BYTES[ptx_type] != dt.itemsize:
            raise ValueError(f"ptx_type = {ptx_type!r} is {_TYPE_BYTES[ptx_type]} bytes but the "
                             f"arrays' dtype {dt.name} is {dt.itemsize} bytes")
        ty = ptx_type
    elif dt.kind == "f":
        ty = {2: "f16", 4: "f32", 8: "f64"}.get(dt.itemsize)
    elif dt.kind in "iu" and dt.itemsize in (4, 8):
        bits = dt.itemsize * 8
        if op in ("and", "or", "xor"):
            ty = f"b{bits}"
        elif op == "add" and dt.kind == "i" and bits == 64:
            ty = "u64"
        else:
            ty = f"{'s' if dt.kind == 'i' else 'u'}{bits}"
    elif dt.kind in "iu" and dt.itemsize == 2:
        raise ValueError(f"a {dt.name} array is ambiguous: pass ptx_type='bf16' or 'f16' for "
                         f"bfloat16/float16 bits (the ISA has no 16-bit integer reductions)")
    else:
        ty = None
    if ty not in allowed:
        raise ValueError(f"op = {op!r} takes {', '.join(allowed)} elements, not {dt.name}"
                         + (f" (as .{ty})" if ty else ""))
    return ty


def copy_global_to_shared(dst, src, nbytes, bar):
    """Copy ``nbytes`` bytes from global ``src`` to shared ``dst``; completes on ``bar``.

    PTX: ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], nbytes,
    [bar];`` (sm_90). SASS: ``UBLKCP.S.G``.
    Issued by: one thread. ``bar``'s current phase must expect the bytes (``arrive_expect_tx``
    or ``expect_tx`` with ``nbytes``, or ``load``), or it completes early or never; readers wait
    on ``bar``. ``nbytes``: a positive multiple of 16, at most ``MAX_TX_BYTES`` per phase; both
    addresses 16-byte aligned (module docstring).
    """
    host_call("bulk.copy_global_to_shared")


def copy_shared_to_global(dst, src, nbytes):
    """Copy ``nbytes`` bytes from shared ``src`` to global ``dst`` (bulk async-group).

    PTX: ``cp.async.bulk.global.shared::cta.bulk_group [dst], [src], nbytes;`` (sm_90).
    SASS: ``UBLKCP.G.S``.
    Issued by: one thread, after the threads that wrote ``src`` fenced
    (``fence.proxy_async_shared``) and the block synchronised. Then ``tma.commit_group`` and
    ``tma.wait_group_read(0)`` before ``src`` is rewritten; ``tma.wait_group(0)`` before this
    thread needs the global writes. ``nbytes``: a positive multiple of 16; addresses 16-byte
    aligned.
    """
    host_call("bulk.copy_shared_to_global")


def reduce(dst, src, nbytes, op="add", ptx_type=None):
    """Element-wise ``dst[i] = dst[i] <op> src[i]`` from shared ``src`` into global ``dst``.

    PTX: ``cp.reduce.async.bulk.global.shared::cta.bulk_group.<op>.<type> [dst], [src], nbytes;``
    (sm_90; f16/bf16 add as ``.add.noftz.<type>``). SASS: ``UBLKRED.G.S.<OP>...``.
    ``op`` is a compile-time string: add, min, max, inc, dec, and, or, xor. The PTX type comes
    from ``dst``'s dtype (``reduce_ptx_type`` gives the table; ``src`` must have the same dtype),
    or from the compile-time string ``ptx_type`` ("bf16" for bfloat16 bits in a 16-bit integer
    array). The ISA's combinations: add u32/s32/u64/f32/f64/f16/bf16 (int64 add runs as .u64);
    min/max u32/s32/u64/s64/f16/bf16 (no float32/float64 min or max); inc/dec u32 only
    (``inc``: ``old >= s ? 0 : old + 1``; ``dec``: ``old == 0 or old > s ? s : old - 1``);
    and/or/xor 32- or 64-bit integers. A combination outside the table is a TypingError.
    Each element's update is an individually relaxed, gpu-scope atomic: many blocks may reduce
    into the same ``dst`` at once. f32 add flushes subnormal inputs and results to zero; f16/bf16
    add keeps them. Float add rounds each element once per reduction (order between blocks is
    not fixed, so float sums are not bitwise reproducible).
    Issued by: one thread, with the same fence / group / alignment rules as
    ``copy_shared_to_global``.
    """
    host_call("bulk.reduce")


def prefetch(src, nbytes):
    """Hint: start bringing ``nbytes`` bytes of global ``src`` into L2.

    PTX: ``cp.async.bulk.prefetch.L2.global [src], nbytes;`` (sm_90). SASS: ``UBLKPF.L2``.
    Issued by: any thread; completes on nothing and changes no data. ``nbytes``: a positive
    multiple of 16; ``src`` 16-byte aligned (undefined otherwise, even for a hint).
    """
    host_call("bulk.prefetch")


def load(dst, src, nbytes, bar):
    """Composite: ``mbarrier.arrive_expect_tx(bar, nbytes)`` then ``copy_global_to_shared``.

    Issued by: one thread, which is the phase's arriving thread (``init(bar, 1)`` when it is the
    only one). Every reader then waits on ``bar``.
    """
    host_call("bulk.load")


def reduce_reference(op, old, src, ptx_type=None):
    """numpy model of one reduction ``old <op> src`` (what ``reduce`` leaves in ``dst``; the
    same element-wise rule as ``tma.reduce`` for the map's element type). Pure numpy.

    ``old``/``src``: same-shape arrays of one dtype; ``ptx_type`` as for ``reduce`` ("bf16" for
    bfloat16 bits in uint16 arrays). Integer add wraps; float add rounds once to nearest even
    (f32 with subnormal inputs and results flushed to zero, as the ISA says of the current
    implementation); bf16 values are computed in float32 and rounded; inc: ``old >= src ? 0 :
    old + 1``; dec: ``old == 0 or old > src ? src : old - 1``.
    """
    from .warp import bf16_bits, bf16_to_float32

    old, src = np.asarray(old), np.asarray(src)
    if old.dtype != src.dtype or old.shape != src.shape:
        raise ValueError(f"old and src must have one dtype and shape: {old.dtype}{old.shape} vs "
                         f"{src.dtype}{src.shape}")
    ty = reduce_ptx_type(op, old.dtype, ptx_type)
    if ty in ("bf16", "f16") and old.dtype.kind in "iu":
        if ty == "f16":
            return reduce_reference(op, old.view(np.float16), src.view(np.float16)).view(old.dtype)
        a, b = bf16_to_float32(old.view(np.uint16)), bf16_to_float32(src.view(np.uint16))
        if op == "add":
            return bf16_bits(a + b).view(old.dtype)
        pick_src = (b < a) if op == "min" else (b > a)
        return np.where(pick_src, src, old)
    if op == "add":
        if ty == "f32":
            tiny = np.finfo(np.float32).tiny

            def flush(v):
                return np.where(np.abs(v) < tiny, np.copysign(np.float32(0), v), v)

            return flush(flush(old) + flush(src)).astype(old.dtype)
        with np.errstate(over="ignore"):
            return (old + src).astype(old.dtype)          # integers wrap
    if op == "min":
        return np.minimum(old, src)
    if op == "max":
        return np.maximum(old, src)
    if op == "inc":
        return np.where(old >= src, 0, old + np.uint32(1)).astype(old.dtype)
    if op == "dec":
        return np.where((old == 0) | (old > src), src, old - np.uint32(1)).astype(old.dtype)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, src)


# --------------------------------------------------------------------------------------------
# typing


def _check_nbytes(fname, nbytes, limit=MAX_BULK_BYTES):
    require_int(fname, "nbytes", nbytes)
    if isinstance(nbytes, types.IntegerLiteral):
        n = nbytes.literal_value
        if n <= 0 or n % BULK_ALIGN or n > limit:
            # Not a TypingError: numba would retry the call with nbytes as a plain int64.
            raise ValueError(f"{fname}: nbytes = {n} must be a positive multiple of {BULK_ALIGN} "
                             f"(at most {limit})")


def _literal_str(fname, argname, ty, choices):
    if isinstance(ty, types.StringLiteral):
        value = ty.literal_value
    elif isinstance(ty, types.Omitted):
        value = ty.value
    elif isinstance(ty, str):                   # the default, when the call leaves it out
        value = ty
    elif ty is None or isinstance(ty, types.NoneType):
        value = None
    else:
        raise errors.TypingError(f"{fname}: {argname} must be a compile-time constant string "
                                 f"(it is a PTX token), got {ty}")
    if value is not None and value not in choices:
        raise errors.TypingError(f"{fname}: {argname} = {value!r} is not one of "
                                 f"{', '.join(choices)}")
    return value


@overload(copy_global_to_shared, prefer_literal=True)
def _ov_copy_global_to_shared(dst, src, nbytes, bar):
    fname = "bulk.copy_global_to_shared"
    require_array(fname, "dst", dst)
    require_array(fname, "src", src)
    require_array(fname, "bar", bar, dtypes=_BARRIER_DTYPES)
    _check_nbytes(fname, nbytes, MAX_TX_BYTES)
    return lambda dst, src, nbytes, bar: _g2s(address_of(dst), address_of(src), nbytes,
                                              address_of(bar))


@overload(copy_shared_to_global, prefer_literal=True)
def _ov_copy_shared_to_global(dst, src, nbytes):
    fname = "bulk.copy_shared_to_global"
    require_array(fname, "dst", dst)
    require_array(fname, "src", src)
    _check_nbytes(fname, nbytes)
    return lambda dst, src, nbytes: _s2g(address_of(dst), address_of(src), nbytes)


@overload(reduce, prefer_literal=True)
def _ov_reduce(dst, src, nbytes, op="add", ptx_type=None):
    fname = "bulk.reduce"
    require_array(fname, "dst", dst)
    require_array(fname, "src", src)
    if dst.dtype != src.dtype:
        raise errors.TypingError(f"{fname}: src must have dst's dtype {dst.dtype}, got "
                                 f"{src.dtype}")
    _check_nbytes(fname, nbytes)
    op_value = _literal_str(fname, "op", op, REDUCE_OPS)
    if op_value is None:
        raise errors.TypingError(f"{fname}: op must be one of {', '.join(REDUCE_OPS)}")
    ty_value = _literal_str(fname, "ptx_type", ptx_type, tuple(_TYPE_BYTES))
    try:
        np_dtype = np.dtype(str(dst.dtype))
    except TypeError:
        raise errors.TypingError(f"{fname}: dst has dtype {dst.dtype}, which no bulk reduction "
                                 f"takes") from None
    try:
        ty = reduce_ptx_type(op_value, np_dtype, ty_value)
    except ValueError as exc:
        raise errors.TypingError(f"{fname}: {exc}") from None
    fn = _reduce[op_value, ty]
    return lambda dst, src, nbytes, op="add", ptx_type=None: fn(address_of(dst), address_of(src),
                                                                nbytes)


@overload(prefetch, prefer_literal=True)
def _ov_prefetch(src, nbytes):
    fname = "bulk.prefetch"
    require_array(fname, "src", src)
    _check_nbytes(fname, nbytes)
    return lambda src, nbytes: _prefetch(address_of(src), nbytes)


@overload(load, prefer_literal=True)
def _ov_load(dst, src, nbytes, bar):
    fname = "bulk.load"
    require_array(fname, "dst", dst)
    require_array(fname, "src", src)
    require_array(fname, "bar", bar, dtypes=_BARRIER_DTYPES)
    _check_nbytes(fname, nbytes, MAX_TX_BYTES)

    def impl(dst, src, nbytes, bar):
        mbarrier.arrive_expect_tx(bar, nbytes)
        _g2s(address_of(dst), address_of(src), nbytes, address_of(bar))

    return impl


# --------------------------------------------------------------------------------------------
# host side


def check_operand(array, nbytes, *, offset=0, name="array"):
    """Check that ``nbytes`` bytes from element ``offset`` of a device ``array`` form a legal
    bulk-copy operand; returns the byte address. Raises TypeError/ValueError naming ``name``.

    The rules: a CUDA device array (numba, CuPy, torch); C-contiguous (the bytes copied are
    ``array.reshape(-1)[offset:]``'s); the address of element ``offset`` 16-byte aligned;
    ``nbytes`` a positive multiple of 16 that fits in the array from ``offset`` on.
    """
    from .operands import describe_array, is_c_contiguous

    try:
        shape, strides, itemsize, _, address = describe_array(array)
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size > 1 and not is_c_contiguous(shape, strides, itemsize):
        raise ValueError(f"{name} must be C-contiguous (shape {tuple(shape)}, strides "
                         f"{tuple(strides)} bytes)")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or \
            not 0 <= offset <= size:
        raise ValueError(f"offset = {offset!r} must be an element index in 0..{size} of {name}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
        raise TypeError(f"nbytes must be an integer, got {nbytes!r}")
    nbytes = int(nbytes)
    if nbytes <= 0 or nbytes % BULK_ALIGN:
        raise ValueError(f"nbytes = {nbytes} must be a positive multiple of {BULK_ALIGN}")
    if nbytes > MAX_BULK_BYTES:
        raise ValueError(f"nbytes = {nbytes} exceeds the 32-bit size operand ({MAX_BULK_BYTES})")
    start = address + int(offset) * itemsize
    if start % BULK_ALIGN:
        raise ValueError(f"{name}[{offset}] is at {start:#x}, not {BULK_ALIGN}-byte aligned "
                         f"(element offset * itemsize = {int(offset) * itemsize} bytes from the "
                         f"array's start at {address:#x})")
    available = (size - int(offset)) * itemsize
    if nbytes > available:
        raise ValueError(f"nbytes = {nbytes} runs past the end of {name}: {available} bytes "
                         f"from element {offset}")
    return start
