"""The host path without a GPU: stream resolution, operand keys, quiet library launches, and the
on-disk kernel cache (keys, invalidation, atomic and corrupt entries)."""

import ctypes
import json
import multiprocessing
import os
import warnings

import pytest

from numba_tma import _calls, kernel_cache
from numba_tma._frontend import cuda, types
from numba_tma.launch import configure, stream_handle


# -- streams ---------------------------------------------------------------------------------

class _TorchStream:
    cuda_stream = 0x7100


class _CupyStream:
    ptr = 0x7200


class _NumbaStream:
    handle = ctypes.c_void_p(0x7300)


class _ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x7400)


def test_stream_handle_takes_every_framework_stream():
    assert stream_handle(None) == 0
    assert stream_handle(0) == 0
    assert stream_handle(0x7000) == 0x7000
    assert stream_handle(_TorchStream()) == 0x7100
    assert stream_handle(_CupyStream()) == 0x7200
    assert stream_handle(_NumbaStream()) == 0x7300
    assert stream_handle(_ProtocolStream()) == 0x7400
    with pytest.raises(TypeError, match="stream must be a CUDA stream .* got str"):
        stream_handle("s")
    with pytest.raises(TypeError, match="stream must be a CUDA stream .* got bool"):
        stream_handle(True)
    with pytest.raises(ValueError, match="stream = -1 is not a CUDA stream handle"):
        stream_handle(-1)


class _FakeTensor:
    """What the fast path reads of a torch tensor."""

    def __init__(self, ptr=0x10000, shape=(4, 8), stride=(8, 1), dtype="f16", device=0):
        self._ptr, self.shape, self._stride = ptr, shape, stride
        self.dtype, self._device = dtype, device

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride

    def get_device(self):
        return self._device


class _FakeCai:
    def __init__(self, ptr=0x20000):
        self.__cuda_array_interface__ = {"shape": (3, 5), "strides": None, "typestr": "<f4",
                                         "data": (ptr, False), "version": 3}


def test_call_stream_rule(monkeypatch):
    # An explicit stream wins; torch tensors run on torch's current stream of their device.
    seen = []
    monkeypatch.setattr(_calls, "_torch_raw_stream", lambda dev: seen.append(dev) or 0x5500)
    t = _FakeTensor(device=1)
    assert _calls.call_stream(None, t) == 0x5500 and seen == [1]
    assert _calls.call_stream(_TorchStream(), t) == 0x7100
    assert _calls.call_stream(0, t) == 0                    # 0 names the legacy default stream
    assert _calls.call_stream(None, _FakeCai()) == 0         # numba and other arrays: default


def test_operand_key_reads_address_layout_and_device():
    a, b = _FakeTensor(), _FakeTensor(ptr=0x10040)
    assert _calls.operand_key(a) == (0x10000, (4, 8), (8, 1), "f16", 0)
    assert _calls.operand_key(a) != _calls.operand_key(b)
    assert _calls.operand_key(_FakeTensor(device=1)) != _calls.operand_key(a)
    assert _calls.operand_key(_FakeCai()) == (0x20000, (3, 5), None, "<f4")
    assert _calls.operand_key(object()) is None
    assert _calls.operand_key([1, 2]) is None


# -- quiet launches --------------------------------------------------------------------------

def test_library_launch_configs_do_not_warn_about_grid_size(monkeypatch):
    from numba_tma._frontend import cuda_config   # what numba-cuda's launch reads

    monkeypatch.setattr(cuda_config, "CUDA_LOW_OCCUPANCY_WARNINGS", 1)
    monkeypatch.setattr(cuda_config, "DISABLE_PERFORMANCE_WARNINGS", 0)

    @cuda.jit
    def kernel(x):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        configure(kernel, 1, 32)               # the library's own small grid: silent
        configure(kernel, (1, 2), (32, 1), 0, 0)
    with pytest.warns(Warning, match="Grid size 3"):
        kernel[3, 64]                          # a user's launch still warns


def test_quiet_launches_match_a_highlighted_warning():
    # With colorama installed (the H100 image) numba wraps the message in terminal codes:
    # "\x1b[1mGrid size 1 ...". A filter anchored at "Grid size" let those through.
    from numba_tma._frontend import NumbaPerformanceWarning

    class Loud:
        def __getitem__(self, config):
            warnings.warn("\x1b[1mGrid size 1 will likely result in GPU under-utilization\x1b[0m",
                          NumbaPerformanceWarning)
            warnings.warn("\x1b[1mHost array used in CUDA kernel\x1b[0m", NumbaPerformanceWarning)
            return config

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        configure(Loud(), 1, 32)
    # (numba's warning class may highlight the text once more: compare what it says)
    said = [str(w.message) for w in seen]
    assert len(said) == 1 and "Host array used in CUDA kernel" in said[0], said


# -- the kernel cache ------------------------------------------------------------------------

@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_TMA_DISABLE_CACHE", raising=False)
    return tmp_path


def test_cache_dir_honours_numba_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernel_cache.cache_dir() == os.path.join(str(tmp_path), "numba_tma")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and not os.uname().sysname == "Darwin":
        assert kernel_cache.cache_dir() == os.path.join(str(tmp_path / "xdg"), "numba_tma")
    monkeypatch.setenv("NUMBA_TMA_DISABLE_CACHE", "1")
    assert not kernel_cache.enabled()
    monkeypatch.setenv("NUMBA_TMA_DISABLE_CACHE", "0")
    assert kernel_cache.enabled()


def test_store_then_load_round_trips(cache_root):
    path = kernel_cache.store("key-1", b"\x7fELF cubin", entry="_Z6kernel", native=True)
    assert path and os.path.dirname(path).startswith(str(cache_root))
    cubin, header = kernel_cache.load("key-1")
    assert cubin == b"\x7fELF cubin" and header["entry"] == "_Z6kernel" and header["native"]
    assert kernel_cache.load("key-2") is None              # another key: not there
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".tmp-")]


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "header"])
def test_corrupt_entries_are_rebuilt_not_loaded(cache_root, damage):
    path = kernel_cache.store("key-c", b"A" * 64, entry="k", native=True)
    blob = bytearray(open(path, "rb").read())
    if damage == "truncate":
        blob = blob[:-5]
    elif damage == "flip":
        blob[-1] ^= 0xFF
    elif damage == "magic":
        blob[0] ^= 0xFF
    else:
        start = len(kernel_cache.MAGIC) + 4
        blob[start] = ord("!")                            # the header is no longer JSON
    open(path, "wb").write(bytes(blob))
    assert kernel_cache.load("key-c") is None
    kernel_cache.store("key-c", b"B" * 64, entry="k", native=True)     # rebuilt over it
    assert kernel_cache.load("key-c")[0] == b"B" * 64


def test_an_entry_under_another_key_text_is_not_loaded(cache_root):
    # Two key texts that hashed to the same file (forced here) must not share an entry.
    path = kernel_cache.store("key-a", b"cubin-a", entry="k")
    other = kernel_cache._path("key-b")
    os.makedirs(os.path.dirname(other), exist_ok=True)
    os.replace(path, other)
    assert kernel_cache.load("key-b") is None


def test_an_edited_link_file_invalidates_the_entry(cache_root, tmp_path):
    cu = tmp_path / "copy.cu"
    cu.write_text('extern "C" __device__ int f(int* r, int x) { *r = x; return 0; }\n')
    kernel_cache.store("key-l", b"cubin", link_files=[str(cu)], entry="k")
    assert kernel_cache.load("key-l") is not None
    cu.write_text('extern "C" __device__ int f(int* r, int x) { *r = x + 1; return 0; }\n')
    assert kernel_cache.load("key-l") is None
    cu.unlink()
    assert kernel_cache.load("key-l") is None


def _kernels():
    """Two kernels whose code differs only in a captured constant."""
    def make(k):
        @cuda.jit(launch_bounds=(128, 1))
        def kernel(x):
            x[0] = k
        return kernel
    return make(1), make(2), make(1)


def test_kernel_key_follows_code_closure_options_cc_and_key():
    a, b, a2 = _kernels()
    sig = (types.Array(types.int64, 1, "C"),)
    key = kernel_cache.kernel_key(a, sig, (9, 0))
    assert key == kernel_cache.kernel_key(a2, sig, (9, 0))          # same code, same key
    assert key != kernel_cache.kernel_key(b, sig, (9, 0))           # captured 1 vs 2
    assert key != kernel_cache.kernel_key(a, sig, (10, 0))
    assert key != kernel_cache.kernel_key(a, (types.Array(types.int32, 1, "C"),), (9, 0))
    assert key != kernel_cache.kernel_key(a, sig, (9, 0), key="v2")
    c = cuda.jit(launch_bounds=(256, 1))(a.py_func)
    assert key != kernel_cache.kernel_key(c, sig, (9, 0))           # compile options
    assert " at 0x" not in key      # no address of this process (a function-valued option)
    # a user kernel's defining file is part of its key
    assert json.loads(key)["source"][0].endswith("test_host_path_offline.py")


def test_kernel_key_follows_versions_sources_and_env(monkeypatch):
    a, _, _ = _kernels()
    sig = (types.Array(types.int64, 1, "C"),)
    key = kernel_cache.kernel_key(a, sig, (9, 0))
    real = kernel_cache._versions
    monkeypatch.setattr(kernel_cache, "_versions", lambda: real() + ["numba-cuda=99"])
    kernel_cache.package_fingerprint.cache_clear()
    try:
        assert kernel_cache.kernel_key(a, sig, (9, 0)) != key
    finally:
        monkeypatch.setattr(kernel_cache, "_versions", real)
        kernel_cache.package_fingerprint.cache_clear()
    assert kernel_cache.kernel_key(a, sig, (9, 0)) == key
    for host_only in ("NUMBA_TMA_DEPENDENT_LAUNCH", "NUMBA_TMA_CACHE_MAX_ENTRIES",
                      "NUMBA_TMA_CACHE_LOCK_WAIT"):
        monkeypatch.setenv(host_only, "1")                          # no kernel's code
    assert kernel_cache.kernel_key(a, sig, (9, 0)) == key
    monkeypatch.setenv("NUMBA_TMA_WAIT_TIMEOUT_NS", "1000")        # a compile-time switch
    assert kernel_cache.kernel_key(a, sig, (9, 0)) != key


def test_package_fingerprint_covers_the_cu_sources(monkeypatch, tmp_path):
    import shutil

    from numba_tma import _bridge

    ptx = tmp_path / "ptx"
    shutil.copytree(_bridge.PTX_DIR, ptx)
    monkeypatch.setattr(_bridge, "PTX_DIR", str(ptx))
    kernel_cache.package_fingerprint.cache_clear()
    try:
        before = kernel_cache.package_fingerprint()
        cu = sorted(ptx.glob("*.cu"))[0]
        cu.write_text(cu.read_text() + "\n// edited\n")
        kernel_cache.package_fingerprint.cache_clear()
        assert kernel_cache.package_fingerprint() != before
    finally:
        monkeypatch.undo()
        kernel_cache.package_fingerprint.cache_clear()


def test_library_kernel_keys_are_stable_and_distinct():
    from numba_tma.kernels import transpose_sector, transpose_vec

    keys = set()
    for module in (transpose_vec, transpose_sector):
        for itemsize in (1, 2, 4, 8):
            kern = module._kernel(itemsize, *module.TILES[itemsize])[0]
            k1 = kernel_cache.kernel_key(kern, (types.int64,), (9, 0), key=itemsize)
            kern2 = module._kernel(itemsize, *module.TILES[itemsize])[0]
            assert kernel_cache.kernel_key(kern2, (types.int64,), (9, 0), key=itemsize) == k1
            keys.add(k1)
    assert len(keys) == 8


def _store_many(root, n, tag):
    os.environ["NUMBA_CACHE_DIR"] = root
    for _ in range(n):
        kernel_cache.store("key-race", tag * 4096, entry="k", native=True)


def test_concurrent_writers_leave_a_whole_entry(cache_root):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_store_many, args=(str(cache_root), 30, t)) for t in (b"a", b"b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cubin, _ = kernel_cache.load("key-race")
    assert cubin in (b"a" * 4096, b"b" * 4096)


def test_building_makes_a_second_builder_wait(cache_root):
    import threading
    import time

    held, order = threading.Event(), []

    def first():
        with kernel_cache.building("key-w"):
            held.set()
            time.sleep(0.6)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    held.wait(10)
    t0 = time.monotonic()
    with kernel_cache.building("key-w"):
        order.append("second in")
        waited = time.monotonic() - t0
    t.join()
    assert order == ["first done", "second in"] and waited > 0.3, (order, waited)


def test_building_stops_waiting_after_lock_wait(cache_root, monkeypatch):
    import threading
    import time

    monkeypatch.setenv("NUMBA_TMA_CACHE_LOCK_WAIT", "0.2")
    held, release = threading.Event(), threading.Event()

    def first():
        with kernel_cache.building("key-t"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    held.wait(10)
    t0 = time.monotonic()
    with kernel_cache.building("key-t"):            # the holder is stuck: build anyway
        waited = time.monotonic() - t0
    release.set()
    t.join()
    assert 0.15 < waited < 5, waited
    assert len(list(cache_root.rglob("*.lock"))) == 1
    kernel_cache.clear()                            # lock files go with the entries
    assert not list(cache_root.rglob("*.lock"))


def _precompile_after(root, start, results):
    os.environ["NUMBA_CACHE_DIR"] = root
    from numba_tma.launch import DirectKernel

    @cuda.jit
    def scale(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * 3.0 + 1.0

    kernel = DirectKernel(scale, "void(float32[::1])", key="lock-test")
    start.wait(120)
    results.put(kernel.precompile("sm_90a"))


def test_processes_that_miss_together_build_once(cache_root):
    # Both miss the entry at the same moment; the one that takes the lock builds, the other
    # waits for it and loads its entry (without the lock both would build).
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_precompile_after, args=(str(cache_root), start, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    assert sorted(results.get(timeout=5) for _ in procs) == ["built", "cached"]


def test_unwritable_cache_dir_still_runs(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker))
    assert kernel_cache.store("key-x", b"cubin", entry="k") is None
    assert kernel_cache.load("key-x") is None


def test_a_single_row_or_column_operand_is_stored_along_its_long_side():
    # K = 1 (or N = 1): a column-major A of shape (M, 1) is also "row-major" with 2-byte rows,
    # which TMA cannot load; it must be read as the column it is stored as. out stays row-major.
    import importlib

    from numba_tma.operands import Operand

    mm = importlib.import_module("numba_tma.matmul_api")

    def op(shape, strides):
        return Operand(shape, strides, 2, "<f2", 1 << 20, False, None)

    col = op((64, 1), (2, 128))
    assert mm._matrix(col, "a") == (False, (1, 64))
    assert mm._matrix(col, "out", prefer_row=True) == (True, (64, 1))
    row = op((1, 64), (128, 2))
    assert mm._matrix(row, "a") == (True, (1, 64))
    assert mm._matrix(op((8, 4), None), "a") == (True, (8, 4))        # C-contiguous
    with pytest.raises(ValueError, match="a must be row-major or column-major contiguous"):
        mm._matrix(op((4, 8), (32, 4)), "a")


def test_prepared_launch_packs_one_buffer_as_the_kernel_parameters_lie():
    # Without a driver: the packed buffer and the per-word pointers hold the same bytes, each
    # word at its natural alignment, and set()/set_pointer() write into both. (An array's words
    # are the front end's: numba-cuda's array struct or numba-cuda-mlir's memref descriptor.)
    import numpy as np

    from numba_tma._frontend import ARRAY_POINTER_WORDS, array_words
    from numba_tma.launch import DirectKernel, PreparedLaunch

    def kernel():
        pass

    u8 = types.Array(types.uint64, 1, "C")
    d = DirectKernel(kernel, (u8, types.int64, types.float32, types.float32, types.int32,
                              types.int64))
    d._native = True
    p = PreparedLaunch(d, 0, (1, 1, 1), (32, 1, 1), 0, None, None,
                       ((0x1000, 16), 7, 0.5, -1.0, 3, 9))
    raw = bytes(p._buffer)
    n = 8 * len(array_words(0, (16,), (8,), 8))
    assert ctypes.sizeof(p._buffer) == n + 8 + 4 + 4 + 4 + 4 + 8    # int64 after int32 aligns
    assert np.frombuffer(raw[:n], "<i8").tolist() == array_words(0x1000, (16,), (8,), 8)
    assert np.frombuffer(raw[n:n + 8], "<i8")[0] == 7
    assert np.frombuffer(raw[n + 8:n + 16], "<f4").tolist() == [0.5, -1.0]
    assert np.frombuffer(raw[n + 16:n + 20], "<i4")[0] == 3
    assert np.frombuffer(raw[n + 24:n + 32], "<i8")[0] == 9
    p.set(2, 2.0)
    p.set_pointer(0, 0x2000)
    raw = bytes(p._buffer)
    assert np.frombuffer(raw[n + 8:n + 12], "<f4")[0] == 2.0
    assert np.frombuffer(raw[:n], "<i8").tolist() == array_words(0x2000, (16,), (8,), 8)
    ptrs = list(p._params)
    first = ARRAY_POINTER_WORDS[0]
    assert ptrs[first] - ctypes.addressof(p._buffer) == 8 * first and ptrs[-1] - ptrs[0] == n + 24


def test_parameter_check_never_asks_past_the_packed_words(monkeypatch):
    # compute-sanitizer counts every failed driver call as an error: the check asks for the
    # parameters DirectKernel packs and no further, and a driver without cuFuncGetParamCount
    # (cuda-bindings raises RuntimeError: 'Function ... not found') is no error.
    from types import SimpleNamespace

    from cuda.bindings import driver as real

    from numba_tma.launch import direct

    def fake(kernel_sizes, has_count):
        asked = []

        def count(func):
            if not has_count:
                raise RuntimeError('Function "cuFuncGetParamCount" not found')
            return real.CUresult.CUDA_SUCCESS, len(kernel_sizes)

        def info(func, i):
            asked.append(i)
            if i >= len(kernel_sizes):
                return real.CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0
            return real.CUresult.CUDA_SUCCESS, 8 * i, kernel_sizes[i]

        monkeypatch.setattr(direct, "_cudrv", SimpleNamespace(
            CUresult=real.CUresult, cuFuncGetParamCount=count, cuFuncGetParamInfo=info))
        return asked

    layout = (direct._ArraySlot(1, 4, "C", "<f4"), ctypes.c_int32)
    sizes = direct._parameter_sizes(layout)
    for has_count in (True, False):
        asked = fake(sizes, has_count)
        assert direct._parameters_match(0, layout) and max(asked) == len(sizes) - 1
        fake(sizes[:-1], has_count)                       # the kernel takes fewer words
        assert not direct._parameters_match(0, layout)
        fake(sizes[:-1] + [8], has_count)                 # another size
        assert not direct._parameters_match(0, layout)
    asked = fake(sizes + [8], True)                       # more words: the count says so
    assert not direct._parameters_match(0, layout) and not asked


def test_direct_kernel_words_are_the_linked_kernels_parameters():
    # The parameter sizes in the linked cubin's ELF (EIATTR_KPARAM_INFO) are the words
    # DirectKernel packs, on either front end: each array's words, then each scalar.
    import re
    import subprocess

    from numba_tma.launch import DirectKernel
    from numba_tma.launch.direct import _parameter_sizes
    from numba_tma.offline import find_tool, link_kernel

    def kernel(a, x, b, y, f):
        i = cuda.grid(1)
        if i < b.shape[0]:
            b[i] = a[i, 0] + x + y + f

    sig = (types.Array(types.float32, 2, "C"), types.int32, types.Array(types.float64, 1, "A"),
           types.uint64, types.float32)
    linked = link_kernel(cuda.jit(kernel), sig)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"params_{os.getpid()}.cubin")
    with open(path, "wb") as f:
        f.write(linked.cubin)
    try:
        elf = subprocess.run([find_tool("cuobjdump"), "-elf", path], capture_output=True,
                             text=True, check=True).stdout
    finally:
        os.remove(path)
    params = sorted((int(o, 16), int(s, 16)) for o, s in
                    re.findall(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*0x[0-9a-f]+\s+"
                               r"Size\s*:\s*(0x[0-9a-f]+)", elf))
    assert [o for o, _ in params] == list(range(len(params)))
    assert [s for _, s in params] == _parameter_sizes(DirectKernel(kernel, sig)._layout)


def test_dependent_launch_configs():
    # Programmatic stream serialization rides on cuLaunchKernelEx, with or without a cluster;
    # a plain launch that is not dependent keeps the raw cuLaunchKernel.
    from cuda.bindings import driver

    from numba_tma.launch import DirectKernel, PreparedLaunch, plan_cluster_launch
    from numba_tma.launch.driver_calls import _launch_config, _PlainLaunch

    ids = driver.CUlaunchAttributeID
    pss = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

    def attr_ids(config):
        return [a.id for a in config.attrs[:config.numAttrs]]

    cl = plan_cluster_launch((4, 1, 1), (128, 1, 1), (2, 1, 1), shared_mem=1024)
    assert attr_ids(_launch_config(cl, 0)) == [ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]
    assert attr_ids(_launch_config(cl, 0, dependent=True)) == [
        ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, pss]
    plain = _PlainLaunch((3, 1, 1), (64, 1, 1), None, 0)
    config = _launch_config(plain, 0, dependent=True)
    assert attr_ids(config) == [pss]
    assert (config.gridDimX, config.blockDimX) == (3, 64)
    assert config.attrs[0].value.programmaticStreamSerializationAllowed == 1

    def kernel():
        pass

    d = DirectKernel(kernel, (types.int64,))
    d._native = True
    p = PreparedLaunch(d, 0, (3, 1, 1), (64, 1, 1), 0, None, None, (1,), dependent=True)
    assert p._plan == plain and p._raw is False and p._dependent
    q = PreparedLaunch(d, 0, (3, 1, 1), (64, 1, 1), 0, None, None, (1,))
    assert q._plan is None and not q._dependent


def test_dependent_launches_are_the_default(monkeypatch):
    from numba_tma.kernels.gemm.plan import dependent_launches

    monkeypatch.delenv("NUMBA_TMA_DEPENDENT_LAUNCH", raising=False)
    assert dependent_launches()
    for value, on in (("0", False), ("", False), ("1", True)):
        monkeypatch.setenv("NUMBA_TMA_DEPENDENT_LAUNCH", value)
        assert dependent_launches() == on


def test_direct_kernel_checks_an_array_arguments_layout():
    from numba_tma._frontend import array_words
    from numba_tma.launch import DirectKernel

    def kernel():
        pass

    class Cai:
        def __init__(self, shape, strides):
            self.__cuda_array_interface__ = {"shape": shape, "strides": strides,
                                             "typestr": "<f4", "data": (0x4000, False),
                                             "version": 3}

    c = DirectKernel(kernel, (types.Array(types.float32, 2, "C"),))
    f = DirectKernel(kernel, (types.Array(types.float32, 2, "F"),))
    a = DirectKernel(kernel, (types.Array(types.float32, 2, "A"),))
    assert c._words([Cai((3, 5), None)]) == array_words(0x4000, (3, 5), (20, 4), 4)
    assert f._words([Cai((3, 5), (4, 12))]) == array_words(0x4000, (3, 5), (4, 12), 4)
    assert a._words([Cai((3, 5), (40, 4))]) == array_words(0x4000, (3, 5), (40, 4), 4)  # any
    with pytest.raises(TypeError, match=r"args\[0\]: the kernel takes a C-contiguous array"):
        c._words([Cai((3, 5), (4, 12))])
    with pytest.raises(TypeError, match=r"args\[0\]: the kernel takes a F-contiguous array"):
        f._words([Cai((3, 5), None)])
    with pytest.raises(TypeError, match=r"args\[0\]: strides \(40, 6\) bytes are not whole"):
        a._words([Cai((3, 5), (40, 6))])


def test_cache_keeps_at_most_max_entries_least_recently_used_first(cache_root, monkeypatch):
    monkeypatch.setenv("NUMBA_TMA_CACHE_MAX_ENTRIES", "10")
    paths = []
    for i in range(10):
        with kernel_cache.building(f"key-{i}"):             # each leaves its lock file
            paths.append(kernel_cache.store(f"key-{i}", b"c" * 8, entry="k"))
        os.utime(paths[-1], (1000 + i, 1000 + i))          # stored in order, oldest first
    assert kernel_cache.load("key-0") is not None           # used again: now the newest
    kernel_cache.store("key-10", b"c" * 8, entry="k")       # 11 > 10: the oldest tenth goes
    left = {k for k in (f"key-{i}" for i in range(11)) if kernel_cache.load(k) is not None}
    assert left == {f"key-{i}" for i in (0, *range(3, 11))}
    locks = {str(p)[:-len(".lock")] for p in cache_root.rglob("*.lock")}
    assert locks == {kernel_cache._path(f"key-{i}") for i in (0, *range(3, 10))}   # with theirs
    assert kernel_cache.clear() == 9
    assert kernel_cache.load("key-0") is None


# -- recycled numba outputs ------------------------------------------------------------------

class _FakeContext:
    """What the output pool reads of a numba context: its pending deallocations."""

    def __init__(self):
        self.freed = []

        class _Deallocations:
            @staticmethod
            def add_item(fn, ptr, nbytes):
                self.freed.append((fn, ptr, nbytes))

        self.deallocations = _Deallocations()


def _pool(limit, ctx_id=7):
    from numba_tma._arrays import OutputPool

    pool, ctx = OutputPool(limit), _FakeContext()
    pool._contexts[ctx_id] = ctx          # (cuda.current_context() needs a GPU)
    return pool, ctx


def test_output_pool_recycles_a_dropped_block_of_the_same_size_and_context():
    import numpy as np

    pool, ctx = _pool(1 << 20)
    f16 = np.dtype(np.float16)
    a = pool.wrap(7, 0x7F0000000000, 2048, (32, 32), f16)
    assert pool.take(7, 2048) is None                     # a live output is never handed out
    del a
    assert pool.held_bytes() == 2048
    assert pool.take(7, 4096) is None and pool.take(8, 2048) is None   # other size, context
    assert pool.take(7, 2048) == 0x7F0000000000
    assert pool.take(7, 2048) is None and pool.held_bytes() == 0
    assert ctx.freed == []


def test_output_pool_block_comes_back_once_on_free_or_death_and_not_while_a_view_lives():
    import numpy as np

    pool, ctx = _pool(1 << 20)
    f16 = np.dtype(np.float16)
    a = pool.wrap(7, 0x5000, 2048, (32, 32), f16)
    a.gpu_data.free()                     # numba's explicit free: back at once, once
    assert pool.take(7, 2048) == 0x5000
    del a
    assert pool.take(7, 2048) is None and ctx.freed == []
    b = pool.wrap(7, 0x6000, 2048, (32, 32), f16)
    view = b.gpu_data.view(64, 128)       # what a slice of the array holds
    del b
    assert pool.held_bytes() == 0         # the view keeps the block
    del view
    assert pool.take(7, 2048) == 0x6000


def test_output_pool_frees_past_its_limit_in_stream_order():
    import numpy as np

    from numba_tma import _arrays

    pool, ctx = _pool(3000)
    f32 = np.dtype(np.float32)
    a = pool.wrap(7, 0x1000, 2048, (512,), f32)
    b = pool.wrap(7, 0x2000, 2048, (512,), f32)
    del a, b                              # the second would pass the limit: freed
    assert pool.held_bytes() == 2048
    assert ctx.freed == [(_arrays._free_async, 0x2000, 2048)]
    off, ctx_off = _pool(0)
    c = off.wrap(7, 0x3000, 64, (16,), f32)
    del c
    assert off.held_bytes() == 0 and ctx_off.freed == [(_arrays._free_async, 0x3000, 64)]


def test_output_pool_release_frees_the_current_contexts_blocks(monkeypatch):
    import numpy as np

    from numba_tma import _arrays

    pool, _ = _pool(1 << 20)
    pool._contexts[9] = _FakeContext()
    f16 = np.dtype(np.float16)
    arrays = [pool.wrap(7, 0x1000, 512, (256,), f16), pool.wrap(7, 0x2000, 512, (256,), f16),
              pool.wrap(9, 0x3000, 512, (256,), f16)]
    del arrays
    freed = []
    monkeypatch.setattr(_arrays, "context_id", lambda: 7)
    monkeypatch.setattr(_arrays, "_free_async", freed.append)
    assert pool.release() == 1024
    assert sorted(freed) == [0x1000, 0x2000]     # context 9 is gone: forgotten, not freed
    assert pool.held_bytes() == 0 and pool.take(9, 512) is None


def test_output_pool_arrays_are_numba_arrays_like_the_constructors():
    import numpy as np
    from numba_tma._frontend import DeviceNDArray, MemoryPointer

    pool, _ = _pool(1 << 20)
    f16 = np.dtype(np.float16)
    first = pool.wrap(7, 0x10000, 2 * 300 * 520, (300, 520), f16)      # builds the template
    again = pool.wrap(7, 0x90000, 2 * 300 * 520, (300, 520), f16)      # from the template
    plain = DeviceNDArray((300, 520), (1040, 2), f16,
                          gpu_data=MemoryPointer(None, ctypes.c_void_p(0x90000), 312000))
    for arr, ptr in ((first, 0x10000), (again, 0x90000)):
        assert type(arr) is DeviceNDArray and arr.is_c_contiguous()
        want = dict(plain.__cuda_array_interface__, data=(ptr, False))
        assert arr.__cuda_array_interface__ == want
        assert arr.gpu_data.size == 312000
    assert _calls.operand_key(again) == (0x90000, (300, 520), (1040, 2), "<f2")
    assert again._dummy is first._dummy           # shared, as numba's own bind() shares it


def test_numba_operand_key_reads_the_interface_address():
    import numpy as np
    from numba_tma._frontend import DeviceNDArray, MemoryPointer, binding

    mem = MemoryPointer(None, ctypes.c_void_p(0x40000), 4096)
    arr = DeviceNDArray((16, 64), (128, 2), np.float16, gpu_data=mem)
    cai = arr.__cuda_array_interface__
    assert _calls.operand_key(arr) == (cai["data"][0], (16, 64), (128, 2), cai["typestr"])
    t = DeviceNDArray((64, 16), (2, 128), np.float16, gpu_data=mem)    # a transposed view
    assert _calls.operand_key(t)[2] == (2, 128)
    null = DeviceNDArray((16, 64), (128, 2), np.float16,
                         gpu_data=MemoryPointer(None, binding.CUdeviceptr(0), 0))
    assert _calls.operand_key(null)[0] == 0           # (ctypes gives None for address 0)
