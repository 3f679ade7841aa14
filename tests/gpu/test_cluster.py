"""Thread-block clusters on the GPU: cluster coordinates seen by every CTA, the cluster barrier,
distributed shared memory (mapa + remote st/ld), remote mbarrier arrivals, TMA multicast loads of
every rank under several CTA masks, and the multicast demo kernels. Every mbarrier wait is bounded;
every kernel ends with cluster.sync() so no CTA exits while a peer may touch its shared memory."""

import functools
import math

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, coords_fn, random_array
from numba_tma import TensorMap, cluster, mbarrier, tma
from numba_tma._frontend import cuda
from numba_tma.kernels import multicast_copy as mc
from numba_tma.launch import cluster_launch, launch_cluster, max_active_clusters

FIELDS = 14  # rank, size, cta_id xyz, dim xyz, cluster_id xyz, grid_dim xyz


@cuda.jit
def coords_kernel(out):
    if cuda.threadIdx.x == 0:
        b = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
        cx, cy, cz = cluster.cta_id()
        nx, ny, nz = cluster.dim()
        ix, iy, iz = cluster.cluster_id()
        gx, gy, gz = cluster.grid_dim()
        vals = (cluster.cta_rank(), cluster.num_ctas(), cx, cy, cz, nx, ny, nz, ix, iy, iz,
                gx, gy, gz)
        for i in range(FIELDS):
            out[b, i] = vals[i]
    cluster.sync()


def expected_coords(grid, clus):
    rows = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                c = (x % clus[0], y % clus[1], z % clus[2])
                rank = c[0] + clus[0] * (c[1] + clus[1] * c[2])
                rows.append((rank, math.prod(clus)) + c + tuple(clus)
                            + (x // clus[0], y // clus[1], z // clus[2])
                            + tuple(g // k for g, k in zip(grid, clus)))
    return np.array(rows, np.int64)


@pytest.mark.parametrize("grid,clus", [
    ((2, 1, 1), (2, 1, 1)), ((8, 3, 1), (4, 1, 1)), ((4, 4, 2), (2, 2, 1)),
    ((6, 2, 4), (1, 2, 2)), ((8, 1, 1), (8, 1, 1)),
])
def test_cluster_coordinates(grid, clus):
    nblocks = math.prod(grid)
    out = random_array((nblocks, FIELDS), np.int64)       # a host array: numba copies it back
    launch_cluster(coords_kernel, grid, 64, clus, (out,))
    np.testing.assert_array_equal(out, expected_coords(grid, clus))


def test_cluster_coordinates_sugar_stream_and_non_portable():
    stream = cuda.stream()
    out = cuda.to_device(random_array((32, FIELDS), np.int64))
    # sm_90 GPUs (H100, H200) run non-portable 16-CTA clusters: an error or 0 here is a failure.
    fits = max_active_clusters(coords_kernel, (out,), 32, 16, non_portable=True)
    assert fits >= 1, "this sm_90 GPU cannot co-schedule a 16-CTA cluster of a 32-thread kernel"
    cluster_launch(coords_kernel, (16, 1, 1), non_portable=True)[32, 32, stream](out)
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), expected_coords((32, 1, 1), (16, 1, 1)))


def test_plain_launch_is_a_cluster_of_one():
    out = cuda.to_device(random_array((6, FIELDS), np.int64))
    coords_kernel[(3, 2), 32](out)
    np.testing.assert_array_equal(out.copy_to_host(), expected_coords((3, 2, 1), (1, 1, 1)))


def test_max_active_clusters():
    out = cuda.to_device(np.zeros((4, FIELDS), np.int64))
    for n in (2, 4, 8):
        assert max_active_clusters(coords_kernel, (out,), 64, (n, 1, 1)) >= 1


WORDS = 64


@cuda.jit
def dsmem_kernel(out):
    own = cuda.shared.array(WORDS, np.uint32)
    mail = cuda.shared.array(WORDS, np.uint32)
    tid = cuda.threadIdx.x
    r = cluster.cta_rank()
    n = cluster.num_ctas()
    own[tid] = r * 1000 + tid
    mail[tid] = 0xDEADBEEF
    cluster.sync()                                    # every CTA's `own` is written
    nxt = r + 1 if r + 1 < n else 0
    prev = r - 1 if r > 0 else n - 1
    # read the next CTA's `own`; write ours into the previous CTA's `mail`
    got = cluster.load_u32(cluster.map_shared(own, nxt) + 4 * tid)
    cluster.store_u32(cluster.map_shared(mail, prev) + 4 * tid, got + 7)
    cluster.sync()                                    # the remote stores are visible
    b = cuda.blockIdx.x
    out[b, 0, tid] = got
    out[b, 1, tid] = mail[tid]
    cluster.sync()                                    # nobody exits while peers may read it


@pytest.mark.parametrize("n", [2, 4, 8])
def test_dsmem_remote_load_store(n):
    grid = 2 * n
    out = cuda.to_device(random_array((grid, 2, WORDS), np.uint32))
    launch_cluster(dsmem_kernel, grid, WORDS, n, (out,))
    got = out.copy_to_host()
    tid = np.arange(WORDS, dtype=np.uint32)
    for b in range(grid):
        r = b % n
        np.testing.assert_array_equal(got[b, 0], ((r + 1) % n) * 1000 + tid)
        # our mail came from the next CTA, which read *its* next CTA's `own`
        np.testing.assert_array_equal(got[b, 1], ((r + 2) % n) * 1000 + tid + 7)


@cuda.jit
def remote_arrive_kernel(out, ok):
    mail = cuda.shared.array(WORDS, np.uint32)
    bars = cuda.shared.array(2, np.uint64)
    tid = cuda.threadIdx.x
    r = cluster.cta_rank()
    n = cluster.num_ctas()
    if tid == 0:
        mbarrier.init(bars, WORDS)          # one arrival per thread of the previous CTA
        mbarrier.init(bars[1:], n)          # one arrival from each CTA (thread 0)
        mbarrier.fence_init()
    mail[tid] = 0
    cluster.sync()
    nxt = r + 1 if r + 1 < n else 0
    # publish a word into the next CTA's mail, then arrive there (release.cluster)
    cluster.store_u32(cluster.map_shared(mail, nxt) + 4 * tid, r * 100 + tid + 1)
    cluster.mbarrier_arrive(bars, nxt)
    if tid == 0:
        for c in range(n):
            cluster.mbarrier_arrive_cta(bars[1:], c)
    # the previous CTA's words are visible once its arrivals complete the phase (acquire.cluster)
    if not cluster.mbarrier_wait_bounded(bars, 0, TIMEOUT_NS):
        ok[cuda.blockIdx.x] = 0
    if not cluster.mbarrier_wait_bounded(bars[1:], 0, TIMEOUT_NS):
        ok[cuda.blockIdx.x] = 0
    out[cuda.blockIdx.x, tid] = mail[tid]
    cluster.sync()


@pytest.mark.parametrize("n", [2, 4])
def test_remote_mbarrier_arrive(n):
    grid = 3 * n
    out = cuda.to_device(random_array((grid, WORDS), np.uint32))
    ok = cuda.to_device(np.ones(grid, np.int32))
    launch_cluster(remote_arrive_kernel, grid, WORDS, n, (out, ok))
    assert ok.copy_to_host().all(), "a cluster mbarrier wait timed out"
    got = out.copy_to_host()
    for b in range(grid):
        prev = (b % n - 1) % n
        np.testing.assert_array_equal(got[b], prev * 100 + np.arange(WORDS) + 1)


# --- multicast loads ---------------------------------------------------------------------------

@functools.cache
def multicast_kernel(rank, n_elems, dtype):
    coords_of = coords_fn(rank)
    nbytes = n_elems * np.dtype(dtype).itemsize

    @cuda.jit
    def kernel(desc, c, mask, src_rank, out, ok):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        tid = cuda.threadIdx.x
        r = cluster.cta_rank()
        if tid == 0:
            mbarrier.init(bar, 1)
            mbarrier.fence_init()
        cluster.sync()                        # receivers' barriers exist before the copy lands
        receiver = (mask >> r) & 1
        if tid == 0:
            if receiver:
                mbarrier.arrive_expect_tx(bar, nbytes)   # each receiver expects the whole box
            if r == src_rank:
                tma.load_multicast(tile, desc, coords_of(c), bar, mask)
        if receiver:
            if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
                ok[r] = 0
            for i in range(tid, n_elems, cuda.blockDim.x):
                out[r, i] = tile[i]
        cluster.sync()                        # the issuer stays until every receiver has it

    return kernel


MC_CASES = {
    1: (np.float32, (1001,), (64,), (516,)),
    2: (np.uint8, (37, 112), (8, 32), (-3, 80)),
    3: (np.float16, (5, 19, 48), (2, 4, 16), (4, 17, 40)),
    4: (np.float64, (3, 5, 7, 38), (2, 2, 4, 8), (1, -1, 2, 6)),
    5: (np.int32, (2, 3, 5, 7, 36), (1, 2, 2, 4, 8), (1, 2, 4, 5, 32)),
}
# (cluster size, mask, issuing rank): partial masks; the issuer is in the mask here (the cases
# with the issuer outside it are the last test of this file).
MASKS = [(2, 0b11, 0), (2, 0b01, 0), (2, 0b10, 1), (4, 0b1111, 2), (4, 0b0101, 2),
         (4, 0b1000, 3)]
MASKS_ISSUER_OUTSIDE = [(2, 0b01, 1), (4, 0b1010, 0)]


def run_multicast(rank, n, mask, issuer):
    dtype, shape, box, coords = MC_CASES[rank]
    a = random_array(shape, dtype)
    tmap = TensorMap(cuda.to_device(a), box)
    n_elems = math.prod(tmap.smem_shape)
    poison = random_array((n, n_elems), dtype)
    out = cuda.to_device(poison)
    ok = cuda.to_device(np.ones(n, np.int32))
    launch_cluster(multicast_kernel(rank, n_elems, dtype), n, 128, n,
                   (tmap, cuda.to_device(np.array(coords, np.int32)), np.int32(mask),
                    np.int32(issuer), out, ok))
    assert ok.copy_to_host().all(), "an mbarrier wait timed out"
    got = out.copy_to_host()
    want = box_model(a, coords, box).reshape(-1)
    for r in range(n):
        if mask >> r & 1:
            np.testing.assert_array_equal(got[r], want, err_msg=f"rank {r} mask {mask:#b}")
        else:
            np.testing.assert_array_equal(got[r], poison[r], err_msg=f"rank {r} was written")


@pytest.mark.parametrize("rank", sorted(MC_CASES))
@pytest.mark.parametrize("n,mask,issuer", MASKS)
def test_load_multicast(rank, n, mask, issuer):
    run_multicast(rank, n, mask, issuer)


# --- the demo kernels --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("shape,dtype", [((64, 64), np.float32), ((100, 52), np.float32),
                                         ((37, 208), np.uint8), ((3, 16), np.float64),
                                         ((65, 40), np.int16)])
def test_multicast_copy(shape, dtype, n):
    a = random_array(shape, dtype)
    out = cuda.to_device(random_array((n,) + shape, dtype))
    mc.multicast_copy(cuda.to_device(a), n, out=out)
    got = out.copy_to_host()
    for r in range(n):
        np.testing.assert_array_equal(got[r], a, err_msg=f"CTA rank {r} of {n}")


@pytest.mark.parametrize("n", [1, 2, 4, 8])
@pytest.mark.parametrize("multicast,use_cluster", [(True, True), (False, True), (False, False)])
def test_stream_panels(n, multicast, use_cluster):
    b = random_array((300, 200), np.uint32)     # 10 k-tiles (the ring wraps), 4 panels, ragged
    got = mc.stream_panels(cuda.to_device(b), n, multicast, use_cluster).copy_to_host()
    np.testing.assert_array_equal(got, mc.stream_panels_reference(b, n))


def test_stream_panels_int32_one_tile():
    b = random_array((5, 12), np.int32)
    got = mc.stream_panels(cuda.to_device(b), 2).copy_to_host()
    np.testing.assert_array_equal(got, mc.stream_panels_reference(b, 2))


# Last, as the one semantic the PTX ISA implies but does not spell out: the issuing CTA need not
# be a destination ("ctaMask specifies the destination CTAs"). Should the H100 fault on it, the
# context loss then hits no later test of this file.
@pytest.mark.parametrize("rank", [2, 5])
@pytest.mark.parametrize("n,mask,issuer", MASKS_ISSUER_OUTSIDE)
def test_load_multicast_issuer_outside_mask(rank, n, mask, issuer):
    run_multicast(rank, n, mask, issuer)
