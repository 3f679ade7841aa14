"""The launch a GEMM config implies: its kernel (from the disk cache or built), grid, cluster,
shared memory and tensor maps, and the launcher that binds them to buffers.

:class:`LaunchPlan` is built from a checked operand plan (``matmul_api.MatmulPlan``: numba
storage views, layouts, kinds, sizes, config). :meth:`LaunchPlan.bind` gives
``run(alpha, beta, stream_handle)`` on the planned buffers, or on other buffers of the same
layout, whose maps are the same encodings moved to the new addresses
(``cuTensorMapReplaceAddress``) rather than a new plan.
"""

import functools
import math
import os

import numpy as np

from ..._frontend import cuda, types
from ...launch import DirectKernel, context_id
from ...tensormap.cache import descriptor_map, retarget
from .choose import SHIPPED_CONFIGS
from .config import SLAB_ROWS, KernelSpec, smem_bytes
from .epilogue import box_columns
from .mainloop import slice_k
from .mma_sync import WARP_TILE, GemmConfig
from .mma_sync import smem_bytes as mma_sync_smem
from .ring import BK
from .scheduler import grid_size, tile_counts
from .user_epilogue import stable

__all__ = ["LaunchPlan", "kernel_variants", "kernel_for", "sm_count", "dependent_launches",
           "output_map", "IN_KINDS", "OUT_KINDS", "ARGTYPES", "MAP_TYPE"]

IN_KINDS = ("f16", "bf16")
OUT_KINDS = ("f16", "bf16", "f32")

#: The GEMM kernels' parameters (``config.SIGNATURE``): the A, B and C tensor maps, M, N, K, the
#: tile rows and columns, alpha and beta; a config's ``extra_argtypes`` follow.
MAP_TYPE = types.Array(types.uint64, 1, "C")     # a tensor map's device copy
ARGTYPES = (MAP_TYPE,) * 3 + (types.int64,) * 5 + (types.float32,) * 2
_ALPHA, _BETA = 8, 9            # their argument positions
#: ... and with fp8 scales (``KernelSpec.scale``), the two float32 scale arrays (any strides).
SCALE_ARGTYPES = (types.Array(types.float32, 2, "A"),) * 2


def kernel_variants(configs=None, in_kinds=IN_KINDS, out_kinds=OUT_KINDS, layouts=None,
                    betas=(False, True)):
    """``[(config name, (config, spec))]``: the kernels matmul() may launch with ``configs``
    (names of :data:`.choose.SHIPPED_CONFIGS`; all by default), each a kernel config and a
    :class:`.config.KernelSpec`. ``layouts``: ``(a_kmajor, b_kmajor)`` pairs, all four by
    default."""
    names = list(SHIPPED_CONFIGS) if configs is None else list(configs)
    for name in names:
        if name not in SHIPPED_CONFIGS:
            raise ValueError(f"configs: {name!r} is not one of {sorted(SHIPPED_CONFIGS)}")
    layouts = layouts or [(True, False), (True, True), (False, False), (False, True)]
    return [(name, (SHIPPED_CONFIGS[name].kernel_config(), KernelSpec(ak, bk, i, o, beta)))
            for name in names for ak, bk in layouts for i in in_kinds for o in out_kinds
            for beta in betas]


def kernel_for(variant):
    """The :class:`numba_tma.launch.DirectKernel` of one variant (see :func:`kernel_variants`),
    not loaded: what a launch of it loads, or ``precompile`` builds."""
    return _direct(*variant)[0]


def _smem(cfg, spec):
    item = 4 if spec.out_kind == "f32" else 2
    if isinstance(cfg, GemmConfig):
        return mma_sync_smem(cfg, item)
    return smem_bytes(cfg, item, block=spec.scale == "block",
                      aux=spec.epilogue is not None and spec.epilogue.aux)


@functools.cache
def _direct(cfg, spec):
    """(DirectKernel, dynamic shared bytes) of one kernel config and spec; its cubin is cached
    on disk."""
    kernel = cfg.kernel(spec)
    key = ("matmul", cfg, tuple(spec))
    argtypes = ARGTYPES + (SCALE_ARGTYPES if spec.scale else ()) + cfg.extra_argtypes
    cache = True
    if spec.epilogue is not None:       # its arguments last; on disk where its code says all
        argtypes += spec.epilogue.argtypes
        cache = stable(spec.epilogue.fn)
    return DirectKernel(kernel, argtypes, key=key, cache=cache), _smem(cfg, spec)


@functools.cache
def _ready(cfg, spec, ctx):
    """``_direct(cfg, spec)``, loaded in context ``ctx`` and allowed its shared memory."""
    direct, nbytes = _direct(cfg, spec)
    direct.reserve_dynamic_shared(nbytes)
    return direct, nbytes


_resident = {}


def _resident_blocks(direct, cfg, nbytes, ctx):
    """Blocks of a persistent wgmma config that fit on the device at once: one per SM (the
    kernel takes 384 threads x 168 registers and most of the shared memory), or whole clusters
    as the driver reports (``cuOccupancyMaxActiveClusters``: a GPC's SMs pair up)."""
    key = (cfg, nbytes, ctx)
    if key not in _resident:
        if cfg.cluster_m == 1:
            _resident[key] = sm_count()
        else:
            clusters = direct.max_active_clusters(cfg.threads, (cfg.cluster_m, 1, 1), nbytes)
            _resident[key] = clusters * cfg.cluster_m
    return _resident[key]


def sm_count():
    """The current device's SMs."""
    return _sm_count_of(cuda.get_current_device().id)


@functools.cache
def _sm_count_of(device_id):            # per device: a process may use several GPUs
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


@functools.cache
def _placeholder(ctx):
    # K = 0: nothing is loaded, but the kernel still takes operand maps.
    return cuda.to_device(np.zeros((WARP_TILE, BK), np.uint16))


def dependent_launches():
    """Whether matmul() launches its wgmma kernels dependent (programmatic stream
    serialization, :mod:`numba_tma.griddep`): yes unless ``NUMBA_TMA_DEPENDENT_LAUNCH`` is
    ``0`` (or empty), read when a launcher is bound (new buffers or a new layout). What it
    saves back to back: ``docs/gemm.md``."""
    return os.environ.get("NUMBA_TMA_DEPENDENT_LAUNCH", "1") not in ("", "0")


def _maps(plan, cfg, ctx):
    """The A, B and C tensor maps of ``plan``: 128B-swizzled boxes of one slot's slice of A
    (in a cluster along N each CTA loads half of it) and of B (along M, 1/cluster_m of it),
    and of one box of C."""
    w = WARP_TILE                       # 64: one 128B-swizzled row of 16-bit elements
    bk = slice_k(plan.in_kind)          # K-major rows: 64 16-bit or 128 fp8 elements
    mma_sync = isinstance(cfg, GemmConfig)
    if plan.k:
        promote = cfg.l2_promotion
        a_map = descriptor_map(plan.a, (cfg.bm // cfg.cluster_n, bk) if plan.a_kmajor
                               else (w, w), 128, promote)
        b_map = descriptor_map(plan.b, (cfg.bn // cfg.cluster_m, bk) if plan.b_kmajor
                               else (w, w), 128, promote)
    else:
        a_map = b_map = descriptor_map(_placeholder(ctx), (w, w), 128)
    if mma_sync:            # one warp's 64 x 64 (16-bit) or 64 x 32 (f32) box
        c_map = descriptor_map(plan.out, (w, box_columns(plan.out_kind)), 128)
    else:
        c_map = output_map(plan.out, plan.out_kind)
    return a_map, b_map, c_map


def output_map(view, out_kind):
    """The tensor map a wgmma kernel stores an M x N output through (C, or a user epilogue's
    auxiliary output of C's dtype): one consumer warp's 16-row, 128-byte-wide box."""
    return descriptor_map(view, (SLAB_ROWS, box_columns(out_kind)), 128)


class LaunchPlan:
    """One planned operand layout (shapes, strides, dtypes, config): kernel, grid, sizes and the
    three tensor maps as first encoded."""

    def __init__(self, plan, has_beta):
        cfg = plan.config
        self.empty = plan.m == 0 or plan.n == 0
        if self.empty:
            return
        ctx = context_id()
        spec = KernelSpec(plan.a_kmajor, plan.b_kmajor, plan.in_kind, plan.out_kind, has_beta,
                          plan.scale, plan.promote, plan.epilogue)
        self.scales = plan.scales
        self.epilogue_args = plan.epilogue_args
        self.direct, self.nbytes = _ready(cfg.kernel_config(), spec, ctx)
        self.maps = _maps(plan, cfg, ctx)
        self.moves = (bool(plan.k), bool(plan.k), True)     # the K = 0 placeholder stays
        self.spans = tuple(v.size * v.dtype.itemsize for v in (plan.a, plan.b, plan.out))
        tiles_m, tiles_n = tile_counts(plan.m, plan.n, cfg)
        self.sizes = (plan.m, plan.n, plan.k, tiles_m, tiles_n)
        resident = (_resident_blocks(self.direct, cfg, self.nbytes, ctx) if cfg.persistent
                    else None)
        grid = grid_size(plan.m, plan.n, cfg, resident)
        self.grid, self.block = (grid, 1, 1), (cfg.threads, 1, 1)
        size = cfg.cluster_m * cfg.cluster_n
        self.cluster = None if size == 1 else (size, 1, 1)
        self.ctx = ctx
        # The wgmma kernels wait for the kernel before them in the stream (griddep.wait) only
        # once their barriers are set up, and let the next launch in early: launched
        # dependent (dependent_launches()), back-to-back GEMMs overlap one's start with the
        # other's end.
        self.dependent_capable = not isinstance(cfg, GemmConfig)
        self.extras = cfg.launch_extras(tiles_m * tiles_n, grid,
                                        math.ceil(plan.k / slice_k(plan.in_kind)))
        # (where the config's parameters start: after the scales')
        self.extras_at = len(ARGTYPES) + (len(SCALE_ARGTYPES) if plan.scale else 0)
        self.extra_arrays = tuple(isinstance(t, types.Array) for t in cfg.extra_argtypes)

    def overlaps(self, a_ptr, b_ptr, out_ptr):
        """Whether out at ``out_ptr`` would overlap a or b (then the full check reports it)."""
        if self.empty:
            return False
        sa, sb, so = self.spans
        return any(ptr < out_ptr + so and out_ptr < ptr + span and span and so
                   for ptr, span in ((a_ptr, sa), (b_ptr, sb)))

    def bind(self, *addresses, scales=None, epilogue_args=None):
        """``run(alpha, beta, stream_handle)`` on the planned buffers, or on the buffers at
        ``addresses`` (a, b, out); ``scales``: the fp8 scale arrays, ``epilogue_args``: the user
        epilogue's arguments, the planned ones when None.
        Launched from the maps' device copies with the words packed once
        (launch.DirectKernel.prepare), not through numba's per-call argument typing."""
        if self.empty:
            return lambda alpha, beta, stream: None
        maps = []
        for i, tmap in enumerate(self.maps):
            if addresses and self.moves[i] and addresses[i] != tmap.address:
                maps.append(retarget(tmap.encoded, addresses[i]))
            else:
                maps.append(tmap.device_array)
        words = tuple((m.__cuda_array_interface__["data"][0], 16) for m in maps)
        extra_args, per_stream = self.extras
        at, arrays = self.extras_at, self.extra_arrays
        scale_args = self.scales if scales is None else scales
        epi_args = self.epilogue_args if epilogue_args is None else epilogue_args
        prepared = self.direct.prepare(self.grid, self.block, *words, *self.sizes, 1.0, 0.0,
                                       *scale_args, *extra_args, *epi_args,
                                       shared_mem=self.nbytes,
                                       cluster=self.cluster,
                                       dependent=self.dependent_capable and dependent_launches())
        lock, set_arg, set_pointer = prepared.lock, prepared.set, prepared.set_pointer
        last = [1.0, 0.0, None]                    # alpha, beta and the stream as packed
        ctx = self.ctx

        def run(alpha, beta, stream, maps=maps):   # maps held: the kernel reads these copies
            with lock:
                if alpha != last[0] or beta != last[1]:
                    set_arg(_ALPHA, alpha)
                    set_arg(_BETA, beta)
                    last[:2] = alpha, beta
                if per_stream is not None and stream != last[2]:
                    values, keep = per_stream(ctx, stream)
                    for i, value in values.items():
                        (set_pointer if arrays[i] else set_arg)(at + i, value)
                    last[2] = stream if keep else None
                prepared(stream)
        return run
