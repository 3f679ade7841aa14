"""The host path on the GPU: framework streams order the public ops, CUDA graphs capture and
replay them, the on-disk kernel cache serves a second process, caches survive a closed context,
and the library's own launches stay quiet.

Ordering tests hold the stream with a GPU-side sleep before the producer, so an op queued on the
wrong stream would read the old data (non-blocking torch streams do not wait for the default
stream)."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import numba_tma
from numba_tma._frontend import cuda

from gpu_helpers import random_array

torch = pytest.importorskip("torch")

SLEEP_CYCLES = 200_000_000          # ~0.1 s: the producer lands long after a wrong-stream read


def _expected_mm(a, b):
    return (a.double() @ b.double()).float()


def _check_mm(got, a, b):
    torch.testing.assert_close(got.float(), _expected_mm(a, b), rtol=2e-2, atol=2e-2)


def test_torch_current_stream_orders_matmul_and_transpose():
    s = torch.cuda.Stream()
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    x = torch.randn(300, 520, device="cuda")
    new_a, new_x = torch.randn_like(a), torch.randn_like(x)
    numba_tma.matmul(a, b), numba_tma.transpose(x)         # plans cached: the timed path
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(new_a)                                     # producer, late
        x.copy_(new_x)
        c = numba_tma.matmul(a, b)                          # no stream=: torch's current one
        t = numba_tma.transpose(x)
        c_read, t_read = c.clone(), t.clone()               # reader on the same stream
    torch.cuda.synchronize()
    _check_mm(c_read, new_a, b)
    assert torch.equal(t_read, new_x.t())


@pytest.mark.parametrize("kind", ["torch", "cupy", "numba", "raw"])
def test_explicit_stream_of_every_framework(kind):
    s = torch.cuda.Stream()
    if kind == "torch":
        stream = s
    elif kind == "cupy":
        cupy = pytest.importorskip("cupy")
        stream = cupy.cuda.ExternalStream(s.cuda_stream)
    elif kind == "numba":
        stream = cuda.external_stream(s.cuda_stream)
    else:
        stream = s.cuda_stream
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    x = torch.randn(1000, 36, device="cuda")
    t = torch.full((36, 1000), float("nan"), device="cuda")
    new_a, new_x = torch.randn_like(a), torch.randn_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.copy_(new_a)
        x.copy_(new_x)
    # Called outside the `with`: only stream= puts them after the producer.
    numba_tma.matmul(a, b, c, stream=stream)
    numba_tma.transpose(x, t, stream=stream)
    with torch.cuda.stream(s):
        c_read, t_read = c.clone(), t.clone()
    torch.cuda.synchronize()
    _check_mm(c_read, new_a, b)
    assert torch.equal(t_read, new_x.t())


def test_numba_out_is_stream_ordered_and_never_blocks_the_host():
    # matmul / transpose without out on numba arrays: out comes from the stream-ordered pool
    # (cuMemAllocAsync), and dropped outputs are freed in stream order (cuMemFreeAsync on the
    # legacy stream) when numba flushes its pending frees, with no wait for the GPU. numba's
    # own device_array frees with cuMemFree, which would wait here for the sleep to finish.
    from cuda.bindings import driver

    a_h = random_array((256, 192), np.float16)
    b_h = random_array((192, 320), np.float16)
    x_h = random_array((300, 520), np.float32)
    a, b, x = cuda.to_device(a_h), cuda.to_device(b_h), cuda.to_device(x_h)
    c, t = numba_tma.matmul(a, b), numba_tma.transpose(x)        # plans cached
    cuda.synchronize()
    want = a_h.astype(np.float64) @ b_h.astype(np.float64)
    np.testing.assert_allclose(c.copy_to_host(), want, rtol=2e-2, atol=2e-2)
    assert np.array_equal(t.copy_to_host(), x_h.T)
    del c, t
    cuda.current_context().deallocations.clear()
    torch.cuda._sleep(10 * SLEEP_CYCLES)        # ~1 s on the legacy default stream (torch's)
    for _ in range(40):                          # each output dropped at once
        numba_tma.matmul(a, b)
        numba_tma.transpose(x)
    c, t = numba_tma.matmul(a, b), numba_tma.transpose(x)
    assert isinstance(c, cuda.devicearray.DeviceNDArray) and c.shape == (256, 320)
    assert t.shape == (520, 300) and t.is_c_contiguous()
    cuda.current_context().deallocations.clear()
    err, = driver.cuStreamQuery(driver.CUstream(0))
    assert err == driver.CUresult.CUDA_ERROR_NOT_READY, "a call waited for the GPU"
    cuda.synchronize()
    np.testing.assert_allclose(c.copy_to_host(), want, rtol=2e-2, atol=2e-2)
    assert np.array_equal(t.copy_to_host(), x_h.T)
    # The result is an ordinary numba array: a slice of it copies back too.
    np.testing.assert_allclose(c[1:3].copy_to_host(), want[1:3], rtol=2e-2, atol=2e-2)


def test_numba_outputs_recycle_dropped_blocks_in_stream_order():
    # A dropped numba output's block serves the next output of its size on the legacy stream
    # (no driver allocation); a live one never does; reuse while the GPU still runs the work
    # that read the old contents is ordered after it (all on the legacy stream, held by a sleep).
    from numba_tma import _arrays

    numba_tma.release_outputs()
    x_h, y_h = random_array((300, 520), np.float32), random_array((300, 520), np.float32)
    x, y = cuda.to_device(x_h), cuda.to_device(y_h)
    t = numba_tma.transpose(x)
    first = t.device_ctypes_pointer.value
    live = numba_tma.transpose(y)                  # t is alive: another block
    assert live.device_ctypes_pointer.value != first
    cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)               # holds the legacy stream (torch's default)
    saved = cuda.device_array((520, 300), np.float32)
    saved.copy_to_device(t)                        # a reader of t, queued behind the sleep
    del t
    assert _arrays.OUTPUTS.held_bytes() >= 520 * 300 * 4
    again = numba_tma.transpose(y)                 # t's block, written after the copy read it
    assert again.device_ctypes_pointer.value == first
    cuda.synchronize()
    assert np.array_equal(saved.copy_to_host(), x_h.T)
    assert np.array_equal(again.copy_to_host(), y_h.T)
    assert np.array_equal(live.copy_to_host(), y_h.T)
    # matmul's outputs recycle too, overwritten with the new product (not the old one).
    a_h, b_h = random_array((256, 192), np.float16), random_array((192, 320), np.float16)
    a, b = cuda.to_device(a_h), cuda.to_device(b_h)
    c = numba_tma.matmul(a, b)
    where = c.device_ctypes_pointer.value
    del c
    c2 = numba_tma.matmul(cuda.to_device(-a_h), b)
    assert c2.device_ctypes_pointer.value == where
    want = -(a_h.astype(np.float64) @ b_h.astype(np.float64))
    np.testing.assert_allclose(c2.copy_to_host(), want, rtol=2e-2, atol=2e-2)
    del again, live, c2
    assert numba_tma.release_outputs() >= 520 * 300 * 4 + 256 * 320 * 2
    assert _arrays.OUTPUTS.held_bytes() == 0
    cuda.synchronize()


def test_numba_outputs_past_the_pool_limit_are_freed(monkeypatch):
    from numba_tma import _arrays

    numba_tma.release_outputs()
    monkeypatch.setattr(_arrays.OUTPUTS, "limit", 0)
    for _ in range(3):      # fresh inputs: a stale block holding the last result would fail
        x_h = random_array((64, 96), np.float32)
        x = cuda.to_device(x_h)
        t = numba_tma.transpose(x)
        assert np.array_equal(t.copy_to_host(), x_h.T)
        del t
        assert _arrays.OUTPUTS.held_bytes() == 0
    cuda.current_context().deallocations.clear()     # the stream-ordered frees run
    cuda.synchronize()


def test_numba_out_on_a_stream_follows_that_stream():
    s = torch.cuda.Stream()
    stream = cuda.external_stream(s.cuda_stream)
    x = torch.randn(700, 260, device="cuda")
    new_x = torch.randn_like(x)
    xn = cuda.as_cuda_array(x)                   # a numba view: out is numba's, from the pool
    numba_tma.transpose(xn, stream=stream)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.copy_(new_x)
    t = numba_tma.transpose(xn, stream=stream)   # allocated and run on s, after the producer
    with torch.cuda.stream(s):
        t_read = torch.as_tensor(t, device="cuda").clone()
    torch.cuda.synchronize()
    assert torch.equal(t_read, new_x.t())


def test_cupy_current_stream_is_the_default():
    cupy = pytest.importorskip("cupy")
    s = cupy.cuda.Stream(non_blocking=True)
    x = cupy.asarray(random_array((700, 900), np.float32))
    new_x = cupy.asarray(random_array((700, 900), np.float32))
    numba_tma.transpose(x)
    cupy.cuda.Device().synchronize()
    with torch.cuda.stream(torch.cuda.ExternalStream(s.ptr)):
        torch.cuda._sleep(SLEEP_CYCLES)                      # holds CuPy's stream s
    with s:
        x[...] = new_x
        t = numba_tma.transpose(x)
        t_read = t.copy()
    s.synchronize()
    assert (cupy.asnumpy(t_read) == cupy.asnumpy(new_x).T).all()


def test_matmul_and_transpose_replay_in_a_torch_graph():
    a = torch.randn(384, 320, device="cuda", dtype=torch.float16)
    b = torch.randn(320, 640, device="cuda", dtype=torch.float16)
    c = torch.empty(384, 640, device="cuda", dtype=torch.float16)
    x = torch.randn(257, 1031, device="cuda")
    xt = torch.empty(1031, 257, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                     # warm-up on the captured buffers
        numba_tma.matmul(a, b, c)
        numba_tma.transpose(x, xt)
        numba_tma.transpose(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        numba_tma.matmul(a, b, c)
        numba_tma.transpose(x, xt)
        fresh = numba_tma.transpose(x)             # out allocated inside the capture
    for _ in range(2):                             # new data in the captured buffers
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        x.copy_(torch.randn_like(x))
        c.fill_(float("nan"))
        xt.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        _check_mm(c, a, b)
        assert torch.equal(xt, x.t())
        assert torch.equal(fresh, x.t())


def test_first_matmul_inside_a_capture_is_a_clear_error():
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 136, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 136, device="cuda", dtype=torch.float16)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="call matmul once on the same buffers before "
                                           "capturing"):
        with torch.cuda.graph(g):
            numba_tma.matmul(a, b, c)
    # the context still works
    numba_tma.matmul(a, b, c)
    torch.cuda.synchronize()
    _check_mm(c, a, b)


def test_public_ops_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (8, 64, 300):
            x = torch.randn(n, n + 3, device="cuda")
            assert torch.equal(numba_tma.transpose(x), x.t())
            xn = cuda.to_device(random_array((2, n, 40), np.float32))
            np.testing.assert_array_equal(numba_tma.transpose(xn).copy_to_host(),
                                          np.swapaxes(xn.copy_to_host(), 1, 2))
            a = torch.randn(n, 64, device="cuda", dtype=torch.float16)
            b = torch.randn(64, 72, device="cuda", dtype=torch.float16)
            _check_mm(numba_tma.matmul(a, b), a, b)
        torch.cuda.synchronize()


_SECOND_PROCESS = textwrap.dedent("""
    import json, time
    import torch
    import numba_tma
    from numba_tma.launch import DirectKernel
    compiled = []
    _build = DirectKernel._build_and_store
    def spy(self, *args):
        compiled.append(self.kernel.py_func.__name__)
        return _build(self, *args)
    DirectKernel._build_and_store = spy
    x = torch.randn(1024, 1024, device="cuda")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    y = numba_tma.transpose(x)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    c = numba_tma.matmul(a, a)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    ok = bool(torch.equal(y, x.t())) and bool(torch.allclose(
        c.float(), (a.double() @ a.double()).float(), rtol=2e-2, atol=5e-1))
    print(json.dumps({"transpose_s": t1 - t0, "matmul_s": t2 - t1, "ok": ok,
                      "compiled": compiled}))
""")


def test_second_process_loads_kernels_from_disk(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_TMA_DISABLE_CACHE", None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    print("first process:", first, "\nsecond process:", second)
    assert first["ok"] and second["ok"]
    assert len(first["compiled"]) >= 2       # the first process compiled both kernels ...
    assert second["compiled"] == []          # ... the second loaded every kernel from disk
    assert os.listdir(os.path.join(tmp_path, "numba_tma"))


def test_precompiled_cache_serves_a_fresh_process(tmp_path):
    # numba_tma.precompile builds offline (no GPU visible to it) into an empty cache; a fresh
    # process then runs matmul() and transpose() without building anything.
    from numba_tma import matmul_api

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_TMA_DISABLE_CACHE", None)
    from numba_tma.kernels.gemm.choose import SHIPPED_CONFIGS

    cfg = matmul_api.choose_config(1024, 1024, 1024)
    name = next(n for n, c in SHIPPED_CONFIGS.items() if c == cfg)
    pre = subprocess.run([sys.executable, "-m", "numba_tma.precompile", "--configs", name,
                          "--dtypes", "f16", "--out-dtypes", "f16", "--no-beta"],
                         env=dict(env, CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True,
                         timeout=600)
    assert pre.returncode == 0, pre.stdout[-3000:] + pre.stderr[-3000:]
    assert pre.stdout.strip().splitlines()[-1].startswith("precompile: 20 built")
    done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    print("after precompile:", run)
    assert run["ok"] and run["compiled"] == []


_LINKED_KERNEL = textwrap.dedent("""
    import json, sys
    import numpy as np
    from numba_tma._frontend import cuda, types
    from numba_tma.launch import DirectKernel
    plus = cuda.declare_device("plus", "int32(int32)", link=sys.argv[1])

    @cuda.jit
    def kernel(out):
        out[0] = plus(out[0])

    built = []
    _build = DirectKernel._build_and_store
    DirectKernel._build_and_store = lambda self, *args: built.append(1) or _build(self, *args)
    d = DirectKernel(kernel, (types.Array(types.int32, 1, "C"),))
    out = cuda.to_device(np.array([40], np.int32))
    d[1, 1](out)
    print(json.dumps({"value": int(out.copy_to_host()[0]), "compiled": bool(built)}))
""")


def test_edited_link_file_rebuilds(tmp_path):
    # A user kernel linking a .cu file, each run a new process (numba caches a linked file's
    # compilation per process): the same file loads from disk, an edited one is rebuilt.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_TMA_DISABLE_CACHE", None)
    cu = tmp_path / "plus.cu"
    script = tmp_path / "kernel.py"
    script.write_text(_LINKED_KERNEL)
    for k, rebuilt in ((1, True), (1, False), (2, True), (2, False)):
        cu.write_text('extern "C" __device__ int plus(int* r, int x) { *r = x + %d; return 0; }\n'
                      % k)
        done = subprocess.run([sys.executable, str(script), str(cu)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got == {"value": 40 + k, "compiled": rebuilt}, (k, got)


_CLOSE_AND_REUSE = textwrap.dedent("""
    import numpy as np
    from numba_tma._frontend import cuda
    import numba_tma
    rng = np.random.default_rng(5)
    for round_ in range(2):
        x = rng.standard_normal((512, 640)).astype(np.float32)
        a = rng.integers(-4, 5, (256, 192)).astype(np.float16)
        b = rng.integers(-4, 5, (192, 320)).astype(np.float16)
        dx, da, db = cuda.to_device(x), cuda.to_device(a), cuda.to_device(b)
        assert (numba_tma.transpose(dx).copy_to_host() == x.T).all()
        got = numba_tma.matmul(da, db).copy_to_host()
        assert (got == (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)).all()
        cuda.close()                  # the next round gets a new context, maybe the same addresses
    print("ok")
""")


_PLAIN_NUMBA_CLOSE = textwrap.dedent("""
    import importlib, sys
    import numpy as np
    cuda = importlib.import_module(sys.argv[1])   # the front end's cuda, without numba_tma
    for _ in range(2):
        x = cuda.to_device(np.arange(4.0))
        assert (x.copy_to_host() == np.arange(4.0)).all()
        cuda.close()
    print("ok")
""")


def test_caches_survive_a_closed_context():
    plain = subprocess.run([sys.executable, "-c", _PLAIN_NUMBA_CLOSE, cuda.__name__],
                           capture_output=True, text=True, timeout=300)
    if plain.returncode:          # numba itself cannot reopen: nothing of ours to test
        pytest.skip(f"{numba_tma.front_end()} cannot allocate after {cuda.__name__}.close() in "
                    f"this install: " + plain.stderr.strip().splitlines()[-1])
    done = subprocess.run([sys.executable, "-c", _CLOSE_AND_REUSE], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_new_buffers_of_a_known_layout_are_not_replanned(monkeypatch):
    import importlib

    matmul_module = importlib.import_module("numba_tma.matmul_api")        # the modules, not the
    transpose_module = importlib.import_module("numba_tma.transpose_api")  # functions of that name

    def fresh():
        a = torch.randn(300, 136, device="cuda", dtype=torch.float16)
        b = torch.randn(200, 136, device="cuda", dtype=torch.float16).t()    # column-major B
        c = torch.full((300, 200), float("nan"), device="cuda", dtype=torch.float32)
        x = torch.randn(3, 77, 1030, device="cuda", dtype=torch.float16)
        return a, b, c, x

    keep = [fresh()]
    a, b, c, x = keep[0]
    numba_tma.matmul(a, b, c, alpha=0.5)
    numba_tma.transpose(x)
    plans = []
    real_plan, real_transpose = matmul_module.plan_matmul, transpose_module._transpose
    monkeypatch.setattr(matmul_module, "plan_matmul", lambda *a_: plans.append("mm") or
                        real_plan(*a_))
    monkeypatch.setattr(transpose_module, "_transpose", lambda *a_: plans.append("t") or
                        real_transpose(*a_))
    for _ in range(3):
        keep.append(fresh())                   # new addresses, same layouts
        a, b, c, x = keep[-1]
        if a.data_ptr() % 16 or x.data_ptr() % 128:
            continue
        numba_tma.matmul(a, b, c, alpha=0.5)
        t = numba_tma.transpose(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, 0.5 * _expected_mm(a, b), rtol=2e-2, atol=2e-2)
        assert torch.equal(t, x.transpose(1, 2))
    assert plans == []


def test_every_launch_cache_is_keyed_by_the_context(monkeypatch):
    # numba-cuda cannot always reopen after close() (the test above skips then); here the
    # context id is made to change instead: every cache must miss, plan again and still be right.
    import importlib

    from numba_tma import launch as launch_module
    from numba_tma.kernels.gemm import plan as gemm_plan
    from numba_tma.launch import direct as launch_direct, streams as launch_streams
    from numba_tma.tensormap import cache as tensormap_cache

    mm = importlib.import_module("numba_tma.matmul_api")
    tr = importlib.import_module("numba_tma.transpose_api")
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 192, device="cuda", dtype=torch.float16)
    x = torch.randn(100, 260, device="cuda")
    xt = torch.empty(260, 100, device="cuda")
    numba_tma.matmul(a, b, c)
    numba_tma.transpose(x, xt)
    real = launch_module.context_id()
    fake = lambda: real + (1 << 40)                              # noqa: E731
    for module in (launch_module, launch_streams, launch_direct, mm, tr, tensormap_cache,
                   gemm_plan):
        if hasattr(module, "context_id"):
            monkeypatch.setattr(module, "context_id", fake)
    monkeypatch.setattr(launch_module, "context_id", fake)
    plans = []
    real_plan, real_transpose = mm.plan_matmul, tr._transpose
    monkeypatch.setattr(mm, "plan_matmul", lambda *a_: plans.append("mm") or real_plan(*a_))
    monkeypatch.setattr(tr, "_transpose", lambda *a_: plans.append("t") or real_transpose(*a_))
    c.fill_(float("nan"))
    xt.fill_(float("nan"))
    numba_tma.matmul(a, b, c)
    numba_tma.transpose(x, xt)
    torch.cuda.synchronize()
    assert plans == ["mm", "t"]
    _check_mm(c, a, b)
    assert torch.equal(xt, x.t())
