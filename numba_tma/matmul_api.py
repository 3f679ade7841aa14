"""``matmul(a, b, out=None)``: ``out = alpha * a @ b + beta * out`` on Hopper tensor cores.

``a`` (M, K) and ``b`` (K, N) are float16 or bfloat16 CUDA arrays (numba, CuPy or torch; torch
for bfloat16), each either row-major or column-major contiguous (a transposed view such as
``w.T`` is fine: wgmma reads it through its transpose immediates, the mma.sync rung with
``ldmatrix.trans``). ``out`` (M, N) is row-major float16, bfloat16 or float32; accumulation is
fp32. The kernel is the warp-specialised TMA + ``wgmma`` GEMM of
:mod:`numba_tma.kernels.gemm_wgmma` (a ``WgmmaConfig``); the ``mma.sync`` GEMM of
:mod:`numba_tma.kernels.gemm_tma` stays a rung of the ladder, run when a ``GemmConfig`` is
given. Any M, N, K work (partial tiles are zero-filled on load and clipped on store), but TMA
needs every row pitch to be a multiple of 16 bytes (8 half-precision or 4 float32 elements) and
16-byte-aligned base addresses.
"""

import functools
import math
import numbers
import os
import threading
from typing import NamedTuple

import numpy as np
from numba import cuda, types

from ._arrays import allocate_like, numba_view
from ._calls import BoundedCache, call_stream, operand_key
from ._device import require_hopper
from .launch import context_id, context_id_or_none, is_capturing, stream_handle
from .kernels import gemm_tma, gemm_wgmma
from .tensormap.cache import descriptor_map, retarget
from .operands import check_device, device_to_enter, dtype_name, read_operand

__all__ = ["matmul", "matmul_kernels", "MatmulPlan", "plan_matmul"]

TMA_ALIGN = 16
_IN_KINDS = {"float16": "f16", "torch.float16": "f16", "torch.bfloat16": "bf16"}
_OUT_KINDS = {"float16": "f16", "torch.float16": "f16", "torch.bfloat16": "bf16",
              "float32": "f32", "torch.float32": "f32"}
_DTYPE_NAMES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


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
    from numba.cuda.cudadrv.devicearray import DeviceNDArray   # absent under the simulator

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
        if oo.shape != (m, n):
            raise ValueError(f"out must have shape ({m}, {n}) for a {oa.shape} @ b "
                             f"{ob.shape}; got {oo.shape}")
        o_row, so = _matrix(oo, "out", prefer_row=True)
        if not o_row and m > 1 and n > 1:
            raise ValueError("out must be row-major (C-contiguous); got a column-major array")
    # Rows of A and B in memory (their contiguous dimension) that are not whole 128-byte lines.
    ragged = all(inner * op.itemsize % 128 for op, (_, inner) in ((oa, sa), (ob, sb)))
    if config is not None:
        _family(config)
    if m and n and k:
        _check_tma(oa, sa, "a", "M x K row-major" if a_row else "column-major (stored K x M)")
        _check_tma(ob, sb, "b", "N-contiguous (K x N row-major)" if b_row else
                   "column-major (stored N x K)")
    if oo is not None:
        if m and n:
            _check_tma(oo, so, "out", "row-major")
        lo, hi = _span(oo)
        for name, op in (("a", oa), ("b", ob)):
            vlo, vhi = _span(op)
            if op.size and oo.size and vlo < hi and lo < vhi:
                raise ValueError(f"out overlaps {name}; matmul cannot run in place")
    return _Checked(a_row, b_row, o_row, in_kind, out_kind, m, n, k, ragged, config)


def plan_matmul(a, b, out, config=None):
    """Validate ``a``, ``b``, ``out`` (all required) and return the :class:`MatmulPlan`."""
    c = check_matmul(a, b, out, config)
    require_hopper("matmul")                    # the checks first: the same errors without a GPU
    config = config or choose_config(c.m, c.n, c.k, ragged_rows=c.ragged)
    _family(config)
    va, vb, vo = numba_view(a, "a"), numba_view(b, "b"), numba_view(out, "out")
    sa = va if c.a_row else _transposed(va)
    sb = vb if c.b_row else _transposed(vb)
    so = vo if c.out_row else _transposed(vo)
    # A row-major A is K-major; a row-major B (K x N) is N-major.
    return MatmulPlan(sa, sb, so, c.a_row, not c.b_row, c.in_kind, c.out_kind, c.m, c.n, c.k,
                      config)


def choose_config(m, n, k, ragged_rows=False):
    """The wgmma configuration for an M x N x K problem: persistent 128 x 256 or 256 x 128 tiles,
    in 2-CTA clusters that multicast B, or 128 x 192 tiles, where 128 x 256 tiles give at
    least half the SMs a tile, else the widest of 128 x 128 and 128 x 64 that does, else
    128 x 64, one block per tile (they fit in one wave: see ``_WGMMA_NARROW``).

    Of the large tiles, the one that takes the fewest waves of the SMs (every block waits for
    the last wave: at 4095 x 4104 the 17th column of 256, 8 columns wide, costs a fifth round
    of 2-CTA clusters where 33 columns of 128 take 4), clusters before single CTAs, 128 x 256
    before 256 x 128 on a tie (single CTAs win only where pairs waste SMs: one tile row). The
    clusters take 4 stages with each slot's wgmma group retired before the next
    (``mma_pipe=0``), as the unclustered tiles do. Where 128 x 192 tiles take no more waves
    than that choice, they replace it (``_WGMMA_192``). Where a 128 x 256 or 128 x 192 launch
    takes more than one wave, its blocks store each tile's C under the next tile's first
    wgmmas (``overlap_epilogue``; see ``_OVERLAPPED``). What each choice measured against the
    others: ``docs/gemm.md``, "Why matmul() chooses what it does".

    ``ragged_rows``: neither A's nor B's rows in memory are whole 128-byte lines (K and N not
    multiples of 64, for row-major operands). The narrower tiles then run in CTA pairs along N
    that share A (``cluster_n=2``, see ``_WGMMA_NARROW_PAIRS``)."""
    sms = _sm_count()
    if math.ceil(m / gemm_wgmma.BM) * math.ceil(n / 256) >= sms // 2:
        # (min keeps the first of the fewest waves)
        cfg = min((_WGMMA_CLUSTER, _WGMMA_TALL_CLUSTER, _WGMMA_WIDE, _WGMMA_TALL),
                  key=lambda cfg: waves(m, n, cfg, sms))
        if waves(m, n, _WGMMA_192, sms) <= waves(m, n, cfg, sms):
            cfg = _WGMMA_192            # the same rounds, each with a quarter less per block
        return _OVERLAPPED.get(cfg.key(), cfg) if waves(m, n, cfg, sms) > 1 else cfg
    # (fewer than sms / 2 tiles of 128 x 256: the narrower tiles fit in one wave)
    # (pairs of them are tiles twice as wide, which number under sms / 2 too: one wave)
    bn = 128 if math.ceil(m / gemm_wgmma.BM) * math.ceil(n / 128) >= sms // 2 else 64
    return (_WGMMA_NARROW_PAIRS if ragged_rows else _WGMMA_NARROW)[bn]


def waves(m, n, cfg, sms):
    """Rounds of a persistent ``cfg`` launch over ``sms`` SMs: its units of work (a tile, or a
    cluster's tiles) over the units that run at once (one per SM, or per SM pair)."""
    cm = cfg.cluster_m
    units = math.ceil(math.ceil(m / cfg.bm) / cm) * math.ceil(n / cfg.bn)
    return math.ceil(units / max(1, sms // cm))


#: 128 x 256 tiles take 4 slots with each slot's wgmma group retired before the next
#: (mma_pipe=0; docs/gemm.md compares it with 3 slots and a group in flight).
_WGMMA_WIDE = gemm_wgmma.WgmmaConfig(256, stages=4, mma_pipe=0)
#: The narrower tiles, which choose_config takes only where they fit in one wave: one block per
#: tile (the first rung), since with no next tile the persistent loop and its epilogue staging
#: only cost. The 128 x 64 tile takes one consumer warpgroup for both m64 halves (cuBLAS's
#: structure there); at 128 x 128 one consumer was no faster (docs/gemm.md).
_WGMMA_NARROW = {128: gemm_wgmma.WgmmaConfig(128, stages=4, persistent=False),
                 64: gemm_wgmma.WgmmaConfig(64, stages=8, persistent=False, consumers=1)}
#: ... in CTA pairs along N sharing A, where neither A's nor B's rows are whole 128-byte lines
#: (choose_config's ragged_rows): there a box row spans two L2 lines, and a pair reads each
#: A slice from L2 once; on aligned rows the pairs lose, with one operand ragged they about tie.
#: Both pairs take 4 stages (the single 128 x 64 CTAs take 8). Measurements: docs/gemm.md.
_WGMMA_NARROW_PAIRS = {bn: cfg.replace(cluster_n=2, stages=4, consumers=2)
                       for bn, cfg in _WGMMA_NARROW.items()}
_WGMMA_CLUSTER = gemm_wgmma.WgmmaConfig(256, stages=4, mma_pipe=0, cluster_m=2)
#: 256 x 128 tiles, where they take fewer waves (choose_config); raster groups of 4 tile rows,
#: the 1024 rows of A (2048 in cluster pairs) that 128 x 256 tiles' groups of 8 cover.
_WGMMA_TALL = gemm_wgmma.WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, group_m=4)
_WGMMA_TALL_CLUSTER = gemm_wgmma.WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, group_m=4,
                                             cluster_m=2)
#: 128 x 192 tiles, where they take no more rounds of the SMs than the large tile
#: choose_config picks: each round then computes a quarter less per block. That happens where
#: 128 x 256 tiles leave SMs idle in their last round (1536^3: 96 tiles of 128 x 192 fill one
#: round of 132 SMs where 36 pairs of 128 x 256 left 60 SMs idle). Not clustered: a pair
#: splits B's columns into whole 64-column boxes, and 96 is not one. Where 192 columns take
#: more rounds the large tile stays, whose pairs load fewer bytes per flop (8192^3: 21 rounds
#: against 16).
_WGMMA_192 = gemm_wgmma.WgmmaConfig(192, stages=4, mma_pipe=0)
#: The 128 x 256 and 128 x 192 choices with the epilogue overlapped, where blocks take more
#: than one tile: with one tile each there is no next tile to store under, and the overlap
#: only costs (docs/gemm.md).
_OVERLAPPED = {cfg.key(): cfg.replace(overlap_epilogue=True)
               for cfg in (_WGMMA_CLUSTER, _WGMMA_WIDE, _WGMMA_192)}

#: Every config choose_config can return, by a short name (numba_tma.precompile, the compile
#: bench).
SHIPPED_CONFIGS = {
    "wide": _WGMMA_WIDE, "wide_ov": _OVERLAPPED[_WGMMA_WIDE.key()],
    "cluster": _WGMMA_CLUSTER, "cluster_ov": _OVERLAPPED[_WGMMA_CLUSTER.key()],
    "tall": _WGMMA_TALL, "tall_cluster": _WGMMA_TALL_CLUSTER,
    "n192": _WGMMA_192, "n192_ov": _OVERLAPPED[_WGMMA_192.key()],
    **{f"narrow{bn}": cfg for bn, cfg in _WGMMA_NARROW.items()},
    **{f"pairs{bn}": cfg for bn, cfg in _WGMMA_NARROW_PAIRS.items()},
}
IN_KINDS = tuple(dict.fromkeys(_IN_KINDS.values()))          # ("f16", "bf16")
OUT_KINDS = tuple(dict.fromkeys(_OUT_KINDS.values()))        # ("f16", "bf16", "f32")


def kernel_variants(configs=None, in_kinds=IN_KINDS, out_kinds=OUT_KINDS, layouts=None,
                    betas=(False, True)):
    """``[(config name, variant)]``: the kernels matmul() may launch with ``configs`` (names
    of :data:`SHIPPED_CONFIGS`; all by default), each ``variant`` the
    ``(kernel_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta)`` of :func:`kernel_for`.
    ``layouts``: ``(a_kmajor, b_kmajor)`` pairs, all four by default."""
    names = list(SHIPPED_CONFIGS) if configs is None else list(configs)
    for name in names:
        if name not in SHIPPED_CONFIGS:
            raise ValueError(f"configs: {name!r} is not one of {sorted(SHIPPED_CONFIGS)}")
    layouts = layouts or [(True, False), (True, True), (False, False), (False, True)]
    return [(name, (SHIPPED_CONFIGS[name].kernel_key(), ak, bk, i, o, beta))
            for name in names for ak, bk in layouts for i in in_kinds for o in out_kinds
            for beta in betas]


def kernel_for(variant):
    """The :class:`numba_tma.launch.DirectKernel` of one variant (see :func:`kernel_variants`),
    not loaded: what a launch of it loads, or ``precompile`` builds."""
    return _direct(*variant)[0]


_CONFIG_TYPES = (gemm_wgmma.WgmmaConfig, gemm_tma.GemmConfig)


def _family(cfg):
    """The kernel module of a config: gemm_wgmma for WgmmaConfig, gemm_tma for GemmConfig."""
    if isinstance(cfg, gemm_wgmma.WgmmaConfig):
        return gemm_wgmma
    if isinstance(cfg, gemm_tma.GemmConfig):
        return gemm_tma
    raise TypeError(f"config must be a numba_tma WgmmaConfig or GemmConfig; got {cfg!r}")


_resident = {}


def _resident_blocks(direct, cfg, nbytes, ctx):
    """Blocks of a persistent wgmma config that fit on the device at once: one per SM (the
    kernel takes 384 threads x 168 registers and most of the shared memory), or whole clusters
    as the driver reports (``cuOccupancyMaxActiveClusters``: a GPC's SMs pair up)."""
    key = (cfg.key(), nbytes, ctx)
    if key not in _resident:
        if cfg.cluster_m == 1:
            _resident[key] = _sm_count()
        else:
            clusters = direct.max_active_clusters(cfg.threads, (cfg.cluster_m, 1, 1), nbytes)
            _resident[key] = clusters * cfg.cluster_m
    return _resident[key]


def _sm_count():
    return _sm_count_of(cuda.get_current_device().id)


@functools.cache
def _sm_count_of(device_id):            # per device: a process may use several GPUs
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


#: The GEMM kernels' parameters (both families' SIGNATURE): the A, B and C tensor maps (16
#: uint64 words in global memory each), M, N, K, the tile rows and columns, alpha and beta.
_ARGTYPES = ((types.Array(types.uint64, 1, "C"),) * 3 + (types.int64,) * 5
             + (types.float32,) * 2)
_ALPHA, _BETA = 8, 9            # their argument positions
#: A stream-K kernel's (gemm_wgmma.SIGNATURE_STREAM_K): then its workspace of partial tiles, the
#: blocks' flags, and the split (whole tiles, K slices split).
_ARGTYPES_STREAM_K = _ARGTYPES + (types.Array(types.float32, 1, "C"),
                                  types.Array(types.uint32, 1, "C"), types.int64, types.int64)
_WORKSPACE, _FLAGS = 10, 11


@functools.cache
def _direct(cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta):
    """(DirectKernel, dynamic shared bytes) of one variant; its cubin is cached on disk."""
    from .launch import DirectKernel

    if cfg_key[0] == "wgmma":
        family, cfg = gemm_wgmma, gemm_wgmma.WgmmaConfig(*cfg_key[1:])
    else:
        family, cfg = gemm_tma, gemm_tma.GemmConfig(*cfg_key)
    kernel = family.gemm_kernel(cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta)
    nbytes = family.smem_bytes(cfg, 4 if out_kind == "f32" else 2)
    key = ("matmul", cfg_key, a_kmajor, b_kmajor, in_kind, out_kind, has_beta)
    argtypes = _ARGTYPES_STREAM_K if getattr(cfg, "stream_k", False) else _ARGTYPES
    return DirectKernel(kernel, argtypes, key=key), nbytes


@functools.cache
def _ready(variant, ctx):
    """``_direct(*variant)``, loaded in context ``ctx`` and allowed its shared memory."""
    direct, nbytes = _direct(*variant)
    direct.reserve_dynamic_shared(nbytes)
    return direct, nbytes


_workspaces = {}
_workspaces_lock = threading.Lock()


def _stream_k_workspace(ctx, handle):
    """``(workspace, flags)`` of stream-K launches on stream ``handle`` in context ``ctx``: one
    partial tile (128 x 256 fp32) and one flag per SM, the flags zeroed once (each launch
    lowers every flag it raised). One per stream, since launches on two streams may run at
    once; allocated on the stream's first stream-K launch, which a graph capture cannot hold."""
    key = (ctx, handle)
    got = _workspaces.get(key)
    if got is None:
        with _workspaces_lock:
            got = _workspaces.get(key)
            if got is None:
                if is_capturing(handle):
                    raise RuntimeError(
                        "matmul: a stream-K config needs a workspace for this stream, and "
                        "allocating it cannot happen during CUDA graph capture; call matmul "
                        "with this config once on the capturing stream before capturing, or "
                        "use a config without stream_k")
                blocks = _sm_count()        # a persistent grid's most blocks (no clusters)
                ws = cuda.device_array(gemm_wgmma.workspace_floats(256, blocks),   # widest tile
                                       np.float32)
                flags = cuda.to_device(np.zeros(blocks, np.uint32))
                got = _workspaces[key] = (ws, flags)
    return got


@functools.cache
def _placeholder(ctx):
    # K = 0: nothing is loaded, but the kernel still takes operand maps.
    return cuda.to_device(np.zeros((gemm_tma.WARP_TILE, gemm_tma.BK), np.uint16))


def dependent_launches():
    """Whether matmul() launches its wgmma kernels dependent (programmatic stream
    serialization, :mod:`numba_tma.griddep`): yes unless ``NUMBA_TMA_DEPENDENT_LAUNCH`` is
    ``0`` (or empty), read when a launcher is bound (new buffers or a new layout). What it
    saves back to back: ``docs/gemm.md``."""
    return os.environ.get("NUMBA_TMA_DEPENDENT_LAUNCH", "1") not in ("", "0")


def launch(plan, alpha=1.0, beta=0.0, stream=0):
    """Run the planned GEMM on ``stream`` (asynchronous; anything
    :func:`numba_tma.launch.stream_handle` takes)."""
    _launcher(plan, beta != 0)(alpha, beta, stream_handle(stream))


def _launcher(plan, has_beta):
    """``run(alpha, beta, stream_handle)`` for ``plan``."""
    return _Layout(plan, has_beta).bind()


class _Layout:
    """One planned operand layout (shapes, strides, dtypes, config): kernel, grid, sizes and the
    three tensor maps as first encoded. :meth:`bind` gives the launcher for the planned
    buffers, or for other buffers of the same layout, whose maps are the same encodings moved
    to the new addresses (``cuTensorMapReplaceAddress``) rather than a new plan."""

    def __init__(self, plan, has_beta):
        cfg = plan.config
        self.empty = plan.m == 0 or plan.n == 0
        if self.empty:
            return
        ctx = context_id()
        wgmma_path = _family(cfg) is gemm_wgmma
        # (configs that differ only in the maps' L2 promotion share a kernel)
        kernel_key = cfg.kernel_key() if wgmma_path else cfg.key()
        self.direct, self.nbytes = _ready((kernel_key, plan.a_kmajor, plan.b_kmajor,
                                           plan.in_kind, plan.out_kind, has_beta), ctx)
        w = gemm_tma.WARP_TILE              # 64: one 128B-swizzled row of 16-bit elements
        if plan.k:
            # the mma.sync rung's maps stay as they were measured, without L2 promotion
            promote = cfg.l2_promotion if wgmma_path else 0
            # In a cluster along N each CTA loads (and multicasts) half of the A slice.
            cn = getattr(cfg, "cluster_n", 1)
            a_map = descriptor_map(plan.a, (cfg.bm // cn, w) if plan.a_kmajor else (w, w), 128,
                                   promote)
            # In a cluster each CTA loads (and multicasts) 1/cluster_m of the B slice.
            b_map = descriptor_map(plan.b, (cfg.bn // cfg.cluster_m, w) if plan.b_kmajor
                                   else (w, w), 128, promote)
        else:
            a_map = b_map = descriptor_map(_placeholder(ctx), (w, w), 128)
        if wgmma_path:
            c_map = descriptor_map(plan.out, gemm_wgmma.c_box(plan.out_kind), 128)
        else:
            c_map = descriptor_map(plan.out, (w, w) if plan.out_kind != "f32" else (w, w // 2),
                                   128)
        self.maps = (a_map, b_map, c_map)
        self.moves = (bool(plan.k), bool(plan.k), True)     # the K = 0 placeholder stays
        self.spans = tuple(v.size * v.dtype.itemsize for v in (plan.a, plan.b, plan.out))
        self.sizes = (plan.m, plan.n, plan.k, math.ceil(plan.m / cfg.bm),
                      math.ceil(plan.n / cfg.bn))
        if wgmma_path:
            resident = (_resident_blocks(self.direct, cfg, self.nbytes, ctx)
                        if cfg.persistent else None)
            grid = gemm_wgmma.grid_size(plan.m, plan.n, cfg, resident)
        else:
            grid = gemm_tma.grid_size(plan.m, plan.n, cfg)
        self.grid, self.block = (grid, 1, 1), (cfg.threads, 1, 1)
        size = cfg.cluster_m * getattr(cfg, "cluster_n", 1)
        self.cluster = None if size == 1 else (size, 1, 1)
        self.ctx, self.bn = ctx, cfg.bn
        # The wgmma kernels wait for the kernel before them in the stream (griddep.wait) only
        # once their barriers are set up, and let the next launch in early: launched
        # dependent (dependent_launches()), back-to-back GEMMs overlap one's start with the
        # other's end.
        self.wgmma = wgmma_path
        self.stream_k = None
        if wgmma_path and cfg.stream_k:
            tiles = self.sizes[3] * self.sizes[4]
            # (dp_units, sk_iters); no workspace is touched where nothing is split
            self.stream_k = gemm_wgmma.stream_k_split(tiles, grid, math.ceil(plan.k / 64))

    def overlaps(self, a_ptr, b_ptr, out_ptr):
        """Whether out at ``out_ptr`` would overlap a or b (then the full check reports it)."""
        if self.empty:
            return False
        sa, sb, so = self.spans
        return any(ptr < out_ptr + so and out_ptr < ptr + span and span and so
                   for ptr, span in ((a_ptr, sa), (b_ptr, sb)))

    def bind(self, *addresses):
        """``run(alpha, beta, stream_handle)`` on the planned buffers, or on the buffers at
        ``addresses`` (a, b, out). Launched from the maps' device copies with the words packed
        once (launch.DirectKernel.prepare), not through numba's per-call argument typing."""
        if self.empty:
            return lambda alpha, beta, stream: None
        maps = []
        for i, tmap in enumerate(self.maps):
            if addresses and self.moves[i] and addresses[i] != tmap.address:
                maps.append(retarget(tmap.encoded, addresses[i]))
            else:
                maps.append(tmap.device_array)
        words = tuple((m.__cuda_array_interface__["data"][0], 16) for m in maps)
        split = ()
        if self.stream_k is not None:       # the workspace's addresses are set per stream
            split = ((0, gemm_wgmma.workspace_floats(self.bn, self.grid[0])),
                     (0, self.grid[0]), *self.stream_k)
        prepared = self.direct.prepare(self.grid, self.block, *words, *self.sizes, 1.0, 0.0,
                                       *split, shared_mem=self.nbytes, cluster=self.cluster,
                                       dependent=self.wgmma and dependent_launches())
        lock, set_arg, set_pointer = prepared.lock, prepared.set, prepared.set_pointer
        last = [1.0, 0.0, None]                    # alpha, beta and the stream as packed
        workspace = self.stream_k is not None and self.stream_k[1] > 0
        ctx = self.ctx

        def run(alpha, beta, stream, maps=maps):   # maps held: the kernel reads these copies
            with lock:
                if alpha != last[0] or beta != last[1]:
                    set_arg(_ALPHA, alpha)
                    set_arg(_BETA, beta)
                    last[:2] = alpha, beta
                if workspace and stream != last[2]:
                    ws, flags = _stream_k_workspace(ctx, stream)
                    set_pointer(_WORKSPACE, ws.__cuda_array_interface__["data"][0])
                    set_pointer(_FLAGS, flags.__cuda_array_interface__["data"][0])
                    last[2] = stream
                prepared(stream)
        return run


#: matmul() remembers the launchers of its last operand sets, keyed by the CUDA context and
#: everything its checks looked at (addresses, shapes, strides, dtypes, devices), so a repeated
#: call skips validation and planning and pays only the keys, the lookup and the driver's launch
#: (benches/results/host-h100.json).
LAUNCHER_CACHE_SIZE = 64
_launchers = BoundedCache(LAUNCHER_CACHE_SIZE)
#: ... and the planned layouts, keyed by the context, the operands' keys without their
#: addresses, each address modulo 16 (TMA's alignment), config and beta: new buffers of a known
#: layout get their maps moved, not a new plan.
LAYOUT_CACHE_SIZE = 64
_layouts = BoundedCache(LAYOUT_CACHE_SIZE)


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, out_dtype=None, config=None, stream=None):
    """``out = alpha * (a @ b) + beta * out`` with fp32 accumulation; returns ``out``.

    ``a`` (M, K), ``b`` (K, N): float16 or bfloat16 (torch), row- or column-major. ``out`` (M, N)
    row-major float16/bfloat16/float32; allocated (like ``a``, dtype ``out_dtype`` or ``a``'s) when
    None, in which case ``beta`` must be 0 (a numba array takes a dropped output's recycled
    block, or one from CUDA's stream-ordered pool, in stream order:
    ``_arrays.stream_ordered_array``;
    ``numba_tma.release_outputs()`` frees the recycled blocks).
    ``config`` forces a kernel: a :class:`~numba_tma.kernels.gemm_wgmma.WgmmaConfig` (the
    wgmma GEMM, chosen per shape when None) or a
    :class:`~numba_tma.kernels.gemm_tma.GemmConfig` (the mma.sync rung). Needs an sm_90 GPU.

    Streams: runs asynchronously on ``stream`` (a ``torch.cuda.Stream``, CuPy or numba stream,
    cuda.core stream or raw handle); without one, on torch's current stream for torch tensors
    (so ``with torch.cuda.stream(s):`` orders it like a torch op), CuPy's current stream for
    CuPy arrays, else the default stream.

    Devices: the call runs on the GPU ``a`` lives on (whatever numba's, torch's or CuPy's current
    device), and ``out`` is allocated there; ``b`` and ``out`` on another device are a
    ValueError. Argument errors come before anything touches the GPU, so they read the same on
    a machine without one; there :class:`numba_tma.NoGPUError` follows them.

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
    device = device_to_enter(a)
    if device is not None:
        with cuda.gpus[device]:         # the operands decide where the call runs, as in torch
            return _matmul(a, b, out, alpha, beta, out_dtype, config, stream)
    return _matmul(a, b, out, alpha, beta, out_dtype, config, stream)


#: (a's key, b's key, config, out dtype) of operands whose checks passed without ``out``.
_checked_inputs = BoundedCache(256)


def _matmul(a, b, out, alpha, beta, out_dtype, config, stream):
    handle = call_stream(stream, a)
    ctx = None
    known_config = config is None or isinstance(config, _CONFIG_TYPES)   # else: reported below
    cfg_key = config.key() if config is not None and known_config else None
    ka, kb = operand_key(a), operand_key(b)
    if out is None and out_dtype is None and beta == 0 and _torch_like(a, b):
        out = a.new_empty((a.shape[0], b.shape[1]))     # a's dtype; checked with a's below
    if out is None:
        if beta != 0:
            raise ValueError("beta must be 0 when out is None (there is no C to scale)")
        in_kind = _kind(a, "a", _IN_KINDS)
        kind = in_kind if out_dtype is None else _OUT_KINDS.get(_dtype_name(out_dtype))
        if kind is None:
            raise TypeError(f"out_dtype must be float16, bfloat16 or float32; got {out_dtype}")
        # The checks before the allocation: a bad a or b gets its own error, on any machine.
        inputs = (ka, kb, cfg_key, kind)
        if None in inputs[:2] or not known_config or _checked_inputs.get(inputs) is None:
            check_matmul(a, b, None, config)
            require_hopper("matmul")
            if None not in inputs[:2] and known_config:
                _checked_inputs.put(inputs, True)
        ctx = context_id_or_none()
        out = allocate_like(a, _out_shape(a, b), _DTYPE_NAMES[kind], stream=handle, ctx_id=ctx)
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
        layout_key = (ctx, ka[1:], kb[1:], ko[1:], ka[0] % TMA_ALIGN, kb[0] % TMA_ALIGN,
                      ko[0] % TMA_ALIGN, cfg_key, beta != 0)
    layout = None if layout_key is None else _layouts.get(layout_key)
    if layout is not None and not layout.overlaps(ka[0], kb[0], ko[0]):
        _refuse_capture(handle)
        run = layout.bind(ka[0], kb[0], ko[0])
    else:
        plan = plan_matmul(a, b, out, config)       # every check, then the GPU's
        _refuse_capture(handle)
        layout = _Layout(plan, beta != 0)
        run = layout.bind()
        if layout_key is not None:
            _layouts.put(layout_key, layout)
    if key is not None:
        _launchers.put(key, run)
    run(alpha, beta, handle)
    return out


def _refuse_capture(handle):
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
    :mod:`numba_tma.kernels`: the wgmma GEMM's ``WgmmaConfig`` rungs, one block per tile, the
    persistent kernel ``matmul()`` runs, its 2-CTA cluster form, its stream-K form, its
    256 x 128 tiles and its ping-pong form, and the ``mma.sync`` ``GemmConfig`` rung; each
    validates like ``matmul()``) or ``"ladder"`` (in
    :mod:`numba_tma.ladders`: seed 004's SIMT fp32 GEMM, float32 operands only, and seed 002's
    one-warp rungs, 16 x 16 float16 operands only; each checks its own operands); its
    ``module`` names the module the kernel lives in.
    """
    from .ladders import simt_gemm, warp_gemm

    def forced(cfg):
        def launch(a, b, out=None, stream=None):
            return matmul(a, b, out, config=cfg, stream=stream)

        launch.__doc__ = f"``matmul(a, b, out, config={cfg!r})``: {_family(cfg).__doc__}"
        return launch, _family(cfg).__name__

    def seed(fn):
        def launch(a, b, out=None, stream=None):
            return fn(a, b, out, stream=stream or 0)

        launch.__doc__ = fn.__doc__
        return launch, fn.__module__

    table = {
        "wgmma_tile_per_block": forced(gemm_wgmma.WgmmaConfig(persistent=False)),
        "wgmma_persistent": forced(gemm_wgmma.WgmmaConfig()),
        "wgmma_persistent_c2": forced(gemm_wgmma.WgmmaConfig(cluster_m=2)),
        "wgmma_persistent_sk": forced(gemm_wgmma.WgmmaConfig(stream_k=True)),
        "wgmma_persistent_m256": forced(_WGMMA_TALL),
        "wgmma_pingpong": forced(gemm_wgmma.WgmmaConfig(128, stages=6, pingpong=True)),
        "mma_sync": forced(gemm_tma.GemmConfig()),
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
