"""mbarrier phases, arrival counts, transaction bytes, inval; async-proxy fences and bulk groups."""

import functools

import numpy as np

from gpu_helpers import TIMEOUT_NS, box_model, random_array
from numba_tma import TensorMap, fence, mbarrier, tma
from numba_tma._frontend import cuda

NTHREADS = 128
PHASES = 4


@cuda.jit
def phases_kernel(log):
    # log[p, 0]: thread 0 saw phase p incomplete before its own arrival
    # log[p, 1]: every thread saw phase p complete after waiting (try_wait and test_wait)
    bar = cuda.shared.array(1, np.uint64)
    seen = cuda.shared.array(1, np.int32)
    mbarrier.init_block(bar, NTHREADS)
    tid = cuda.threadIdx.x
    for p in range(PHASES):
        if tid == 0:
            seen[0] = 0
            log[p, 0] = 0 if mbarrier.test_wait(bar, p) else 1
        cuda.syncthreads()
        mbarrier.arrive(bar)
        if mbarrier.wait_bounded(bar, p, TIMEOUT_NS):
            if mbarrier.try_wait(bar, p) and mbarrier.test_wait(bar, p):
                cuda.atomic.add(seen, 0, 1)
        cuda.syncthreads()
        if tid == 0:
            log[p, 1] = seen[0]


def test_phases_alternate_parity():
    log = cuda.to_device(np.full((PHASES, 2), -1, np.int32))
    phases_kernel[1, NTHREADS](log)
    got = log.copy_to_host()
    np.testing.assert_array_equal(got[:, 0], 1)
    np.testing.assert_array_equal(got[:, 1], NTHREADS)


@cuda.jit
def arrive_count_kernel(log):
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 2 * cuda.blockDim.x)
    mbarrier.arrive(bar, 2)                       # each thread arrives twice at once
    log[cuda.threadIdx.x] = mbarrier.wait_bounded(bar, 0, TIMEOUT_NS)


def test_arrive_with_count():
    log = cuda.to_device(np.zeros(64, np.int32))
    arrive_count_kernel[1, 64](log)
    np.testing.assert_array_equal(log.copy_to_host(), 1)


@cuda.jit
def tx_kernel(desc, out, log):
    tile = cuda.shared.array(256, np.float32, alignment=128)
    bars = cuda.shared.array(2, np.uint64)
    mbarrier.init_block(bars, 1)
    if cuda.threadIdx.x == 0:
        # bars[0]: bytes announced with expect_tx alone, then a plain arrival
        mbarrier.expect_tx(bars, 256 * 4)
        tma.load(tile, desc, (3, 4), bars)
        mbarrier.arrive(bars)
        # bars[1]: 16 bytes announced that no copy delivers: the phase must not complete
        mbarrier.arrive_expect_tx(bars[1:], 16)
    log[0] = mbarrier.wait_bounded(bars, 0, TIMEOUT_NS)
    log[1] = mbarrier.wait_bounded(bars[1:], 0, 200_000)
    log[2] = mbarrier.test_wait(bars[1:], 0)
    for i in range(cuda.threadIdx.x, 256, cuda.blockDim.x):
        out[i] = tile[i]


def test_expect_tx_counts_bytes():
    a = random_array((40, 52), np.float32)
    out = cuda.to_device(random_array(256, np.float32))
    log = cuda.to_device(np.full(3, -1, np.int32))
    tx_kernel[1, 1](TensorMap(cuda.to_device(a), (8, 32)), out, log)
    np.testing.assert_array_equal(log.copy_to_host(), [1, 0, 0])
    np.testing.assert_array_equal(out.copy_to_host().reshape(8, 32), box_model(a, (3, 4), (8, 32)))


@cuda.jit
def inval_kernel(log):
    bar = cuda.shared.array(1, np.uint64)
    tid = cuda.threadIdx.x
    if tid == 0:
        mbarrier.init(bar, 1)
        mbarrier.fence_init()
    cuda.syncthreads()
    if tid == 0:
        mbarrier.arrive(bar)
    log[0, tid] = mbarrier.wait_bounded(bar, 0, TIMEOUT_NS)
    cuda.syncthreads()
    if tid == 0:
        mbarrier.inval(bar)
        mbarrier.init(bar, 2)                   # re-initialised: two arrivals, parity 0 again
        mbarrier.fence_init()
    cuda.syncthreads()
    if tid == 0:
        mbarrier.arrive(bar)
        log[1, 0] = mbarrier.test_wait(bar, 0)  # one arrival of two: still pending
    cuda.syncthreads()
    if tid == 1:
        mbarrier.arrive(bar)
    log[1, tid] += 2 * mbarrier.wait_bounded(bar, 0, TIMEOUT_NS)


def test_inval_and_reinit():
    log = cuda.to_device(np.zeros((2, 32), np.int32))
    inval_kernel[1, 32](log)
    got = log.copy_to_host()
    np.testing.assert_array_equal(got[0], 1)
    np.testing.assert_array_equal(got[1], 2)    # test_wait was 0 for thread 0, then all completed


@functools.cache
def global_fence_kernel(fenced=True):
    """Ordinary stores to global memory, then a TMA load of the same bytes in the same kernel,
    ``ITERS`` times with fresh values per block. ``fenced=False`` is the same kernel without
    the proxy fences: tests/test_gpu_test_kernels_sass.py compiles both, so the fence test
    fails (offline, on every machine) if the instruction disappears from the fenced kernel."""

    @cuda.jit
    def kernel(scratch, desc, values, out, log):
        tile = cuda.shared.array(512, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        row0 = cuda.blockIdx.x * 16                     # this block's 16 x 32 region
        bad = 0
        for it in range(ITERS):
            for i in range(cuda.threadIdx.x, 512, cuda.blockDim.x):
                scratch[row0 + i // 32, i % 32] = values[i] + it
            if fenced:
                fence.proxy_async_global()
                fence.proxy_async()
            cuda.syncthreads()
            if cuda.threadIdx.x == 0:
                tma.load_tile(tile, desc, (row0, 0), bar)
            if not mbarrier.wait_bounded(bar, it & 1, TIMEOUT_NS):
                log[0] = 0
            for i in range(cuda.threadIdx.x, 512, cuda.blockDim.x):
                if tile[i] != values[i] + it:
                    bad += 1
                out[cuda.blockIdx.x, i] = tile[i]
            cuda.syncthreads()                          # tile read out before the next load
        if bad:
            cuda.atomic.add(log, 1, bad)

    return kernel


ITERS = 16
FENCE_BLOCKS = 264


def test_proxy_async_global_fence():
    """Generic-proxy stores, fence.proxy.async.global, then a TMA (async-proxy) load of the
    same bytes: the load must see the stores. 264 blocks x 16 rounds of fresh values make a
    missing fence likely to show as stale data here; that the fence is really there (and that
    the check would see it gone) is tested offline on its SASS (FENCE.VIEW.ASYNC.G)."""
    scratch = cuda.to_device(random_array((FENCE_BLOCKS * 16, 32), np.float32))
    values = np.arange(512, dtype=np.float32) * 3
    out = cuda.to_device(random_array((FENCE_BLOCKS, 512), np.float32))
    log = cuda.to_device(np.array([1, 0], np.int32))
    global_fence_kernel()[FENCE_BLOCKS, 256](scratch, TensorMap(scratch, (16, 32)),
                                             cuda.to_device(values), out, log)
    ok, stale = log.copy_to_host()
    assert ok == 1 and stale == 0, f"wait ok {ok}, stale elements {stale}"
    np.testing.assert_array_equal(out.copy_to_host(), np.tile(values + ITERS - 1, (FENCE_BLOCKS, 1)))


@cuda.jit
def groups_kernel(desc, tiles_in, out, log):
    # Three stores from three tiles, committed separately, retired with every wait form; then the
    # stored region is read back with TMA, which is only right once wait_group(0) has returned.
    tiles = cuda.shared.array((3, 8, 32), np.float32, alignment=128)
    back = cuda.shared.array((8, 96), np.float32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    for i in range(cuda.threadIdx.x, 3 * 256, cuda.blockDim.x):
        tiles[i // 256, (i // 32) % 8, i % 32] = tiles_in[i]
    fence.proxy_async_shared()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        tma.store(desc, (0, 0), tiles[0])
        tma.commit_group()
        tma.store(desc, (0, 32), tiles[1])
        tma.commit_group()
        tma.wait_group_read(1)
        tma.store_async(desc, (0, 64), tiles[2])
        tma.wait_group_read(2)
        tma.wait_group(1)
        tma.wait_group(0)
        fence.proxy_async_global()
        tma.load_tile(back, desc[16:], (0, 0), bar)   # the second descriptor
    log[0] = mbarrier.wait_bounded(bar, 0, TIMEOUT_NS)
    for i in range(cuda.threadIdx.x, 8 * 96, cuda.blockDim.x):
        out[i] = back[i // 96, i % 96]


def test_bulk_groups_and_readback():
    g = cuda.to_device(random_array((8, 96), np.float32))
    store_map = TensorMap(g, (8, 32))
    load_map = TensorMap(g, (8, 96))
    # Both descriptors in one 256-byte array: the second starts 128 bytes (64-byte aligned) in.
    both = cuda.to_device(np.concatenate([store_map.device_array.copy_to_host(),
                                          load_map.device_array.copy_to_host()]))
    tiles_in = random_array(3 * 256, np.float32)
    out = cuda.to_device(random_array(8 * 96, np.float32))
    log = cuda.to_device(np.zeros(1, np.int32))
    groups_kernel[1, 128](both, cuda.to_device(tiles_in), out, log)
    assert log.copy_to_host()[0] == 1
    want = tiles_in.reshape(3, 8, 32).transpose(1, 0, 2).reshape(8, 96)
    np.testing.assert_array_equal(g.copy_to_host(), want)
    np.testing.assert_array_equal(out.copy_to_host().reshape(8, 96), want)
    del store_map, load_map  # kept alive until here: they own the references to g
