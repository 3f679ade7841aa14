"""Proxy fences (sm_90): order ordinary loads/stores (the generic proxy) against TMA and bulk copies
(the async proxy). PTX ISA: "Parallel Synchronization and Communication Instructions: membar/fence".

The rule they serve: data written by ordinary stores and then read by the TMA unit (a TMA store of
a shared tile, a TMA load of a global buffer this kernel wrote) must be fenced by each writing
thread before the barrier that hands it over::

    tile[ty, tx] = value                 # every thread writes shared memory
    fence.proxy_async_shared()           # CORRECT: each writer fences its own writes ...
    cuda.syncthreads()                   # ... then the block synchronises
    if tid == 0:
        tma.store(desc, coords, tile)

    # WRONG: syncthreads() alone, or a fence only in the issuing thread, lets the TMA engine read
    # stale shared memory.
"""

from ._frontend import overload, types

from ._bridge import declare, host_call

__all__ = ["proxy_async_shared", "proxy_async_global", "proxy_async"]

_proxy_async_shared_cta = declare("fence", "numba_tma_fence_proxy_async_shared_cta", types.void())
_proxy_async_global = declare("fence", "numba_tma_fence_proxy_async_global", types.void())
_proxy_async = declare("fence", "numba_tma_fence_proxy_async", types.void())


def proxy_async_shared():
    """Order this thread's prior shared-memory accesses before later async-proxy accesses (and back).

    PTX: ``fence.proxy.async.shared::cta;`` (sm_90). SASS: ``FENCE.VIEW.ASYNC.S``.
    Issued by: every thread whose ordinary shared-memory writes the TMA unit will read, before the
    barrier that publishes them. Also needed after ordinary writes to a buffer that a TMA load
    will overwrite while other threads may still read it.
    """
    host_call("fence.proxy_async_shared")


def proxy_async_global():
    """Order this thread's prior global-memory accesses against later async-proxy accesses.

    PTX: ``fence.proxy.async.global;`` (sm_90).
    Issued by: each thread that wrote global memory with ordinary stores which a TMA load (or
    bulk copy) in this kernel will read. It orders, it does not synchronise: the reader still
    needs a barrier (``cuda.syncthreads``) or a release/acquire pair after it.
    """
    host_call("fence.proxy_async_global")


def proxy_async():
    """``fence.proxy.async;``: the proxy fence over every state space (shared and global)."""
    host_call("fence.proxy_async")


@overload(proxy_async_shared)
def _ov_proxy_async_shared():
    return lambda: _proxy_async_shared_cta()


@overload(proxy_async_global)
def _ov_proxy_async_global():
    return lambda: _proxy_async_global()


@overload(proxy_async)
def _ov_proxy_async():
    return lambda: _proxy_async()
