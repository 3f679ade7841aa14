"""Compile a numba-cuda kernel for sm_90a (or another arch) offline and inspect its SASS.

``compile_kernel`` turns a ``@cuda.jit`` kernel (or a plain Python function) plus a
signature into a linked cubin, exactly as the launch path would build it for an
sm_90a device: numba emits LTO-IR for the kernel, every ``.cu`` file attached
with ``cuda.declare_device(..., link=...)`` (or ``@cuda.jit(link=[...])``, or the
``linking`` argument) is compiled by NVRTC to LTO-IR, and nvJitLink links them
with ``-lto``, so the inline-PTX helpers are inlined into the kernel.  The
result carries the cubin, the SASS (``cuobjdump -sass``), the LTO'd PTX, the
ptxas log and the resource usage, so tests can check the generated machine
code -- no GPU, no driver, no libcuda needed.

Example::

    from numba import cuda
    from numba_tma.offline import compile_kernel

    @cuda.jit
    def k(out):
        ...

    kb = compile_kernel(k, "void(float32[::1])")          # arch="sm_90a"
    print(kb)                                             # one-line resource summary
    assert kb.has("UTMALDG") and kb.count("CALL") == 0
    assert kb.spill_stores == 0 and kb.stack_bytes == 0
    print(kb.sass)

The SASS/resource part needs ``cuobjdump`` (from ``pip install "numba_tma[sass]"``,
a CUDA toolkit's ``$CUDA_HOME/bin``, or ``PATH``).

Pitfall: numba's device-function dispatchers cache their compiled overloads by
argument types only, not by compute capability.  A ``@cuda.jit(device=True)``
function (or ``@overload``/``register_jitable`` helper) first compiled through
``compile_kernel`` is compiled for the *target* cc (9.0 for sm_90a) and that
cached overload is reused later by real launches on whatever GPU is present
(and, conversely, one already compiled for the local GPU is reused here).  This
is harmless when the two agree; on a machine with a different GPU, compile
offline in a separate process.

Kernels that need numba's NRT or cudadevrt (grid sync) are not linked with
those libraries here.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import glob
import hashlib
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from typing import Optional

__all__ = ["KernelBinary", "LinkError", "LinkedKernel", "compile_kernel", "cubin_entries",
           "find_tool", "link_kernel", "parse_mnemonics", "parse_opcodes"]

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")

# Serialises our patch of numba's module globals; numba's own compiler lock is
# also held so that no other thread compiles (and sees the fake device) meanwhile.
_LOCK = threading.RLock()


# --------------------------------------------------------------------------- arch


def _parse_arch(arch):
    """'sm_90a' -> (9, 0, 'a'); 'sm_100a' -> (10, 0, 'a'); 'sm_89' -> (8, 9, '')."""
    m = _ARCH_RE.match(arch) if isinstance(arch, str) else None
    if m is None:
        raise ValueError(
            f"arch must look like 'sm_90a', 'sm_90' or 'sm_100a', got arch={arch!r}"
        )
    digits, suffix = m.groups()
    cc = (int(digits[:-1]), int(digits[-1]))
    from numba.cuda.cudadrv import nvrtc

    supported = nvrtc.get_supported_ccs()
    # numba would silently fall back to the closest cc; the link below would then
    # use a different -arch than the LTO-IR was built for.
    if cc not in supported:
        raise ValueError(
            f"arch={arch!r} is not supported by this NVRTC "
            f"(supported: {', '.join(f'sm_{a}{b}' for a, b in supported)})"
        )
    return cc + (suffix,)


# ------------------------------------------------------------------- device patch


class _TargetDevice:
    """Stands in for the current device while compiling: only its cc is read."""

    def __init__(self, cc):
        self.compute_capability = (cc[0], cc[1])

    def __repr__(self):
        return f"<offline target device cc={self.compute_capability}>"


@contextlib.contextmanager
def _target_device(cc):
    """Make numba believe the current device has compute capability ``cc``, compile each
    ``.cu`` source with NVRTC once per process (:func:`_nvrtc_compile`), and collect the paths
    of the files ``cuda.compile_all`` links; yields that list.

    ``numba.cuda.dispatcher`` calls ``get_current_device()`` when it compiles a
    device function that a kernel calls, which needs a driver.  The target here is
    always ``cc``, never the local GPU, so the patch is applied with or without one.
    ``cuda.compile_all`` runs NVRTC on every ``.cu`` file a kernel links, each time (a GEMM
    links ten); the same source gives the same LTO-IR, so it is kept.
    These module globals of numba-cuda are the one place this package patches its compiler.
    """
    import numba.cuda.compiler as _compiler
    import numba.cuda.dispatcher as _dispatcher

    try:
        from numba.cuda.core.compiler_lock import global_compiler_lock
    except ImportError:  # pragma: no cover - layout of other numba-cuda versions
        global_compiler_lock = contextlib.nullcontext()

    fake = _TargetDevice(cc)
    link_paths = []

    def get_current_device():
        return fake

    class RecordingLinkableCode:
        """``LinkableCode`` for compile_all, noting the path of each file it links."""

        @staticmethod
        def from_path_or_obj(path_or_obj):
            if isinstance(path_or_obj, (str, os.PathLike)):
                link_paths.append(os.path.abspath(os.fspath(path_or_obj)))
            return linkable_code.from_path_or_obj(path_or_obj)

    patches = [(m, name, value) for m, name, value in (
        (_dispatcher, "get_current_device", get_current_device),
        (_compiler, "get_current_device", get_current_device),
        (_compiler, "nvrtc", _MemoNVRTC),
        (_compiler, "LinkableCode", RecordingLinkableCode)) if hasattr(m, name)]
    linkable_code = getattr(_compiler, "LinkableCode", None)
    with _LOCK, global_compiler_lock:
        saved = [(m, name, getattr(m, name)) for m, name, _ in patches]
        try:
            for m, name, value in patches:
                setattr(m, name, value)
            yield link_paths
        finally:
            for m, name, orig in saved:
                setattr(m, name, orig)


_NVRTC_MEMO = {}


def _nvrtc_compile(src, name, cc, ltoir=False, lineinfo=False, debug=False):
    """numba's ``nvrtc.compile``, remembered per source text, name, cc and options."""
    from numba.cuda.cudadrv import nvrtc

    data = src.encode() if isinstance(src, str) else bytes(src)
    key = (hashlib.sha256(data).hexdigest(), name, tuple(cc), bool(ltoir), bool(lineinfo),
           bool(debug))
    hit = _NVRTC_MEMO.get(key)
    if hit is None:
        hit = _NVRTC_MEMO[key] = nvrtc.compile(src, name, cc, ltoir=ltoir, lineinfo=lineinfo,
                                               debug=debug)
    return hit


class _MemoNVRTC:
    """Stands in for ``numba.cuda.cudadrv.nvrtc`` inside ``cuda.compile_all``."""

    compile = staticmethod(_nvrtc_compile)


# -------------------------------------------------------------------------- tools


def _tool_dirs():
    seen = set()
    roots = []
    try:
        roots += site.getsitepackages()
    except AttributeError:  # virtualenv's old site.py
        pass
    try:
        roots.append(site.getusersitepackages())
    except AttributeError:
        pass
    roots += sys.path
    for root in roots:
        if not root or not os.path.isdir(root):
            continue
        # cu13 wheels: nvidia/cu13/bin; cu12 ones: nvidia/cuda_cuobjdump/bin etc.
        for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin"))):
            if d not in seen:
                seen.add(d)
                yield d
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "bin")


@functools.lru_cache(maxsize=None)
def find_tool(name):
    """Path of a CUDA binary tool (``cuobjdump``, ``nvdisasm``).

    Looks in the nvidia wheels on every site-packages/sys.path entry, then
    ``$CUDA_HOME/bin`` (and ``$CUDA_PATH/bin``), then ``PATH``.
    """
    exe = name + (".exe" if os.name == "nt" else "")
    for d in _tool_dirs():
        p = os.path.join(d, exe)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    p = shutil.which(name)
    if p:
        return p
    raise RuntimeError(
        f"{name} not found (looked in the nvidia-* wheels, $CUDA_HOME/bin and PATH); "
        f'install it with: pip install "numba_tma[sass]"'
    )


def _run_tool(name, *args):
    exe = find_tool(name)
    proc = subprocess.run([exe, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}"
        )
    return proc.stdout


# ----------------------------------------------------------------------- parsing

# "        /*0150*/                   UTMALDG.2D [UR8], [UR4] ;   /* 0x...*/"
# The address comment has no blank inside; the encoding lines ("/* 0x... */") do.
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*(?P<insn>[^;]*);")
_PREDICATE = re.compile(r"^@!?U?P(?:T|\d+)\s+")
# Lower case too: wgmma's shape is part of its mnemonic ("HGMMA.64x256x16.F32").
_MNEMONIC = re.compile(r"^[A-Z0-9_][A-Za-z0-9_.]*")


def parse_mnemonics(sass):
    """Full SASS mnemonics ("UTMALDG.2D", "SYNCS.EXCH.64", "HGMMA.64x256x16.F32") of a dump,
    in program order: the instruction's whole first word, every dotted modifier kept.

    Works on ``cuobjdump -sass`` and ``nvdisasm`` output (with or without ``-hex``);
    predicates ("@P0", "@!UPT"), operands, labels and directives are dropped.
    """
    mnemonics = []
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if not m:
            continue
        insn = _PREDICATE.sub("", m.group("insn").strip())
        mm = _MNEMONIC.match(insn)
        if mm:
            mnemonics.append(mm.group(0))
    return mnemonics


def parse_opcodes(sass):
    """Counter of full SASS mnemonics in a dump (see ``parse_mnemonics``)."""
    return collections.Counter(parse_mnemonics(sass))


_RES_FUNC = re.compile(r"^\s*Function\s+(\S+?):?\s*$")
_RES_PAIR = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def _parse_res_usage(text):
    """``cuobjdump -res-usage`` -> {function: {"REG": 10, "STACK": 0, ...}}."""
    out = {}
    current = None
    for line in text.splitlines():
        m = _RES_FUNC.match(line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        if current is not None:
            pairs = _RES_PAIR.findall(line)
            if pairs:
                out[current].update((k, int(v)) for k, v in pairs)
    return out


_LOG_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_LOG_PROPS = re.compile(r"Function properties for (\S+)")
_LOG_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_LOG_USED = re.compile(r"Used (\d+) registers")
_LOG_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "lmem": re.compile(r"(\d+) bytes lmem"),
    "cumulative_stack": re.compile(r"(\d+) bytes cumulative stack size"),
}


def _has_op(sass, op):
    """Whether SASS text has an instruction of opcode ``op`` (any modifiers)."""
    return re.search(rf"\b{op}(\.|\s)", sass) is not None


def _parse_ptxas_log(text):
    """ptxas lines of the nvJitLink verbose log -> ([entries], {function: {...}})."""
    entries, funcs = [], {}
    current = None
    for line in text.splitlines():
        m = _LOG_ENTRY.search(line)
        if m:
            current = m.group(1)
            entries.append(current)
            funcs.setdefault(current, {})
            continue
        m = _LOG_PROPS.search(line)
        if m:
            current = m.group(1)
            funcs.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _LOG_FRAME.search(line)
        if m:
            d = funcs[current]
            d["stack"], d["spill_stores"], d["spill_loads"] = map(int, m.groups())
            continue
        m = _LOG_USED.search(line)
        if m:
            d = funcs[current]
            d["registers"] = int(m.group(1))
            # ptxas leaves out fields that are zero.
            for key, rx in _LOG_FIELDS.items():
                f = rx.search(line)
                d[key] = int(f.group(1)) if f else 0
    return entries, funcs


# ------------------------------------------------------------------------ result


@dataclasses.dataclass(eq=False)
class KernelBinary:
    """A kernel linked for one arch, with its SASS and resource usage.

    ``shared_bytes`` is the static shared memory the kernel declares (ptxas'
    "bytes smem"); ``res_usage["SHARED"]`` additionally counts the 1 KiB that
    sm_90 reserves per CTA.  numba's ``cuda.local.array`` lives in the stack
    frame, so it shows up in ``stack_bytes`` (and LDL/STL), not ``local_bytes``.
    Opcode counts cover the whole cubin: after whole-program LTO that is the
    kernel and whatever it still calls.

    Mnemonics are full, every dotted modifier and shape kept, as the SASS spells
    them: ``UTMALDG.2D``, ``SYNCS.EXCH.64``, ``HGMMA.64x256x16.F32``
    (:func:`parse_mnemonics`). ``mnemonics()`` lists them in program order and
    ``opcodes()`` counts them (exact keys: ``opcodes()["UTMALDG.2D"]``);
    ``count(prefix)`` / ``has(prefix)`` match by string prefix, so
    ``count("UTMALDG")`` counts every rank and mode, ``count("HGMMA.64x256x16")``
    one shape, ``count("BRA")`` both ``BRA`` and ``BRA.U.ANY`` (and ``count("LDS")``
    ``LDSM`` too: ``opcodes()`` has the exact counts).
    """

    name: str
    arch: str
    cubin: bytes = dataclasses.field(repr=False)
    sass: str = dataclasses.field(repr=False)
    info_log: str = dataclasses.field(repr=False)
    registers: Optional[int]
    shared_bytes: Optional[int]
    local_bytes: Optional[int]
    stack_bytes: Optional[int]
    spill_stores: Optional[int]
    spill_loads: Optional[int]
    barriers: Optional[int]
    res_usage: dict = dataclasses.field(default_factory=dict, repr=False)
    py_name: str = dataclasses.field(default="", repr=False)
    _link_inputs: list = dataclasses.field(default_factory=list, repr=False)
    _link_options: list = dataclasses.field(default_factory=list, repr=False)

    @functools.cached_property
    def ptx(self) -> str:
        # nvJitLink gives either a cubin or PTX per link, and the PTX is rarely
        # looked at, so it is a second link, done on first access.
        ptx, _ = _nvjitlink(self._link_inputs, self._link_options + ["-ptx"], ptx=True)
        return ptx

    @functools.cached_property
    def _mnemonics(self):
        return parse_mnemonics(self.sass)

    @functools.cached_property
    def _opcodes(self):
        return collections.Counter(self._mnemonics)

    def mnemonics(self) -> list:
        """Full SASS mnemonics in program order, e.g. to check that a load precedes a barrier."""
        return list(self._mnemonics)

    def opcodes(self) -> collections.Counter:
        """Counter of full SASS mnemonics, e.g. {"UTMALDG.2D": 1, "SYNCS.EXCH.64": 1}."""
        return collections.Counter(self._opcodes)

    def count(self, prefix: str) -> int:
        """Number of SASS instructions whose mnemonic starts with ``prefix``."""
        return sum(n for op, n in self._opcodes.items() if op.startswith(prefix))

    def has(self, prefix: str) -> bool:
        """Whether some SASS mnemonic starts with ``prefix``."""
        return self.count(prefix) > 0

    def summary(self) -> str:
        def v(x):
            return "?" if x is None else str(x)

        return (
            f"{self.py_name or self.name} [{self.arch}]: {v(self.registers)} regs, "
            f"{v(self.shared_bytes)} B smem, {v(self.stack_bytes)} B stack, "
            f"{v(self.local_bytes)} B local, spill {v(self.spill_stores)}/"
            f"{v(self.spill_loads)} B st/ld, {v(self.barriers)} barriers"
        )

    def __str__(self):
        return self.summary()


# ----------------------------------------------------------------------- linking


def _input_type(kind):
    """nvJitLink input type for a cuda.core code_type or a driver CUjitInputType."""
    from cuda.bindings import nvjitlink

    name = getattr(kind, "name", str(kind)).upper()
    name = name.removeprefix("CU_JIT_INPUT_")
    table = {
        "NVVM": nvjitlink.InputType.LTOIR,
        "LTOIR": nvjitlink.InputType.LTOIR,
        "FATBINARY": nvjitlink.InputType.FATBIN,
        "FATBIN": nvjitlink.InputType.FATBIN,
        "CUBIN": nvjitlink.InputType.CUBIN,
        "PTX": nvjitlink.InputType.PTX,
        "OBJECT": nvjitlink.InputType.OBJECT,
        "LIBRARY": nvjitlink.InputType.LIBRARY,
    }
    if name in table:
        return table[name]
    raise ValueError(f"don't know how to link code of kind {kind!r}")


def _as_bytes(data):
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def _link_input(code, cc, index, debug=False, lineinfo=False):
    """One entry of compile_all's list (or a `linking` item) -> (type, bytes, name)."""
    from cuda.bindings import nvjitlink
    from numba.cuda.cudadrv.linkable_code import LinkableCode

    if isinstance(code, (bytes, bytearray)):
        return nvjitlink.InputType.LTOIR, bytes(code), f"input{index}.ltoir"
    if isinstance(code, (str, os.PathLike)):
        code = LinkableCode.from_path(os.fspath(code))
    if isinstance(code, LinkableCode):
        if code.kind == "cu":
            code, _ = _nvrtc_compile(
                code.data, code.name, cc, ltoir=True, lineinfo=lineinfo, debug=debug
            )
        else:
            return _input_type(code.kind), _as_bytes(code.data), code.name
    # cuda.core ObjectCode from NVRTC; never repr() it, that loads it into a context.
    return _input_type(code.code_type), _as_bytes(code.code), f"input{index}.{code.code_type}"


def _nvjitlink(inputs, options, ptx=False):
    from cuda.bindings import nvjitlink

    def log(h, which):
        n = getattr(nvjitlink, f"get_{which}_log_size")(h)
        buf = bytearray(n)
        if n:
            getattr(nvjitlink, f"get_{which}_log")(h, buf)
        return buf.decode(errors="replace").rstrip("\x00")

    h = nvjitlink.create(len(options), options)
    try:
        try:
            for kind, data, name in inputs:
                nvjitlink.add_data(h, kind, data, len(data), name)
            nvjitlink.complete(h)
        except nvjitlink.nvJitLinkError as e:
            raise LinkError(
                f"nvJitLink {' '.join(options)} failed: {e}\n{log(h, 'error')}{log(h, 'info')}"
            ) from e
        what = "ptx" if ptx else "cubin"
        n = getattr(nvjitlink, f"get_linked_{what}_size")(h)
        buf = bytearray(n)
        getattr(nvjitlink, f"get_linked_{what}")(h, buf)
        out = buf.decode().rstrip("\x00") if ptx else bytes(buf)
        return out, log(h, "info")
    finally:
        nvjitlink.destroy(h)


class LinkError(RuntimeError):
    """nvJitLink refused the link (its error and info logs are in the message)."""


_RESHAPE_FUNCS = ("nocopy_empty_reshape", "numba_attempt_nocopy_reshape")


def cubin_entries(cubin):
    """The kernel entry points of a cubin (ELF symbols of type FUNC marked ``STO_CUDA_ENTRY``),
    read from its symbol table: the names a driver's ``cuModuleGetFunction`` takes."""
    import struct

    data = bytes(cubin)
    if data[:4] != b"\x7fELF" or data[4] != 2:          # 64-bit ELF, as every cubin since sm_20
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    names = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 2:                                  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for sym in range(offset, offset + size, entsize or 24):
            st_name, st_info, st_other = struct.unpack_from("<IBB", data, sym)
            if st_info & 0xF == 2 and st_other & 0x10:   # STT_FUNC, STO_CUDA_ENTRY
                end = data.index(b"\0", strtab + st_name)
                names.append(data[strtab + st_name:end].decode())
    return names


def _pick_kernel_name(candidates, py_name):
    if not candidates:
        return ""
    # numba's mangled names spell the Python name with its length: "_ZN8__main__1kB2..."
    tagged = f"{len(py_name)}{py_name}"
    for c in candidates:
        if tagged in c:
            return c
    return candidates[0]


# ---------------------------------------------------------------------------- API


@dataclasses.dataclass(eq=False)
class LinkedKernel:
    """A kernel linked for one arch: the cubin and what loading it needs, without the SASS
    tools (what :class:`numba_tma.launch.DirectKernel` stores in the kernel cache)."""

    cubin: bytes = dataclasses.field(repr=False)
    entry: str                      # the kernel's (mangled) name in the cubin
    arch: str
    info_log: str = dataclasses.field(repr=False)
    link_files: tuple = ()          # the source files the link read (.cu, .ltoir, ...)
    py_name: str = ""
    _link_inputs: list = dataclasses.field(default_factory=list, repr=False)
    _link_options: list = dataclasses.field(default_factory=list, repr=False)


def link_kernel(kernel, signature, *, arch="sm_90a", linking=None) -> LinkedKernel:
    """Compile and link ``kernel`` for ``signature`` and ``arch`` (no GPU needed): numba's
    LTO-IR of the kernel, NVRTC's of every ``.cu`` file it links, one ``nvJitLink -lto``.
    Arguments as :func:`compile_kernel`; the launch path (``DirectKernel``) builds its cubins
    here too, so a kernel compiled offline is the one a GPU loads."""
    cc = _parse_arch(arch)
    from numba import cuda

    opts = {}
    if hasattr(kernel, "py_func"):
        opts = dict(getattr(kernel, "targetoptions", {}) or {})
        if opts.get("device"):
            raise TypeError(f"{kernel.py_func.__name__} is a device function, not a kernel")
        pyfunc = kernel.py_func
    elif callable(kernel):
        pyfunc = kernel
    else:
        raise TypeError(f"expected a @cuda.jit kernel or a function, got {kernel!r}")

    debug = opts.get("debug")
    lineinfo = bool(opts.get("lineinfo", False))
    compile_opts = dict(
        debug=debug,
        lineinfo=lineinfo,
        fastmath=bool(opts.get("fastmath", False)),
        opt=opts.get("opt"),
        launch_bounds=opts.get("launch_bounds"),
    )

    with _target_device(cc) as link_paths:
        codes, _ = cuda.compile_all(
            pyfunc, signature, device=False, abi="numba", cc=cc, output="ltoir",
            **compile_opts,
        )

    extra = list(opts.get("link") or ()) + list(linking or ())
    seen = set()
    for item in extra:
        key = os.path.abspath(os.fspath(item)) if isinstance(item, (str, os.PathLike)) else id(item)
        if key not in seen:
            seen.add(key)
            codes.append(item)
    inputs = [
        _link_input(c, cc, i, debug=bool(debug), lineinfo=lineinfo)
        for i, c in enumerate(codes)
    ]

    link_options = [f"-arch={arch}", "-lto"]
    if opts.get("max_registers"):
        link_options.append(f"-maxrregcount={int(opts['max_registers'])}")
    try:
        cubin, info_log = _nvjitlink(inputs, link_options + ["-verbose"])
    except LinkError as e:
        # The launch path links numba's reshape helpers on demand; compile_all does not.
        if not any(f"'{fn}'" in str(e) for fn in _RESHAPE_FUNCS):
            raise
        path = os.path.join(os.path.dirname(cuda.__file__), "reshape_funcs.cu")
        inputs.append(_link_input(path, cc, len(inputs)))
        cubin, info_log = _nvjitlink(inputs, link_options + ["-verbose"])

    # (from the cubin itself: some nvJitLink builds leave the ptxas lines out of the log)
    entries = cubin_entries(cubin) or _parse_ptxas_log(info_log)[0]
    if not entries:
        raise LinkError(f"nvJitLink {' '.join(link_options)}: the linked cubin has no kernel "
                        f"entry point")
    files = tuple(dict.fromkeys(link_paths + [os.path.abspath(os.fspath(item)) for item in extra
                                              if isinstance(item, (str, os.PathLike))]))
    return LinkedKernel(cubin=cubin, entry=_pick_kernel_name(entries, pyfunc.__name__),
                        arch=arch, info_log=info_log, link_files=files,
                        py_name=getattr(pyfunc, "__qualname__", pyfunc.__name__),
                        _link_inputs=inputs, _link_options=link_options)


def compile_kernel(kernel, signature, *, arch="sm_90a", linking=None) -> KernelBinary:
    """Compile ``kernel`` for ``signature`` and ``arch`` without a GPU.

    :param kernel: a ``@cuda.jit`` kernel dispatcher or a plain Python function.
        A dispatcher's ``link=``, ``fastmath``, ``lineinfo``, ``debug``, ``opt``,
        ``launch_bounds`` and ``max_registers`` options are honoured.
    :param signature: a numba signature or a string such as
        ``"void(float32[::1], uint64[::1])"``.
    :param arch: ``"sm_90a"`` (default), ``"sm_90"``, ``"sm_100a"``, ...
    :param linking: extra link inputs besides those the kernel already carries
        (``declare_device(link=...)`` files are included automatically): paths to
        ``.cu`` (compiled by NVRTC), ``.ltoir``, ``.ptx``, ``.cubin``, ``.fatbin``,
        ``.o``, ``.a`` files, or numba ``LinkableCode`` objects.
    :raises ValueError: for a malformed or unsupported ``arch``.
    :raises LinkError: when linking fails (with nvJitLink's log).
    :raises RuntimeError: when cuobjdump is missing.
    """
    linked = link_kernel(kernel, signature, arch=arch, linking=linking)
    cubin, info_log = linked.cubin, linked.info_log

    with tempfile.TemporaryDirectory(prefix="numba_tma_") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        sass = _run_tool("cuobjdump", "-sass", path)
        res_text = _run_tool("cuobjdump", "-res-usage", path)

    _, log_funcs = _parse_ptxas_log(info_log)
    res = _parse_res_usage(res_text)
    name = linked.entry
    r = res.get(name, {})
    p = log_funcs.get(name, {})

    def first(*vals):
        return next((v for v in vals if v is not None), None)

    return KernelBinary(
        name=name,
        arch=arch,
        cubin=cubin,
        sass=sass,
        info_log=info_log,
        registers=first(r.get("REG"), p.get("registers")),
        # -res-usage's SHARED includes sm_90's 1 KiB reserved block; ptxas' doesn't.
        shared_bytes=first(p.get("smem"), r.get("SHARED")),
        local_bytes=first(r.get("LOCAL"), p.get("lmem")),
        stack_bytes=first(r.get("STACK"), p.get("stack")),
        # Some nvJitLink builds (the H100 image's) leave the stack-frame line out of the log;
        # a spill is a local store/load, so SASS without STL/LDL has none.
        spill_stores=first(p.get("spill_stores"), None if _has_op(sass, "STL") else 0),
        spill_loads=first(p.get("spill_loads"), None if _has_op(sass, "LDL") else 0),
        barriers=p.get("barriers"),
        res_usage=r,
        py_name=linked.py_name,
        _link_inputs=linked._link_inputs,
        _link_options=linked._link_options,
    )
