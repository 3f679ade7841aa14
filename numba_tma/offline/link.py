"""The link step of :mod:`numba_tma.offline`: numba's LTO-IR of a kernel, NVRTC's of every ``.cu``
file it links, one ``nvJitLink -lto`` (:func:`link_kernel`), and the cubin's entry points."""

import dataclasses
import os

from .sass import _parse_ptxas_log
from .toolchain import _MemoNVRTC, _nvrtc_compile, _parse_arch, target_device

__all__ = ["LinkError", "LinkedKernel", "cubin_entries", "link_kernel"]

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
    from .._frontend import LinkableCode

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
    from .._frontend import cuda, front_end

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

    extra = list(opts.get("link") or ()) + list(linking or ())
    entry = None
    if front_end() == "numba-cuda-mlir":
        # (numba-cuda-mlir has no compile_all: its kernel compile gives the LTO-IR)
        from .._frontend import compile_ltoir

        # (it links while it compiles: the files of ``linking`` go in with the kernel's own)
        try:
            codes, link_paths, entry = compile_ltoir(
                pyfunc, signature, cc, arch, nvrtc=_MemoNVRTC, link=extra or None,
                max_registers=opts.get("max_registers") or None, **compile_opts)
        except Exception as e:      # (an unresolved extern: a link error, as ours would be)
            if type(e).__name__ != "nvJitLinkError":
                raise
            raise LinkError(f"nvJitLink (numba-cuda-mlir's compile): {e}") from e
        codes += link_paths
    else:
        with target_device(cc) as link_paths:
            codes, _ = cuda.compile_all(
                pyfunc, signature, device=False, abi="numba", cc=cc, output="ltoir",
                **compile_opts,
            )

    seen = set(link_paths) if entry is not None else set()   # (mlir: codes hold its .cu files)
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
    if entry not in entries:
        entry = _pick_kernel_name(entries, pyfunc.__name__)
    return LinkedKernel(cubin=cubin, entry=entry,
                        arch=arch, info_log=info_log, link_files=files,
                        py_name=getattr(pyfunc, "__qualname__", pyfunc.__name__),
                        _link_inputs=inputs, _link_options=link_options)
