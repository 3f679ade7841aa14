"""The README's kernels, compiled offline for sm_90a, keep what the README says of them (no GPU).

Which blocks: the README's ```python blocks, in order. A block with an ``@cuda.jit`` kernel is a
kernel block: its statements up to its last ``def`` are the definitions (imports, constants, the
kernels); what follows runs them on a GPU, which ``tests/gpu/test_readme.py`` does on an H100 (it
execs the first block and checks the array). A block that calls ``compile_kernel`` is an offline
block: it runs as written (its own asserts included) with the definitions of the kernel blocks
above it. Every README kernel must be compiled by some offline block, and each compiled kernel must
show what the README's opening claims of a kernel's SASS: the named opcodes (``UTMALDG``,
``UTMASTG``, ``SYNCS.*``), never a ``CALL``; and, as its offline example asserts, no local memory.
"""

import ast
import os
import pathlib
import re
import subprocess
import sys
import traceback

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("the CUDA simulator has no compiler to inspect", allow_module_level=True)

from numba_tma import front_end, offline

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# (README line of the block's first line, its text)
BLOCKS = [(README.count("\n", 0, m.start(1)) + 1, m.group(1))
          for m in re.finditer(r"```python\n(.*?)```", README, re.S)]
KERNEL_BLOCKS = [b for b in BLOCKS if "@cuda.jit" in b[1]]
OFFLINE_BLOCKS = [b for b in BLOCKS if "compile_kernel(" in b[1]]


def as_front_end(text):
    """A README block for the front end in use: the README's examples import numba-cuda's
    ``cuda`` (``from numba import cuda``); under another front end its ``cuda`` (from
    ``numba_tma._frontend``) takes that import's place, on the same line."""
    if front_end() == "numba-cuda":
        return text
    return re.sub(r"^(\s*)from numba import cuda$", r"\1from numba_tma._frontend import cuda", text,
                  flags=re.M)


def code(block, definitions_only=False):
    """A block compiled with README line numbers; ``definitions_only``: its statements up to its
    last def (what runs without a GPU)."""
    line, text = block
    text = as_front_end(text)
    tree = ast.increment_lineno(ast.parse(text), line - 1)
    if definitions_only:
        last = max(i for i, node in enumerate(tree.body)
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
        tree.body = tree.body[:last + 1]
    return compile(tree, str(ROOT / "README.md"), "exec")


def claimed_sass():
    """The opcode prefixes and the absent one of the README's "a kernel's SASS shows ..." claim."""
    m = re.search(r"a kernel's SASS shows\s+(.*?),\s+never a\s+`(\w+)`", README, re.S)
    assert m, "the README's claim about a kernel's SASS moved: update this test"
    shown = [s.rstrip("*") for s in re.findall(r"`([^`]+)`", m.group(1))]
    return shown, m.group(2)


@pytest.fixture(scope="module")
def compiled():
    """(kernel, signature, KernelBinary) of every compile_kernel call of the offline blocks, the
    kernels the kernel blocks define, and the error an offline block's own asserts raised."""
    assert KERNEL_BLOCKS and OFFLINE_BLOCKS, "the README lost its kernel or offline example"
    calls, kernels, error = [], [], None

    def recording(kernel, signature, **kw):
        kb = real(kernel, signature, **kw)
        calls.append((kernel, signature, kb))
        return kb

    real = offline.compile_kernel
    offline.compile_kernel = recording      # what ``from numba_tma.offline import`` then binds
    try:
        scope = {"__name__": "readme"}
        for block in BLOCKS:
            if block in KERNEL_BLOCKS:
                before = set(scope)
                exec(code(block, definitions_only=True), scope)
                kernels += [v for k, v in scope.items()       # (device functions are not)
                            if k not in before and hasattr(v, "py_func")
                            and not getattr(v, "targetoptions", {}).get("device")]
            if block in OFFLINE_BLOCKS:
                try:
                    exec(code(block), scope)
                except AssertionError as e:     # reported by its own test, after the checks below
                    error = error or e
    finally:
        offline.compile_kernel = real
    return calls, kernels, error


def test_offline_examples_run_as_written(compiled):
    error = compiled[2]
    if error is not None:
        where = [f for f in traceback.extract_tb(error.__traceback__)
                 if f.filename.endswith("README.md")][-1]
        pytest.fail(f"README.md:{where.lineno} failed: {where.line} {error}".rstrip())


def test_every_readme_kernel_is_compiled(compiled):
    calls, kernels, _ = compiled
    assert kernels, "no @cuda.jit kernel found in the README's kernel blocks"
    done = {id(k) for k, _, _ in calls}
    assert all(id(k) in done for k in kernels), \
        [k.py_func.__name__ for k in kernels if id(k) not in done]


def test_readme_sass_claims(compiled):
    shown, never = claimed_sass()
    assert "UTMALDG" in shown and never == "CALL", (shown, never)
    for kernel, signature, kb in compiled[0]:
        assert kb.arch == "sm_90a"
        assert kb.count(never) == 0, (kb, [ln for ln in kb.sass.splitlines() if never in ln])
        for prefix in shown:
            assert kb.has(prefix), (kb, prefix, sorted(set(kb.mnemonics())))
        # No local memory: no stack frame, no spills, no LDL/STL.
        assert kb.stack_bytes == 0 and kb.local_bytes == 0, kb
        assert kb.spill_stores == 0 and kb.spill_loads == 0, kb
        assert not kb.has("LDL") and not kb.has("STL"), kb


def test_add_one_moves_one_tile_each_way(compiled):
    # One TMA load, one TMA store per block; its mbarrier: init, arrive.expect_tx, try_wait.
    ((sig, kb),) = [(sig, kb) for k, sig, kb in compiled[0] if k.py_func.__name__ == "add_one"]
    assert sig == "void(uint64[::1])", sig              # a TensorMap parameter's type
    ops = kb.opcodes()
    assert ops["UTMALDG.2D"] == 1 and ops["UTMASTG.2D"] == 1, ops
    assert ops["SYNCS.EXCH.64"] == 1 and ops["SYNCS.ARRIVE.TRANS64"] == 1, ops
    assert kb.has("SYNCS.PHASECHK.TRANS64.TRYWAIT"), ops


def test_documented_attributes_resolve_after_import():
    # In a fresh interpreter: a test that imported numba_tma.offline would have bound it already.
    script = ("import re, numba_tma\n"
              "names = re.findall(r'``numba_tma\\.(\\w+)``', numba_tma.__doc__)\n"
              "assert {'offline', 'bench'} <= set(names), names\n"
              "missing = [n for n in names + numba_tma.__all__ if not hasattr(numba_tma, n)]\n"
              "assert not missing, missing\n"
              "assert set(numba_tma.__all__) <= set(dir(numba_tma))\n"
              "assert callable(numba_tma.offline.compile_kernel)\n"
              "assert callable(numba_tma.bench.do_bench)\n"
              "print('ok')\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
