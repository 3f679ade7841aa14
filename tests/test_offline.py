"""numba_tma.offline: compile kernels for sm_90a and read their SASS, no GPU needed."""

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("the CUDA simulator has no compiler to inspect", allow_module_level=True)

from numba_tma import offline
from numba_tma._frontend import address_of as _addr, compiler, cuda, dispatcher, errors, types
from numba_tma.offline import KernelBinary, compile_kernel, find_tool, parse_mnemonics, parse_opcodes

# NVRTC has no standard headers here, hence the typedef.
HELPERS_CU = r"""
typedef unsigned int uint32_t;
extern "C" __device__ void ot_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
extern "C" __device__ void ot_mbarrier_init(void* bar, unsigned count) {
  uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(count) : "memory");
}
extern "C" __device__ float ot_add_one(float x) { return x + 1.0f; }
"""


@pytest.fixture
def helpers_cu(tmp_path):
    path = tmp_path / "offline_helpers.cu"
    path.write_text(HELPERS_CU)
    return str(path)


@pytest.fixture
def no_driver(monkeypatch):
    """Make numba's device query fail as on a machine without a driver, even on a GPU host."""

    def get_current_device():
        raise RuntimeError("no CUDA driver (simulated by the test)")

    monkeypatch.setattr(dispatcher, "get_current_device", get_current_device)
    monkeypatch.setattr(compiler, "get_current_device", get_current_device)
    return get_current_device


def test_inline_ptx_helpers_are_lto_inlined(helpers_cu):
    fence = cuda.declare_device(
        "ot_fence_proxy_async", types.void(), link=helpers_cu, abi="c"
    )
    init = cuda.declare_device(
        "ot_mbarrier_init", types.void(types.voidptr, types.uint32), link=helpers_cu, abi="c"
    )

    def kernel(out):
        bar = cuda.shared.array(1, types.uint64)  # 8 bytes
        buf = cuda.shared.array(256, types.float32)  # 1024 bytes
        tid = cuda.threadIdx.x
        buf[tid] = tid
        if tid == 0:
            init(_addr(bar), 1)
            fence()
        cuda.syncthreads()
        out[tid] = buf[255 - tid]

    kb = compile_kernel(kernel, "void(float32[::1])")
    assert isinstance(kb, KernelBinary)
    assert kb.arch == "sm_90a"
    assert "kernel" in kb.name and kb.name.startswith("_Z")
    assert kb.cubin[:4] == b"\x7fELF"
    assert "sm_90a" in kb.sass

    ops = kb.opcodes()
    assert ops["SYNCS.EXCH.64"] == 1  # mbarrier.init
    assert kb.has("FENCE.VIEW.ASYNC.S")  # fence.proxy.async
    assert kb.count("BAR.SYNC") == 1  # syncthreads
    assert kb.count("CALL") == 0  # LTO inlined the C helpers
    assert not kb.has("LDL") and not kb.has("STL")

    assert kb.registers > 0
    assert kb.shared_bytes == 8 + 256 * 4
    assert kb.local_bytes == 0 and kb.stack_bytes == 0
    assert kb.spill_stores == 0 and kb.spill_loads == 0
    assert kb.barriers == 1
    assert f"{kb.registers} regs" in str(kb) and str(kb) == kb.summary()
    assert "\n" not in kb.summary()

    ptx = kb.ptx
    assert ".target sm_90a" in ptx
    assert "mbarrier.init.shared::cta.b64" in ptx and "fence.proxy.async" in ptx

    # Control: without the fence call there is no FENCE, so the check above is real.
    def init_only(out):
        bar = cuda.shared.array(1, types.uint64)
        if cuda.threadIdx.x == 0:
            init(_addr(bar), 1)
        cuda.syncthreads()
        out[0] = bar[0]

    kb2 = compile_kernel(init_only, "void(uint64[::1])")
    assert kb2.count("SYNCS.EXCH") == 1 and not kb2.has("FENCE.VIEW.ASYNC")
    assert kb2.shared_bytes == 8


def test_device_function_compiles_without_driver(no_driver):
    @cuda.jit(device=True)
    def scale(x):
        return x * types.float32(3.0) + types.float32(1.0)

    @cuda.jit
    def kernel(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = scale(out[i])

    kb = compile_kernel(kernel, (types.float32[::1],))
    assert kb.registers > 0
    assert kb.has("FFMA") and kb.has("STG")
    assert kb.count("CALL") == 0
    # The simulated "no driver" query is back in place after the compile.
    assert dispatcher.get_current_device is no_driver
    assert compiler.get_current_device is no_driver


def test_patch_restored_after_failing_compile(no_driver):
    @cuda.jit(device=True)
    def broken(x):
        return x + "not a number"

    def kernel(out):
        out[0] = broken(out[0])

    # A TypingError (not the simulated driver error) means typing ran under the patch.
    with pytest.raises(errors.TypingError):
        compile_kernel(kernel, "void(float32[::1])")
    assert dispatcher.get_current_device is no_driver
    assert compiler.get_current_device is no_driver


def test_runtime_indexed_local_array_shows_local_memory():
    def kernel(out, idx, n):
        a = cuda.local.array(64, types.float32)
        for i in range(64):
            a[i] = out[i] * i
        s = types.float32(0)
        for j in range(n):
            s += a[(idx + j) % 64]
        out[cuda.threadIdx.x] = s

    kb = compile_kernel(kernel, "void(float32[::1], int32, int32)")
    # numba's local arrays live in the stack frame (STACK), accessed with LDL/STL.
    assert kb.stack_bytes + kb.local_bytes >= 64 * 4
    assert kb.has("STL") and kb.has("LDL")


def test_link_inputs_from_linking_and_dispatcher(helpers_cu):
    add_one = cuda.declare_device("ot_add_one", types.float32(types.float32), abi="c")  # no link=

    def kernel(out):
        out[0] = add_one(out[0])

    with pytest.raises(RuntimeError, match="ot_add_one"):
        compile_kernel(kernel, "void(float32[::1])")

    kb = compile_kernel(kernel, "void(float32[::1])", linking=[helpers_cu])
    assert kb.count("CALL") == 0 and kb.has("FADD")

    jitted = cuda.jit(link=[helpers_cu])(kernel)
    kb = compile_kernel(jitted, "void(float32[::1])")
    assert kb.count("CALL") == 0 and kb.has("FADD")


@pytest.mark.parametrize(
    "arch", ["sm90a", "sm_9", "sm_90x", "compute_90a", "SM_90A", "sm_91a", "", None, 90]
)
def test_bad_arch_rejected(arch):
    with pytest.raises(ValueError, match="arch"):
        compile_kernel(lambda out: None, "void(float32[::1])", arch=arch)


def test_parse_arch():
    assert offline.toolchain._parse_arch("sm_90a") == (9, 0, "a")
    assert offline.toolchain._parse_arch("sm_90") == (9, 0, "")
    assert offline.toolchain._parse_arch("sm_100a") == (10, 0, "a")


CANNED_SASS = """
	code for sm_90a
		Function : _Z1kv
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                              /* 0x00000a00ff017b82 */
                                                                                       /* 0x000fe20000000800 */
        /*0010*/                   FENCE.VIEW.ASYNC.S ;                                /* 0x00000000000073c6 */
        /*0020*/                   SYNCS.EXCH.64 URZ, [UR9], UR4 ;                     /* 0x00000004093f75b2 */
        /*0030*/               @P0 ELECT P1, URZ, PT ;                                 /* 0x00000000003f082f */
        /*0040*/                   UTMALDG.2D [UR8], [UR4] ;                           /* 0x00000008040075b4 */
        /*0050*/              @!P1 SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR4], RZ ;
        /*0060*/             @!UPT UTMALDG.2D [UR8], [UR4] ;
.L_x_2:
        /*0070*/               @P0 BRA.U.ANY 0x40 ;                                    /* 0xfffffffd00ec0947 */
        /*0080*/                   CALL.REL.NOINC `(helper) ;
        /*0090*/                   EXIT ;                                              /* 0x000000000000794d */
        /*00a0*/                   BRA 0xa0;
"""


def test_parse_opcodes_on_canned_sass():
    ops = parse_opcodes(CANNED_SASS)
    assert ops == {
        "LDC": 1,
        "FENCE.VIEW.ASYNC.S": 1,
        "SYNCS.EXCH.64": 1,
        "ELECT": 1,
        "UTMALDG.2D": 2,
        "SYNCS.ARRIVE.TRANS64.RED.A1T0": 1,
        "BRA.U.ANY": 1,
        "CALL.REL.NOINC": 1,
        "EXIT": 1,
        "BRA": 1,
    }
    kb = KernelBinary(
        name="_Z1kv", arch="sm_90a", cubin=b"", sass=CANNED_SASS, info_log="",
        registers=10, shared_bytes=0, local_bytes=0, stack_bytes=0,
        spill_stores=0, spill_loads=0, barriers=0,
    )
    assert kb.count("UTMALDG") == 2
    assert kb.count("SYNCS") == 2
    assert kb.count("BRA") == 2  # BRA and BRA.U.ANY
    order = ["LDC", "FENCE.VIEW.ASYNC.S", "SYNCS.EXCH.64", "ELECT", "UTMALDG.2D",
             "SYNCS.ARRIVE.TRANS64.RED.A1T0", "UTMALDG.2D", "BRA.U.ANY", "CALL.REL.NOINC", "EXIT", "BRA"]
    assert parse_mnemonics(CANNED_SASS) == order and kb.mnemonics() == order
    assert kb.count("CALL") == 1 and kb.has("EXIT") and not kb.has("LDL")
    kb.opcodes()["EXIT"] += 5  # a copy: the cached counts stay intact
    assert kb.count("EXIT") == 1


# nvdisasm's layout (no encodings unless -hex; labels, directives and backquoted targets).
CANNED_NVDISASM = """
	.section	.text._Z1kv,"ax",@progbits
        /*0004*/ 	.word	index@(_Z1kv)
.L_x_0:
        /*1980*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ, !UPT ;
        /*1a40*/                   HGMMA.64x192x16.F32.BF16 R24, gdesc[UR4].tnspA, R24, gsb0 ;
        /*1a50*/                   QGMMA.64x64x32.F32.E5M2.E4M3 R24, R88, gdesc[UR8], R24 ;
        /*1ad0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*1ae0*/              @!PT LDS RZ, [RZ] ;
        /*1af0*/              @UP0 UTMASTG.2D [UR4], [UR6] ;  /* 0x00000004060073b5 */
        /*1b00*/               @P0 BRA `(.L_x_0) ;
        /*22f0*/                   BRA `(.L_x_12);
"""


def test_parse_mnemonics_keeps_the_whole_mnemonic():
    assert parse_mnemonics(CANNED_NVDISASM) == [
        "HGMMA.64x256x16.F32", "HGMMA.64x192x16.F32.BF16", "QGMMA.64x64x32.F32.E5M2.E4M3",
        "WARPGROUP.DEPBAR.LE", "LDS", "UTMASTG.2D", "BRA", "BRA"]
    # cuobjdump's layout: the same instruction gives the same mnemonic.
    line = ("        /*1980*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ, !UPT ;"
            "   /* 0x03e00000041879f0 */\n"
            "                                                                  "
            "/* 0x000fe20008000000 */\n")
    assert parse_mnemonics(line) == ["HGMMA.64x256x16.F32"]
    kb = KernelBinary(
        name="_Z1kv", arch="sm_90a", cubin=b"", sass=CANNED_NVDISASM, info_log="",
        registers=10, shared_bytes=0, local_bytes=0, stack_bytes=0,
        spill_stores=0, spill_loads=0, barriers=0,
    )
    assert kb.count("HGMMA.64x256x16") == 1 and kb.count("HGMMA") == 2 and kb.count("GMMA") == 0
    assert kb.count("QGMMA.64x64x32.F32.E5M2") == 1 and kb.opcodes()["HGMMA.64x256x16.F32"] == 1
    assert kb.count("UTMASTG") == 1 and kb.count("BRA") == 2


def test_parse_resources():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z1kv\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 4104 bytes smem\n"
    )
    entries, funcs = offline.sass._parse_ptxas_log(log)
    assert entries == ["_Z1kv"]
    assert funcs["_Z1kv"] == {
        "stack": 16, "spill_stores": 8, "spill_loads": 4, "registers": 40,
        "barriers": 1, "smem": 4104, "lmem": 0, "cumulative_stack": 0,
    }
    res = offline.sass._parse_res_usage(
        "Resource usage:\n Common:\n  GLOBAL:0\n Function _Z1kv:\n"
        "  REG:40 STACK:16 SHARED:5128 LOCAL:0 CONSTANT[0]:592 TEXTURE:0\n"
    )
    assert res == {"_Z1kv": {"REG": 40, "STACK": 16, "SHARED": 5128, "LOCAL": 0,
                             "CONSTANT[0]": 592, "TEXTURE": 0}}


def test_find_tool(monkeypatch, tmp_path):
    assert os.access(find_tool("cuobjdump"), os.X_OK)
    monkeypatch.setattr(offline.toolchain.site, "getsitepackages", lambda: [])
    monkeypatch.setattr(offline.toolchain.site, "getusersitepackages", lambda: "")
    monkeypatch.setattr(offline.toolchain.sys, "path", [])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"numba_tma\[sass\]"):
        find_tool.__wrapped__("cuobjdump")  # bypass the cache
