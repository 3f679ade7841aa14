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

    from .._frontend import cuda
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

The package, by concern: :mod:`~numba_tma.offline.toolchain` (the target arch, the stand-in device
numba compiles for, NVRTC remembered per source, ``find_tool``), :mod:`~numba_tma.offline.link`
(numba's LTO-IR + NVRTC + nvJitLink: ``link_kernel``, ``LinkedKernel``, ``LinkError``,
``cubin_entries``), :mod:`~numba_tma.offline.sass` (mnemonics, resource usage and ptxas-log
parsing) and :mod:`~numba_tma.offline.binary` (``compile_kernel`` and its ``KernelBinary``).
"""

from .binary import KernelBinary, compile_kernel
from .link import LinkError, LinkedKernel, cubin_entries, link_kernel
from .sass import parse_mnemonics, parse_opcodes
from .toolchain import find_tool

__all__ = ["KernelBinary", "LinkError", "LinkedKernel", "compile_kernel", "cubin_entries",
           "find_tool", "link_kernel", "parse_mnemonics", "parse_opcodes"]
