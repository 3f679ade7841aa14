"""Offline (no GPU) checks of the 16-byte global accesses (numba_tma.gmem) and of v7_vec16's
machine code: LDG.E.128 / STG.E.128 inlined, operands in registers, bad operands refused at compile
time naming the argument; v7's 8 vector loads, 8 shared 16-byte reads and 8 vector stores per
thread for every element size (byte_perm packing for 1- and 2-byte elements), launch bounds met
without spills; v8_sector's vector loads (main, halo, 17th per row) and whole-chunk stores."""

import functools
import os

import numpy as np
import pytest

from numba_tma import gmem
from numba_tma._frontend import cuda, errors
from sass_checks import check_clean, on_mlir, pinned_toolchain

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")


def compile_kernel(kernel, sig):
    from numba_tma.offline import compile_kernel as compile_

    return compile_(kernel, sig)


def test_gmem_v4_sass():
    @cuda.jit
    def copy16(src, out):
        regs = cuda.local.array(4, np.uint32)
        i = cuda.grid(1)
        gmem.load_v4(regs, src, i * 16)
        regs[0] ^= np.uint32(1)
        gmem.store_v4(out, i * 16, regs)

    kb = compile_kernel(copy16, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.count("LDG.E.128") == 1 and kb.count("STG.E.128") == 1
    assert kb.count("LDG") == 1 and kb.count("STG") == 1     # no narrower access beside them


@pytest.mark.parametrize("size", gmem.L2_PREFETCH_BYTES[1:])
def test_gmem_v4_l2_prefetch_sass(size):
    @cuda.jit
    def copy16(src, out):
        regs = cuda.local.array(4, np.uint32)
        i = cuda.grid(1)
        gmem.load_v4(regs, src, i * 16, size)
        gmem.store_v4(out, i * 16, regs)

    kb = compile_kernel(copy16, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.count(f"LDG.E.LTC{size}B.128") == 1 and kb.count("LDG") == 1


def test_gmem_rejects_bad_operands():
    @cuda.jit
    def bad_regs(src, out):
        regs = cuda.local.array(4, np.float64)
        gmem.load_v4(regs, src, 0)

    with pytest.raises(errors.TypingError, match="regs"):
        compile_kernel(bad_regs, "void(float32[::1], float32[::1])")

    @cuda.jit
    def bad_offset(src, out):
        regs = cuda.local.array(4, np.uint32)
        gmem.store_v4(out, 1.5, regs)

    with pytest.raises(errors.TypingError, match="byte_offset"):
        compile_kernel(bad_offset, "void(float32[::1], float32[::1])")

    @cuda.jit
    def bad_prefetch(src, out):
        regs = cuda.local.array(4, np.uint32)
        gmem.load_v4(regs, src, 0, 32)

    with pytest.raises(errors.TypingError, match="l2_prefetch = 32 must be one of"):
        compile_kernel(bad_prefetch, "void(float32[::1], float32[::1])")

    @cuda.jit
    def runtime_prefetch(src, out, n):
        regs = cuda.local.array(4, np.uint32)
        gmem.load_v4(regs, src, 0, n)

    with pytest.raises(errors.TypingError, match="l2_prefetch must be a compile-time integer"):
        compile_kernel(runtime_prefetch, "void(float32[::1], float32[::1], int64)")


def build_transpose(spec):
    """(rung, itemsize, row_offset) -> the v7_vec16 or v8_sector kernel, compiled."""
    from numba_tma.kernels import transpose_sector as ts
    from numba_tma.kernels import transpose_vec as tv

    rung, itemsize, row_offset = spec
    if rung == "v7":
        kernel, word, _, _, _ = tv._kernel(itemsize, *tv.TILES[itemsize], row_offset=row_offset)
        e = f"uint{8 * itemsize}[::1]"
        return compile_kernel(kernel, f"void({word}[::1], {word}[::1], {e}, {e}, int64, int64, "
                                      f"int64)")
    kernel, elem, _ = ts._kernel(itemsize, *ts.TILES[itemsize], row_offset=row_offset)
    return compile_kernel(kernel, f"void({elem}[::1], {elem}[::1], int64, int64, int64, int64, "
                                  f"int64)")


@pytest.fixture(scope="module")
def transposes():
    """The kernels the tests below read, each built once (in this process: the H100 image's
    nvJitLink leaves the ptxas lines, barriers and shared bytes among them, out of a spawned
    worker's link log)."""
    return functools.cache(build_transpose)


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_v7_vec16_sass(itemsize, transposes):
    from numba_tma.kernels import transpose_vec as tv

    trows, cols, threads, min_blocks = tv.TILES[itemsize]
    _, word, pack, _, _ = tv._kernel(itemsize, trows, cols, threads, min_blocks)
    kb = transposes(("v7", itemsize, False))
    check_clean(kb)
    assert kb.count("LDG.E.128") == tv.LOADS and kb.count("STG.E.128") == tv.LOADS
    assert kb.count("LDS.128") == tv.LOADS
    assert kb.barriers == 1 and kb.count("BAR.SYNC") == (2 if pack == 1 else 1)  # partial path
    # Packed elements: 2 byte_perms per word for fp16 pairs, 8 per 4 words for a uint8 4 x 4.
    assert kb.count("PRMT") >= {1: 0, 2: 2 * 4 * tv.LOADS // 2, 4: 2 * 4 * tv.LOADS}[pack]
    assert kb.registers <= 65536 // (threads * min_blocks)
    assert kb.shared_bytes == trows * cols * np.dtype(word).itemsize


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_v8_sector_sass(itemsize, transposes):
    from numba_tma.kernels import transpose_sector as ts

    trows, cols, threads, min_blocks = ts.TILES[itemsize]
    _, elem, halo = ts._kernel(itemsize, trows, cols, threads, min_blocks)
    spe, kv = 32 // itemsize, 16 // itemsize
    assert halo == spe - 1
    kb = transposes(("v8", itemsize, False))
    check_clean(kb)
    # Vector path: 8 main vectors, the halo row's and the extra one per row, each asking the L2
    # for its whole 256-byte block; 8 LDS.128 / STG.E.128 of whole chunks (or, for BULK_STORE
    # sizes, one bulk copy per out-row segment after a proxy fence), plus those of the
    # element-wise edge path.
    assert ts.L2_PREFETCH == 256
    assert kb.count("LDG.E.LTC256B.128") == ts.LOADS + 2 and not kb.has("LDG.E.128")
    if itemsize in ts.BULK_STORE:
        assert kb.count("UBLKCP.G.S") == 1 and kb.count("FENCE.VIEW.ASYNC.S") == 1
        if not on_mlir():       # (numba-cuda-mlir's edge path keeps 8 of each: front_ends.md)
            assert kb.count("STG.E.128") < ts.LOADS and kb.count("LDS.128") < ts.LOADS
    else:
        assert not kb.has("UBLKCP")
        assert kb.count("STG.E.128") > ts.LOADS and kb.count("LDS.128") > ts.LOADS
    # The scatter of the main and halo vectors is straight-line: one store per element.
    sts = {1: "STS.U8", 2: "STS.U16", 4: "STS", 8: "STS.64"}[itemsize]
    assert kb.count(sts) >= (ts.LOADS + 1) * kv
    assert kb.registers <= 65536 // (threads * min_blocks)
    # The tile padded by kv - 1 rows above and below and a sector of slots on each side, one
    # spare chunk per row, plus one 16-byte chunk of skew per kv rows.
    nrows = cols + 2 * (kv - 1)
    assert kb.shared_bytes == (nrows * (trows + 2 * spe + kv) + ((nrows - 1) // kv) * kv) * itemsize


# Instructions, registers of the plain kernels (no row offset) before the grid split: the
# common path keeps them exactly (the tile_y0 argument is unused there). A set per front end:
# numba-cuda-mlir's v8 kernels are 1.6-3.7 times as long (docs/front_ends.md).
PLAIN = {("v7", 1): (968, 64), ("v7", 2): (976, 40), ("v7", 4): (1248, 40), ("v7", 8): (1160, 40),
         ("v8", 1): (1528, 64), ("v8", 2): (1352, 79), ("v8", 4): (1088, 79), ("v8", 8): (1128, 64)}
PLAIN_MLIR = {("v7", 1): (1000, 64), ("v7", 2): (1008, 40), ("v7", 4): (1320, 40),
              ("v7", 8): (1216, 40), ("v8", 1): (5712, 64), ("v8", 2): (3688, 80),
              ("v8", 4): (2376, 80), ("v8", 8): (1816, 62)}


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_row_offset_variants(itemsize, transposes):
    """Grids taller than 65535 tile rows run the row-offset variants (R0 from blockIdx.y +
    tile_y0): the same vector accesses; the plain kernels are what they were."""
    from numba_tma.kernels import transpose_sector as ts
    from numba_tma.kernels import transpose_vec as tv

    plain = {}
    for row_offset in (False, True):
        v7 = transposes(("v7", itemsize, row_offset))
        v8 = transposes(("v8", itemsize, row_offset))
        if not row_offset:
            plain = {"v7": v7, "v8": v8}
            if pinned_toolchain():
                pinned = PLAIN_MLIR if on_mlir() else PLAIN
                assert (len(v7.mnemonics()), v7.registers) == pinned["v7", itemsize]
                assert (len(v8.mnemonics()), v8.registers) == pinned["v8", itemsize]
            continue
        # Any toolchain: the variant moves the same data as the plain kernel (the offset is
        # address arithmetic), and both are clean.
        for name, kb in (("v7", v7), ("v8", v8)):
            check_clean(plain[name])
            for op in ("LDG", "STG", "LDS", "STS"):
                assert plain[name].count(op) == kb.count(op), (name, op)
        if not (on_mlir() and itemsize == 1):  # (it spills 12 bytes there: front_ends.md)
            check_clean(v7)
        assert v7.count("LDG.E.128") == tv.LOADS and v7.count("STG.E.128") == tv.LOADS
        assert v8.count("LDG.E.LTC256B.128") == ts.LOADS + 2
        # fp16 / fp32 v8 sit at their 80-register bound: the extra add spills a word there.
        assert v8.count("CALL") == 0 and (v8.spill_stores or 0) <= 8
