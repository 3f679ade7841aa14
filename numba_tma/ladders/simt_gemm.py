"""A tiled SIMT fp32 GEMM in plain numba (seed 004): ``C = alpha * A @ B + beta * C``.

Seed 004 (``004_9575a841adb7a051.txt``, "GEMM优化1:使用 CuTe 实现一个 naive GEMM": BM = BN = 64,
BK = 16, TM = TN = 8, slice-k, with its bank-conflict analysis). On a GPU,
tests/gpu/test_simt_gemm.py prints the "large" configuration's speed at 4096^3 against cuBLAS
fp32 (no committed result times it: ``docs/gemm.md``).

No tensor cores, no inline PTX: the classic CUDA-core GEMM the seed builds with CuTe (block tile
BM x BN, slice-k over BK-deep slices staged in shared memory, each thread a TM x TN micro-tile of
C in registers), written out by hand so that every index is visible. Runs under numba's CUDA
simulator too (tests/test_simt_gemm_sim.py).

Seed mapping (its CuTe names in brackets). Block ``(blockIdx.y, blockIdx.x)`` owns the BM x BN
tile of C [``gC = local_tile(mC, (BM, BN), (by, bx))``] and walks K in BK-deep slices (slice-k):
each slice of A (BM x BK) and B (BK x BN) is copied to shared memory [``copy(tAgA, tAsA)``], the
block syncs, and each thread accumulates the outer products of its TM values of A and TN values of
B for every k of the slice [``gemm(tCsA, tCsB, tCrC)``]. The shared tiles are stored as k-rows
(``sA[k][m]``, ``sB[k][n]``: the seed's ``sA (BM, BK) : (1, BM)``), so a thread's operands for one
k are contiguous and load as 16-byte vectors.

Two configurations (``CONFIGS``): ``"seed"`` is the seed's BM = BN = 64, BK = 16, TM = TN = 8 (64
threads); ``"large"`` (the default) is the same design at BM = BN = 128 (256 threads, 8 warps,
two blocks per SM), which is what keeps the FFMA pipes busy: for every k a thread loads 16 floats
from shared memory (four ``LDS.128``) and issues 64 ``FFMA``.

What differs from the seed, and why (its section 2.2.4 finds a 4-way bank conflict on sA and an
8-lane broadcast on sB with its thread partition ``tC_row = tid % 8``):

* Thread layout: a warp is a 4 (m) x 8 (n) patch of the thread grid, and a thread's 8 rows (and
  8 columns) are two runs of 4, ``BM/2`` (``BN/2``) apart. For one k the warp reads 4 distinct
  16-byte vectors of sA (64 contiguous bytes) and 8 of sB (128 contiguous bytes): every
  ``LDS.128`` is conflict-free, its distinct vectors on distinct banks, the rest broadcasts.
* Shared rows are padded by 4 floats (``PAD``): the transposing copy of a k-major operand
  (row-major A, column-major B) has 8 lanes along k and 4 along m, banks ``(4k + m) mod 32``, all
  32 distinct; vectors stay 16-byte aligned. The direct copy (lanes along m) is conflict-free
  with or without the pad.
* Register prefetch and two shared buffers: slice t + 1 is loaded from global memory into
  registers before slice t is computed and stored to the other buffer after it, so the loads'
  latency hides behind 1024 FFMAs per thread and there is one ``syncthreads`` per slice (the seed
  has two and waits on every load).
* The k loop is unrolled by two (``K_UNROLL``) through an inlined step function: LLVM leaves the
  64-FFMA loop body rolled (78 instructions per 64 FFMAs); unrolled, 147 per 128. Unrolling by
  4 or more, or BK = 8, makes ptxas spill under the 128-register bound of two blocks per SM.

Offline (tests/test_seed_gemm_sass.py): 128 registers, no local memory, and the inner loop is
exactly ``K_UNROLL * 4`` ``LDS.128`` and ``K_UNROLL * 64`` ``FFMA`` plus 11 loop instructions; a
whole 16-deep slice of the "large" row-major kernel is ~1400 instructions per thread of which
1024 FFMAs (the rest: 16 guarded loads, 16 shared stores, their addresses, the barrier), which
bounds it at about 1024/1400 of the FFMA peak.

Layouts: ``layout="row"``: a (M, K), b (K, N), out (M, N) all C-contiguous (row-major).
``layout="col"``: all three Fortran-contiguous (column-major, BLAS's convention; the seed's
``A (M, K) : (1, M)`` and ``C (M, N) : (1, M)``). The seed stores "B transposed", ``B (N, K) :
(1, N)`` (CuTe's NT GEMM), which element for element is a row-major (K, N) B: pass
``layout="col", b_layout="row"`` for exactly the seed's operands. Layouts only change how threads
map onto global memory in the copies (coalesced in every case) and the edge indexing; the inner
loop is the same kernel code.

Any M, N, K: edge slices load zeros outside the matrices, edge tiles store only inside C.
"""

import collections
import functools

import numpy as np

from .._frontend import config as numba_config, cuda, register_jitable
from .._arrays import as_device
from .._bridge import inline_device
from ..launch import configure

__all__ = ["Config", "CONFIGS", "DEFAULT_CONFIG", "LAYOUTS", "gemm_kernel", "launch_config",
           "simt_gemm", "flops"]

Config = collections.namedtuple("Config", "bm bn bk tm tn")

CONFIGS = {
    "seed": Config(bm=64, bn=64, bk=16, tm=8, tn=8),      # seed 004: 64 threads, 8 x 8 each
    "large": Config(bm=128, bn=128, bk=16, tm=8, tn=8),   # 256 threads, 8 x 8 each
}
DEFAULT_CONFIG = "large"
#: Blocks per SM the launch bounds reserve registers for (65536 / (threads * blocks) each).
MIN_BLOCKS = {"seed": 4, "large": 2}
LAYOUTS = ("row", "col")

LANES_M, LANES_N = 4, 8   # a warp is a 4 x 8 patch of the thread grid
RUN = 4                   # a micro-tile's rows (columns) are two runs of 4 floats: 16-byte vectors
PAD = 4                   # floats appended to each shared row: keeps 16 B alignment, staggers banks
K_RUN = 8                 # transposing copy: 8 lanes read 8 consecutive k (one 32-byte sector)
K_UNROLL = 2              # k steps per inner-loop iteration
BANKS = 32
MAX_GRID_Y = 65535
# Indices are cast to uint64 where they are known to be in range: numba wraps negative signed
# indices (a compare and a select per access), which also hides from LLVM the 16-byte alignment
# it needs to merge four shared loads into one LDS.128.
U = np.uint64
# The simulator has no aligned shared arrays (and no vectors to align for).
_SHARED_ALIGN = None if numba_config.ENABLE_CUDASIM else 16


def _check_config(cfg):
    """(threads along m, threads along n, threads) of a supported configuration."""
    bm, bn, bk, tm, tn = cfg
    th_m, th_n = bm // tm, bn // tn
    nt = th_m * th_n
    ok = (tm == 2 * RUN and tn == 2 * RUN and bm % tm == 0 and bn % tn == 0
          and th_m % LANES_M == 0 and th_n % LANES_N == 0 and bk % K_RUN == 0
          and bk % K_UNROLL == 0)
    for extent in (bm, bn):
        ok = (ok and extent & (extent - 1) == 0 and extent % BANKS == 0 and nt % extent == 0
              and extent % (nt // K_RUN) == 0)
    if not ok:
        raise ValueError(f"unsupported tile configuration {cfg}: need TM = TN = {2 * RUN}, "
                         f"power-of-two BM and BN (multiples of {BANKS}, dividing the thread "
                         f"count), BK a multiple of {K_RUN} and {K_UNROLL}, whole {LANES_M} x "
                         f"{LANES_N} warps")
    return th_m, th_n, nt


def _jit(threads, min_blocks):
    """``cuda.jit`` with launch bounds; the simulator's ``jit`` takes none."""
    try:
        return cuda.jit(launch_bounds=(threads, min_blocks))
    except TypeError:
        return cuda.jit


def _device():
    """An always-inlined device function (plain ``device=True`` under the simulator)."""
    return inline_device


@register_jitable
def thread_tile(tid, warps_n):
    """(tm, tn) of thread ``tid``: warp w is the 4 x 8 patch (w // warps_n, w % warps_n) of the
    thread grid, lane l its (l // 8, l % 8). The micro-tile is rows ``4 tm + {0..3}`` and
    ``BM/2 + 4 tm + {0..3}``, columns likewise with tn and BN/2."""
    warp, lane = tid >> 5, tid & 31
    return ((warp // warps_n) * LANES_M + (lane >> 3),
            (warp % warps_n) * LANES_N + (lane & (LANES_N - 1)))


@register_jitable
def kmajor_coords(j, tid, bo, nt, bk):
    """(o, k) within the BO x BK slice of the ``j``-th element thread ``tid`` copies from a
    k-major operand: 8 lanes along k (one 32-byte sector per row), 4 rows per warp."""
    parts = bk // K_RUN
    return (j // parts) * (nt // K_RUN) + (tid >> 3), (j % parts) * K_RUN + (tid & (K_RUN - 1))


@register_jitable
def omajor_coords(j, tid, bo, nt, bk):
    """(o, k) of the ``j``-th element thread ``tid`` copies from an o-major operand: lanes along
    o (``tid % BO``), ``NT / BO`` k rows per pass."""
    return tid & (bo - 1), j * (nt // bo) + tid // bo


def _copy_fns(kmajor, BO, P, NT, BK):
    """Device functions moving one operand's BO x BK slice: ``load(x, reg, o0, O, ld, k0, K,
    tid)`` from the flat array ``x`` (element (o, k) at ``o * ld + k`` if ``kmajor`` else
    ``k * ld + o``; o is m for A, n for B) into registers, zeros outside ``O x K``; and
    ``store(s, sbase, reg, tid)`` into shared ``s[sbase + k * P + o]``.

    k-major: lane l of warp w takes o = 4 w + l // 8 (+ q * NT / 8) and k = l % 8 (+ 8 p): every
    row's 8 k are one 32-byte sector, the shared store is conflict-free with ``P = BO + 4``.
    o-major: lanes along o (``tid % BO``), 128 contiguous bytes per warp, ``NT / BO`` k per pass.
    """
    NREG = BO * BK // NT
    ROWS = NT // K_RUN                 # k-major: o rows per pass
    PARTS = BK // K_RUN                # k-major: k runs per row
    KSTRIDE = NT // BO                 # o-major: k rows per pass
    f32 = np.float32

    if kmajor:
        @_device()
        def load(x, reg, o0, O, ld, k0, K, tid):
            o, k = kmajor_coords(0, tid, BO, NT, BK)
            o += o0
            k += k0
            base = o * ld + k
            rstep = ROWS * ld
            for j in range(NREG):
                q, p = j // PARTS, j % PARTS
                if o + q * ROWS < O and k + p * K_RUN < K:
                    reg[j] = x[U(base + q * rstep + p * K_RUN)]
                else:
                    reg[j] = f32(0)

        @_device()
        def store(s, sbase, reg, tid):
            for j in range(NREG):
                o, k = kmajor_coords(j, tid, BO, NT, BK)
                s[U(sbase + k * P + o)] = reg[j]
    else:
        @_device()
        def load(x, reg, o0, O, ld, k0, K, tid):
            o, k = omajor_coords(0, tid, BO, NT, BK)
            o += o0
            k += k0
            base = k * ld + o
            kstep = KSTRIDE * ld
            for j in range(NREG):
                if o < O and k + j * KSTRIDE < K:
                    reg[j] = x[U(base + j * kstep)]
                else:
                    reg[j] = f32(0)

        @_device()
        def store(s, sbase, reg, tid):
            for j in range(NREG):
                o, k = omajor_coords(j, tid, BO, NT, BK)
                s[U(sbase + k * P + o)] = reg[j]

    return load, store


@functools.cache
def gemm_kernel(config=DEFAULT_CONFIG, a_kmajor=True, b_kmajor=False, c_rowmajor=True):
    """The compiled-on-first-call kernel for ``config`` (a ``CONFIGS`` key) and storage orders:
    A k-major (row-major A) or m-major, B k-major (column-major B) or n-major, C row- or
    column-major.

    ``kernel(a, b, c, M, N, K, lda, ldb, ldc, alpha, beta)``: ``a``, ``b``, ``c`` flat float32
    arrays; element (m, k) of A at ``m * lda + k`` (k-major) or ``k * lda + m``, (k, n) of B at
    ``n * ldb + k`` (k-major) or ``k * ldb + n``, (m, n) of C at ``m * ldc + n`` (row-major) or
    ``n * ldc + m``; M, N, K, ld* int64, alpha, beta float32. Launch ``[grid, threads]`` from
    ``launch_config``. With ``beta == 0`` C is only written, never read (it may hold NaNs).
    """
    cfg = CONFIGS[config]
    BM, BN, BK, TM, TN = cfg
    TH_M, TH_N, NT = _check_config(cfg)
    WARPS_N = TH_N // LANES_N
    PA, PB = BM + PAD, BN + PAD          # shared row pitches (floats)
    SA, SB = BK * PA, BK * PB            # one buffer of each
    SA2, SB2 = 2 * SA, 2 * SB            # two buffers (shared.array shapes must be constants)
    HM, HN = BM // 2, BN // 2            # offset of a micro-tile's second run
    LA, LB = BM * BK // NT, BN * BK // NT   # floats each thread copies per slice
    NACC = TM * TN
    C_ROW = bool(c_rowmajor)
    load_a, store_a = _copy_fns(bool(a_kmajor), BM, PA, NT, BK)
    load_b, store_b = _copy_fns(bool(b_kmajor), BN, PB, NT, BK)

    @_device()
    def k_step(sa, sb, base_a, base_b, fa, fb, acc):
        """One k: this thread's 8 values of A and 8 of B (four LDS.128), their 64 products."""
        for i in range(RUN):
            fa[i] = sa[U(base_a + i)]
            fa[RUN + i] = sa[U(base_a + HM + i)]
            fb[i] = sb[U(base_b + i)]
            fb[RUN + i] = sb[U(base_b + HN + i)]
        for i in range(TM):
            for j in range(TN):
                acc[i * TN + j] += fa[i] * fb[j]

    def unrolled(n):
        """A device function running k_step for n consecutive k (inlined calls, no loop)."""
        if n == 1:
            return k_step
        half = unrolled(n // 2)

        @_device()
        def k_steps(sa, sb, base_a, base_b, fa, fb, acc):
            half(sa, sb, base_a, base_b, fa, fb, acc)
            half(sa, sb, base_a + (n // 2) * PA, base_b + (n // 2) * PB, fa, fb, acc)

        return k_steps

    k_steps = unrolled(K_UNROLL)

    @_jit(NT, MIN_BLOCKS.get(config, 1))
    def simt_gemm_kernel(a, b, c, M, N, K, lda, ldb, ldc, alpha, beta):
        tid = cuda.threadIdx.x
        # Micro-tile rows tm*4 + {0..3} and HM + tm*4 + {0..3}; columns likewise with tn.
        tm, tn = thread_tile(tid, WARPS_N)
        m0 = np.int64(cuda.blockIdx.y) * BM
        n0 = np.int64(cuda.blockIdx.x) * BN

        sa = cuda.shared.array(SA2, np.float32, alignment=_SHARED_ALIGN)
        sb = cuda.shared.array(SB2, np.float32, alignment=_SHARED_ALIGN)
        ra = cuda.local.array(LA, np.float32)      # the next slice, in flight
        rb = cuda.local.array(LB, np.float32)
        fa = cuda.local.array(TM, np.float32)      # this k's operands
        fb = cuda.local.array(TN, np.float32)
        acc = cuda.local.array(NACC, np.float32)   # indexed by constants only: registers
        for i in range(NACC):
            acc[i] = 0

        nslices = (K + BK - 1) // BK
        load_a(a, ra, m0, M, lda, 0, K, tid)
        load_b(b, rb, n0, N, ldb, 0, K, tid)
        store_a(sa, 0, ra, tid)
        store_b(sb, 0, rb, tid)
        cuda.syncthreads()
        cur = 0
        for t in range(nslices):
            more = t + 1 < nslices
            if more:           # slice t + 1's loads fly while slice t is computed
                load_a(a, ra, m0, M, lda, (t + 1) * BK, K, tid)
                load_b(b, rb, n0, N, ldb, (t + 1) * BK, K, tid)
            base_a = cur * SA + tm * RUN
            base_b = cur * SB + tn * RUN
            for _ in range(BK // K_UNROLL):
                k_steps(sa, sb, base_a, base_b, fa, fb, acc)
                base_a += K_UNROLL * PA
                base_b += K_UNROLL * PB
            if more:           # the other buffer's last readers passed the previous sync
                store_a(sa, (1 - cur) * SA, ra, tid)
                store_b(sb, (1 - cur) * SB, rb, tid)
            cuda.syncthreads()
            cur = 1 - cur

        for i in range(TM):
            m = m0 + tm * RUN + (i % RUN) + (i // RUN) * HM
            for j in range(TN):
                n = n0 + tn * RUN + (j % RUN) + (j // RUN) * HN
                if m < M and n < N:
                    off = U(m * ldc + n if C_ROW else n * ldc + m)
                    v = alpha * acc[i * TN + j]
                    if beta != 0:
                        v += beta * c[off]
                    c[off] = v

    return simt_gemm_kernel


def launch_config(M, N, config=DEFAULT_CONFIG):
    """``(grid, threads)`` of ``gemm_kernel(config, ...)`` for an M x N output."""
    cfg = CONFIGS[config]
    _, _, nt = _check_config(cfg)
    grid_y = -(-M // cfg.bm)
    if grid_y > MAX_GRID_Y:
        raise ValueError(f"M = {M} needs {grid_y} row tiles of {cfg.bm}; CUDA allows "
                         f"{MAX_GRID_Y} blocks in gridDim.y")
    return (-(-N // cfg.bn), grid_y), nt


def flops(M, N, K):
    """Floating-point operations of one GEMM (a multiply-add counts as two)."""
    return 2 * M * N * K


# --------------------------------------------------------------------------- host wrapper


def _describe(x, name):
    """(shape, dtype, strides in bytes or None for C-contiguous, data pointer, is a device array)
    of ``x`` from its ``__cuda_array_interface__``, or from a simulator array."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        if cai.get("mask") is not None:
            raise ValueError(f"{name} has a __cuda_array_interface__ mask; masked arrays are "
                             "not supported")
        strides = cai.get("strides")
        return (tuple(cai["shape"]), np.dtype(cai["typestr"]),
                None if strides is None else tuple(strides), cai["data"][0])
    if numba_config.ENABLE_CUDASIM and hasattr(x, "copy_to_host") and hasattr(x, "strides"):
        return tuple(x.shape), np.dtype(x.dtype), tuple(x.strides), 0
    if isinstance(x, np.ndarray):
        raise TypeError(f"{name} is a host numpy array; pass a device array (numba "
                        "cuda.to_device(...), a CuPy array or a CUDA torch tensor)")
    raise TypeError(f"{name} must be a CUDA device array exposing __cuda_array_interface__ "
                    f"(numba, CuPy, torch); got {type(x).__name__}")


def _contiguous(shape, strides, itemsize, order):
    """Whether an array of ``shape``/``strides`` (bytes; None = C-contiguous) is contiguous in
    ``order`` ("C" or "F"); strides of extent-1 dimensions (and of empty arrays) do not
    matter."""
    if 0 in shape:
        return True
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * itemsize
                        for i in range(len(shape)))
        if order == "C":
            return True
    dims = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    expect = itemsize
    for d in dims:
        if shape[d] != 1 and strides[d] != expect:
            return False
        expect *= shape[d]
    return True


def _flat(x, order):
    return as_device(x).ravel(order=order)


def _overlaps(p, nbytes_p, q, nbytes_q):
    return p and q and p < q + nbytes_q and q < p + nbytes_p


def simt_gemm(a, b, out=None, *, layout="row", alpha=1.0, beta=0.0, b_layout=None,
              config=DEFAULT_CONFIG, stream=0):
    """``out = alpha * a @ b + beta * out`` in fp32 on the CUDA cores (the seed-004 kernel).

    ``a`` (M, K), ``b`` (K, N), ``out`` (M, N): float32 CUDA device arrays (numba device arrays,
    CuPy arrays, CUDA torch tensors: anything with ``__cuda_array_interface__``), 2-D and
    contiguous in ``layout``: ``"row"`` C order, ``"col"`` Fortran order. ``b_layout`` (default
    ``layout``) lets B differ: ``layout="col", b_layout="row"`` is the seed's NT operand set.
    ``out`` None allocates a new numba device array in ``layout`` (then ``beta`` must be 0);
    with ``beta == 0`` ``out`` is never read. ``config``: a key of ``CONFIGS``. Returns ``out``.
    Launches on ``stream`` and does not synchronize. Any M, N, K >= 0 (K = 0 gives
    ``beta * out``). ``out`` must not overlap ``a`` or ``b``.

    Raises TypeError (not a device array, not float32) or ValueError (ranks, shapes, layouts,
    contiguity, overlap, bad ``config``/``layout``) naming the argument, before any launch.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    b_layout = layout if b_layout is None else b_layout
    if b_layout not in LAYOUTS:
        raise ValueError(f"b_layout must be one of {LAYOUTS} or None, got {b_layout!r}")
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {tuple(CONFIGS)}, got {config!r}")
    try:
        alpha, beta = float(alpha), float(beta)
    except (TypeError, ValueError):
        raise TypeError(f"alpha and beta must be real numbers, got alpha={alpha!r}, "
                        f"beta={beta!r}") from None
    order = {"row": "C", "col": "F"}
    f32 = np.dtype(np.float32)

    described = {}
    for name, x, lay in (("a", a, layout), ("b", b, b_layout), ("out", out, layout)):
        if x is None:
            continue
        shape, dtype, strides, ptr = _describe(x, name)
        if dtype != f32:
            raise TypeError(f"{name} must have dtype float32, got {dtype}")
        if len(shape) != 2:
            raise ValueError(f"{name} must be 2-D, got shape {shape}")
        if not _contiguous(shape, strides, f32.itemsize, order[lay]):
            raise ValueError(f"{name} must be {order[lay]}-contiguous for {lay}-major "
                             f"layout={lay!r}; got shape {shape}, strides {strides} (bytes)")
        described[name] = (shape, ptr)
    (M, K), (K2, N) = described["a"][0], described["b"][0]
    if K2 != K:
        raise ValueError(f"b must have shape (K, N) with K = a.shape[1] = {K}; got a {(M, K)} "
                         f"and b {(K2, N)}")
    if out is None:
        if beta != 0:
            raise ValueError(f"beta = {beta} scales out, so out must be given")
    else:
        if described["out"][0] != (M, N):
            raise ValueError(f"out must have shape (M, N) = {(M, N)}; got {described['out'][0]}")
        po = described["out"][1]
        for name, (M_, N_) in (("a", (M, K)), ("b", (K, N))):
            if _overlaps(po, 4 * M * N, described[name][1], 4 * M_ * N_):
                raise ValueError(f"out overlaps {name}: the kernel reads {name} while out is "
                                 "written; pass a separate output")
    grid, threads = launch_config(M, N, config)   # validates the grid before allocating
    if out is None:
        out = cuda.device_array((M, N), np.float32, order=order[layout], stream=stream)
    if M == 0 or N == 0:
        return out
    kernel = gemm_kernel(config, layout == "row", b_layout == "col", layout == "row")
    lda = K if layout == "row" else M
    ldb = K if b_layout == "col" else N
    ldc = N if layout == "row" else M
    configure(kernel, grid, threads, stream)(
        _flat(a, order[layout]), _flat(b, order[b_layout]), _flat(out, order[layout]),
        np.int64(M), np.int64(N), np.int64(K), np.int64(lda), np.int64(ldb), np.int64(ldc),
        np.float32(alpha), np.float32(beta))
    return out
