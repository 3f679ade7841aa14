"""Baselines the benches measure numba_tma's kernels against, each as a launcher: ``launch()``
enqueues one asynchronous run on the default stream (where :mod:`numba_tma.bench.timing`'s CUDA
events are recorded) on arrays made once, so a timed call does only the work.

- copies, the ceiling of a memory-bound kernel: :func:`copy_launchers` (``cuMemcpyDtoDAsync``
  and torch ``copy_``);
- transposes: :func:`torch_transpose` (``x.t().contiguous()``), :func:`cupy_transpose`
  (``cupy.ascontiguousarray(a.T)``), :func:`cublas_geam_transpose` (``cublas<s|d>geam``) and
  :func:`numba_bundled_transpose` (``numba.cuda.kernels.transpose``, compiled once) and
  :func:`triton_transpose` (a tiled Triton transpose, tile sized per element size);
- GEMMs: :func:`cublas_matmul` (``torch.matmul``) and :func:`triton_matmul` (a tuned Triton
  matmul).

torch, CuPy and Triton are optional: pass the module (:func:`~numba_tma.bench.env.import_optional`
gives it or the reason it is missing), or call :func:`triton_matmul`, which imports Triton itself.
"""

import functools

import numpy as np

from .env import gpu_environment, import_optional
from .report import log

COPY = "copy"


def copy_launchers(src, dst, torch=None):
    """``{"copy[cuMemcpyDtoDAsync]": launch, "copy[torch copy_]": launch}``: device-to-device
    copies of numba device array ``src``'s bytes into ``dst`` (same size), the second with torch
    when it is given. The faster of them is a memory-bound kernel's ceiling."""
    from .._frontend import cuda

    size = src.size
    src_flat, dst_flat = src.reshape(size), dst.reshape(dst.size)
    stream = cuda.default_stream()
    launchers = {f"{COPY}[cuMemcpyDtoDAsync]":
                 lambda: dst_flat.copy_to_device(src_flat, stream=stream)}
    if torch is not None:
        t_src = torch.as_tensor(src_flat, device="cuda")
        t_dst = torch.as_tensor(dst_flat, device="cuda")
        launchers[f"{COPY}[torch copy_]"] = lambda: t_dst.copy_(t_src)
    return launchers


def merge_copies(rows):
    """The faster ok row of :func:`copy_launchers`' timed result rows (dicts with ``kernel``,
    ``status``, ``ms``), renamed "copy", with every variant's time in its ``note``."""
    ok = [r for r in rows if r["status"] == "ok"]
    parts = [f"{r['kernel'][len(COPY) + 1:-1]} " +
             (f"{r['ms']:.4f} ms" if r["status"] == "ok" else r["status"]) for r in rows]
    best = dict(min(ok, key=lambda r: r["ms"]) if ok else rows[0])
    best["kernel"] = COPY
    best["note"] = "faster of: " + "; ".join(parts)
    return best


def torch_transpose(torch, d_src):
    """torch's transpose of a 2-D device array, ``x.t().contiguous()``; ``launch()`` returns the
    new tensor."""
    t_src = torch.as_tensor(d_src, device="cuda")
    return lambda: t_src.t().contiguous()


def cupy_transpose(cupy, d_src):
    """CuPy's transpose, ``cupy.ascontiguousarray(a.T)``; ``launch()`` returns the new array."""
    c_src = cupy.asarray(d_src)
    return lambda: cupy.ascontiguousarray(c_src.T)


def numba_bundled_transpose(d_src, d_out):
    """numba-cuda's bundled transpose, compiled once: it builds (and compiles) a new kernel on
    every call, so its first call is made with ``cuda.jit`` wrapped to capture the configured
    kernel, and later runs relaunch that same kernel with the same grid."""
    from .._frontend import bundled_transpose as bundled

    state = {}

    class Capture:
        def __init__(self, dispatcher):
            self._dispatcher = dispatcher

        def __getitem__(self, config):
            state["launch"] = self._dispatcher[config]
            return state["launch"]

    def launch():
        if "launch" in state:
            return state["launch"](d_src, d_out)
        cuda_mod = bundled.cuda
        real_jit = cuda_mod.jit

        def jit(*a, **kw):
            made = real_jit(*a, **kw)
            fn = a[0] if a else None
            if getattr(fn, "__module__", None) == bundled.__name__ and \
                    hasattr(made, "__getitem__"):
                return Capture(made)            # only the bundled module's own kernel
            return made

        cuda_mod.jit = jit
        try:
            bundled.transpose(d_src, d_out)
        finally:
            cuda_mod.jit = real_jit
        if "launch" not in state:
            raise RuntimeError("could not capture the kernel of numba.cuda.kernels.transpose")

    return launch


def cublas_geam_transpose(cupy, d_src, d_out):
    """cuBLAS's transpose, ``C = 1 * op(A) + 0 * C`` with op = T (``cublasSgeam`` /
    ``cublasDgeam``, CuPy's handle): row-major (M, N) src is column-major N x M, and the
    column-major M x N result is the row-major (N, M) out."""
    if cupy is None:
        raise ImportError("cupy not importable")
    from cupy_backends.cuda.libs import cublas

    geam = {np.dtype(np.float32): cublas.sgeam, np.dtype(np.float64): cublas.dgeam}.get(
        np.dtype(d_src.dtype))
    if geam is None:
        raise TypeError(f"cuBLAS geam takes float32 and float64 here, not {d_src.dtype}")
    m, n = d_src.shape
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, 0)                   # the default stream the events time
    one, zero = np.ones(1, d_src.dtype), np.zeros(1, d_src.dtype)
    a = d_src.__cuda_array_interface__["data"][0]
    c = d_out.__cuda_array_interface__["data"][0]

    def launch():
        geam(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, m, n, one.ctypes.data, a, n,
             zero.ctypes.data, c, m, c, m)

    return launch


# --- the Triton transpose -----------------------------------------------------------------------

#: Tiles (rows, cols) per element size: 256-byte src rows and out rows, as v7's tiles.
TRITON_TRANSPOSE_TILES = {1: (256, 256), 2: (128, 128), 4: (64, 64), 8: (32, 32)}
_triton_transpose_kernel = None


def triton_transpose(d_src, d_out):
    """Triton's tiled transpose of a 2-D device array into ``d_out``: each program loads a
    ``TRITON_TRANSPOSE_TILES[itemsize]`` tile (masked at the edges), ``tl.trans`` and stores it
    (Triton lays the tile out through shared memory itself). Raises ImportError where Triton is
    not importable."""
    global _triton_transpose_kernel
    mod, why = import_optional("triton")
    if mod is None:
        raise ImportError(why)
    import torch
    import triton
    import triton.language as tl

    if _triton_transpose_kernel is None:
        @triton.jit
        def kernel(src, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
            pid_m, pid_n = tl.program_id(0), tl.program_id(1)
            rows = pid_m * BM + tl.arange(0, BM)
            cols = pid_n * BN + tl.arange(0, BN)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            tile = tl.load(src + rows[:, None].to(tl.int64) * N + cols[None, :], mask=mask)
            tl.store(out + cols[:, None].to(tl.int64) * M + rows[None, :], tl.trans(tile),
                     mask=tl.trans(mask))
        _triton_transpose_kernel = kernel

    itemsize = np.dtype(d_src.dtype).itemsize
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[itemsize]
    t_src = torch.as_tensor(d_src, device="cuda").view(view)
    t_out = torch.as_tensor(d_out, device="cuda").view(view)
    m, n = t_src.shape
    bm, bn = TRITON_TRANSPOSE_TILES[itemsize]
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    return lambda: _triton_transpose_kernel[grid](t_src, t_out, m, n, BM=bm, BN=bn,
                                                  num_warps=8)


def _matmul_cast(torch, a, b, out):
    out.copy_(torch.matmul(a, b))


def cublas_matmul(torch, a, b, out):
    """cuBLAS through ``torch.matmul(a, b, out=out)`` (torch tensors); for an ``out`` of another
    dtype than the inputs (fp32 from 16-bit inputs), torch.matmul's result cast into it."""
    if out.dtype == a.dtype:
        return functools.partial(torch.matmul, a, b, out=out)
    return functools.partial(_matmul_cast, torch, a, b, out)


def kernel_label(name):
    """A CUDA kernel's name without its return type, template arguments and parameters
    (``void at::native::f<...>(...)`` -> ``at::native::f``); cuBLAS's nvjet names are kept."""
    name = name.split("<", 1)[0].split("(", 1)[0].strip()
    return name[5:] if name.startswith("void ") else name


def cuda_kernels(torch, fn):
    """The names of the CUDA kernels one ``fn()`` launches, in order, each once (torch.profiler;
    memsets and copies left out): which cuBLAS kernel a baseline ran, tile and cluster shape in
    its name (``nvjet_sm90_hsh_256x128_64x4_1x2_...``: 256 x 128 tile, 64-deep K slices, 4
    stages, 1 x 2 cluster, in cuBLAS's column-major terms: torch's row-major C = A @ B is
    cuBLAS's C^T = B^T A^T, so that tile is 128 rows x 256 columns of C)."""
    import warnings

    torch.cuda.synchronize()
    with warnings.catch_warnings():     # (its note that events are cleared after each cycle)
        warnings.simplefilter("ignore")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
    names = []
    for event in prof.events():
        name = kernel_label(event.name)
        if (event.device_type == torch.autograd.DeviceType.CUDA
                and not name.startswith(("Memset", "Memcpy")) and name not in names):
            names.append(name)
    return names


# --- the Triton matmul --------------------------------------------------------------------------

#: Triton's autotuning space, (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): Hopper tiles
#: (wgmma wants 64-row multiples; <= 192 KiB of pipelined smem), big ones for the large shapes,
#: smaller ones to fill 132 SMs at 1024^3. Kept short: each is compiled per dtype pair and per
#: divisibility of M, N, K and tried at every shape.
TRITON_CONFIGS = (
    (128, 256, 64, 3, 8),
    (256, 128, 64, 3, 8),
    (128, 256, 32, 4, 8),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 5, 8),
    (64, 256, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
)
TRITON_GROUP_M = 8              # tile rows that walk N together (B tiles reused from L2)
TUNE_HOLD_CYCLES = 50_000_000   # GPU wait before each tuning round: longer than queuing its runs

triton = tl = None              # imported by triton_matmul_kernel(): the kernel's globals
_triton_epilogue_kernel = None
#: The epilogues the Triton baseline fuses (matmul_epilogue_kernel's EPI), as
#: numba_tma.epilogues names them.
TRITON_EPILOGUES = {"bias": 1, "bias_relu": 2, "bias_gelu": 3, "bias_gelu_erf": 4,
                    "bias_silu": 5, "row_scale": 6, "col_scale": 7, "residual": 8,
                    "bias_gelu_aux": 9}


@functools.lru_cache(maxsize=None)
def triton_matmul_kernel():
    """``(kernel, None)``: the ``@triton.jit`` matmul that :func:`triton_matmul` tunes, untuned
    (``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M`` and ``ALIGN`` are its constexprs; the
    compile bench times its first compile), or ``(None, reason)`` where Triton is not
    importable."""
    mod, why = import_optional("triton")
    if mod is None:
        return None, why
    global triton, tl           # Triton resolves the kernel's names through its module globals
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr):
        # Grouped raster: GROUP_M tile rows sweep the tile columns together, so the B tiles
        # they share are read from L2 rather than HBM.
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_m = min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % group_m
        pid_n = (pid % per_group) // group_m
        # Rows and columns past M and N wrap onto valid ones, so the loads need a mask only
        # along K; the store is masked.
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - kt * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        return acc, rows, cols

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, ALIGN: tl.constexpr):
        # Rows of a multiple of 8 elements are 16-byte aligned, but Triton infers alignment only
        # from arguments divisible by 16 (its specialization). Rounding N, K and the row strides
        # down to ALIGN, a no-op (8 only where the host saw multiples of 8), proves it, so the
        # loads are vectorized and pipelined at shapes such as N = 4104 or 1000 too.
        N = N // ALIGN * ALIGN
        K = K // ALIGN * ALIGN
        stride_am = stride_am // ALIGN * ALIGN
        stride_bk = stride_bk // ALIGN * ALIGN
        stride_cm = stride_cm // ALIGN * ALIGN
        acc, rows, cols = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                                      stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))

    global _triton_epilogue_kernel

    @triton.jit
    def matmul_epilogue_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                               stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                               stride_cn, v_ptr, r_ptr, stride_rm,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                               ALIGN: tl.constexpr, EPI: tl.constexpr):
        # matmul_kernel with TRITON_EPILOGUES[EPI] fused before the store: v_ptr a vector (of
        # N, or of M for row_scale), r_ptr an (M, N) matrix read (residual) or written
        # (bias_gelu_aux's pre-activation).
        N = N // ALIGN * ALIGN
        K = K // ALIGN * ALIGN
        stride_am = stride_am // ALIGN * ALIGN
        stride_bk = stride_bk // ALIGN * ALIGN
        stride_cm = stride_cm // ALIGN * ALIGN
        acc, rows, cols = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                                      stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        if EPI == 6:                                            # row_scale
            x = acc * tl.load(v_ptr + rows, mask=rows < M, other=0.0)[:, None]
        elif EPI == 7:                                          # col_scale
            x = acc * tl.load(v_ptr + cols, mask=cols < N, other=0.0)[None, :]
        elif EPI == 8:                                          # residual
            x = acc + tl.load(r_ptr + rows[:, None] * stride_rm + cols[None, :], mask=mask,
                              other=0.0).to(tl.float32)
        else:                                                   # bias, then an activation
            x = acc + tl.load(v_ptr + cols, mask=cols < N, other=0.0)[None, :]
        if EPI == 9:                                            # bias_gelu_aux: x kept
            tl.store(r_ptr + rows[:, None] * stride_rm + cols[None, :],
                     x.to(r_ptr.dtype.element_ty), mask=mask)
        if EPI == 2:
            x = tl.maximum(x, 0.0)
        elif EPI == 3 or EPI == 9:                              # GELU, tanh approximation
            y = 0.7978845608028654 * (x + 0.044715 * x * x * x)
            x = 0.5 * x * (2.0 * tl.sigmoid(2.0 * y))           # 1 + tanh(y) = 2 sigmoid(2y)
        elif EPI == 4:
            x = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
        elif EPI == 5:
            x = x * tl.sigmoid(x)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, x.to(c_ptr.dtype.element_ty), mask=mask)

    _triton_epilogue_kernel = matmul_epilogue_kernel
    return matmul_kernel, None


#: The input dtypes the Triton GEMM takes (torch names): fp8 ``b`` K-major, as ``w.t()``.
FLOAT_INPUTS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


@functools.lru_cache(maxsize=None)
def triton_matmul():
    """``(tune, None)``, or ``(None, reason)`` where Triton is not importable.

    ``tune(a, b, out)`` computes ``out = a @ b`` (torch tensors: ``a`` (M, K) and ``b`` (K, N)
    float16, bfloat16 or float8 (:data:`FLOAT_INPUTS`), any strides; ``out`` (M, N) float16,
    bfloat16 or float32) with the Triton kernel autotuned over ``TRITON_CONFIGS`` for this
    (M, N, K) and these dtypes, and returns ``(launch, config)``: ``launch()`` reruns it on the
    same tensors with the chosen config, straight to the jitted kernel, so a timed call can
    never autotune.
    """
    matmul_kernel, why = triton_matmul_kernel()
    if matmul_kernel is None:
        return None, why
    import torch

    from . import timing

    def bench(fn, quantiles):
        # Each config timed as the benches time every kernel (numba_tma.bench.timing: operands
        # warm in L2, runs queued behind a GPU wait, each between CUDA events, median of round
        # medians), not as triton.testing.do_bench does, flushing L2 before every run: ranked
        # cold, the tiles that won ran slower warm in the bench than the ones warm ranking
        # picks (docs/gemm.md).
        ms = timing.do_bench(fn, iters=10, warmup=3, rounds=3, hold=tune_hold)
        return [ms] * len(quantiles) if quantiles else ms

    def tune_hold():
        torch.cuda._sleep(TUNE_HOLD_CYCLES)

    configs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                              "GROUP_M": TRITON_GROUP_M}, num_stages=stages, num_warps=warps)
               for bm, bn, bk, stages, warps in TRITON_CONFIGS]
    tuned_kernel = triton.autotune(configs, key=["M", "N", "K"], do_bench=bench)(matmul_kernel)

    def grid(M, N, meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    def tune(a, b, out):
        (M, K), (Kb, N) = a.shape, b.shape
        if Kb != K or tuple(out.shape) != (M, N):
            raise ValueError(f"shapes {tuple(a.shape)} @ {tuple(b.shape)} -> {tuple(out.shape)}")
        if a.dtype != b.dtype or str(a.dtype).split(".")[-1] not in FLOAT_INPUTS:
            raise TypeError(f"float16, bfloat16 or float8 inputs; got {a.dtype} and {b.dtype}")
        args = (a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride())
        align = 8 if all(v % 8 == 0 for v in (N, K, a.stride(0), b.stride(0), out.stride(0))) else 1
        tuned_kernel[lambda meta: grid(M, N, meta)](*args, ALIGN=align)  # tunes on a new key
        config = tuned_kernel.best_config
        launch = functools.partial(matmul_kernel[grid(M, N, config.kwargs)], *args, ALIGN=align,
                                   **config.all_kwargs())
        return launch, config

    return tune, None


def triton_matmul_epilogue(config, name, a, b, out, vector=None, matrix=None):
    """``launch()``: the Triton GEMM with the epilogue ``name`` (:data:`TRITON_EPILOGUES`)
    fused, on ``config`` (a triton.Config, as :func:`triton_matmul`'s ``tune`` chose for the
    plain GEMM): ``vector`` its bias or scale, ``matrix`` its residual (read) or pre-activation
    (written)."""
    kernel, why = triton_matmul_kernel()
    if kernel is None:
        raise RuntimeError(why)
    (M, K), N = a.shape, b.shape[1]
    v = vector if vector is not None else out
    r = matrix if matrix is not None else out
    align = 8 if all(x % 8 == 0 for x in (N, K, a.stride(0), b.stride(0), out.stride(0))) else 1
    kw = config.kwargs
    grid = (triton.cdiv(M, kw["BLOCK_M"]) * triton.cdiv(N, kw["BLOCK_N"]),)
    return functools.partial(_triton_epilogue_kernel[grid], a, b, out, M, N, K, *a.stride(),
                             *b.stride(), *out.stride(), v, r, r.stride(0), ALIGN=align,
                             EPI=TRITON_EPILOGUES[name], **config.all_kwargs())


def triton_config_label(config):
    """``128x256x64 s3 w8`` for a triton.Config of the kernel above."""
    kw = config.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{config.num_stages} "
            f"w{config.num_warps}")


def gemm_session(torch, seed, hold_cycles):
    """What a GEMM bench sets up before its shapes: ``(gen, tune_triton, env, hold)``.

    ``gen``: a CUDA ``torch.Generator`` seeded with ``seed`` (the time where None);
    ``tune_triton``: :func:`triton_matmul`'s tuner, or None where Triton is missing (logged:
    the baseline is optional); ``env``: :func:`~numba_tma.bench.env.gpu_environment`;
    ``hold``: queues ``hold_cycles`` GPU clocks of waiting (``torch.cuda._sleep``) before a
    timed batch, so its launches queue behind it and its events time the kernels alone (None
    where this torch lacks ``_sleep``)."""
    import time

    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed if seed is not None else int(time.time()))
    tune_triton, why = triton_matmul()
    if tune_triton is None:
        log(f"no Triton baseline (optional: pip install triton): {why}")
    hold = ((lambda: torch.cuda._sleep(hold_cycles)) if hasattr(torch.cuda, "_sleep")
            else None)
    return gen, tune_triton, gpu_environment(), hold
