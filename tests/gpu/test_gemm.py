"""``matmul`` on the GPU -- the wgmma GEMM it runs by default and the mma.sync rung (GemmConfig)
-- for every operand layout, output dtype and alpha/beta path, at tile multiples, odd shapes and
seeded random shapes, against numpy.

Small-integer inputs make the products and their fp32 sums exact, so those results compare
exactly (the 16-bit outputs after the same round-to-nearest); random-normal inputs check the
ordinary case within fp32-accumulation bounds.
"""

import numpy as np
import pytest

from numba_tma import matmul, matmul_api, warp
from numba_tma._calls import BoundedCache
from numba_tma._frontend import cuda
from numba_tma.kernels.gemm import GemmConfig, WgmmaConfig
from numba_tma.kernels.gemm.plan import LaunchPlan, sm_count
from numba_tma.ladders.gemm_pingpong import PingPongConfig
from numba_tma.ladders.gemm_stream_k import StreamKConfig
from numba_tma.matmul_api import plan_matmul

rng = np.random.default_rng()

SHAPES = [(128, 256, 64), (256, 512, 192), (1001, 1000, 1000), (8, 8, 8), (200, 72, 8),
          (64, 520, 4104), (1, 16, 24)]


def small_ints(shape):
    return rng.integers(-4, 5, size=shape).astype(np.float16)


def layout(x, order):
    """A device array holding ``x`` row-major ("C") or column-major ("F")."""
    d = cuda.to_device(np.ascontiguousarray(x) if order == "C" else np.asfortranarray(x))
    if order == "F" and min(x.shape) > 1:
        assert d.is_f_contiguous() and not d.is_c_contiguous()
    return d


def poisoned(shape, dtype):
    return cuda.to_device(np.full(shape, np.nan, dtype))


def exact_reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def random_problem(r, m_range, n8_range, k8_range):
    """(m, n, k, orders) drawn with ``r``: m in ``m_range``, n and k multiples of 8 (TMA's
    16-byte rows) from ``n8_range``/``k8_range`` eighths, random A/B layouts ("C"/"F"; A
    row-major where m is not a multiple of 8)."""
    m = int(r.integers(*m_range))
    n = 8 * int(r.integers(*n8_range))
    k = 8 * int(r.integers(*k8_range))
    orders = "".join(r.choice(["C", "F"], 2))
    if orders[0] == "F" and m % 8:
        orders = "C" + orders[1]
    return m, n, k, orders


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_f16_exact_every_layout(shape, orders):
    m, n, k = shape
    if orders[0] == "F" and m % 8 or orders[1] == "F" and k % 8 or orders[1] == "C" and n % 8:
        pytest.skip("that layout's contiguous dimension is not a multiple of 16 bytes")
    a, b = small_ints((m, k)), small_ints((k, n))
    ref = exact_reference(a, b)
    for out_dtype in (np.float32, np.float16):
        out = poisoned((m, n), out_dtype)
        matmul(layout(a, orders[0]), layout(b, orders[1]), out)
        np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


@pytest.mark.parametrize("cfg", [WgmmaConfig(256), WgmmaConfig(128), WgmmaConfig(64),
                                 WgmmaConfig(256, stages=2), WgmmaConfig(192, group_m=3),
                                 WgmmaConfig(256, stages=3), WgmmaConfig(256, cluster_m=2),
                                 WgmmaConfig(128, stages=5, cluster_m=2),
                                 WgmmaConfig(256, c_buffers=4),
                                 WgmmaConfig(256, cluster_m=2, c_buffers=4),
                                 WgmmaConfig(256, persistent=False),
                                 WgmmaConfig(128, stages=2, persistent=False),
                                 WgmmaConfig(256, mma_pipe=0),
                                 WgmmaConfig(256, stages=4, persistent=False, mma_pipe=0),
                                 WgmmaConfig(128, stages=4, mma_pipe=0, bm=256),
                                 WgmmaConfig(64, bm=256), WgmmaConfig(128, bm=256, cluster_m=2),
                                 PingPongConfig(128, stages=6),
                                 PingPongConfig(64),
                                 WgmmaConfig(256, stages=4, mma_pipe=0, l2_promotion=0),
                                 # matmul()'s one-wave narrow tiles, and its 128 x 192
                                 WgmmaConfig(128, stages=4, persistent=False),
                                 WgmmaConfig(192, stages=4, mma_pipe=0),
                                 # ... and its narrow tiles in pairs along N sharing A
                                 WgmmaConfig(64, stages=8, persistent=False, cluster_n=2),
                                 WgmmaConfig(64, stages=4, persistent=False, cluster_n=2),
                                 WgmmaConfig(128, stages=4, persistent=False, cluster_n=2),
                                 WgmmaConfig(64, stages=8, persistent=False),
                                 # one consumer warpgroup for both m64 halves (matmul()'s
                                 # 128 x 64 choice), also at 128 x 128 and in pairs
                                 WgmmaConfig(64, stages=8, persistent=False, consumers=1),
                                 WgmmaConfig(64, stages=2, persistent=False, consumers=1),
                                 WgmmaConfig(128, stages=4, persistent=False, consumers=1),
                                 WgmmaConfig(64, stages=4, persistent=False, cluster_n=2,
                                             consumers=1),
                                 WgmmaConfig(128, bm=256, cluster_m=2, l2_promotion=256),
                                 GemmConfig(128, 256, 4), GemmConfig(128, 128, 4),
                                 GemmConfig(64, 64, 2), GemmConfig(256, 128, 2),
                                 GemmConfig(192, 128, 2),   # 6 warps take turns producing
                                 GemmConfig(128, 256, 4, cluster_m=2),
                                 GemmConfig(128, 128, 2, group_m=3, cluster_m=2)],
                         ids=repr)
def test_configs_exact(cfg):
    m, n, k = 333, 392, 520
    a, b = small_ints((m, k)), small_ints((k, n))
    out = poisoned((m, n), np.float32)
    matmul(cuda.to_device(a), cuda.to_device(b), out, config=cfg)
    np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b))


def test_l2_promotion_reaches_the_operand_maps():
    # A's and B's tensor maps carry the config's L2 promotion, C's none; the launcher cache
    # keeps configs that differ only there apart, and both compute the same product.
    from numba_tma import matmul_api
    m, n, k = 300, 264, 200
    a, b = cuda.to_device(small_ints((m, k))), cuda.to_device(small_ints((k, n)))
    ref = exact_reference(a.copy_to_host(), b.copy_to_host())
    maps = {}
    out = poisoned((m, n), np.float32)
    for promo in (0, 128, 256):
        cfg = WgmmaConfig(256, stages=4, mma_pipe=0, l2_promotion=promo)
        out.copy_to_device(np.full((m, n), np.nan, np.float32))
        matmul(a, b, out, config=cfg)
        np.testing.assert_array_equal(out.copy_to_host(), ref)
        layout = LaunchPlan(matmul_api.plan_matmul(a, b, out, cfg), False)
        maps[promo] = [tmap.encoded for tmap in layout.maps]
    for promo in (128, 256):
        assert maps[promo][0] != maps[0][0] and maps[promo][1] != maps[0][1]
        assert maps[promo][2] == maps[0][2]
    assert maps[128][0] != maps[256][0]


@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_cluster_multicast_every_layout(orders):
    # 5 tile rows: the last cluster's second CTA lies wholly past M (loads zeros, stores nothing)
    m, n, k = 520, 776, 392
    a, b = small_ints((m, k)), small_ints((k, n))
    out = poisoned((m, n), np.float16)
    matmul(layout(a, orders[0]), layout(b, orders[1]), out, config=GemmConfig(128, 256, 4,
                                                                              cluster_m=2))
    np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b).astype(np.float16))


@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_wgmma_cluster_every_layout(orders):
    # 5 tile rows: the last cluster's second CTA lies wholly past M (loads zeros, stores nothing)
    m, n, k = 520, 776, 392
    a, b = small_ints((m, k)), small_ints((k, n))
    out = poisoned((m, n), np.float16)
    matmul(layout(a, orders[0]), layout(b, orders[1]), out, config=WgmmaConfig(256, cluster_m=2))
    np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b).astype(np.float16))


@pytest.mark.parametrize("cfg", [WgmmaConfig(256), WgmmaConfig(128, stages=6),
                                 WgmmaConfig(256, stages=3, group_m=5),
                                 WgmmaConfig(256, cluster_m=2), WgmmaConfig(128, cluster_m=2),
                                 WgmmaConfig(256, c_buffers=4),
                                 WgmmaConfig(256, cluster_m=2, c_buffers=4),
                                 StreamKConfig(256, c_buffers=4),
                                 WgmmaConfig(256, mma_pipe=0),
                                 WgmmaConfig(256, stages=4, mma_pipe=0),
                                 WgmmaConfig(256, cluster_m=2, stages=4, mma_pipe=0),
                                 StreamKConfig(256, mma_pipe=0),
                                 WgmmaConfig(128, stages=4, mma_pipe=0, bm=256),
                                 WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, cluster_m=2),
                                 WgmmaConfig(128, stages=3, bm=256, c_buffers=4),
                                 PingPongConfig(128, stages=6),
                                 PingPongConfig(128, stages=3, c_buffers=4)],
                         ids=repr)
@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_persistent_many_tiles(cfg, out_dtype):
    # More tiles than SMs: every persistent block (cluster) walks several tiles, so the slot
    # ring, the staging boxes and the beta loads' barrier phases carry across tiles. M, N and
    # K are not tile multiples; beta reads the old C back.
    m, n, k = 3000, 2600, 328
    a, b = small_ints((m, k)), small_ints((k, n))
    c = small_ints((m, n)).astype(out_dtype)
    out = cuda.to_device(c)
    matmul(layout(a, "C"), layout(b, "F"), out, alpha=-1.0, beta=2.0, config=cfg)
    ref = -exact_reference(a, b) + 2.0 * c.astype(np.float64)
    np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


OVERLAPPED = [WgmmaConfig(256, stages=4, mma_pipe=0, overlap_epilogue=True),
              WgmmaConfig(256, stages=4, mma_pipe=0, cluster_m=2, overlap_epilogue=True),
              WgmmaConfig(192, stages=4, mma_pipe=0, group_m=3, overlap_epilogue=True),
              WgmmaConfig(192, stages=4, mma_pipe=0, overlap_epilogue=True),     # matmul()'s
              WgmmaConfig(128, stages=6, mma_pipe=0, cluster_m=2, overlap_epilogue=True),
              WgmmaConfig(64, stages=6, mma_pipe=0, overlap_epilogue=True)]


@pytest.mark.parametrize("cfg", OVERLAPPED, ids=repr)
@pytest.mark.parametrize("k", [328, 136, 8], ids=lambda k: f"k{k}")
@pytest.mark.parametrize("b_order", ["C", "F"])
def test_overlapped_epilogue_exact(cfg, k, b_order):
    # Several tiles per block: each tile's C is stored under the next tile's first slots
    # (K = 136 and 8: fewer slots than boxes, the rest stored after them), the block's last
    # tile after its loop; M and N not tile multiples; alpha scales before the packing. f32
    # output keeps the plain epilogue.
    m, n = 3000, 2600
    a, b = small_ints((m, k)), small_ints((k, n))
    ref = -0.5 * exact_reference(a, b)
    a_d, b_d = layout(a, "C"), layout(b, b_order)
    for out_dtype in (np.float16, np.float32):
        out = poisoned((m, n), out_dtype)
        matmul(a_d, b_d, out, alpha=-0.5, config=cfg)
        np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


def test_overlapped_epilogue_seeded_random_shapes():
    # matmul()'s overlapped choices on 20 random problems large enough for several tiles per
    # block, random layouts, exact against float64 (the seed is printed to replay a failure).
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed {seed}")
    r = np.random.default_rng(seed)
    for case in range(20):
        cfg = OVERLAPPED[case % 2]
        m, n, k, orders = random_problem(r, (1500, 4000), (250, 500), (1, 80))
        a, b = small_ints((m, k)), small_ints((k, n))
        out = poisoned((m, n), np.float16)
        matmul(layout(a, orders[0]), layout(b, orders[1]), out, config=cfg)
        np.testing.assert_array_equal(out.copy_to_host(),
                                      exact_reference(a, b).astype(np.float16),
                                      err_msg=f"seed {seed} case {case}: {m}x{n}x{k} {orders}")


@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_alpha_beta_exact(out_dtype):
    m, n, k = 300, 264, 136
    a, b = small_ints((m, k)), small_ints((k, n))
    c = small_ints((m, n)).astype(out_dtype)
    out = cuda.to_device(c)
    matmul(cuda.to_device(a), cuda.to_device(b), out, alpha=0.5, beta=-2.0)
    ref = 0.5 * exact_reference(a, b) - 2.0 * c.astype(np.float64)
    np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


@pytest.mark.parametrize("cfg", [WgmmaConfig(256), WgmmaConfig(128), WgmmaConfig(256, cluster_m=2),
                                 WgmmaConfig(256, persistent=False),
                                 WgmmaConfig(256, stages=4, mma_pipe=0),
                                 WgmmaConfig(256, cluster_m=2, stages=4, mma_pipe=0),
                                 WgmmaConfig(128, stages=4, mma_pipe=0, bm=256),
                                 WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, cluster_m=2),
                                 PingPongConfig(128, stages=6),
                                 WgmmaConfig(64, stages=8, persistent=False, consumers=1),
                                 WgmmaConfig(128, stages=4, persistent=False, consumers=1)],
                         ids=repr)
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_wgmma_layouts_alpha_beta(cfg, orders, out_dtype):
    # Partial tiles in M, N and K; the old C is read back through the beta path.
    m, n, k = 264, 392, 200
    a, b = small_ints((m, k)), small_ints((k, n))
    c = small_ints((m, n)).astype(out_dtype)
    out = cuda.to_device(c)
    matmul(layout(a, orders[0]), layout(b, orders[1]), out, alpha=2.0, beta=-1.0, config=cfg)
    ref = 2.0 * exact_reference(a, b) - c.astype(np.float64)
    np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


@pytest.mark.parametrize("b_order", ["C", "F"])
def test_matmul_chooses_256_row_tiles_where_they_take_fewer_waves(b_order):
    # 4095 x 4104: 17 columns of 128 x 256 tiles (the last 8 wide) against 33 of 256 x 128;
    # matmul() takes the 256-row tiles, in 2-CTA clusters, whether B's stored rows are a
    # multiple of 128 bytes (column-major B) or not (row-major: 8208 bytes); exact against
    # float64.
    m, n, k = 4095, 4104, 1024
    a, b = small_ints((m, k)), small_ints((k, n))
    a_d, b_d = layout(a, "C"), layout(b, b_order)
    out = poisoned((m, n), np.float32)
    plan = plan_matmul(a_d, b_d, out)
    if cuda.get_current_device().MULTIPROCESSOR_COUNT == 132:
        assert plan.config.bm == 256 and plan.config.cluster_m == 2
    matmul(a_d, b_d, out)
    np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b))


def test_seeded_random_shapes():
    # 60 random problems (any M; N and K multiples of 8 as TMA's 16-byte rows need, or any
    # where that operand is M/N-major ...), random layouts and output dtypes, exact against
    # float64. The seed is printed so a failure can be replayed.
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"seed {seed}")
    r = np.random.default_rng(seed)
    for case in range(60):
        m, n, k, orders = random_problem(r, (1, 700), (1, 90), (1, 120))
        out_dtype = (np.float32, np.float16)[case % 2]
        a, b = small_ints((m, k)), small_ints((k, n))
        out = poisoned((m, n), out_dtype)
        matmul(layout(a, orders[0]), layout(b, orders[1]), out)
        np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b).astype(out_dtype),
                                      err_msg=f"seed {seed} case {case}: {m}x{n}x{k} {orders}")


def test_k_zero_scales_out():
    m, n = 40, 48
    c = small_ints((m, n)).astype(np.float32)
    out = cuda.to_device(c)
    matmul(cuda.to_device(np.zeros((m, 0), np.float16)), cuda.to_device(np.zeros((0, n), np.float16)),
           out, beta=3.0)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * c)
    out = poisoned((m, n), np.float32)
    matmul(cuda.to_device(np.zeros((m, 0), np.float16)), cuda.to_device(np.zeros((0, n), np.float16)),
           out)
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros((m, n), np.float32))


@pytest.mark.parametrize("cfg", OVERLAPPED[:2], ids=repr)
def test_k_zero_overlapped_epilogue_writes_zeros(cfg):
    # The overlapped epilogue zeroes no accumulators where a first slice overwrites them: with
    # K = 0 there is none, and every tile (several per block) must still be stored as zeros.
    m, n = 3000, 2600
    out = poisoned((m, n), np.float16)
    matmul(cuda.to_device(np.zeros((m, 0), np.float16)),
           cuda.to_device(np.zeros((0, n), np.float16)), out, config=cfg)
    np.testing.assert_array_equal(out.copy_to_host(), np.zeros((m, n), np.float16))


def check_default_path_exact(a, b, da, db, alpha, beta):
    """matmul(da, db, out) with the config it chooses, exact against ``a @ b`` (small integers)
    into 16-bit and f32 ``out``, then ``alpha * a @ b + beta * C`` into an f32 C."""
    m, n = a.shape[0], b.shape[1]
    ref = exact_reference(a, b)
    for out_dtype in (np.float16, np.float32):
        out = poisoned((m, n), out_dtype)
        matmul(da, db, out)
        np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))
    c = small_ints((m, n)).astype(np.float32)
    out = cuda.to_device(c)
    matmul(da, db, out, alpha=alpha, beta=beta)
    np.testing.assert_array_equal(out.copy_to_host(), alpha * ref + beta * c)


@pytest.mark.parametrize("m, n", [(1000, 1000), (760, 2040)], ids=["128x64", "128x128"])
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_ragged_rows_take_pairs_exact(m, n, orders):
    # Where neither A's nor B's rows in memory are whole 128-byte lines (here 1000 or 2040
    # elements, and K = 120), matmul() runs its narrow tiles in CTA pairs along N that multicast
    # A (cluster_n=2); the tile columns at 1000 are 16, at 2040 16 of 128, so every pair is full,
    # and the odd counts are in test_configs_exact. Exact for every layout, 16-bit and f32
    # output, and with beta.
    k = 120
    a, b = small_ints((m, k)), small_ints((k, n))
    da, db = layout(a, orders[0]), layout(b, orders[1])
    assert plan_matmul(da, db, poisoned((m, n), np.float16)).config.cluster_n == 2
    check_default_path_exact(a, b, da, db, alpha=-1.0, beta=0.5)


@pytest.mark.parametrize("m, n, overlapped", [(1536, 1528, False), (3000, 3064, True)],
                         ids=["one-round", "overlapped"])
def test_chosen_128x192_tiles_exact(m, n, overlapped):
    # Where 128 x 192 tiles take no more waves than the large tile, matmul() takes them
    # (choose_config): on 132 SMs one round of 96 tiles at 1536 x 1528 (one tile per block),
    # three at 3000 x 3064 (the overlapped epilogue). Exact through the default path, 16-bit
    # and f32 output, and with beta (the plain epilogue).
    k = 72
    cfg = matmul_api.choose_config(m, n, k)
    if sm_count() == 132:
        assert (cfg.bn, cfg.cluster_m, cfg.overlap_epilogue) == (192, 1, overlapped), cfg
    a, b = small_ints((m, k)), small_ints((k, n))
    check_default_path_exact(a, b, cuda.to_device(a), cuda.to_device(b), alpha=1.0, beta=-2.0)


@pytest.mark.parametrize("shape", [(2048, 2048, 2048), (1000, 1032, 4000), (4096, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
def test_f16_random_within_fp32_bounds(shape):
    m, n, k = shape
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = poisoned((m, n), np.float32)
    matmul(cuda.to_device(a), cuda.to_device(b), out)
    got = out.copy_to_host().astype(np.float64)
    ref = exact_reference(a, b)
    # fp32 accumulation of k products: |err| <= k * 2^-24 * sum|a||b| (a loose, safe bound).
    bound = k * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(got - ref) <= bound + 1e-6)


def _torch():
    try:
        import torch as t
    except ImportError:
        pytest.skip("torch is not installed")
    return t


@pytest.mark.parametrize("config", [None, OVERLAPPED[1]], ids=["chosen", "overlapped"])
@pytest.mark.parametrize("out_kind", ["bfloat16", "float32"])
@pytest.mark.parametrize("orders", ["CC", "FF"])
def test_bf16_torch_exact(out_kind, orders, config):
    t = _torch()
    m, n, k = (520, 392, 264) if config is None else (2600, 3000, 264)
    a = rng.integers(-4, 5, size=(m, k)).astype(np.float32)
    b = rng.integers(-4, 5, size=(k, n)).astype(np.float32)
    ta = t.tensor(a, dtype=t.bfloat16, device="cuda")
    tb = t.tensor(b, dtype=t.bfloat16, device="cuda")
    if orders[0] == "F":
        ta = ta.t().contiguous().t()
    if orders[1] == "F":
        tb = tb.t().contiguous().t()
    out = t.full((m, n), float("nan"), dtype=getattr(t, out_kind), device="cuda")
    matmul(ta, tb, out, config=config)
    ref = exact_reference(a, b).astype(np.float32)
    got = out.float().cpu().numpy()
    if out_kind == "bfloat16":
        ref = warp.bf16_to_float32(warp.bf16_bits(ref))
    np.testing.assert_array_equal(got, ref)


def test_torch_f16_allocates_out():
    t = _torch()
    with pytest.raises(TypeError, match="same dtype"):
        matmul(t.ones(8, 8, dtype=t.float16, device="cuda"),
               t.ones(8, 8, dtype=t.bfloat16, device="cuda"))
    a = t.randn(300, 200, dtype=t.float16, device="cuda")
    b = t.randn(200, 136, dtype=t.float16, device="cuda")
    out = matmul(a, b, out_dtype=t.float32)
    assert out.dtype == t.float32 and tuple(out.shape) == (300, 136)
    ref = (a.double() @ b.double())
    assert t.allclose(out.double(), ref, rtol=0, atol=1e-3)


def test_cupy_f16():
    cp = pytest.importorskip("cupy")
    a = cp.asarray(small_ints((264, 128)))
    b = cp.asarray(small_ints((128, 72)))
    out = matmul(a, b)
    assert isinstance(out, cp.ndarray) and out.dtype == cp.float16
    np.testing.assert_array_equal(cp.asnumpy(out),
                                  exact_reference(cp.asnumpy(a), cp.asnumpy(b)).astype(np.float16))


# ------------------------------------------------------------------------------- bad input


def dev(shape, dtype=np.float16):
    return cuda.to_device(np.ones(shape, dtype))


F16, F32 = np.float16, np.float32


@pytest.mark.parametrize("specs, exc, match", [
    ((((8, 8), F32), ((8, 8), F16), ((8, 8), F32)), TypeError, "a must have"),
    ((((8, 8), F16), ((8, 8), F32), ((8, 8), F32)), TypeError, "b must have"),
    ((((8, 8), F16), ((16, 8), F16), ((8, 8), F32)), ValueError, "b must have 8 rows"),
    ((((8, 8), F16), ((8, 16), F16), ((8, 8), F32)), ValueError, "out must have shape"),
    ((((8, 8), F16), ((8, 8), F16), ((8, 8), np.int32)), TypeError, "out must have dtype"),
    ((((8, 12), F16), ((12, 8), F16), ((8, 8), F32)), ValueError, "a is M x K row-major"),
    ((((8, 8), F16), ((8, 12), F16), ((8, 12), F32)), ValueError, "b is N-contiguous"),
    ((((8, 8), F16), ((8, 8), F16), ((8, 8, 1), F32)), ValueError, "out must have shape"),
    ((((8, 8, 2), F16), ((8, 8), F16), ((8, 8), F32)), ValueError, "a must be 2-D"),
    ((None, ((8, 8), F16), ((8, 8), F32)), TypeError, "host"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_input(specs, exc, match):
    # Arrays are made here, not at collection (no GPU there).
    args = [np.ones((8, 8), F16) if spec is None else dev(*spec) for spec in specs]
    with pytest.raises(exc, match=match):
        matmul(*args)


def test_bad_strides_and_overlap():
    a = dev((16, 32))
    with pytest.raises(ValueError, match="a must be row-major or column-major"):
        matmul(a[:, ::2], dev((16, 8)), dev((16, 8), np.float32))
    sq = dev((16, 16))
    with pytest.raises(ValueError, match="out overlaps a"):
        matmul(sq, dev((16, 16)), sq)
    with pytest.raises(ValueError, match="beta must be 0"):
        matmul(dev((8, 8)), dev((8, 8)), beta=1.0)
    with pytest.raises(ValueError, match="16-byte aligned"):
        matmul(_misaligned(), dev((8, 8)), dev((17, 8), np.float32))


def _misaligned():
    # A row-major 17 x 8 view starting 2 bytes into an allocation.
    flat = cuda.to_device(np.ones(17 * 8 + 8, np.float16))
    return flat[1:1 + 17 * 8].reshape(17, 8)


def test_plan_layouts():
    a = dev((64, 32))
    b = dev((32, 48))
    plan = plan_matmul(a, b, dev((64, 48), np.float32))
    assert plan.a_kmajor and not plan.b_kmajor and plan.out_kind == "f32"
    assert isinstance(plan.config, WgmmaConfig)
    plan = plan_matmul(cuda.to_device(np.ones((64, 32), np.float16, order="F")),
                       cuda.to_device(np.ones((32, 48), np.float16, order="F")), dev((64, 48)))
    assert not plan.a_kmajor and plan.b_kmajor and plan.out_kind == "f16"


def test_repeated_calls_reuse_the_launcher_correctly():
    # matmul() caches its launcher by operand addresses, shapes, strides and dtypes: new data in
    # the same buffers, a new alpha, a beta path and a new out buffer all give fresh results,
    # and a call that differs in shape is validated again (no stale hit).
    m, n, k = 200, 136, 72
    a, b = small_ints((m, k)), small_ints((k, n))
    da, db = cuda.to_device(a), cuda.to_device(b)
    out = poisoned((m, n), np.float32)
    for step in range(3):
        a = small_ints((m, k))
        da.copy_to_device(a)
        alpha = float(step + 1)
        matmul(da, db, out, alpha=alpha)
        np.testing.assert_array_equal(out.copy_to_host(), alpha * exact_reference(a, b))
    c = out.copy_to_host()
    matmul(da, db, out, beta=-1.0)
    np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b) - c)
    other = poisoned((m, n), np.float32)
    matmul(da, db, other)
    np.testing.assert_array_equal(other.copy_to_host(), exact_reference(a, b))
    with pytest.raises(ValueError, match="out must have shape"):
        matmul(da, db, poisoned((m, n + 8), np.float32))
    with pytest.raises(ValueError, match="b must have 72 rows"):
        matmul(da, cuda.to_device(small_ints((k + 8, n))), out)


@pytest.mark.parametrize("dependent", ["1", "0"], ids=["dependent", "serialized"])
@pytest.mark.parametrize("m, n", [(256, 512), (3000, 1024), (4096, 2048)],
                         ids=["tile-per-block", "cluster", "overlapped"])
def test_back_to_back_dependent_launches(m, n, dependent, monkeypatch):
    # matmul() launches its wgmma kernels dependent (programmatic stream serialization;
    # NUMBA_TMA_DEPENDENT_LAUNCH=0 turns that off): each may start while the one before it in the
    # stream ends, and must not read its input before that one wrote it, nor overwrite what
    # that one still reads. A chain through two buffers, 24 launches with no host sync, each
    # reading what the last one wrote and writing what it read: x <- x @ P for a signed
    # permutation P keeps the values small integers, so the chain compares exactly; an early
    # read or write shows as stale values. (The kernels' griddep.wait is a no-op otherwise.)
    monkeypatch.setenv("NUMBA_TMA_DEPENDENT_LAUNCH", dependent)
    # (read when a launcher is bound: none cached from buffers at the same addresses before)
    monkeypatch.setattr(matmul_api, "_launchers", BoundedCache(matmul_api.LAUNCHER_CACHE_SIZE))
    perm = rng.permutation(n)
    sign = rng.choice(np.array([-1, 1], np.float16), n)
    p = np.zeros((n, n), np.float16)
    p[np.arange(n), perm] = sign
    x0 = rng.integers(-3, 4, size=(m, n)).astype(np.float16)
    bufs = [cuda.to_device(x0), poisoned((m, n), np.float16)]
    dp = cuda.to_device(p)
    expect = x0.astype(np.float64)
    for step in range(24):
        matmul(bufs[step % 2], dp, bufs[(step + 1) % 2])
        expect = expect @ p.astype(np.float64)
    np.testing.assert_array_equal(bufs[0].copy_to_host(), expect.astype(np.float16))


def test_matmul_kernels_every_launcher():
    """Every launcher ``matmul_kernels()`` lists, shipped and ladder, on operands it takes,
    exactly (small integers): the shipped rungs at an odd shape, the SIMT ladder in fp32, the
    one-warp rungs at 16 x 16 x 16."""
    from numba_tma.matmul_api import matmul_kernels

    for name, fn in matmul_kernels().items():
        if name.startswith("warp16_"):
            m = n = k = 16
        else:
            m, n, k = 200, 72, 136
        dtype = np.float32 if name == "simt_fp32" else np.float16
        a, b = small_ints((m, k)).astype(dtype), small_ints((k, n)).astype(dtype)
        out = poisoned((m, n), dtype)
        assert fn(cuda.to_device(a), cuda.to_device(b), out) is out, name
        np.testing.assert_array_equal(out.copy_to_host(), exact_reference(a, b).astype(dtype),
                                      err_msg=name)
