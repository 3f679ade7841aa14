"""The pipelined TMA transpose without a GPU: its register micro-transpose, its bank-conflict-free
thread placement, and its sm_90a SASS (16-byte shared accesses, no calls, no local memory)."""

import os

import numpy as np
import pytest

from numba_tma import swizzle
from numba_tma.ladders import transpose_tma as tt
from sass_checks import collected, compiled_in_processes, on_mlir, take

ITEMSIZES = [1, 2, 4, 8]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_micro_transpose_source_transposes(itemsize):
    E = 16 // itemsize
    scope = {"np": np}
    exec(tt._micro_transpose_source(itemsize), scope)
    wi = np.random.default_rng().integers(0, 2**32, 4 * E, dtype=np.uint64).astype(np.uint32)
    wo = np.zeros_like(wi)
    scope["micro_transpose"](wi, wo)
    block = wi.view(UINT[itemsize]).reshape(E, E)          # chunk r = row r of the micro-tile
    np.testing.assert_array_equal(wo.view(UINT[itemsize]).reshape(E, E), block.T)


@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_thread_placement_is_bank_conflict_free(itemsize):
    E = 16 // itemsize
    tile = tt.pipelined_config(itemsize)[0]
    for warp_phase in range(tt.THREADS_PIPELINED // 8):         # 8 lanes per 128-bit phase
        tids = range(8 * warp_phase, 8 * warp_phase + 8)
        for k in range(E):
            for read in (True, False):
                quads = set()
                for tid in tids:
                    rb, cb = tid % 8, (tid % 8) ^ (tid // 8)
                    row, chunk = (E * rb + k, cb) if read else (E * cb + k, rb)
                    byte = swizzle.byte_offset(row * tt.LINE + chunk * 16, 128)
                    quads.add((byte % 128) // 16)
                assert len(quads) == 8, f"conflict: itemsize {itemsize} k {k} read={read}"
    assert tile * itemsize == tt.LINE


def build_pipelined(itemsize):
    """The pipelined kernel for ``itemsize``, compiled (in a worker process)."""
    from numba_tma.offline import compile_kernel

    return compile_kernel(tt._pipelined_kernel(itemsize, *tt.PIPELINE[itemsize], *tt.GROUP),
                          tt.PIPELINED_SIGNATURE)


@pytest.fixture(scope="module")
def pipelined(request):
    return compiled_in_processes(collected(request, "test_pipelined_sass", "itemsize"),
                                 build_pipelined)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="needs the CUDA target")
@pytest.mark.parametrize("itemsize", ITEMSIZES)
def test_pipelined_sass(itemsize, pipelined):
    kb = take(pipelined, itemsize)
    E = 16 // itemsize
    assert kb.count("CALL") == 0 and kb.stack_bytes == 0 and kb.local_bytes == 0
    assert kb.spill_stores == 0 and not kb.has("LDL") and not kb.has("STL")
    assert kb.opcodes()["LDS.128"] == E and kb.opcodes()["STS.128"] == E
    assert kb.has("UTMALDG.3D") and kb.has("UTMASTG.3D")


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="needs the CUDA target")
@pytest.mark.parametrize("batch", [None, 1, tt.SEED_BATCH])
def test_seed_kernels_sass(batch):
    from numba_tma.offline import compile_kernel

    kernel = tt._naive_kernel() if batch is None else tt._swizzled_kernel(batch)
    kb = compile_kernel(kernel, "void(uint64[::1], uint64[::1])")
    ops = kb.mnemonics()
    assert kb.count("CALL") == 0 and kb.local_bytes == 0 and kb.spill_stores == 0

    def first(prefix):
        return next(i for i, op in enumerate(ops) if op.startswith(prefix))

    # The tile load is in flight before the block syncs (init_and_load), and the store issues
    # after the sync that follows the shared writes.
    assert first("UTMALDG.3D") < first("BAR.SYNC") < first("UTMASTG.3D")
    assert kb.count("BAR.SYNC") == 2
    # Unsigned 32-bit thread and swizzle math: no 64-bit shifts, no signed-division fix-ups
    # (numba-cuda-mlir keeps one or two unsigned 64-bit shifts: docs/front_ends.md).
    wide = ("SHF.R.S64", "SHF.R.S32", "IMAD.WIDE") + (() if on_mlir() else ("SHF.R.U64",))
    assert not any(op.startswith(wide) for op in ops)
    # One element per shared access; a batched thread issues all its reads before its writes.
    n = batch or 1
    lds = [i for i, op in enumerate(ops) if op == "LDS"]
    sts = [i for i, op in enumerate(ops) if op == "STS"]
    assert len(lds) == n and len(sts) == n and max(lds) < min(sts)


def test_seed_grid_is_column_major_and_checked():
    assert tt._seed_grid("tma_batched", 1024, 3, 2) == (1024, 3, 2)
    assert tt._seed_grid("tma_naive", 10**6, 65535, 65535) == (10**6, 65535, 65535)
    for tiles_j, batch in ((65536, 1), (1, 65536)):
        with pytest.raises(ValueError, match="tma_naive: .*gridDim.y and gridDim.z to 65535"):
            tt._seed_grid("tma_naive", 1, tiles_j, batch)


@pytest.mark.parametrize("tiles,batch,grid,group", [
    ((256, 256), 1, 1188, (8, 8)),      # 32768^2 fp32 on 132 SMs x 9 blocks
    ((13, 7), 3, 40, (8, 8)),           # partial supertiles, several batches
    ((5, 300), 1, 7, (4, 2)),
    ((1, 1), 2, 2, (8, 8)),
    ((33, 17), 1, 5000, (1, 1)),        # more blocks than tiles: the launcher caps the grid
])
def test_tile_walk_visits_every_tile_once(tiles, batch, grid, group):
    ti, tj = tiles
    gi, gj = group
    grid = min(grid, batch * ti * tj)
    advance, tile_i, tile_j = (f.py_func for f in tt._pipelined_kernel(4, 2, 2, 4, 2, gi, gj).tile_walk)
    st_i, st_j = -(-ti // gi), -(-tj // gj)
    q, r = divmod(grid, gi * gj)
    seen = []
    for bid in range(grid):
        cur = np.zeros(4, np.int64)
        advance(cur, bid // (gi * gj), bid % (gi * gj), st_i, st_j)
        while cur[3] < batch:
            i, j = tile_i(cur), tile_j(cur)
            if i < ti and j < tj:
                seen.append((int(cur[3]), int(i), int(j)))
            advance(cur, q, r, st_i, st_j)
    assert len(seen) == len(set(seen)) == batch * ti * tj
