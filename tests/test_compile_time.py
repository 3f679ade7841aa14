"""What keeps kernels quick to build, checked without a GPU: inline_device compiles a device
function once per argument types (not once per literal) and falls back to the literal where the
body needs it, its code keeps constant-indexed fragments in registers; NVRTC runs once per
source and process; ``numba_tma.precompile`` fills the kernel cache under the very key a launch
looks up."""

import json
import os
import subprocess
import sys

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("the CUDA simulator has no compiler", allow_module_level=True)

import numpy as np

from numba_tma import front_end, offline, precompile, transpose_api, wgmma
from numba_tma._frontend import cuda, types
from numba_tma.kernels.gemm import choose
from numba_tma._bridge import inline_device
from numba_tma.offline import compile_kernel


def test_one_compile_per_argument_types_not_per_literal():
    @inline_device
    def add_slot(acc, j):
        # j indexes a register fragment: a constant once NVVM inlines the call
        for q in range(4):
            acc[j * 4 + q] += 1.0

    @cuda.jit
    def kernel(out):
        acc = cuda.local.array(16, np.float32)
        for i in range(16):
            acc[i] = out[i]
        add_slot(acc, 0)
        add_slot(acc, 1)
        add_slot(acc, 2)
        add_slot(acc, 3)
        for i in range(16):
            out[i] = acc[i]

    kb = compile_kernel(kernel, "void(float32[::1])")
    if front_end() == "numba-cuda":     # (numba-cuda-mlir inlines it in the kernel's IR instead)
        assert list(add_slot.overloads) == [(types.Array(types.float32, 1, "C"), types.int64)]
    # ... and after inlining the fragment is registers: no stack frame, no local loads, no CALL
    assert kb.stack_bytes == 0 and not kb.has("LDL") and not kb.has("STL")
    assert not kb.has("CALL")


def test_literal_is_kept_where_the_body_needs_it():
    # wgmma.wait_group takes a PTX immediate: typed with a plain int64 the body fails, so the
    # call is compiled for the literal (one overload per value), as numba would.
    @inline_device
    def wait(n):
        wgmma.wait_group(n)

    @cuda.jit
    def kernel(out):
        wait(0)
        wait(1)
        out[0] = 1

    kb = compile_kernel(kernel, "void(int32[::1])")
    if front_end() == "numba-cuda":     # (numba-cuda-mlir inlines it in the kernel's IR instead)
        assert sorted(str(k[0]) for k in wait.overloads) == ["Literal[int](0)", "Literal[int](1)"]
    assert kb.has("WARPGROUP.DEPBAR")


def test_nvrtc_runs_once_per_source_and_process(monkeypatch, tmp_path):
    calls = []
    from numba_tma._frontend import nvrtc

    real = nvrtc.compile

    def counted(src, name, *args, **kwargs):
        calls.append(name)
        return real(src, name, *args, **kwargs)

    monkeypatch.setattr(nvrtc, "compile", counted)
    monkeypatch.setattr(offline.toolchain, "_NVRTC_MEMO", {})
    cu = tmp_path / "plus_seven.cu"
    cu.write_text('extern "C" __device__ int plus_seven(int x) { return x + 7; }\n')
    plus = cuda.declare_device("plus_seven", "int32(int32)", link=str(cu))

    @cuda.jit
    def kernel(out):
        out[0] = plus(out[0])

    @cuda.jit
    def other(out):
        out[1] = plus(out[1])

    def stems():        # (numba-cuda names a source by its stem, numba-cuda-mlir by its file)
        return [os.path.splitext(c)[0] for c in calls]

    offline.link_kernel(kernel, "void(int32[::1])")
    offline.link_kernel(other, "void(int32[::1])")
    assert stems() == ["plus_seven"]
    cu.write_text('extern "C" __device__ int plus_seven(int x) { return x + 8; }\n')
    offline.link_kernel(kernel, "void(int32[::1])")          # an edited source: compiled again
    assert stems() == ["plus_seven"] * 2
    from numba_tma._frontend import compiler, driver_module

    assert compiler.nvrtc is nvrtc                          # the stand-in is gone again
    assert getattr(driver_module, "nvrtc", nvrtc) is nvrtc


def test_link_kernel_names_the_entry_and_its_files():
    from numba_tma.kernels import transpose_vec

    direct = transpose_vec.LAUNCHER.direct(4)
    linked = offline.link_kernel(direct.kernel, direct.argtypes)
    assert linked.cubin.startswith(b"\x7fELF")
    assert "transpose_v7_vec16" in linked.entry and linked.entry.startswith("_Z")
    assert any(f.endswith("gmem.cu") for f in linked.link_files)


def test_precompile_targets_cover_every_choice():
    todo = precompile.targets()
    gemm = [t for t in todo if t[0] == "matmul"]
    # every config choose_config returns, both input dtypes, three outputs, four layouts, beta
    assert len(gemm) == len(choose.SHIPPED_CONFIGS) * 2 * 3 * 4 * 2
    assert {t[1] for t in gemm} == set(choose.SHIPPED_CONFIGS)
    assert len([t for t in todo if t[0] == "transpose"]) == 16
    sms = 132
    chosen = set()
    for m, n, k in [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (1000, 1000, 1000),
                    (8192, 1024, 8192), (1536, 1536, 1536), (4095, 4104, 4096), (64, 64, 64),
                    (768, 2048, 4096), (3000, 5000, 2000), (256, 8192, 512)]:
        for ragged in (False, True):
            chosen.add(choose.choose_config(m, n, k, sms, ragged).kernel_config())
    shipped = {cfg.kernel_config() for cfg in choose.SHIPPED_CONFIGS.values()}
    assert chosen <= shipped
    assert precompile.describe(gemm[0]) == "matmul wide f16->f16 A:MxK B:KxN"


def test_precompile_filters_and_errors(capsys):
    assert precompile.main(["--list", "--only", "transpose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16 and lines[0] == "transpose v7_vec16 1-byte"
    precompile.main(["--list", "--only", "matmul", "--configs", "narrow64", "--dtypes", "bf16",
                     "--out-dtypes", "f32", "--no-beta"])
    assert len(capsys.readouterr().out.splitlines()) == 4          # the four layouts
    for bad, why in ((["--dtypes", "f8"], "--dtypes: 'f8' is not one of f16, bf16"),
                     (["--configs", "huge"], "configs: 'huge' is not one of"),
                     (["--jobs", "0"], "--jobs must be >= 1"),
                     (["--arch", "sm_9"], "arch must look like")):
        with pytest.raises(SystemExit) as exc:
            precompile.main(bad + ["--list"])
        assert exc.value.code == 2
        assert why in capsys.readouterr().err
    with pytest.raises(ValueError, match="names: 'v9' is not one of"):
        transpose_api.kernel_variants(["v9"])


def test_precompile_fills_the_key_a_launch_reads(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_TMA_DISABLE_CACHE", None)
    cmd = [sys.executable, "-m", "numba_tma.precompile", "--only", "matmul", "--configs",
           "narrow64", "--dtypes", "f16", "--out-dtypes", "f16", "--no-beta", "--jobs", "2"]
    done = subprocess.run(cmd + ["--arch", "sm_90a"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("precompile: 4 built, 0 already cached")
    # A launch on an sm_90 GPU finds each of them under its own key, in another process.
    probe = (
        "import json\n"
        "from numba_tma.kernels.gemm import plan\n"
        "hits = []\n"
        "for name, v in plan.kernel_variants(['narrow64'], ['f16'], ['f16'], betas=(False,)):\n"
        "    hits.append(plan.kernel_for(v).cached('sm_90a'))\n"
        "print(json.dumps(hits))\n")
    seen = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=300)
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout.strip().splitlines()[-1]) == [True] * 4
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.stdout.strip().splitlines()[-1].startswith("precompile: 0 built, 4 already")


def test_precompile_refuses_a_disabled_cache(monkeypatch):
    monkeypatch.setenv("NUMBA_TMA_DISABLE_CACHE", "1")
    with pytest.raises(ValueError, match="NUMBA_TMA_DISABLE_CACHE"):
        precompile.precompile(precompile.targets(only="transpose")[:1])
    from numba_tma.kernels import transpose_vec

    with pytest.raises(ValueError, match="the kernel cache is off"):
        transpose_vec.LAUNCHER.direct(4).precompile()
