"""A one-warp 16 x 16 x K fp16 GEMM main loop on ``ldmatrix`` + ``mma.sync`` (fp32 accumulators).

The smallest tensor-core GEMM the warp intrinsics make: A and B staged in shared memory, each
16-deep step loads A with ``ldmatrix.x4`` and B with ``ldmatrix.x4.trans`` and issues two
m16n8k16 mmas into 8 f32 registers. Its SASS keeps every fragment in registers (no LDL/STL,
checked offline by tests/test_warp_sass.py); tests/gpu/test_warp.py checks it on the GPU.
"""

import numpy as np
from numba import cuda

from .. import warp

__all__ = ["KMAX", "gemm_16x16"]

KMAX = 64
TILE_ELEMS = 16 * KMAX                   # shared array shapes must be plain constants


@cuda.jit
def gemm_16x16(a, b, d, k):
    """D (16x16 f32) = A (16 x k f16, row stride KMAX) @ B (k x 16 f16): ldmatrix A (x4) and B
    (x4.trans) from shared memory each 16-deep step, two m16n8k16 mmas into 8 f32 accumulators."""
    sa = cuda.shared.array(TILE_ELEMS, np.uint16, alignment=128)
    sb = cuda.shared.array(TILE_ELEMS, np.uint16, alignment=128)
    lane = cuda.threadIdx.x % 32
    for i in range(lane, TILE_ELEMS, 32):
        sa[i] = a[i]
        sb[i] = b[i]
    cuda.syncwarp()
    acc = cuda.local.array(8, np.float32)    # [0:4] columns 0-7, [4:8] columns 8-15
    for i in range(8):
        acc[i] = 0
    af = cuda.local.array(4, np.uint32)
    bf = cuda.local.array(4, np.uint32)      # [0:2] columns 0-7, [2:4] columns 8-15
    m, r = lane >> 3, lane & 7               # this lane supplies row r of 8x8 matrix m
    row, col = r + 8 * (m & 1), 8 * (m >> 1)
    for kk in range(0, k, 16):               # run-time trip count: a real loop
        warp.ldmatrix(af, sa, (row * KMAX + kk + col) * 2, count=4)
        warp.ldmatrix(bf, sb, ((kk + row) * 16 + col) * 2, count=4, trans=True)
        warp.mma_m16n8k16_f32_f16(acc, af, bf, acc)
        warp.mma_m16n8k16_f32_f16(acc[4:], af, bf[2:], acc[4:])
    g, t = lane >> 2, lane & 3
    for nt in range(2):
        for i in range(4):
            d[(g + 8 * (i >> 1)) * 16 + 8 * nt + 2 * t + (i & 1)] = acc[4 * nt + i]
