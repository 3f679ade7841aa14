"""A wgmma GEMM kernel's start: the tensor maps prefetched and the barriers set up by one thread,
the block (or cluster) met, and the dependent launch's wait.

The barrier thread prefetches the three tensor maps into the TMA unit's cache while it sets the
barriers up, rather than at the first load and the first store. Then every thread calls
``griddep.wait()`` (nothing before it touches global memory) and
``griddep.launch_dependents()``: launched with programmatic stream serialization, the kernel may
have started while the one before it in the stream still ran, and back-to-back calls overlap
one's start with the other's end.
"""

import functools

from ..._frontend import cuda

from ..._bridge import inline_device
from ... import cluster, griddep, tma
from .ring import barrier_setup

__all__ = ["ring_setup", "meet", "start_dependent"]


@functools.cache
def ring_setup(stages, empty_arrivals, c_bars):
    """``setup(a_map, b_map, c_map, full, empty, cbar)``: the barrier thread's prefetch of the
    maps and initialisation of the ring's and C's barriers; the caller adds its own barriers,
    then ``mbarrier.fence_init()``."""
    init = barrier_setup(stages, empty_arrivals, c_bars)

    @inline_device
    def setup(a_map, b_map, c_map, full, empty, cbar):
        tma.prefetch_descriptor(a_map)
        tma.prefetch_descriptor(b_map)
        tma.prefetch_descriptor(c_map)
        init(full, empty, cbar)
    return setup


@functools.cache
def meet(ctas):
    """``meet()``: every thread of the block, or of the cluster of ``ctas`` CTAs, waits until the
    barriers exist. In a cluster the peer's barriers must exist before anything multicasts or
    arrives remotely: ``fence_init`` released them at cluster scope, so a relaxed arrive
    suffices (a releasing one adds a GPU-scope MEMBAR per thread)."""
    @inline_device
    def meet_all():
        if ctas > 1:
            cluster.arrive_relaxed()
            cluster.wait()
        else:
            cuda.syncthreads()
    return meet_all


@inline_device
def start_dependent():
    # Every thread, after the barriers' setup and before any global memory access of its own:
    # wait for the memory of the kernel before this one in the stream, and let the next
    # dependent launch be scheduled (its blocks take SMs as these exit).
    griddep.wait()
    griddep.launch_dependents()
