"""The result of :mod:`numba_tma.offline`: :func:`compile_kernel` links a kernel and reads its SASS
and resources into a :class:`KernelBinary`."""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import tempfile
from typing import Optional

from . import link
from .sass import _has_op, _parse_ptxas_log, _parse_res_usage, parse_mnemonics
from .toolchain import _run_tool

__all__ = ["KernelBinary", "compile_kernel"]

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
        ptx, _ = link._nvjitlink(self._link_inputs, self._link_options + ["-ptx"], ptx=True)
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
    linked = link.link_kernel(kernel, signature, arch=arch, linking=linking)
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
