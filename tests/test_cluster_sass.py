"""Offline (no GPU) checks of the cluster intrinsics and multicast TMA loads: each lands in sm_90a
SASS as its instruction, inlined, with no stack or local memory; bad operands fail at compile
time; cluster launches are validated (naming the argument) before any driver call; the launch's
parameter packing matches cuda.core's; the multicast demo kernels compile clean."""

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from numba_tma._frontend import cuda, errors
from numba_tma import cluster, launch, mbarrier, tma
from numba_tma.kernels import multicast_copy as mc
from numba_tma.offline import compile_kernel
from sass_checks import check_clean

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

ROOT = Path(__file__).resolve().parents[1]


# --- device intrinsics -------------------------------------------------------------------------

def registers_kernel(out):
    cx, cy, cz = cluster.cta_id()
    nx, ny, nz = cluster.dim()
    ix, iy, iz = cluster.cluster_id()
    gx, gy, gz = cluster.grid_dim()
    out[0] = cluster.cta_rank()
    out[1] = cluster.num_ctas()
    out[2] = cx + 10 * cy + 100 * cz
    out[3] = nx + 10 * ny + 100 * nz
    out[4] = ix + 10 * iy + 100 * iz
    out[5] = gx + 10 * gy + 100 * gz


def test_cluster_registers_sass():
    kb = compile_kernel(registers_kernel, "void(uint32[::1])")
    check_clean(kb)
    assert "SR_CgaCtaId" in kb.sass                    # %cluster_ctarank
    for reg in ("%cluster_ctarank", "%cluster_nctarank", "%cluster_ctaid.z", "%cluster_nctaid.y",
                "%clusterid.x", "%nclusterid.z"):
        assert reg in kb.ptx, reg


def barrier_kernel(out):
    cluster.arrive()
    cluster.wait()
    cluster.arrive_release()
    cluster.wait_acquire()
    out[0] = 1
    cluster.sync()


def relaxed_kernel(out):
    cluster.arrive_relaxed()
    out[0] = 1
    cluster.wait()


def test_cluster_barrier_sass():
    kb = compile_kernel(barrier_kernel, "void(int32[::1])")
    check_clean(kb)
    assert kb.count("UCGABAR_ARV") == 3 and kb.count("UCGABAR_WAIT") == 3
    assert kb.count("MEMBAR.ALL.GPU") == 3                # every arrive here releases
    for ptx in ("barrier.cluster.arrive;", "barrier.cluster.arrive.release;",
                "barrier.cluster.wait;", "barrier.cluster.wait.acquire;"):
        assert ptx in kb.ptx, ptx


def test_relaxed_arrive_has_no_fence():
    kb = compile_kernel(relaxed_kernel, "void(int32[::1])")
    check_clean(kb)
    assert kb.count("UCGABAR_ARV") == 1 and kb.count("UCGABAR_WAIT") == 1
    assert not kb.has("MEMBAR")
    assert "barrier.cluster.arrive.relaxed;" in kb.ptx


def dsmem_kernel(out, peer):
    box = cuda.shared.array(64, np.uint32)
    tid = cuda.threadIdx.x
    a = cluster.map_shared(box, peer)
    cluster.store_u32(a + 4 * tid, tid)
    cluster.sync()
    out[tid] = cluster.load_u32(a + 4 * (63 - tid))
    cluster.sync()


def test_dsmem_sass():
    kb = compile_kernel(dsmem_kernel, "void(uint32[::1], int32)")
    check_clean(kb)
    assert any(op in ("PRMT", "UPRMT") for op in kb.opcodes())   # mapa: rank into the address
    assert kb.has("ST.E") and kb.has("LD.E")               # through the shared window
    assert "SR_SWINHI" in kb.sass
    for ptx in ("mapa.shared::cluster.u32", "st.shared::cluster.u32", "ld.shared::cluster.u32"):
        assert ptx in kb.ptx, ptx


def remote_mbarrier_kernel(out, peer):
    bar = cuda.shared.array(2, np.uint64)
    if cuda.threadIdx.x == 0:
        mbarrier.init(bar, 2)
        mbarrier.init(bar[1:], 1)
        mbarrier.fence_init()
    cluster.sync()
    if cuda.threadIdx.x == 0:
        cluster.mbarrier_arrive(bar, peer)
        cluster.mbarrier_arrive(bar, peer, 1)
    ok = cluster.mbarrier_wait_bounded(bar, 0, 1000)
    ok += cluster.mbarrier_try_wait(bar, 0)
    cluster.mbarrier_wait(bar, 0)
    out[cuda.threadIdx.x] = ok
    cluster.sync()


def remote_cta_arrive_kernel(out, peer):
    bar = cuda.shared.array(1, np.uint64)
    out[0] = 1
    cluster.mbarrier_arrive_cta(bar, peer, 2)


def test_remote_mbarrier_sass():
    kb = compile_kernel(remote_mbarrier_kernel, "void(uint32[::1], int32)")
    check_clean(kb)
    assert kb.count("SYNCS.ARRIVE.TRANS64.RED") == 2
    assert kb.count("SYNCS.PHASECHK.TRANS64.TRYWAIT") >= 3
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in kb.ptx
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in kb.ptx


def test_remote_cta_arrive_has_no_fence():
    kb = compile_kernel(remote_cta_arrive_kernel, "void(uint32[::1], int32)")
    check_clean(kb)
    assert kb.count("SYNCS.ARRIVE.TRANS64.RED") == 1
    assert not kb.has("MEMBAR")
    assert "mbarrier.arrive.release.cta.shared::cluster.b64" in kb.ptx


def make_multicast_kernel(rank):
    shape = (2,) * (rank - 1) + (16,)
    coords = {1: lambda c: (c,), 2: lambda c: (c, 1), 3: lambda c: (c, 1, 2),
              4: lambda c: (c, 1, 2, 3), 5: lambda c: (c, 1, 2, 3, -4)}[rank]
    coords = cuda.jit(device=True)(coords)

    def kernel(desc, c, mask, out):
        tile = cuda.shared.array(shape, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        if cuda.threadIdx.x == 0:
            mbarrier.init(bar, 1)
            mbarrier.fence_init()
        cluster.sync()
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, tile.size * 4)
            tma.load_multicast(tile, desc, coords(c), bar, mask)
        mbarrier.wait(bar, 0)
        out[0] = 1
        cluster.sync()

    return kernel


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_load_multicast_sass(rank):
    kb = compile_kernel(make_multicast_kernel(rank), "void(uint64[::1], int32, int64, int32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops[f"UTMALDG.{rank}D.MULTICAST"] == 1
    assert not any(op.startswith("UTMALDG") and "MULTICAST" not in op for op in ops)
    assert (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile"
            ".mbarrier::complete_tx::bytes.multicast::cluster") in kb.ptx


def literal_mask_kernel(desc, out):
    tile = cuda.shared.array(16, np.float32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    tma.load_multicast(tile, desc, (0,), bar, 0b11)
    out[0] = 1


def test_load_multicast_literal_mask():
    kb = compile_kernel(literal_mask_kernel, "void(uint64[::1], int32[::1])")
    check_clean(kb)
    assert kb.count("UTMALDG.1D.MULTICAST") == 1


def float_mask_kernel(desc, out):
    tile = cuda.shared.array(16, np.float32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    tma.load_multicast(tile, desc, (0,), bar, 1.0)


def bad_bar_multicast_kernel(desc, out):
    tile = cuda.shared.array(16, np.float32, alignment=128)
    bar = cuda.shared.array(1, np.int32)
    tma.load_multicast(tile, desc, (0,), bar, 1)


def bad_remote_bar_kernel(out):
    bar = cuda.shared.array(1, np.float32)
    cluster.mbarrier_arrive(bar, 1)


def bad_map_kernel(out):
    cluster.map_shared(out[0], 1)


def bad_store_kernel(out):
    cluster.store_u32(0, 1.5)


@pytest.mark.parametrize("kernel,sig,message", [
    (float_mask_kernel, "void(uint64[::1], int32[::1])", r"cta_mask must be an integer"),
    (bad_bar_multicast_kernel, "void(uint64[::1], int32[::1])",
     r"tma.load_multicast: bar must have dtype uint64"),
    (bad_remote_bar_kernel, "void(int32[::1])", r"cluster.mbarrier_arrive: bar must have dtype"),
    (bad_map_kernel, "void(int32[::1])", r"cluster.map_shared: arr must be an array"),
    (bad_store_kernel, "void(int32[::1])", r"cluster.store_u32: value must be an integer"),
])
def test_bad_operands_fail_at_compile_time(kernel, sig, message):
    with pytest.raises(TypingError, match=message):
        compile_kernel(kernel, sig)


def test_intrinsics_refuse_host_calls():
    with pytest.raises(RuntimeError, match="device intrinsic"):
        cluster.sync()
    with pytest.raises(RuntimeError, match="device intrinsic"):
        tma.load_multicast(None, None, (0,), None, 1)


# --- the demo kernels --------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 4])
def test_multicast_copy_kernel_sass(n):
    kb = compile_kernel(mc._copy_kernel(np.dtype(np.float32), n).py_func,
                        "void(uint64[::1], float32[:, :, ::1], int32[::1])")
    check_clean(kb)
    assert kb.count("UTMALDG.2D.MULTICAST") == 1
    assert kb.count("UCGABAR_ARV") == 2                    # set-up and tear-down syncs


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("multicast", [True, False])
def test_stream_panels_kernel_sass(n, multicast):
    kb = compile_kernel(mc._stream_kernel(n, multicast).py_func,
                        "void(uint64[::1], int32, uint32[:, ::1], int32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops["LDS.128"] == mc.CHUNKS_PER_THREAD           # unrolled 16-byte reads
    if multicast:
        assert ops["UTMALDG.2D.MULTICAST"] == 1
        # one release.cta arrive per cluster peer, unrolled, with no fence
        assert ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] == n
        assert kb.count("MEMBAR.ALL.GPU") == 2              # only the two cluster syncs
    else:
        assert ops["UTMALDG.2D"] == 1 and "UTMALDG.2D.MULTICAST" not in ops
        assert not kb.has("UCGABAR")


def test_stream_panels_reference_matches_a_direct_model():
    rng = np.random.default_rng(7)
    b = rng.integers(0, 2**32, size=(45, 72), dtype=np.uint32)   # partial tiles and panels
    ref = mc.stream_panels_reference(b, 2)
    panels, k_tiles = 2, 2
    assert ref.shape == (panels * 2, mc.CONSUMERS)
    padded = np.zeros((k_tiles * mc.TILE_K, panels * mc.PANEL_COLS), np.uint32)
    padded[:45, :72] = b
    for cta in range(panels * 2):
        p = cta // 2
        for t in (0, 1, 77, mc.CONSUMERS - 1):
            want = np.uint32(0)
            for k in range(k_tiles):
                tile = padded[k * mc.TILE_K:(k + 1) * mc.TILE_K,
                              p * mc.PANEL_COLS:(p + 1) * mc.PANEL_COLS].ravel()
                for j in range(mc.CHUNKS_PER_THREAD):
                    chunk = t + j * mc.CONSUMERS
                    for w in range(4):
                        want ^= tile[4 * chunk + w]
            assert ref[cta, t] == want, (cta, t)


def test_demo_rejects_bad_arguments():
    with pytest.raises(ValueError, match="cluster_size"):
        mc.multicast_copy(np.zeros((4, 32), np.float32), cluster_size=3)
    with pytest.raises(TypeError, match="src"):
        mc.multicast_copy(np.zeros((4, 32), np.float32), cluster_size=2)
    with pytest.raises(ValueError, match="cluster_size"):
        mc.stream_panels(np.zeros((4, 32), np.uint32), cluster_size=16)


# --- launch validation (no GPU) ----------------------------------------------------------------

def test_plan_cluster_launch_accepts_and_normalises():
    plan = launch.plan_cluster_launch((8, 2), 128, 2)
    assert plan.grid == (8, 2, 1) and plan.block == (128, 1, 1) and plan.cluster == (2, 1, 1)
    assert plan.cluster_size == 2 and plan.num_clusters == 8 and plan.shared_mem == 0
    plan = launch.plan_cluster_launch((16, 4, 2), (32, 4), (2, 2, 2), shared_mem=1024)
    assert plan.cluster_size == 8 and plan.num_clusters == 8 * 2 * 1 and plan.shared_mem == 1024
    assert launch.plan_cluster_launch(32, 64, (16,), non_portable=True).cluster_size == 16


@pytest.mark.parametrize("kwargs,exc,message", [
    (dict(grid=(3, 1), block=128, cluster=2), ValueError,
     r"grid = \(3, 1, 1\) \(in blocks\) is not a multiple of cluster = \(2, 1, 1\): along x, "
     r"3 % 2 = 1; round grid.x up to 4"),
    (dict(grid=(4, 3), block=128, cluster=(2, 2)), ValueError, r"grid .* along y, 3 % 2 = 1"),
    (dict(grid=16, block=128, cluster=(16,)), ValueError,
     r"cluster = \(16, 1, 1\) has 16 CTAs, more than the portable 8; pass non_portable=True"),
    (dict(grid=32, block=128, cluster=32, non_portable=True), ValueError,
     r"cluster = \(32, 1, 1\) has 32 CTAs; sm_90 clusters hold at most 16"),
    (dict(grid=16, block=2048, cluster=2), ValueError, r"block = \(2048, 1, 1\): x = 2048"),
    (dict(grid=16, block=(32, 32, 2), cluster=2), ValueError, r"block = .* has 2048 threads"),
    (dict(grid=16, block=128, cluster=(2, 0)), ValueError, r"cluster = \(2, 0, 1\) must be >= 1"),
    (dict(grid=0, block=128, cluster=1), ValueError, r"grid = \(0, 1, 1\) must be >= 1"),
    (dict(grid=16, block=128, cluster="2"), TypeError, r"cluster must be an int or a tuple"),
    (dict(grid=(1, 2, 3, 4), block=128, cluster=1), TypeError, r"grid must be an int or a tuple"),
    (dict(grid=16, block=True, cluster=1), TypeError, r"block must be an int"),
    (dict(grid=(2**31, 1), block=128, cluster=1), ValueError, r"grid = .* exceeds"),
    (dict(grid=16, block=128, cluster=2, shared_mem=-1), ValueError, r"shared_mem = -1"),
    (dict(grid=16, block=128, cluster=2, shared_mem=1.5), TypeError, r"shared_mem must be an int"),
    (dict(grid=16, block=128, cluster=2, non_portable=1), TypeError, r"non_portable must be"),
])
def test_plan_cluster_launch_rejects(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        launch.plan_cluster_launch(**kwargs)


@cuda.jit
def _noop(out):
    out[0] = 1


def test_launch_validates_before_touching_the_gpu():
    # All of these fail on a machine with no GPU, before any driver call.
    with pytest.raises(ValueError, match=r"grid = \(5, 1, 1\)"):
        launch.launch_cluster(_noop, 5, 32, 2, (None,))
    with pytest.raises(ValueError, match="grid"):
        launch.cluster_launch(_noop, (2, 1, 1))[3, 32]
    with pytest.raises(ValueError, match="takes 2 to 4 values"):
        launch.cluster_launch(_noop, 2)[4]
    with pytest.raises(TypeError, match="cluster must be"):
        launch.cluster_launch(_noop, "2")
    with pytest.raises(TypeError, match="kernel must be a @cuda.jit kernel"):
        launch.launch_cluster(lambda out: None, 4, 32, 2, (None,))
    with pytest.raises(TypeError, match="args must be a tuple"):
        launch.launch_cluster(_noop, 4, 32, 2, None)
    with pytest.raises(ValueError, match="non_portable=True"):
        launch.max_active_clusters(_noop, (None,), 128, 12)


def _read_params(address, sizes):
    ptrs = (ctypes.c_void_p * len(sizes)).from_address(address)
    return [ctypes.string_at(ptrs[i], n) for i, n in enumerate(sizes)]


def test_pack_kernel_args_matches_cuda_core():
    # The words numba's _prepare_args produces for (array, int32, float32, float64, bool).
    args = [0, 0, 12, 4, 0x7F00_1234_5678, 3, 4, 16, 4, ctypes.c_int32(-7), ctypes.c_float(1.5),
            ctypes.c_double(-2.25), True, ctypes.c_uint16(0x3C00), 2**40 + 3]
    sizes = [8] * 9 + [4, 4, 8, 1, 2, 8]
    a, keep_a = launch.pack_kernel_args(args)
    b, keep_b = launch.pack_kernel_args_ctypes(args)
    got_a, got_b = _read_params(a, sizes), _read_params(b, sizes)
    assert got_a == got_b
    assert got_b[4] == (0x7F00_1234_5678).to_bytes(8, "little")
    assert got_b[9] == (-7).to_bytes(4, "little", signed=True)
    assert got_b[12] == b"\x01"
    assert launch.pack_kernel_args([])[0] == 0
    with pytest.raises(TypeError, match="parameter word 0"):
        launch.pack_kernel_args_ctypes([object()])


# --- the bench's pure parts --------------------------------------------------------------------

def _load_bench():
    name = "bench_multicast"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benches" / "multicast.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bench_arguments_and_arithmetic():
    bench = _load_bench()
    assert bench.VALID_CLUSTERS == mc.CLUSTER_SIZES
    a = bench.parse_args([])
    assert (a.k, a.w, a.clusters, a.iters, a.warmup) == (16384, 8192, [2, 4], 50, 5)
    a = bench.parse_args(["--clusters", "4,2,4", "--k", "64", "--w", "128", "--json", "x.json"])
    assert a.clusters == [4, 2] and a.json == "x.json"
    with pytest.raises(SystemExit):
        bench.parse_args(["--clusters", "3"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--w", "6"])
    assert bench.traffic(64, 128, 4, True) == (4 * 64 * 128 * 4, 64 * 128 * 4)
    assert bench.traffic(64, 128, 4, False) == (4 * 64 * 128 * 4, 4 * 64 * 128 * 4)
    rows = [bench.make_row(2, "multicast", "ok", times=[1.0, 2.0, 3.0], smem_bytes=4e9,
                           l2_bytes=2e9),
            bench.make_row(2, "unicast_cluster", "ok", times=[4.0], smem_bytes=4e9, l2_bytes=4e9),
            bench.make_row(2, "unicast", "FAILED", reason="x")]
    bench.finalize(rows)
    assert set(rows[0]) == set(bench.RESULT_KEYS)
    assert rows[0]["ms"] == 2.0 and rows[0]["smem_GBps"] == pytest.approx(2000.0)
    assert rows[0]["l2_GBps"] == pytest.approx(1000.0) and rows[0]["x_unicast"] == 2.0
    assert rows[2]["x_unicast"] is None
    assert "multicast" in bench.format_results(rows)
