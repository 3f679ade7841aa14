"""Timing on the GPU with CUDA events, and host cost per call.

``numba.cuda`` is imported inside the functions (``event``/``synchronize`` can be given instead,
which is how the tests time fake events without a GPU).
"""

import time

from .stats import gbps, median


def _warm_up(fn, iters, warmup, event, synchronize):
    """Check ``iters``, default ``event``/``synchronize`` to numba's, run the ``warmup`` untimed
    calls and synchronize; returns ``(event, synchronize)``."""
    if iters < 1:
        raise ValueError("iters must be >= 1")
    if event is None or synchronize is None:
        from .._frontend import cuda

        event = event or cuda.event
        synchronize = synchronize or cuda.synchronize
    for _ in range(warmup):
        fn()
    synchronize()
    return event, synchronize


def time_cuda(fn, iters, warmup=0, *, event=None, synchronize=None, hold=None):
    """Times of ``iters`` runs of ``fn()`` in ms, each bracketed by its own pair of CUDA events.

    ``fn`` enqueues asynchronous work on the default stream (where the events are recorded).
    ``warmup`` untimed runs come first, then a device synchronize; all timed runs are enqueued
    back to back (so the GPU never waits on the host for a launch that takes longer than its
    enqueue), and the host waits once at the end. ``hold``, if given, enqueues a GPU-side wait
    first (e.g. ``torch.cuda._sleep``): the host then queues every timed run while the GPU
    waits, so a run shorter than its launch's Python cost is timed on the GPU alone (device
    time, not host throughput). ``event``/``synchronize`` default to numba's ``cuda.event``
    and ``cuda.synchronize`` (overridable for tests).
    """
    event, synchronize = _warm_up(fn, iters, warmup, event, synchronize)
    pairs = [(event(), event()) for _ in range(iters)]
    if hold is not None:
        hold()
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    pairs[-1][1].synchronize()
    synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def time_cuda_batch(fn, iters, warmup=0, *, event=None, synchronize=None):
    """Time per run in ms of ``iters`` back-to-back runs of ``fn()`` between one pair of CUDA
    events, with no GPU-side wait: what a caller sees, the Python launch path included wherever
    it is slower than the GPU (``time_cuda`` with ``hold`` times the GPU alone).

    ``warmup`` untimed runs and a device synchronize come first. ``event``/``synchronize`` as
    in ``time_cuda``.
    """
    event, synchronize = _warm_up(fn, iters, warmup, event, synchronize)
    start, end = event(), event()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def host_us_per_call(fn, iters, hold, synchronize):
    """Host cost of one call of ``fn`` in microseconds: ``iters`` calls timed with
    ``time.perf_counter`` after ``hold()`` (a GPU-side wait, e.g. ``torch.cuda._sleep``) so no
    call waits for the GPU; ``synchronize`` before and after."""
    synchronize()
    hold()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - start
    synchronize()
    return elapsed / iters * 1e6


def interleaved_rounds(fns, rounds, iters, warmup=0, *, hold=None, wall=False, event=None,
                       synchronize=None):
    """Time several functions in interleaved rounds: each round runs every ``fns`` entry in turn
    (``time_cuda``: ``warmup`` untimed runs, then ``iters`` runs between CUDA events, queued
    behind ``hold`` when given), so a clock that drifts with power or temperature shifts them
    all alike. Returns, per entry in order, ``(round medians in ms, wall ms per call per round)``;
    the wall times (``time_cuda_batch``, no hold) only with ``wall``, else an empty list."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    fns = list(fns)
    out = [([], []) for _ in fns]
    for _ in range(rounds):
        for fn, (ms, walls) in zip(fns, out):
            ms.append(median(time_cuda(fn, iters, warmup, hold=hold, event=event,
                                       synchronize=synchronize)))
            if wall:
                walls.append(time_cuda_batch(fn, iters, warmup, event=event,
                                             synchronize=synchronize))
    return out


def do_bench(fn, iters=50, warmup=5, rounds=1, *, hold=None, event=None, synchronize=None):
    """The time of one ``fn()`` in ms: the median over ``rounds`` rounds of the median of
    ``iters`` runs, each between its own pair of CUDA events on the default stream, after
    ``warmup`` untimed runs (numba_tma's ``triton.testing.do_bench``). ``fn`` enqueues
    asynchronous work; ``hold`` (a GPU-side wait such as ``torch.cuda._sleep``) makes it device
    time even where ``fn``'s Python cost exceeds the kernel's. Several functions to compare:
    :func:`interleaved_rounds`."""
    (ms, _), = interleaved_rounds([fn], rounds, iters, warmup, hold=hold, event=event,
                                  synchronize=synchronize)
    return median(ms)


def copy_bandwidth(nbytes=1 << 30, iters=20, warmup=3):
    """The device-to-device copy bandwidth in GB/s (decimal; bytes read plus written, ``2 *
    nbytes``): ``cuMemcpyDtoDAsync`` of ``nbytes`` between two fresh allocations, timed with
    :func:`do_bench`. The ceiling a memory-bound kernel is compared with."""
    import numpy as np
    from .._frontend import cuda

    src = cuda.device_array(nbytes, np.uint8)
    dst = cuda.device_array(nbytes, np.uint8)
    stream = cuda.default_stream()
    ms = do_bench(lambda: dst.copy_to_device(src, stream=stream), iters, warmup)
    return gbps(2 * nbytes, ms)
