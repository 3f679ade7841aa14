"""The epilogues: a consumer's accumulators to C, through 128B-swizzled boxes and TMA stores.

Each consumer warp owns 16 rows of C (a slab) of each m64 half it holds. A box is 16 rows x 128
bytes (64 columns of 16-bit C, 32 of f32), laid out as C's TMA box reads it: the accumulators
are scaled by ``alpha`` (plus ``beta`` times the box's old contents, loaded by TMA), 16-bit
output packed and written with ``stmatrix``, f32 with 8-byte stores, then stored by one lane
(clipped at the matrix's edges by the hardware).

- :func:`slab_epilogue`: one block per tile; after the main loop the ring becomes the warps'
  slabs, written whole and stored.
- :func:`staged_epilogue`: persistent; the producer is already refilling the ring, so each warp
  stages its boxes one by one through ``c_buffers`` boxes of its own, a box written while the
  others' stores still read theirs.
- :func:`packed_epilogue`: the overlapped epilogue's store of one box of a tile already packed
  into 16-bit pairs.
"""

import functools

import numpy as np

from ..._frontend import cuda
from ..._bridge import generated_device, inline_device
from ... import fence, mbarrier, tma, warp
from .config import CONSUMER_WARPS, C_BOX_BYTES, SLAB_ROWS, WG_ROWS
from .ring import Parts, SPAN
from .user_epilogue import AUX_MAP, element_epilogue

__all__ = ["stmatrix_row", "box_writer", "slab_epilogue", "staged_epilogue", "packed_epilogue",
           "box_columns"]


def box_columns(out_kind):
    """Columns of C in one 128-byte-wide box: 64 of 16-bit output, 32 of f32."""
    return 64 if out_kind != "f32" else 32


@inline_device
def stmatrix_row(off, lane, q4):
    # The byte offset of lane's row address for the stmatrix.x4 of columns 16 q4..16 q4 + 15 of
    # the 128B-swizzled 16 x 64 (16-bit) box at off: its matrices are (rows 0-7 | 8-15) x
    # (n8 tile 2 q4 | 2 q4 + 1), and lane's word q of them packs accumulators
    # ((q4 * 2 + (q >> 1)) * 4 + 2 * (q & 1)) + (0, 1) of the box's n8 tiles.
    srow = (lane & 7) + (((lane >> 3) & 1) << 3)
    chunk = (q4 * 2 + (lane >> 4)) & 7
    return off + srow * SPAN + ((chunk ^ (srow & 7)) << 4)


@functools.cache        # one set of device functions for every kernel that shares them
def box_writer(out_kind, has_beta, epi=None, j=None, aux_delta=0):
    """``write_box(acc, smem8, dynf, fbase, off, j, lane, alpha, beta, words, old, crow, col0,
    m, n, ep)``: a consumer warp's box ``j`` of C (the n8 tiles 8j..8j+7 of 16-bit output,
    4j..4j+3 of f32) at byte ``off`` of the uint8 shared array ``smem8``, which starts at float
    ``fbase`` of ``dynf`` (the dynamic shared memory as float32): ``alpha * acc``, plus ``beta``
    times the box's old contents (already loaded there) when ``has_beta``. ``j`` must be a
    compile-time constant (an unrolled loop), as every accumulator index is. ``words`` and
    ``old`` are the warp's 4-word scratch fragments.

    With a user epilogue ``epi`` (:mod:`.user_epilogue`; ``ep`` its arguments), each element
    of the warp's rows ``crow..crow + 15`` and the tile's columns from ``col0`` goes through it
    (inside ``m`` x ``n``): that writer is box ``j``'s alone, its loops written out
    (:func:`_epilogue_box_writer`). With ``epi.aux`` it writes the auxiliary output's box too,
    ``aux_delta`` bytes after C's."""
    if epi is not None:
        return _epilogue_box_writer(out_kind, has_beta, epi, j, aux_delta)
    OUT16 = out_kind != "f32"
    pack = warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2
    unpack = warp.unpack_f16x2 if out_kind == "f16" else warp.unpack_bf16x2

    @inline_device
    def write_box(acc, smem8, dynf, fbase, off, j, lane, alpha, beta, words, old, crow, col0,
                  m, n, ep):
        if OUT16:
            for q4 in range(4):
                soff = stmatrix_row(off, lane, q4)
                if has_beta:
                    warp.ldmatrix(old, smem8, soff, 4)
                for q in range(4):
                    i = ((j * 4 + q4) * 2 + (q >> 1)) * 4 + 2 * (q & 1)
                    v0 = alpha * acc[i]
                    v1 = alpha * acc[i + 1]
                    if has_beta:
                        v0 += beta * unpack(old[q])
                        v1 += beta * unpack(old[q], True)
                    words[q] = pack(v0, v1)
                warp.stmatrix(smem8, soff, words, 4)
        else:
            g = lane >> 2
            t = lane & 3
            for q in range(4):
                for h in range(2):
                    row = g + 8 * h
                    chunk = (q * 2 + (t >> 1)) ^ g
                    f = fbase + ((off + row * SPAN + (chunk << 4) + (t & 1) * 8) >> 2)
                    i = (j * 4 + q) * 4 + 2 * h
                    v0 = alpha * acc[i]
                    v1 = alpha * acc[i + 1]
                    if has_beta:
                        v0 += beta * dynf[f]
                        v1 += beta * dynf[f + 1]
                    dynf[f] = v0
                    dynf[f + 1] = v1

    return write_box


def epilogue_branches(epi, condition, body):
    """``(lines, names)``: source lines (inside a function) that run ``body`` with each
    ``APPLY(v, row, col, m, n, ep)`` the user's epilogue ``epi`` untested where ``condition``
    holds (a box wholly inside C: no branch per element, so its loads issue together) and
    tested per element elsewhere (:func:`.user_epilogue.element_epilogue`); ``names``, what
    those lines call, for :func:`generated_device`'s ``env``."""
    apply, apply_inside = element_epilogue(epi)
    lines = ([f"    if {condition}:"]
             + ["        " + line.replace("APPLY", "apply_inside") for line in body]
             + ["    else:"] + ["        " + line.replace("APPLY", "apply") for line in body])
    return lines, {"apply": apply, "apply_inside": apply_inside}


@functools.cache
def _epilogue_box_writer(out_kind, has_beta, epi, j, aux_delta):
    # box_writer's write_box of box j with the user's epilogue, every loop written out, twice:
    # for a box inside C (no test per element) and for one across its edge; with an auxiliary
    # output, its box (aux_delta bytes on) from the pairs the epilogue returns.
    out16 = out_kind != "f32"
    aux = epi.aux
    env = {"stmatrix_row": stmatrix_row, "warp": warp, "cuda": cuda, "np": np,
           "pack": warp.pack_f16x2 if out_kind == "f16" else warp.pack_bf16x2,
           "unpack": warp.unpack_f16x2 if out_kind == "f16" else warp.unpack_bf16x2}
    body = []
    if out16:
        for q4 in range(4):
            body.append(f"soff = stmatrix_row(off, lane, {q4})")
            if has_beta:
                body.append("warp.ldmatrix(old, smem8, soff, 4)")
            for q in range(4):
                t = (j * 4 + q4) * 2 + (q >> 1)
                i = t * 4 + 2 * (q & 1)
                body += [f"v0 = alpha * acc[{i}]", f"v1 = alpha * acc[{i + 1}]"]
                if has_beta:
                    body += [f"v0 += beta * unpack(old[{q}])",
                             f"v1 += beta * unpack(old[{q}], True)"]
                got0, got1 = ("v0, x0", "v1, x1") if aux else ("v0", "v1")
                body += [f"{got0} = APPLY(v0, r + {8 * (q & 1)}, c + {8 * t}, m, n, ep)",
                         f"{got1} = APPLY(v1, r + {8 * (q & 1)}, c + {8 * t + 1}, m, n, ep)",
                         f"words[{q}] = pack(v0, v1)"]
                if aux:
                    body.append(f"xwords[{q}] = pack(x0, x1)")
            body.append("warp.stmatrix(smem8, soff, words, 4)")
            if aux:
                body.append(f"warp.stmatrix(smem8, soff + {aux_delta}, xwords, 4)")
    else:
        body += ["g = lane >> 2", "t = lane & 3"]
        for q in range(4):
            for h in range(2):
                i = (j * 4 + q) * 4 + 2 * h
                body += [f"f = fbase + ((off + (g + {8 * h}) * {SPAN} + ((({q * 2} + (t >> 1))"
                         f" ^ g) << 4) + (t & 1) * 8) >> 2)",
                         f"v0 = alpha * acc[{i}]", f"v1 = alpha * acc[{i + 1}]"]
                if has_beta:
                    body += ["v0 += beta * dynf[f]", "v1 += beta * dynf[f + 1]"]
                got0, got1 = ("v0, x0", "v1, x1") if aux else ("v0", "v1")
                body += [f"{got0} = APPLY(v0, r + {8 * h}, c + {8 * (j * 4 + q)}, m, n, ep)",
                         f"{got1} = APPLY(v1, r + {8 * h}, c + {8 * (j * 4 + q) + 1}, m, n, ep)",
                         "dynf[f] = v0", "dynf[f + 1] = v1"]
                if aux:
                    body += [f"dynf[f + {aux_delta // 4}] = x0",
                             f"dynf[f + {aux_delta // 4 + 1}] = x1"]
    cols = (j + 1) * box_columns(out_kind)          # the box's columns end col0 + cols
    src = ["def write_box(acc, smem8, dynf, fbase, off, j, lane, alpha, beta, words, old, "
           "crow, col0, m, n, ep):",
           "    r = crow + (lane >> 2)",            # lane's rows: r, r + 8
           "    c = col0 + 2 * (lane & 3)"]         # its columns of n8 tile t: c + 8 t (+ 1)
    if aux and out16:
        src.append("    xwords = cuda.local.array(4, np.uint32)")
    lines, names = epilogue_branches(epi, f"crow + {SLAB_ROWS} <= m and col0 + {cols} <= n",
                                     body)
    return generated_device("write_box", src + lines, {**env, **names})


@functools.cache
def slab_epilogue(bn, out_kind, has_beta, epi=None):
    """One block per tile: slab ``w`` (rows ``row0 + 16 w..``) of a ``bn``-wide tile, in the
    ring at ``w * SLAB_BYTES``. ``load_old_slab`` (``beta``: its old C by TMA, lane 0),
    ``write_slab`` (``alpha * acc`` + ``beta`` times the old C once landed, then the user's
    ``epi`` with arguments ``ep``) and ``store_slab`` (lane 0; boxes past N skipped). With
    ``epi.aux`` the auxiliary output's slabs follow the ``CONSUMER_WARPS`` slabs of C in the
    ring (:func:`.config.smem_bytes` counts both)."""
    C_COLS = box_columns(out_kind)
    C_BOXES = bn // C_COLS
    SLAB_BYTES = C_BOXES * C_BOX_BYTES
    AUX = epi is not None and epi.aux
    AUX_DELTA = CONSUMER_WARPS * SLAB_BYTES      # (an auxiliary slab after C's slabs)
    write_box = box_writer(out_kind, has_beta)

    @inline_device
    def load_old_slab(tiles, c_map, cbar, w, lane, row0, col0, m, n):
        crow = row0 + w * SLAB_ROWS
        if lane == 0 and crow < m and col0 < n:
            mbarrier.arrive_expect_tx(cbar[w:], SLAB_BYTES)
            for j in range(C_BOXES):
                tma.load(tiles[w * SLAB_BYTES + j * C_BOX_BYTES:], c_map,
                         (crow, col0 + j * C_COLS), cbar[w:])

    if epi is not None:         # (each box's writer called by name: box_writer)
        env = {f"write_{j}": box_writer(out_kind, has_beta, epi, j, AUX_DELTA)
               for j in range(C_BOXES)}
        write_epilogue_slab = generated_device("write_slab", [
            "def write_slab(acc, smem8, dynf, fbase, off, lane, alpha, beta, words, old, crow, "
            "col0, m, n, ep):"] + [
            f"    write_{j}(acc, smem8, dynf, fbase, off + {j * C_BOX_BYTES}, {j}, lane, alpha, "
            f"beta, words, old, crow, col0, m, n, ep)" for j in range(C_BOXES)], env)

    @inline_device
    def write_slab(acc, tiles, dynf, first, cbar, w, lane, row0, col0, m, n, alpha, beta, ep):
        crow = row0 + w * SLAB_ROWS
        if has_beta and crow < m and col0 < n:
            mbarrier.wait(cbar[w:], 0)
        words = cuda.local.array(4, np.uint32)
        old = cuda.local.array(4, np.uint32)
        if epi is not None:
            write_epilogue_slab(acc, tiles, dynf, first >> 2, w * SLAB_BYTES, lane, alpha,
                                beta, words, old, crow, col0, m, n, ep)
        else:
            for j in range(C_BOXES):
                write_box(acc, tiles, dynf, first >> 2, w * SLAB_BYTES + j * C_BOX_BYTES, j,
                          lane, alpha, beta, words, old, crow, col0, m, n, ep)

    @inline_device
    def store_slab(c_map, tiles, w, lane, row0, col0, m, n, ep):
        crow = row0 + w * SLAB_ROWS
        if lane == 0 and crow < m:
            for j in range(C_BOXES):
                if col0 + j * C_COLS < n:
                    tma.store(c_map, (crow, col0 + j * C_COLS), tiles[w * SLAB_BYTES
                                                                     + j * C_BOX_BYTES:])
                    if AUX:
                        tma.store(ep[AUX_MAP], (crow, col0 + j * C_COLS),
                                  tiles[AUX_DELTA + w * SLAB_BYTES + j * C_BOX_BYTES:])

    return Parts(load_old_slab=load_old_slab, write_slab=write_slab, store_slab=store_slab)


@functools.cache
def _box_storer(write_box, c_cols, nbuf, has_beta, aux=False):
    """``store_box(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0, m, n, alpha, beta,
    words, old, boxes, loads, j, ep)``: box ``j`` of a warp's 16 rows of C (from row ``crow``)
    written by ``write_box`` into the next of its ``nbuf`` staging boxes and stored (with
    ``beta``, its old C loaded first); returns the counts of boxes staged and C boxes loaded.
    ``aux``: each box of C takes two staging boxes, C's and the auxiliary output's after it
    (``write_box``'s ``aux_delta`` is ``C_BOX_BYTES``), stored in one bulk group."""
    PER = 2 if aux else 1
    SLOTS = nbuf // PER                         # (the caller makes it at least 1)
    STORES_IN_FLIGHT = SLOTS - 1                # a warp's store groups that may still read

    @inline_device
    def store_box(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0, m, n, alpha, beta,
                  words, old, boxes, loads, j, ep):
        ccol = col0 + j * c_cols
        inside = crow < m and ccol < n
        off = stage + (boxes & (SLOTS - 1)) * (PER * C_BOX_BYTES)
        boxes += 1
        if lane == 0:
            tma.wait_group_read(STORES_IN_FLIGHT)   # this buffer's last store read it
        cuda.syncwarp()
        if has_beta and inside:
            if lane == 0:
                mbarrier.arrive_expect_tx(cbar[cw:], C_BOX_BYTES)
                tma.load(dyn8[off:], c_map, (crow, ccol), cbar[cw:])
            mbarrier.wait(cbar[cw:], loads & 1)
            loads += 1
        write_box(acc, dyn8, dynf, 0, off, j, lane, alpha, beta, words, old, crow, col0, m, n,
                  ep)
        fence.proxy_async_shared()
        cuda.syncwarp()
        if lane == 0:
            if inside:
                tma.store(c_map, (crow, ccol), dyn8[off:])
                if aux:
                    tma.store(ep[AUX_MAP], (crow, ccol), dyn8[off + C_BOX_BYTES:])
            tma.commit_group()          # (empty when outside: keeps the count)
        return boxes, loads
    return store_box


@functools.cache
def _epilogue_store_tile(out_kind, has_beta, nbuf, tm, halves, whole, epi, c_boxes):
    # staged_epilogue's store_tile with a user epilogue: each box's store called by name (an
    # auxiliary output needs nbuf >= 2: WgmmaConfig.check_spec says so before a kernel is built).
    env = {f"store_{j}": _box_storer(box_writer(out_kind, has_beta, epi, j, C_BOX_BYTES),
                                     box_columns(out_kind), nbuf, has_beta, epi.aux)
           for j in range(c_boxes)}
    args = ("dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0, m, n, alpha, beta, words, "
            "old, boxes, loads")
    src = ["def store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0, col0, m, "
           "n, alpha, beta, words, old, boxes, loads, ep):",
           f"    crow = row0 + {0 if whole else f'(cw >> 2) * {tm // 2}'} + (cw & 3) * "
           f"{SLAB_ROWS}"]
    for half in range(halves):
        if half:
            src.append(f"    crow += {WG_ROWS}")
        src += [f"    boxes, loads = store_{j}({'acc2' if half else 'acc'}, {args}, {j}, ep)"
                for j in range(c_boxes)]
    src.append("    return boxes, loads")
    return generated_device("store_tile", src, env)


@functools.cache
def staged_epilogue(bn, out_kind, has_beta, nbuf, tm, halves, whole, epi=None):
    """Persistent: ``store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0,
    col0, m, n, alpha, beta, words, old, boxes, loads, ep)`` writes consumer warp ``cw``'s 16
    rows x ``bn`` of each of its ``halves`` m64 halves (``acc``, ``acc2``) box by box through
    its ``nbuf`` staging boxes at byte ``stage`` (the user's ``epi`` applied, with arguments
    ``ep``); returns the counts of boxes staged (which buffer is next) and of C boxes loaded
    for ``beta`` (``cbar``'s parity). ``whole``: the warpgroup holds its own ``tm``-row tile
    (else its half of the block's rows)."""
    C_COLS = box_columns(out_kind)
    C_BOXES = bn // C_COLS
    if epi is not None:
        return _epilogue_store_tile(out_kind, has_beta, nbuf, tm, halves, whole, epi, C_BOXES)
    HALF_BOXES = (C_BOXES + 1) // 2
    store_box = _box_storer(box_writer(out_kind, has_beta), C_COLS, nbuf, has_beta)

    @inline_device
    def store_tile(acc, acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, row0, col0, m, n,
                   alpha, beta, words, old, boxes, loads, ep):
        # Loops of at most 4 boxes: the compiler unrolls those, while one loop over the 8 f32
        # boxes of a 256-wide tile with beta's loads stayed a loop, its run-time accumulator
        # index sending all 128 accumulators to local memory.
        crow = row0 + (0 if whole else (cw >> 2) * (tm // 2)) + (cw & 3) * SLAB_ROWS
        for j in range(HALF_BOXES):
            boxes, loads = store_box(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0,
                                     m, n, alpha, beta, words, old, boxes, loads, j, ep)
        for j in range(HALF_BOXES, C_BOXES):
            boxes, loads = store_box(acc, dyn8, dynf, c_map, cbar, stage, cw, lane, crow, col0,
                                     m, n, alpha, beta, words, old, boxes, loads, j, ep)
        if halves == 2:
            crow += WG_ROWS
            for j in range(HALF_BOXES):
                boxes, loads = store_box(acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, crow,
                                         col0, m, n, alpha, beta, words, old, boxes, loads, j,
                                         ep)
            for j in range(HALF_BOXES, C_BOXES):
                boxes, loads = store_box(acc2, dyn8, dynf, c_map, cbar, stage, cw, lane, crow,
                                         col0, m, n, alpha, beta, words, old, boxes, loads, j,
                                         ep)
        return boxes, loads

    return store_tile


@functools.cache
def packed_epilogue(bn, out_kind, nbuf):
    """The overlapped epilogue's ``store_packed(c16, dyn8, c_map, stage, lane, crow, col0, m, n,
    boxes, words, j)``: box ``j`` (a compile-time constant; nothing past the tile's last box)
    of a warp's 16 rows already packed into 16-bit pairs (``c16``), staged through its ``nbuf``
    boxes at byte ``stage`` and stored; returns the count of boxes staged."""
    C_COLS = box_columns(out_kind)
    C_BOXES = bn // C_COLS
    STORES_IN_FLIGHT = nbuf - 1

    @inline_device
    def store_packed(c16, dyn8, c_map, stage, lane, crow, col0, m, n, boxes, words, j):
        if j < C_BOXES:
            ccol = col0 + j * C_COLS
            off = stage + (boxes & (nbuf - 1)) * C_BOX_BYTES
            boxes += 1
            if lane == 0:
                tma.wait_group_read(STORES_IN_FLIGHT)   # this buffer's last store read it
            cuda.syncwarp()
            for q4 in range(4):
                for q in range(4):
                    words[q] = c16[((j * 4 + q4) * 2 + (q >> 1)) * 2 + (q & 1)]
                warp.stmatrix(dyn8, stmatrix_row(off, lane, q4), words, 4)
            fence.proxy_async_shared()
            cuda.syncwarp()
            if lane == 0:
                if crow < m and ccol < n:
                    tma.store(c_map, (crow, ccol), dyn8[off:])
                tma.commit_group()      # (empty when outside: keeps the count)
        return boxes

    return store_packed
