"""Stream-K: the last, part-filled round of a persistent launch's tiles split along K over every
block (:class:`StreamKConfig`).

Every block first takes ``dp_units`` tiles whole (the same number each), then an even share of
the remaining tiles' K slices (:func:`stream_k_split`, :func:`stream_k_schedule`): a share that
starts inside a tile stops at the tile's end or earlier, and its fp32 accumulators go to the
block's workspace slot (below) and its flag is raised; the block whose share holds a tile's first
slice finishes that tile last (its share ends there), adds the partials of the following blocks
whose shares start inside the tile (waiting on their flags, which it lowers again for the next
launch), and stores C. Every block of a persistent launch is resident, and a block waits only on
higher-numbered blocks' first segments, which wait on nobody: no deadlock.

A consumer warpgroup's part of a partial (element ``i`` of its thread ``t`` at ``i * 128 + t``)
is contiguous, and the finishing block bulk-copies those parts into its ring, which its share no
longer needs (the tile it finishes is its last): one thread per consumer issues the copies, two
in flight where they fit, and the consumer's threads add them from shared memory, rather than
each thread loading every partial from L2 itself, one round trip after another.

The accumulators a segment leaves are sums over its K slices that the finishing block adds as
they are: for fp8 the promoted sums already carry their block scales, and per-tensor or
per-row scales apply once, to the finished tile. The persistent kernel (:mod:`.persistent`) and
its frame (:mod:`.frame`) walk the shares with the device functions here
(:func:`stream_k_parts`).

The workspace and flags are one per stream (launches on two streams may run at once), allocated
on the stream's first split launch. A launch that a CUDA graph captures on a stream without one
runs its tiles whole (``sk_iters = 0``: no workspace is touched) rather than allocate.
"""

import dataclasses
import functools
import threading

import numpy as np

from ..._frontend import cuda, types
from ..._bridge import inline_device, tail
from ... import barrier, bulk, fence, intmath, mbarrier, wgmma
from ...launch import is_capturing
from .config import BM, CONSUMER_THREADS, SIGNATURE, WgmmaConfig, ring_bytes
from .ring import Parts

__all__ = ["StreamKConfig", "stream_k_split", "stream_k_schedule", "workspace_floats",
           "stream_k_parts", "MIN_STREAM_K_SLICES", "SIGNATURE_STREAM_K"]

#: A stream-K kernel's parameters (without fp8 scales, which come before these): SIGNATURE's,
#: then the workspace of partial tiles (float32), one flag per block, the tiles the blocks take
#: whole (``dp_units``) and the K slices split evenly over the blocks after them
#: (``sk_iters``); see :func:`stream_k_split`.
SIGNATURE_STREAM_K = SIGNATURE[:-1] + ", float32[::1], uint32[::1], int64, int64)"
_WORKSPACE, _FLAGS, _DP_UNITS, _SK_ITERS = 0, 1, 2, 3   # their places after the scales
#: A stream-K split pays only where each block gets at least this many K slices of the tail.
MIN_STREAM_K_SLICES = 4
#: Ring buffers per consumer warpgroup that the fix-up copies partials into, at most, and the
#: mbarriers the kernel adds for them (one per buffer and consumer).
FIXUP_BUFFERS = 2
FIXUP_BARRIERS = 2 * FIXUP_BUFFERS


def part_bytes(nacc):
    """Bytes of one consumer warpgroup's part of a partial tile: its threads' ``nacc`` fp32
    accumulators each, which the fix-up copies into that consumer's half of the ring."""
    return 4 * (CONSUMER_THREADS // 2) * nacc


def stream_k_split(tiles, blocks, num_k):
    """``(dp_units, sk_iters)`` of a stream-K launch of ``blocks`` persistent blocks over
    ``tiles`` tiles of ``num_k`` K slices: the first ``dp_units`` tiles are taken whole (the
    same number by every block), the K slices of the rest, ``sk_iters`` of them, are split
    evenly over the blocks (with fewer tiles than blocks, every tile's). No split
    (``(tiles, 0)``) where the tiles fill whole waves, where a block would get fewer than
    ``MIN_STREAM_K_SLICES`` slices, or where ``blocks * sk_iters`` would not fit the kernel's
    32-bit division."""
    tail = tiles % blocks
    sk_iters = tail * num_k
    if tail == 0 or sk_iters < MIN_STREAM_K_SLICES * blocks or blocks * sk_iters >= 2 ** 32:
        return tiles, 0
    return tiles - tail, sk_iters


def stream_k_schedule(blocks, dp_units, sk_iters, num_k):
    """The stream-K part of each block's work as the kernel walks it, a model for tests and
    readers: ``[[(tile, k0, k1, role), ...] per block]``, ``role`` "final" for the segment that
    starts its tile (it adds the others' partials and stores C) or "partial" (stored in the
    block's workspace slot and flagged). Block ``b`` takes slices ``[b W / G, (b + 1) W / G)``
    of the ``W = sk_iters`` slices after the whole tiles (tile ``dp_units + t`` holds slices
    ``[t num_k, (t + 1) num_k)``)."""
    plan = []
    for b in range(blocks):
        it, hi = b * sk_iters // blocks, (b + 1) * sk_iters // blocks
        segs = []
        while it < hi:
            t = it // num_k
            k0 = it - t * num_k
            k1 = min(num_k, k0 + hi - it)
            segs.append((dp_units + t, k0, k1, "final" if k0 == 0 else "partial"))
            it += k1 - k0
        plan.append(segs)
    return plan


def workspace_floats(bn, blocks):
    """float32 elements of the workspace of a stream-K launch of ``blocks`` blocks of
    ``128 x bn`` tiles: one partial tile per block."""
    return blocks * CONSUMER_THREADS * (bn // 2)


_workspaces = {}
_workspaces_lock = threading.Lock()


def _workspace(ctx, handle, blocks):
    """``(workspace, flags)`` of stream-K launches on stream ``handle`` in context ``ctx``: one
    partial tile (128 x 256 fp32) and one flag per block, the flags zeroed once (each launch
    lowers every flag it raised); None where the stream has none and is being captured into a
    CUDA graph, which cannot hold the allocation."""
    key = (ctx, handle, blocks)
    got = _workspaces.get(key)
    if got is None:
        with _workspaces_lock:
            got = _workspaces.get(key)
            if got is None:
                if is_capturing(handle):
                    return None
                ws = cuda.device_array(workspace_floats(256, blocks), np.float32)
                flags = cuda.to_device(np.zeros(blocks, np.uint32))
                got = _workspaces[key] = (ws, flags)
    return got


@dataclasses.dataclass(frozen=True, repr=False)
class StreamKConfig(WgmmaConfig):
    """A persistent :class:`~numba_tma.kernels.gemm.WgmmaConfig` (``bm = 128``, no clusters,
    the plain epilogue) whose last, partly filled round of tiles is split along K over every
    block (the module's docstring); it takes a workspace per stream."""

    signature = SIGNATURE_STREAM_K
    extra_argtypes = (types.Array(types.float32, 1, "C"), types.Array(types.uint32, 1, "C"),
                      types.int64, types.int64)
    stream_k = True
    extra_barriers = FIXUP_BARRIERS

    def _check(self):
        super()._check()
        if not self.persistent or self.cluster_m != 1 or self.bm != BM \
                or self.overlap_epilogue:
            raise ValueError(f"stream-K needs persistent=True, cluster_m=1, bm={BM} and "
                             f"overlap_epilogue=False; got persistent={self.persistent}, "
                             f"cluster_m={self.cluster_m}, bm={self.bm}, "
                             f"overlap_epilogue={self.overlap_epilogue}")
        half_part = part_bytes(self.bn // 2)
        if ring_bytes(self) // 2 < half_part:
            raise ValueError(f"stream-K copies a consumer's part of each partial ({half_part} "
                             f"bytes) into its half of the ring: stages = {self.stages} is "
                             f"too few for bn = {self.bn}")

    def check_spec(self, spec):
        super().check_spec(spec)
        if spec.promoted and self.bn == 128:
            raise ValueError(f"{self!r}: stream-K with block scales or promoted accumulation "
                             f"needs bn = 64 or 192 (at 128 the promoting loop's two 64 x 128 "
                             f"products beside the partials' fix-up spill registers)")

    def launch_extras(self, tiles, grid, num_k):
        dp_units, sk_iters = stream_k_split(tiles, grid, num_k)
        args = ((0, workspace_floats(self.bn, grid)), (0, grid), dp_units, sk_iters)
        if not sk_iters:            # nothing split: no workspace is touched
            return args, None

        def per_stream(ctx, stream):
            got = _workspace(ctx, stream, grid)
            if got is None:         # (captured without a workspace: every tile whole, and
                return {_DP_UNITS: tiles, _SK_ITERS: 0}, False     # ask again next launch)
            ws, flags = got
            return {_WORKSPACE: ws.__cuda_array_interface__["data"][0],
                    _FLAGS: flags.__cuda_array_interface__["data"][0],
                    _DP_UNITS: dp_units, _SK_ITERS: sk_iters}, True
        return args, per_stream


@functools.cache
def stream_k_parts(nacc, ring_bytes):
    """The device functions of a stream-K walk whose consumer threads hold ``nacc``
    accumulators each (one m64 half) and whose ring is ``ring_bytes`` long: ``share(b,
    sk_iters, blocks)`` (block ``b``'s first and end slice), ``segment(it, hi, num_k)`` (the
    tile, counted from the first split one, of slice ``it`` and the slices ``k0..k1`` of it that
    the share up to ``hi`` covers), ``fix_up(acc, ws, flags, ct, cid, blocks, sk_iters, t, k1,
    num_k, live, ring, bars)`` (the finishing block adds the partials of split tile ``t``
    through ``ring``, its ring as float32, and ``bars``, the ``FIXUP_BARRIERS`` barriers that
    ``init_barriers(bars)`` sets up), ``leave_partial(acc, ws, flags, ct, cid, live)``; a
    consumer whose rows all lie past M (``live`` False) takes part in their barriers and flags
    but neither stores nor loads its partials (zeros nobody stores)."""
    CT = CONSUMER_THREADS
    WT = CT // 2                                # threads of one consumer warpgroup
    assert WT == 128                            # (c = ct >> 7)
    HALF = WT * nacc                            # floats of a consumer's part of a partial
    PART = CT * nacc                            # workspace floats of one block's partial tile
    HALF_BYTES = part_bytes(nacc)
    NBUF = min(FIXUP_BUFFERS, ring_bytes // 2 // HALF_BYTES)    # per consumer, in its half
    assert NBUF >= 1, "StreamKConfig._check: the ring holds a consumer's part of a partial"
    FIXUP_BARRIER = 1                           # named barrier of the 256 consumer threads
    CONSUMER_BARRIER = 2                        # ... and of consumer c's 128, plus c
    TIMEOUT = mbarrier.WAIT_TIMEOUT_NS          # the hang-debugging switch, as mbarrier.wait's
    # The flags' values in their own type (uint32): numba-cuda-mlir 0.6.0 lowers a cas of
    # int64 literals on a uint32 array to an i64/i32 select its verifier rejects.
    RAISED, LOWERED = np.uint32(1), np.uint32(0)

    @inline_device
    def take_partial(flags, p):
        # Wait until block p has flagged its partial, and lower the flag for the next launch.
        # Under NUMBA_TMA_WAIT_TIMEOUT_NS a flag that never comes is reported, then trapped on.
        if TIMEOUT:
            start = mbarrier.globaltimer()
            while cuda.atomic.cas(flags, p, RAISED, LOWERED) != RAISED:
                if mbarrier.globaltimer() - start > TIMEOUT:
                    print("numba_tma: stream-K block", np.int64(cuda.blockIdx.x), "waited past",
                          TIMEOUT, "ns (NUMBA_TMA_WAIT_TIMEOUT_NS) for the partial of block", p)
                    mbarrier.trap()
        else:
            while cuda.atomic.cas(flags, p, RAISED, LOWERED) != RAISED:
                pass

    @inline_device
    def first_slice(b, sk_iters, blocks):
        # b * W // G in 32 bits (the host keeps blocks * W below 2^32).
        return np.int64(intmath.div_u32(b * sk_iters, blocks))

    @inline_device
    def share(b, sk_iters, blocks):
        return first_slice(b, sk_iters, blocks), first_slice(b + 1, sk_iters, blocks)

    @inline_device
    def segment(it, hi, num_k):
        t = np.int64(intmath.div_u32(it, num_k))
        k0 = it - t * num_k
        return t, k0, min(num_k, k0 + hi - it)

    @inline_device
    def partials_after(cid, blocks, sk_iters, t_end):
        # How many blocks after cid start their shares inside the tile that ends at slice
        # t_end, each leaving a partial of it: the p < blocks with p * sk_iters // blocks <
        # t_end, that is p <= (t_end * blocks - 1) // sk_iters (in 32 bits, as first_slice).
        last = np.int64(intmath.div_u32(t_end * blocks - 1, sk_iters))
        return np.uint32(min(last, blocks - 1) - cid)

    @inline_device
    def init_barriers(bars):
        for j in range(FIXUP_BARRIERS):
            mbarrier.init(bars[j:], 1)

    @inline_device
    def copy_part(buf, src, bars, q):
        # The consumer's part of the tile's partial q into its buffer q % NBUF.
        j = q % NBUF
        bar = tail(bars, j)
        mbarrier.arrive_expect_tx(bar, HALF_BYTES)
        bulk.copy_global_to_shared(tail(buf, j * HALF), tail(src, q * PART), HALF_BYTES, bar)

    @inline_device
    def fix_up(acc, ws, flags, ct, cid, blocks, sk_iters, t, k1, num_k, live, ring, bars):
        t_end = (t + 1) * num_k
        if k1 < num_k:
            # The partials of blocks cid + 1, ..., cid + parts (whose shares start inside the
            # tile; at least one, as this block's ends inside it): the first warp's lanes take
            # up to 32 of their flags at once.
            parts = partials_after(cid, blocks, sk_iters, t_end)
            if ct < 32:
                q = np.uint32(ct)
                while q < parts:
                    take_partial(flags, cid + 1 + q)
                    q = np.uint32(q + 32)
                cuda.threadfence()
                cuda.syncwarp()     # (bar.sync is .aligned: warp 0 reconverges)
            # After it both consumers' wgmmas have retired and every slot's loads have landed:
            # the ring is free (this tile is the block's last).
            barrier.sync(FIXUP_BARRIER, CT)
            if live:
                c = ct >> 7
                wt = ct & (WT - 1)
                src = tail(ws, (cid + 1) * PART + c * HALF)
                buf = tail(ring, c * (NBUF * HALF))
                cbars = tail(bars, c * FIXUP_BUFFERS)
                if wt == 0:     # (parts >= 1)
                    fence.proxy_async_global()      # (the flags' acquire, for the bulk copies)
                    copy_part(buf, src, cbars, 0)
                    if NBUF > 1 and parts > 1:
                        copy_part(buf, src, cbars, 1)
                q = np.uint32(0)
                while q < parts:
                    mbarrier.wait(tail(cbars, q % NBUF), (q // NBUF) & 1)
                    part = tail(buf, (q % NBUF) * HALF + wt)
                    for i in range(nacc):
                        acc[i] += part[i * WT]
                    if q + NBUF < parts:
                        # (every thread of the consumer has read the buffer before it refills)
                        barrier.sync(CONSUMER_BARRIER + c, WT)
                        if wt == 0:
                            copy_part(buf, src, cbars, q + NBUF)
                    q = np.uint32(q + 1)
        wgmma.fence_operand(acc, nacc)

    @inline_device
    def leave_partial(acc, ws, flags, ct, cid, live):
        # A share that starts inside its tile: the accumulators to the block's slot (each
        # consumer's part contiguous), flagged.
        if live:
            c = ct >> 7
            part = tail(ws, cid * PART + c * HALF + (ct & (WT - 1)))
            for i in range(nacc):
                part[i * WT] = acc[i]
        cuda.threadfence()
        barrier.sync(FIXUP_BARRIER, CT)
        if ct == 0:
            cuda.atomic.exch(flags, cid, RAISED)

    return Parts(share=share, segment=segment, fix_up=fix_up, leave_partial=leave_partial,
                 init_barriers=init_barriers)
