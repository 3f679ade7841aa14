"""The toolchain of :mod:`numba_tma.offline`: the target arch, the stand-in device numba compiles
for, NVRTC remembered per source, and the CUDA binary tools (``cuobjdump``, ``nvdisasm``)."""

import contextlib
import functools
import glob
import hashlib
import os
import re
import shutil
import site
import subprocess
import sys
import threading

__all__ = ["find_tool"]

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")

# Serialises our patch of numba's module globals; numba's own compiler lock is
# also held so that no other thread compiles (and sees the fake device) meanwhile.
_LOCK = threading.RLock()

def _parse_arch(arch):
    """'sm_90a' -> (9, 0, 'a'); 'sm_100a' -> (10, 0, 'a'); 'sm_89' -> (8, 9, '')."""
    m = _ARCH_RE.match(arch) if isinstance(arch, str) else None
    if m is None:
        raise ValueError(
            f"arch must look like 'sm_90a', 'sm_90' or 'sm_100a', got arch={arch!r}"
        )
    digits, suffix = m.groups()
    cc = (int(digits[:-1]), int(digits[-1]))
    from .._frontend import nvrtc

    supported = nvrtc.get_supported_ccs()
    # numba would silently fall back to the closest cc; the link below would then
    # use a different -arch than the LTO-IR was built for.
    if cc not in supported:
        raise ValueError(
            f"arch={arch!r} is not supported by this NVRTC "
            f"(supported: {', '.join(f'sm_{a}{b}' for a, b in supported)})"
        )
    return cc + (suffix,)


class _TargetDevice:
    """Stands in for the current device while compiling: only its cc is read."""

    def __init__(self, cc):
        self.compute_capability = (cc[0], cc[1])

    def __repr__(self):
        return f"<offline target device cc={self.compute_capability}>"


def _front_end_cc(cc):
    """numba-cuda-mlir's own question for the GPU's cc (``tools.resolve_gpu_target``), answered
    ``cc`` too (its compile_ptx, which typing a user epilogue runs, asks it)."""
    from .. import _frontend

    if _frontend.NAME == "numba-cuda-mlir":
        from .._frontend_mlir import _target_cc

        return _target_cc(cc)
    return contextlib.nullcontext()


@contextlib.contextmanager
def target_device(cc):
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
    from .._frontend import compiler as _compiler, dispatcher as _dispatcher

    try:
        from .._frontend import global_compiler_lock
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
    with _LOCK, global_compiler_lock, _front_end_cc(cc):
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
    """numba's ``nvrtc.compile``, remembered per source text, name, cc and options (the name
    without its ``.cu``: numba-cuda-mlir's linker names a file ``x.cu`` where numba's
    ``LinkableCode`` names it ``x``, and the offline compile on that front end compiles the
    same file through both)."""
    from .._frontend import nvrtc

    data = src.encode() if isinstance(src, str) else bytes(src)
    key = (hashlib.sha256(data).hexdigest(), os.path.splitext(name)[0], tuple(cc), bool(ltoir),
           bool(lineinfo), bool(debug))
    hit = _NVRTC_MEMO.get(key)
    if hit is None:
        hit = _NVRTC_MEMO[key] = nvrtc.compile(src, name, cc, ltoir=ltoir, lineinfo=lineinfo,
                                               debug=debug)
    return hit


class _MemoNVRTC:
    """Stands in for ``numba.cuda.cudadrv.nvrtc`` inside ``cuda.compile_all``."""

    compile = staticmethod(_nvrtc_compile)


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
