"""TMA multicast in thread-block clusters: the byte accounting, in two small kernels.

``multicast_copy(src, cluster_size)`` -- a cluster broadcast. Each cluster of N CTAs owns one
``TILE_ROWS`` x 128-byte tile of ``src``; CTA ``rank`` TMA-loads rows ``rank * TILE_ROWS/N ...``
of it and multicasts them to all N CTAs (``cta_mask = (1 << N) - 1``), so each CTA's shared tile
is assembled from N slices issued by N different CTAs. Every CTA then writes the full tile to its
own copy of the output, ``out[rank]``: ``out[r] == src`` for every r proves each slice reached every
CTA. The barrier accounting: each CTA's barrier expects the *whole* tile's bytes
(``arrive_expect_tx(bar, TILE_BYTES)``), not the slice it issued -- bytes land wherever the mask
says, and each destination counts what lands in it.

``stream_panels(b, cluster_size, multicast=True)`` -- the operand-sharing pattern of a GEMM, as a
bandwidth test (``benches/multicast.py``). ``b`` (K x W, 32-bit words) is cut into column panels
of ``PANEL_COLS`` words; the N CTAs of a cluster all stream the same panel, ``TILE_K`` rows at a
time through a ``STAGES``-deep ring, as the CTAs of a GEMM cluster that share a B tile would.
With multicast each CTA issues 1/N of every tile to all N, so L2 serves each byte once; without,
each CTA loads every tile itself (N times the L2 traffic). Each consumer thread XORs the words it
reads into ``out[cta, thread]``, checkable against numpy. The ring is warp-specialised:

- barriers, per stage ``s``: ``full[s]`` (1 arrival: the local producer's ``arrive_expect_tx`` of
  the whole tile; completed by the N slices' ``complete_tx``) and ``empty[s]`` (one arrival from
  each consumer warp of each of the N CTAs: ``N * CONSUMER_WARPS``, since this CTA's slice lands in
  all N CTAs and may only be rewritten once all of them finished reading the stage);
- producer (lane 0 of the last warp), for k-tile ``kt`` in stage ``s = kt % STAGES``: once
  ``kt >= STAGES``, wait ``empty[s]`` for the previous use (parity ``(kt // STAGES - 1) & 1``),
  then ``arrive_expect_tx(full[s], TILE_BYTES)`` and the multicast load of its slice;
- consumers: wait ``full[s]`` (parity ``(kt // STAGES) & 1``), read, ``syncwarp``, then lane 0
  arrives on ``empty[s]`` of every CTA of the cluster (``cluster.mbarrier_arrive_cta``);
- set-up: barriers initialised and ``fence_init`` (release.cluster), then ``cluster.sync()``
  before any multicast can land; tear-down: ``cluster.sync()`` so no CTA exits while peers may
  still write into it or arrive on its barriers.

A peer's slice may land on ``full[s]`` before the local producer's ``arrive_expect_tx``: the
transaction count goes transiently negative and the pending arrival keeps the phase open.
"""

import functools

import numpy as np

from .._frontend import cuda
from .. import cluster, mbarrier, smem, tma
from .._device import require_hopper
from ..launch import configure, launch_cluster, plan_cluster_launch
from ..tensormap import TensorMap, describe_array, resolve_dtype

__all__ = ["multicast_copy", "stream_panels", "stream_panels_reference", "CLUSTER_SIZES",
           "TILE_ROWS", "ROW_BYTES", "PANEL_COLS", "TILE_K", "STAGES", "CONSUMER_WARPS"]

#: Cluster sizes the kernels take: powers of two up to the portable limit (each slice stays a
#: whole number of rows and a multiple of 128 bytes, the TMA destination alignment).
CLUSTER_SIZES = (1, 2, 4, 8)
# Waits are bounded so a lost transaction raises instead of hanging the GPU.
TIMEOUT_NS = 2_000_000_000
TMA_SMEM_ALIGN = 128

def _describe(name, array):
    """(shape, dtype spec) of a device array, or a TypeError naming the argument."""
    try:
        shape, _, _, natural, _ = describe_array(array)
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None
    return tuple(shape), natural


# ---- multicast_copy
TILE_ROWS = 32
ROW_BYTES = 128
COPY_THREADS = 128


@functools.cache
def _copy_kernel(dtype, n):
    cols = ROW_BYTES // dtype.itemsize
    tile_elems = TILE_ROWS * cols
    tile_bytes = tile_elems * dtype.itemsize
    slice_rows = TILE_ROWS // n
    slice_elems = slice_rows * cols
    mask = (1 << n) - 1

    @cuda.jit
    def kernel(desc, out, timed_out):
        tile = cuda.shared.array(tile_elems, dtype, alignment=TMA_SMEM_ALIGN)
        bar = cuda.shared.array(1, np.uint64)
        tid = cuda.threadIdx.x
        rank = cluster.cta_rank()
        if tid == 0:
            mbarrier.init(bar, 1)
            mbarrier.fence_init()
        cluster.sync()                       # every peer's barrier is initialised from here on
        y0 = cuda.blockIdx.y * TILE_ROWS
        x0 = cluster.cluster_id()[0] * cols
        if tid == 0:
            # This CTA's barrier expects the whole tile: N slices, one from each CTA.
            mbarrier.arrive_expect_tx(bar, tile_bytes)
            tma.load_multicast(tile[rank * slice_elems:], desc, (y0 + rank * slice_rows, x0),
                               bar, mask)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            timed_out[0] = 1
        rows, width = out.shape[1], out.shape[2]
        for i in range(tid, tile_elems, COPY_THREADS):
            y = y0 + i // cols
            x = x0 + i % cols
            if y < rows and x < width:
                out[rank, y, x] = tile[i]
        cluster.sync()                       # no CTA exits while a peer's multicast may target it

    return kernel


def multicast_copy(src, cluster_size=2, out=None):
    """Broadcast every tile of the 2-D device array ``src`` to all CTAs of a cluster by TMA
    multicast; returns ``out`` (shape ``(cluster_size,) + src.shape``) with ``out[r] == src``.

    ``cluster_size`` is 1, 2, 4 or 8; ``src``'s rows must be a multiple of 16 bytes (TMA's global
    stride rule). Needs an sm_90 GPU. Raises ValueError/TypeError naming the argument.
    """
    if cluster_size not in CLUSTER_SIZES:
        raise ValueError(f"cluster_size must be one of {CLUSTER_SIZES}, got {cluster_size!r}")
    shape, natural = _describe("src", src)
    if len(shape) != 2:
        raise ValueError(f"src must be 2-D, got {len(shape)}-D with shape {shape}")
    dtype, itemsize = resolve_dtype(natural, "src's dtype")
    if isinstance(dtype, str):
        raise TypeError(f"src's dtype must be a numpy dtype, got {dtype}")
    dtype = np.dtype(dtype)
    want = (cluster_size,) + tuple(shape)
    if out is None:
        out = cuda.device_array(want, dtype)
    else:
        oshape, onat = _describe("out", out)
        if tuple(oshape) != want or np.dtype(resolve_dtype(onat, "out's dtype")[0]) != dtype:
            raise ValueError(f"out must have shape {want} and dtype {dtype}, got {tuple(oshape)}")
    require_hopper("multicast_copy")
    cols = ROW_BYTES // itemsize
    tmap = TensorMap(src, (TILE_ROWS // cluster_size, cols))
    grid = (cluster_size * -(-shape[1] // cols), -(-shape[0] // TILE_ROWS))
    timed_out = cuda.to_device(np.zeros(1, np.int32))
    launch_cluster(_copy_kernel(dtype, cluster_size), grid, COPY_THREADS, (cluster_size, 1, 1),
                   (tmap, out, timed_out))
    if timed_out.copy_to_host()[0]:
        raise RuntimeError("multicast_copy: an mbarrier wait timed out (a multicast slice was lost)")
    return out


# ---- stream_panels
PANEL_COLS = 64                 # 32-bit words per panel row: 256 bytes
TILE_K = 32                     # panel rows per k-tile: 8 KB tiles
STAGES = 4                      # 32 KB of ring: static shared memory stays under 48 KB
CONSUMER_WARPS = 4
WARP = 32
CONSUMERS = CONSUMER_WARPS * WARP
STREAM_THREADS = CONSUMERS + WARP          # + one producer warp
TILE_WORDS = TILE_K * PANEL_COLS
TILE_BYTES = TILE_WORDS * 4
CHUNK_BYTES = 16                           # one ld.shared.v4
CHUNKS_PER_THREAD = TILE_BYTES // (CHUNK_BYTES * CONSUMERS)
RING_WORDS = STAGES * TILE_WORDS


@functools.cache
def _stream_kernel(n, multicast):
    slice_rows = TILE_K // n if multicast else TILE_K
    slice_words = slice_rows * PANEL_COLS
    mask = (1 << n) - 1
    empty_arrivals = CONSUMER_WARPS * n if multicast else CONSUMER_WARPS

    @cuda.jit
    def kernel(desc, k_tiles, out, timed_out):
        ring = cuda.shared.array(RING_WORDS, np.uint32, alignment=TMA_SMEM_ALIGN)
        full = cuda.shared.array(STAGES, np.uint64)
        empty = cuda.shared.array(STAGES, np.uint64)
        tid = cuda.threadIdx.x
        rank = cluster.cta_rank() if multicast else 0
        if tid == 0:
            for s in range(STAGES):
                mbarrier.init(full[s:], 1)
                mbarrier.init(empty[s:], empty_arrivals)
            mbarrier.fence_init()
        if multicast:
            cluster.sync()                    # peers' barriers exist before any slice lands
        else:
            cuda.syncthreads()
        panel = cuda.blockIdx.x // n          # the N CTAs of a cluster share a panel
        x0 = panel * PANEL_COLS
        if tid == CONSUMERS:                  # producer: lane 0 of the last warp
            for kt in range(k_tiles):
                s = kt % STAGES
                if kt >= STAGES:
                    if not mbarrier.wait_bounded(empty[s:], (kt // STAGES - 1) & 1, TIMEOUT_NS):
                        timed_out[0] = 1
                        break                 # later phases cannot complete either
                mbarrier.arrive_expect_tx(full[s:], TILE_BYTES)
                dst = ring[s * TILE_WORDS + rank * slice_words:]
                if multicast:
                    tma.load_multicast(dst, desc, (kt * TILE_K + rank * slice_rows, x0),
                                       full[s:], mask)
                else:
                    tma.load(dst, desc, (kt * TILE_K, x0), full[s:])
        elif tid < CONSUMERS:
            regs = cuda.local.array(4, np.uint32)
            acc = np.uint32(0)
            lane = tid % WARP
            for kt in range(k_tiles):
                s = kt % STAGES
                if not mbarrier.wait_bounded(full[s:], (kt // STAGES) & 1, TIMEOUT_NS):
                    timed_out[0] = 1
                    break                     # later phases cannot complete either
                base = s * TILE_BYTES + tid * CHUNK_BYTES
                for j in range(CHUNKS_PER_THREAD):
                    smem.load_v4(regs, ring, base + j * (CHUNK_BYTES * CONSUMERS))
                    acc ^= regs[0] ^ regs[1] ^ regs[2] ^ regs[3]
                cuda.syncwarp()
                if lane == 0:                 # this warp is done with stage s in every CTA's eyes
                    if multicast:
                        for c in range(n):
                            cluster.mbarrier_arrive_cta(empty[s:], c)
                    else:
                        mbarrier.arrive(empty[s:])
            out[cuda.blockIdx.x, tid] = acc
        if multicast:
            cluster.sync()                    # no CTA exits while peers may still touch it
        else:
            cuda.syncthreads()

    return kernel


def _check_panels(b, cluster_size):
    if cluster_size not in CLUSTER_SIZES:
        raise ValueError(f"cluster_size must be one of {CLUSTER_SIZES}, got {cluster_size!r}")
    shape, natural = _describe("b", b)
    if len(shape) != 2:
        raise ValueError(f"b must be 2-D, got {len(shape)}-D with shape {shape}")
    try:
        dtype = np.dtype(natural)
    except TypeError:
        dtype = None
    if dtype is None or dtype not in (np.dtype(np.uint32), np.dtype(np.int32)):
        raise TypeError(f"b must hold 32-bit integers (uint32 or int32), got {natural}")
    return shape


def stream_panels_launch(b, cluster_size=2, multicast=True, use_cluster=True):
    """Prepared launch of the streaming kernel: returns ``(run, out, timed_out)``; ``run()``
    enqueues one launch (for timing loops). See :func:`stream_panels`."""
    shape = _check_panels(b, cluster_size)
    if multicast and not use_cluster:
        raise ValueError("multicast=True needs use_cluster=True (multicast targets cluster peers)")
    require_hopper("stream_panels")
    # Each CTA's copy is its slice of the tile: TILE_K / N rows with multicast, all of it without.
    box_rows = TILE_K // cluster_size if multicast else TILE_K
    tmap = TensorMap(b, (box_rows, PANEL_COLS), dtype=np.uint32)
    panels = -(-shape[1] // PANEL_COLS)
    k_tiles = -(-shape[0] // TILE_K)
    grid = panels * cluster_size
    out = cuda.device_array((grid, CONSUMERS), np.uint32)
    timed_out = cuda.to_device(np.zeros(1, np.int32))
    kernel = _stream_kernel(cluster_size, bool(multicast))
    args = (tmap, np.int32(k_tiles), out, timed_out)
    if use_cluster:
        plan_cluster_launch(grid, STREAM_THREADS, cluster_size)

        def run():
            launch_cluster(kernel, grid, STREAM_THREADS, (cluster_size, 1, 1), args)
    else:
        def run():
            configure(kernel, grid, STREAM_THREADS)(*args)
    run.keepalive = tmap
    return run, out, timed_out


def stream_panels(b, cluster_size=2, multicast=True, use_cluster=True):
    """Stream every ``PANEL_COLS``-word column panel of ``b`` (K x W, uint32/int32 on the device)
    through ``cluster_size`` CTAs each; returns ``out`` (``panels * cluster_size`` x
    ``CONSUMERS`` uint32), the per-thread XOR of what each CTA received (see the module
    docstring; :func:`stream_panels_reference` is its numpy model).

    ``multicast=False`` loads every tile in every CTA instead (``use_cluster=False`` also drops
    the cluster launch). Raises RuntimeError if a barrier wait timed out.
    """
    run, out, timed_out = stream_panels_launch(b, cluster_size, multicast, use_cluster)
    run()
    if timed_out.copy_to_host()[0]:
        raise RuntimeError("stream_panels: an mbarrier wait timed out")
    return out


def stream_panels_reference(b_host, cluster_size=2):
    """numpy model of :func:`stream_panels`: ``out[cta, t]`` for the host array ``b_host``."""
    b_host = np.ascontiguousarray(b_host).view(np.uint32)
    k, w = b_host.shape
    panels, k_tiles = -(-w // PANEL_COLS), -(-k // TILE_K)
    padded = np.zeros((k_tiles * TILE_K, panels * PANEL_COLS), np.uint32)  # TMA fills with zeros
    padded[:k, :w] = b_host
    # (k_tiles, TILE_K, panels, PANEL_COLS) -> per panel, per tile, the tile's words in order.
    tiles = padded.reshape(k_tiles, TILE_K, panels, PANEL_COLS).transpose(2, 0, 1, 3)
    words = tiles.reshape(panels, k_tiles, CHUNKS_PER_THREAD, CONSUMERS, CHUNK_BYTES // 4)
    per_thread = np.bitwise_xor.reduce(words, axis=(1, 2, 4))          # (panels, CONSUMERS)
    return np.repeat(per_thread, cluster_size, axis=0)
