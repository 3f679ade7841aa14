"""One warpgroup, one tile: ``D = A @ B`` with K/16 (fp8: K/32) ``wgmma.mma_async`` steps on
operands copied into shared memory in a canonical layout. The smallest complete wgmma program,
and the kernel the intrinsic tests run for every shape, type, transpose and swizzle.

No seed: the first rung of the wgmma GEMM ladder, whose shipped rungs (``WgmmaConfig``) are
:mod:`numba_tma.kernels.gemm`. It is a correctness probe, with no speed figure.

The host lays A (64 x K) and B (N x K as the instruction sees it) out with
:func:`numba_tma.wgmma.operand_image` (the project's TMA swizzle model), the kernel copies the
bytes to shared memory, fences them into the async proxy, builds the descriptors and runs::

    fence_operand(acc); wgmma.fence()
    for each k step:  mma(acc, desc_a + a_step, desc_b + b_step, N, scale_d=step)   # step 0
    commit_group(); fence_operand(acc); wait_group(0); fence_operand(acc)        #  ignores acc

The accumulators start poisoned (NaN): the first step's ``scale_d = 0`` must ignore them.
"""

import functools

import numpy as np

from .._frontend import cuda
from .._bridge import inline_device
from .. import fence, wgmma
from ..launch import configure

__all__ = ["probe_kernel", "probe_signature", "run_probe", "KINDS", "FP8_KINDS"]

#: kind -> (wgmma stub name, element bytes, K per instruction, accumulator words per 8 columns)
KINDS = {
    "f16": ("mma_f32_f16", 2, 16, 4),
    "bf16": ("mma_f32_bf16", 2, 16, 4),
    "f16acc": ("mma_f16_f16", 2, 16, 2),
    "e4m3_e4m3": ("mma_f32_e4m3_e4m3", 1, 32, 4),
    "e4m3_e5m2": ("mma_f32_e4m3_e5m2", 1, 32, 4),
    "e5m2_e4m3": ("mma_f32_e5m2_e4m3", 1, 32, 4),
    "e5m2_e5m2": ("mma_f32_e5m2_e5m2", 1, 32, 4),
}
FP8_KINDS = tuple(k for k in KINDS if k.startswith("e"))
K_STEPS = 2                                  # two instructions: the second accumulates
A_WORDS = 4 * K_STEPS                        # register-A words per thread
# Shared images: up to 64 (A) / 256 (B) rows of 64 bytes of K, each row padded to a whole
# 128-byte span under the 128B swizzle (what the TMA box layout takes).
SMEM_WORDS_A = 64 * 128 // 4
SMEM_WORDS_B = 256 * 128 // 4


def probe_signature(kind):
    out = "uint32" if kind == "f16acc" else "float32"
    return f"void(uint32[::1], uint32[::1], uint32[::1], int64[::1], {out}[::1])"


@functools.cache
def probe_kernel(kind, n, trans_a, trans_b, swizzle, a_in_registers):
    """The kernel for one case: args (a image words, b image words, a register words per thread
    (128 x 4 x steps), params int64[4 + 2 * steps] = (lbo_a, sbo_a, lbo_b, sbo_b, a step byte
    offsets..., b step byte offsets...), out (128 x accumulator words))."""
    stub, _, _, per8 = KINDS[kind]
    mma = getattr(wgmma, stub)
    NACC = n // 8 * per8
    f16acc = kind == "f16acc"
    acc_dtype = np.uint32 if f16acc else np.float32
    POISON = 0x7E007E00 if f16acc else np.nan      # NaN in both halves / NaN
    SW = swizzle
    TA, TB = trans_a, trans_b
    RS = a_in_registers

    if kind in FP8_KINDS:                    # fp8: K-major only, no transpose immediates
        @inline_device
        def step(acc, a, b, s):
            mma(acc, a, b, n, s)
    else:
        @inline_device
        def step(acc, a, b, s):
            mma(acc, a, b, n, s, TA, TB)

    @cuda.jit(launch_bounds=(128, 1))
    def probe(a_img, b_img, a_regs, params, out):
        sa = cuda.shared.array(SMEM_WORDS_A, np.uint32, alignment=1024)
        sb = cuda.shared.array(SMEM_WORDS_B, np.uint32, alignment=1024)
        t = cuda.threadIdx.x
        for i in range(t, a_img.size, 128):
            sa[i] = a_img[i]
        for i in range(t, b_img.size, 128):
            sb[i] = b_img[i]
        fence.proxy_async_shared()         # generic-proxy writes -> wgmma's async-proxy reads
        cuda.syncthreads()
        af = cuda.local.array(A_WORDS, np.uint32)
        for i in range(A_WORDS):
            af[i] = a_regs[t * A_WORDS + i]
        acc = cuda.local.array(NACC, acc_dtype)
        for i in range(NACC):
            acc[i] = POISON
        da = wgmma.descriptor(sa, 0, params[0], params[1], SW)
        db = wgmma.descriptor(sb, 0, params[2], params[3], SW)
        wgmma.fence_operand(acc, NACC)
        wgmma.fence()
        for s in range(K_STEPS):
            b = wgmma.descriptor_advance(db, params[4 + K_STEPS + s])
            if RS:
                step(acc, af[4 * s:], b, s)
            else:
                step(acc, wgmma.descriptor_advance(da, params[4 + s]), b, s)
        wgmma.commit_group()
        wgmma.fence_operand(acc, NACC)
        wgmma.wait_group(0)
        wgmma.fence_operand(acc, NACC)
        for i in range(NACC):
            out[t * NACC + i] = acc[i]

    return probe


def _steps(k_major, swizzle, rows, itemsize, lbo):
    """Byte offset of each k step's operand within its image (see ``operand_image``)."""
    kbytes = 32                                        # 16 x 2 bytes or 32 x 1 byte
    out = []
    for s in range(K_STEPS):
        if k_major:
            if swizzle:
                box = (s * kbytes) // swizzle          # boxes of one span of K each
                out.append(box * rows * swizzle + (s * kbytes) % swizzle)
            else:
                out.append(s * 2 * lbo)                # two 8-element core columns per step
        else:
            krows = kbytes // itemsize                 # 16 K rows per step
            out.append(s * krows * swizzle if swizzle else s * 2 * lbo)
    return out


def run_probe(A, B, kind, *, trans_a=False, trans_b=False, swizzle=128, a_in_registers=False):
    """``A @ B.T`` through the probe: ``A`` 64 x K, ``B`` N x K (K = 2 instructions' worth),
    as numpy arrays of 16-bit elements (f16 as float16, bf16 as uint16 bit patterns) or uint8
    fp8 bit patterns. Returns the 64 x N result (float32; float16 for ``f16acc``)."""
    _, item, kstep, per8 = KINDS[kind]
    n = B.shape[0]
    ka = kstep * K_STEPS
    if A.shape != (64, ka) or B.shape != (n, ka):
        raise ValueError(f"A must be 64 x {ka} and B N x {ka}; got {A.shape} and {B.shape}")
    a_img, lbo_a, sbo_a = wgmma.operand_image(A, not trans_a, swizzle)
    b_img, lbo_b, sbo_b = wgmma.operand_image(B, not trans_b, swizzle)
    regs = np.zeros((128, 4 * K_STEPS), np.uint32)
    if a_in_registers:
        from .. import warp

        for s in range(K_STEPS):
            frag = wgmma.fragment_a(A[:, s * kstep:(s + 1) * kstep])
            regs[:, 4 * s:4 * s + 4] = warp.pack_words(frag)
    params = np.array([lbo_a, sbo_a, lbo_b, sbo_b]
                      + _steps(not trans_a, swizzle, 64, item, lbo_a)
                      + _steps(not trans_b, swizzle, n, item, lbo_b), np.int64)
    for name, img, words in (("A", a_img, SMEM_WORDS_A), ("B", b_img, SMEM_WORDS_B)):
        if img.size > 4 * words:
            raise ValueError(f"the {name} image ({img.size} bytes) exceeds the probe's shared "
                             f"buffer ({4 * words} bytes)")
    nacc = n // 8 * per8
    out = cuda.device_array(128 * nacc, np.uint32 if kind == "f16acc" else np.float32)
    kernel = probe_kernel(kind, n, trans_a, trans_b, swizzle, a_in_registers)
    configure(kernel, 1, 128)(cuda.to_device(a_img.view(np.uint32)), cuda.to_device(b_img.view(np.uint32)),
                   cuda.to_device(regs.reshape(-1)), cuda.to_device(params), out)
    frag = out.copy_to_host().reshape(128, nacc)
    if kind == "f16acc":
        frag = frag.view(np.float16)                    # word i: elements 2i (low), 2i + 1
    return wgmma.unfragment_d(frag)
