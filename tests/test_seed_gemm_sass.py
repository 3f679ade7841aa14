"""Seeds 002 and 004 offline: the 16x16x16 half-GEMM ladder (numba_tma.ladders.warp_gemm) and the
SIMT fp32 GEMM (numba_tma.ladders.simt_gemm) compiled for sm_90a without a GPU.

* Ladder: each rung's SASS has exactly the shared-memory instructions its docstring describes,
  two HMMA.16816.F32, no local memory, no calls; the bank model's table; the seed's swizzle is
  CuTe's Swizzle<1,3,3> on half offsets (not Swizzle<3,1,3>, which would split ldmatrix rows).
* SIMT GEMM: no local memory for every layout and configuration; the inner loop is exactly
  K_UNROLL * 4 LDS.128 and K_UNROLL * 64 FFMA plus a few loop instructions; the shared copies
  and the compute loads are bank-conflict-free (host model on the kernel's own index functions).
* benches/warp_gemm_banks.py: ncu CSV parsing and the profiling command, on canned text.
"""

import collections
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sass_checks import check_clean, skip_on_mlir

ROOT = Path(__file__).resolve().parents[1]

needs_compiler = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                    reason="offline compilation needs the real CUDA target")

WORDS_SIG = "void(uint32[::1], uint32[::1], uint32[::1])"
SIMT_SIG = ("void(float32[::1], float32[::1], float32[::1], int64, int64, int64, int64, int64, "
            "int64, float32, float32)")
SIMT_LAYOUTS = {          # name: (a_kmajor, b_kmajor, c_rowmajor)
    "row": (True, False, True),
    "col": (False, True, False),
    "seed_nt": (False, False, False),
    "row_bcol": (True, True, True),
}


def compile_kernel(kernel, sig):
    from numba_tma.offline import compile_kernel as compile_

    return compile_(kernel, sig)


# ================================================================ seed 002: the warp ladder

LADDER_SASS = {
    # rung: shared-memory and math opcodes, exactly
    "smem": {"LDS": 8, "LDS.U16": 8, "STS": 12, "HMMA.16816.F32": 2},
    "padded": {"LDS": 8, "LDS.U16": 8, "STS": 12, "HMMA.16816.F32": 2},
    "ldmatrix": {"LDS": 4, "STS": 8, "LDSM.16.M88.4": 1, "LDSM.16.MT88.4": 1,
                 "STSM.16.M88.4": 1, "HMMA.16816.F32": 2},
    "swizzle": {"LDS": 4, "STS": 8, "LDSM.16.M88.4": 1, "LDSM.16.MT88.4": 1,
                "STSM.16.M88.4": 1, "HMMA.16816.F32": 2},
}


@needs_compiler
@pytest.mark.parametrize("rung", list(LADDER_SASS))
def test_ladder_sass(rung):
    from numba_tma.ladders import warp_gemm

    kb = compile_kernel(warp_gemm.KERNELS[rung], WORDS_SIG)
    check_clean(kb)
    ops = kb.opcodes()
    got = {op: n for op, n in ops.items()
           if op.startswith(("LDS", "STS", "LDSM", "STSM", "HMMA"))}
    assert got == LADDER_SASS[rung]
    assert ops["F2FP.F16.F32.PACK_AB"] == 4          # C rounded to f16 once, in pairs
    assert ops["LDG.E"] == 8 and ops["STG.E"] == 4     # 32-bit words in, f16 pairs out


def test_ladder_order_and_names():
    from numba_tma.ladders import warp_gemm

    bench = _load_bench()
    assert list(warp_gemm.LADDER) == list(warp_gemm.KERNELS) == list(bench.RUNGS)
    for rung, fn in warp_gemm.LADDER.items():
        assert fn.__name__ == f"gemm16_{rung}"
        assert "Changed from" in fn.__doc__ or rung == "smem"
        assert "Buys" in fn.__doc__ or rung == "smem"
        assert warp_gemm.KERNELS[rung].py_func.__name__ == f"warp_gemm16_{rung}"


# (load wavefronts, ideal), (store wavefronts, ideal) per op kind, one run of one warp
BANK_TABLE = {
    "smem": {"ld": (28, 16), "st": (16, 12)},
    "padded": {"ld": (16, 16), "st": (12, 12)},
    "ldmatrix": {"st": (8, 8), "ldsm": (16, 8), "stsm": (8, 4), "ld": (4, 4)},
    "swizzle": {"st": (8, 8), "ldsm": (8, 8), "stsm": (4, 4), "ld": (4, 4)},
}


@pytest.mark.parametrize("rung", list(BANK_TABLE))
def test_bank_model_table(rung):
    from numba_tma.ladders import warp_gemm

    assert warp_gemm.bank_model(rung) == BANK_TABLE[rung]


def test_bank_model_details():
    """The conflicts sit where the docstrings say: the dense rungs' fragment accesses are each
    2-way (rows g and g + 4 share banks), everything else is one wavefront per phase."""
    from numba_tma.ladders import warp_gemm

    for rung in warp_gemm.LADDER:
        for acc in warp_gemm.shared_accesses(rung):
            assert all(len(p) == (32 if acc.op in ("ld", "st") else 8) for p in acc.phases)
            waves = [warp_gemm._wavefronts(p) for p in acc.phases]
            conflicted = rung in ("smem", "ldmatrix") and not acc.what.startswith(
                ("stage", "copy out"))
            assert waves == [2 if conflicted else 1] * len(acc.phases), (rung, acc.what, waves)
    with pytest.raises(ValueError, match="unknown rung"):
        warp_gemm.shared_accesses("wmma")


def test_bank_model_counts_distinct_words_per_bank():
    from numba_tma.ladders.warp_gemm import _wavefronts

    assert _wavefronts([[0]] * 32) == 1                    # broadcast
    assert _wavefronts([[i] for i in range(32)]) == 1      # one word per bank
    assert _wavefronts([[32 * i] for i in range(32)]) == 32
    assert _wavefronts([[0], [32], [64], [1]]) == 3


def test_fragment_index_functions_match_the_ptx_layouts():
    """The per-lane addresses of the plain rungs pick exactly the mma fragments (numpy models of
    numba_tma.warp), for the dense and the padded pitch; the staging copies are bijections."""
    from numba_tma import warp
    from numba_tma.ladders import warp_gemm as wg

    m = np.arange(256, dtype=np.uint16).reshape(16, 16)
    frag_a = warp.fragment_a_m16n8k16(m)
    for pitch in (wg.ROW_WORDS, wg.PADDED_PITCH_WORDS):
        halves = np.zeros(16 * pitch * 2, np.uint16)
        halves.reshape(16, 2 * pitch)[:, :16] = m
        for lane in range(32):
            for q in range(4):
                w = wg._a_word(lane, q, pitch)
                assert list(halves[2 * w:2 * w + 2]) == list(frag_a[lane, 2 * q:2 * q + 2])
            for r in range(4):
                b_frag = warp.fragment_b_m16n8k16(m[:, 8 * (r >> 1):8 * (r >> 1) + 8])
                for j in range(2):
                    h = wg._b_half(lane, r, j, 2 * pitch)
                    assert halves[h] == b_frag[lane, 2 * (r & 1) + j]
            for r in range(4):
                w = wg._c_word(lane, r, pitch)
                c_frag = warp.fragment_c(m[:, 8 * (r >> 1):8 * (r >> 1) + 8])
                i0 = 2 * (r & 1)
                assert list(halves[2 * w:2 * w + 2]) == list(c_frag[lane, i0:i0 + 2])
    for padded, size in ((False, wg.TILE_WORDS), (True, wg.PADDED_WORDS)):
        pairs = [wg._stage_words(lane, i, padded) for lane in range(32) for i in range(4)]
        assert sorted(p[0] for p in pairs) == list(range(wg.TILE_WORDS))
        assert len({p[1] for p in pairs}) == wg.TILE_WORDS and max(p[1] for p in pairs) < size
        for src, dst in pairs:      # same element: row src // 8, word src % 8
            pitch = wg.PADDED_PITCH_WORDS if padded else wg.ROW_WORDS
            assert divmod(dst, pitch) == divmod(src, wg.ROW_WORDS)


def test_ldmatrix_rows_give_the_mma_fragments():
    """ldmatrix.x4 with the rungs' row addresses yields A's fragment, .trans B's two n-tiles,
    and stmatrix of the C pairs writes C (numpy models), with and without the swizzle."""
    from numba_tma import warp
    from numba_tma.ladders import warp_gemm as wg

    m = np.arange(256, dtype=np.uint16).reshape(16, 16)
    for swz in (False, True):
        tile = np.zeros(256, np.uint16)
        for off in range(256):
            tile[wg.swizzle_half(off) if swz else off] = m.ravel()[off]
        rows = [wg._ldsm_half(lane) for lane in range(32)]
        rows = [wg.swizzle_half(h) if swz else h for h in rows]
        mats = np.stack([np.stack([tile[rows[8 * q + r]:rows[8 * q + r] + 8] for r in range(8)])
                         for q in range(4)])
        np.testing.assert_array_equal(warp.fragment_ldmatrix(mats), warp.fragment_a_m16n8k16(m))
        bt = warp.fragment_ldmatrix(mats, trans=True)
        np.testing.assert_array_equal(bt[:, :4], warp.fragment_b_m16n8k16(m[:, :8]))
        np.testing.assert_array_equal(bt[:, 4:], warp.fragment_b_m16n8k16(m[:, 8:]))
        # C pairs r = 2 nt + h: rows g + 8h of n-tile nt, what stmatrix puts in quadrant r
        frag = np.concatenate([warp.fragment_c(m[:, 8 * nt:8 * nt + 8])[:, 2 * h:2 * h + 2]
                               for nt in range(2) for h in range(2)], axis=1)
        np.testing.assert_array_equal(warp.unfragment_ldmatrix(frag), mats)


def test_seed_swizzle_is_cute_swizzle_1_3_3():
    from numba_tma.ladders import warp_gemm as wg

    off = np.arange(256)
    seed = wg.seed_swizzle(off, 3, 1, 3)
    np.testing.assert_array_equal(seed, off ^ ((off >> 3) & 8))
    np.testing.assert_array_equal(seed, wg.cute_swizzle(off, 1, 3, 3))
    np.testing.assert_array_equal(seed, [wg.swizzle_half(int(x)) for x in off])
    np.testing.assert_array_equal(wg.cute_swizzle(2 * off, 1, 4, 3), 2 * seed)  # on bytes
    assert sorted(seed) == list(off)                                   # a permutation
    words = np.arange(128)
    np.testing.assert_array_equal([wg.swizzle_word(int(w)) for w in words],
                                  seed[2 * words] // 2)
    # 16-byte ldmatrix rows stay whole: every 8-half run maps onto one 8-half run
    for start in range(0, 256, 8):
        run = seed[start:start + 8]
        assert run[0] % 8 == 0 and list(run) == list(range(run[0], run[0] + 8))
    # the mask the seed's comment means, CuTe's Swizzle<3,1,3>, splits those runs
    intended = wg.cute_swizzle(off, 3, 1, 3)
    assert any(list(intended[s:s + 8]) != list(range(intended[s], intended[s] + 8))
               for s in range(0, 256, 8))


@pytest.mark.parametrize("bad,exc,message", [
    ("f32", TypeError, r"a must have dtype float16, got float32"),
    ("shape", ValueError, r"a must have shape \(16, 16\), got \(16, 8\)"),
    ("strided", ValueError, r"a must be C-contiguous"),
    ("object", TypeError, r"a must be a numpy array or a CUDA device array"),
    ("misaligned", ValueError, r"a must be 4-byte aligned"),
])
def test_ladder_wrappers_validate(bad, exc, message):
    from numba_tma.ladders import warp_gemm

    class Fake:
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {"version": 3, "shape": (16, 16), "typestr": "<f2",
                                             "strides": None, "data": (ptr, False)}

    a = {"f32": np.zeros((16, 16), np.float32), "shape": np.zeros((16, 8), np.float16),
         "strided": np.zeros((16, 32), np.float16)[:, ::2], "object": object(),
         "misaligned": Fake(0x1002)}[bad]
    for fn in warp_gemm.LADDER.values():
        with pytest.raises(exc, match=message):
            fn(a, np.zeros((16, 16), np.float16))
    with pytest.raises(TypeError, match="out must be a CUDA device array"):
        warp_gemm.gemm16_swizzle(np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16),
                                 np.zeros((16, 16), np.float16))


# ================================================================ seed 004: the SIMT GEMM

_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(?P<insn>[^;]*);")
_BRA = re.compile(r"\bBRA\s+(?:\S+\s+)?0x([0-9a-f]+)")
_PRED = re.compile(r"^@!?U?P(?:T|\d+)\s+")


def sass_instructions(sass):
    """[(address, mnemonic)] of a cuobjdump SASS listing."""
    out = []
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            insn = _PRED.sub("", m.group("insn").strip())
            out.append((int(m.group(1), 16), insn))
    return out


def innermost_loop(sass, marker):
    """Mnemonic counts of the smallest backward-branch loop containing ``marker``."""
    insns = sass_instructions(sass)
    loops = []
    for addr, insn in insns:
        m = _BRA.search(insn)
        if m and int(m.group(1), 16) <= addr:
            body = [i for a, i in insns if int(m.group(1), 16) <= a <= addr]
            if any(i.startswith(marker) for i in body):
                loops.append(body)
    assert loops, f"no loop containing {marker} in the SASS"
    body = min(loops, key=len)
    return collections.Counter(i.split()[0] for i in body), len(body)


@pytest.fixture(scope="module")
def simt_binaries():
    pytest.importorskip("numba_tma.offline")
    from numba_tma.ladders import simt_gemm as sg

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("offline compilation needs the real CUDA target")
    return {(config, name): compile_kernel(sg.gemm_kernel(config, *SIMT_LAYOUTS[name]), SIMT_SIG)
            for config, name in SIMT_BUILDS}


SIMT_BUILDS = [(c, lay) for c in ("large", "seed") for lay in SIMT_LAYOUTS
               if not (c == "seed" and lay == "row_bcol")]


@needs_compiler
@pytest.mark.parametrize("config,layout", SIMT_BUILDS)
def test_simt_no_local_memory(simt_binaries, config, layout):
    from numba_tma.ladders import simt_gemm as sg

    if (config, layout) == ("large", "seed_nt"):
        skip_on_mlir("the large SIMT GEMM (B transposed) spills 8 bytes")
    kb = simt_binaries[config, layout]
    check_clean(kb)
    threads = sg._check_config(sg.CONFIGS[config])[2]
    assert kb.registers * threads * sg.MIN_BLOCKS[config] <= 65536, kb
    assert kb.count("BAR.SYNC") == 2          # one before the loop, one per slice
    assert kb.count("LDS") == kb.count("LDS.128"), "a scalar shared load in the compute"


@needs_compiler
@pytest.mark.parametrize("config", ["large", "seed"])
@pytest.mark.parametrize("layout", ["row", "col", "seed_nt"])
def test_simt_inner_loop(simt_binaries, config, layout):
    """The k loop: K_UNROLL steps of 4 LDS.128 + 64 FFMA, nothing else from memory, and at
    least 85 % of its instructions FFMAs (the rest: two address increments, the counter)."""
    from numba_tma.ladders import simt_gemm as sg

    ops, n = innermost_loop(simt_binaries[config, layout].sass, "LDS.128")
    cfg = sg.CONFIGS[config]
    assert ops["FFMA"] == sg.K_UNROLL * cfg.tm * cfg.tn
    assert ops["LDS.128"] == sg.K_UNROLL * (cfg.tm + cfg.tn) // 4
    memory = {op for op in ops if op.startswith(("LD", "ST", "BAR", "CALL"))}
    assert memory == {"LDS.128"}, memory
    assert ops["FFMA"] / n >= 0.85, (ops, n)


def _vector_wavefronts(addrs16):
    """Conflict check of one LDS.128: the distinct 16-byte vectors must sit on distinct banks
    (then the warp is served at the bandwidth limit)."""
    per_bank = collections.defaultdict(set)
    for v in set(addrs16):
        for w in range(4):
            per_bank[(4 * v + w) % 32].add(v)
    return max(len(s) for s in per_bank.values())


@pytest.mark.parametrize("config", ["large", "seed"])
def test_simt_shared_memory_is_conflict_free(config):
    """Host model on the kernel's own index functions: the transposing (k-major) and direct
    copies store one word per bank per warp instruction, and each compute LDS.128 reads
    distinct vectors from distinct banks; the seed's own partition would not."""
    from numba_tma.ladders import simt_gemm as sg

    cfg = sg.CONFIGS[config]
    th_m, th_n, nt = sg._check_config(cfg)
    for bo in (cfg.bm, cfg.bn):
        pitch = bo + sg.PAD
        nreg = bo * cfg.bk // nt
        for coords in (sg.kmajor_coords, sg.omajor_coords):
            for warp in range(nt // 32):
                for j in range(nreg):
                    words = [k * pitch + o for o, k in
                             (coords(j, warp * 32 + lane, bo, nt, cfg.bk) for lane in range(32))]
                    assert len(set(words)) == 32
                    assert len({w % 32 for w in words}) == 32, (coords.__name__, warp, j)
            cover = {coords(j, t, bo, nt, cfg.bk) for j in range(nreg) for t in range(nt)}
            assert cover == {(o, k) for o in range(bo) for k in range(cfg.bk)}
    for warp in range(nt // 32):
        tiles = [sg.thread_tile(warp * 32 + lane, th_n // sg.LANES_N) for lane in range(32)]
        for k in range(2):
            for half, (pitch, extent, idx) in enumerate([(cfg.bm + sg.PAD, cfg.bm, 0),
                                                         (cfg.bn + sg.PAD, cfg.bn, 1)]):
                for run in range(2):
                    vecs = [(k * pitch + t[idx] * 4 + run * extent // 2) // 4 for t in tiles]
                    assert _vector_wavefronts(vecs) == 1
    all_tiles = {sg.thread_tile(t, th_n // sg.LANES_N) for t in range(nt)}
    assert all_tiles == {(i, j) for i in range(th_m) for j in range(th_n)}
    # the seed's partition (tC_row = tid % 8, rows 8 apart): lanes 4 apart share banks
    seed_vecs = [((tid % 8) * 8) // 4 for tid in range(32)]
    assert _vector_wavefronts(seed_vecs) > 1


# ================================================================ benches/warp_gemm_banks.py

def _load_bench():
    name = "bench_warp_gemm_banks"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benches" / "warp_gemm_banks.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


NCU_DETAILS = textwrap.dedent('''\
    ==PROF== Connected to process 1234 (/usr/bin/python3.11)
    smem: ok
    ==PROF== Profiling "warp_gemm16_smem": 0%....50%....100% - 4 passes
    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
    "0","1234","python3.11","127.0.0.1","warp_gemm16_smem","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","12"
    "0","1234","python3.11","127.0.0.1","warp_gemm16_smem","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","1,028"
    "1","1234","python3.11","127.0.0.1","cudapy::warp_gemm16_swizzle[abi:v1](Array<unsigned int, 1, C, mutable, aligned>)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","0"
    "1","1234","python3.11","127.0.0.1","cudapy::warp_gemm16_swizzle[abi:v1](Array<unsigned int, 1, C, mutable, aligned>)","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum","","n/a"
    ==PROF== Disconnected from process 1234
    ''')

NCU_RAW = textwrap.dedent('''\
    "ID","Process ID","Kernel Name","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
    "","","","",""
    "0","9","warp_gemm16_padded","0","12"
    ''')


def test_bench_parses_ncu_csv():
    bench = _load_bench()
    parsed = bench.parse_ncu_csv(NCU_DETAILS)
    assert [k for k, _ in parsed] == [
        "warp_gemm16_smem",
        "cudapy::warp_gemm16_swizzle[abi:v1](Array<unsigned int, 1, C, mutable, aligned>)"]
    assert parsed[0][1] == {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 12.0,
                            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 1028.0}
    by_rung = bench.counters_by_rung(parsed, ("ld_conflicts", "ld_wavefronts", "ldsm_conflicts"))
    assert by_rung == {"smem": {"ld_conflicts": 12.0, "ld_wavefronts": 1028.0,
                                "ldsm_conflicts": None},
                       "swizzle": {"ld_conflicts": 0.0, "ld_wavefronts": None,
                                   "ldsm_conflicts": None}}
    raw = bench.counters_by_rung(bench.parse_ncu_csv(NCU_RAW), ("st_conflicts", "st_wavefronts"))
    assert raw == {"padded": {"st_conflicts": 0.0, "st_wavefronts": 12.0}}
    assert bench.rung_of("void warp_gemm16_ldmatrix(unsigned int*)") == "ldmatrix"
    assert bench.rung_of("transpose") is None


def test_bench_command_and_arguments():
    bench = _load_bench()
    cmd = bench.ncu_command("/opt/ncu", ["smem", "swizzle"], bench.REQUIRED, seed=3)
    assert cmd[:2] == ["/opt/ncu", "--csv"]
    assert cmd[cmd.index("--metrics") + 1].split(",") == [bench.METRICS[k] for k in bench.REQUIRED]
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:warp_gemm16_"
    assert cmd[-4:] == ["--run-only", "smem,swizzle", "--seed", "3"]
    assert cmd[-5].endswith("warp_gemm_banks.py")
    a = bench.parse_args(["--run-only", "swizzle,smem"])
    assert a.run_only == ["smem", "swizzle"] and a.rungs == list(bench.RUNGS)
    assert bench.parse_args(["--rungs", "all"]).rungs == list(bench.RUNGS)
    with pytest.raises(SystemExit):
        bench.parse_args(["--rungs", "wmma"])
    assert bench.find_ncu("/nonexistent/ncu") is None
    row = {"rung": "smem", "check": {"ok": True}, "ncu": None,
           "model": {"ld": {"wavefronts": 28, "conflicts": 12}}}
    assert bench.table_row(row) == ["smem", "ok", "-", "-", "-", "-", "12/28", "-", "-", "-"]


def test_bench_import_does_not_load_numba_cuda():
    # The bench is a command line over numba_tma.bench, so importing it loads numba_tma (and
    # numba.cuda, which needs no GPU); the optional GPU libraries stay unloaded.
    code = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location(
            "b", {str(ROOT / "benches" / "warp_gemm_banks.py")!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        loaded = [m for m in sys.modules
                  if m.split(".")[0] in ("torch", "cupy", "triton", "matplotlib")]
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
