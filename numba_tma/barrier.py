"""Named CTA barriers: ``bar.sync`` / ``bar.arrive`` with an id and a thread count.

PTX ISA "bar, barrier": ``bar.sync id, count;`` waits until ``count`` threads (a multiple of 32,
counted per warp) have arrived at barrier ``id`` (0-15) with ``bar.sync`` or ``bar.arrive``;
``bar.arrive`` arrives without waiting. Barrier 0 is what ``cuda.syncthreads()`` uses (with the
whole block's count), so give a subset of warps an id of its own (1-15). SASS: ``BAR.SYNC`` /
``BAR.ARV``. Architecture: any. Issued by: whole warps (all lanes, converged); every warp that
takes part must use the same id and count.

Use: in a warp-specialised kernel the consumer warpgroups synchronise among themselves with
``barrier.sync(1, 256)`` while the producer warpgroup is busy or has exited -- a
``cuda.syncthreads()`` there would wait for the producer too (and hang if it exited).
"""

from ._frontend import overload, types

from ._bridge import declare, host_call, require_int

__all__ = ["sync", "arrive"]

_u32 = types.uint32
_sync = declare("barrier", "numba_tma_bar_sync", types.void(_u32, _u32))
_arrive = declare("barrier", "numba_tma_bar_arrive", types.void(_u32, _u32))


def sync(barrier_id, count):
    """Wait at named barrier ``barrier_id`` (0-15) until ``count`` threads (a multiple of 32)
    have arrived. PTX: ``bar.sync id, count;``"""
    host_call("barrier.sync")


def arrive(barrier_id, count):
    """Arrive at named barrier ``barrier_id`` without waiting (a producer signalling
    consumers that wait with ``sync``). PTX: ``bar.arrive id, count;``"""
    host_call("barrier.arrive")


@overload(sync)
def _ov_sync(barrier_id, count):
    require_int("barrier.sync", "barrier_id", barrier_id)
    require_int("barrier.sync", "count", count)
    return lambda barrier_id, count: _sync(_u32(barrier_id), _u32(count))


@overload(arrive)
def _ov_arrive(barrier_id, count):
    require_int("barrier.arrive", "barrier_id", barrier_id)
    require_int("barrier.arrive", "count", count)
    return lambda barrier_id, count: _arrive(_u32(barrier_id), _u32(count))
