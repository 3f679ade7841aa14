"""The package's layout: the seed ladders in ``numba_tma.ladders``, the kernels the public API
runs in ``numba_tma.kernels`` (which never import a ladder), no alias of an old path, and numba
reached only through ``numba_tma._frontend`` (by the package, its tests and its benches)."""

import ast
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MOVED = ["transpose_classic", "transpose_tma", "warp_gemm", "simt_gemm", "add_one", "wgmma_probe"]


@pytest.mark.parametrize("name", MOVED)
def test_the_ladders_live_only_in_ladders(name):
    # The seed ladders moved out of kernels/ in 0.1.0; no alias keeps the old path alive.
    importlib.import_module(f"numba_tma.ladders.{name}")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"numba_tma.kernels.{name}")
    assert not (ROOT / "numba_tma" / "kernels" / f"{name}.py").exists()


def _module_name(path):
    """``numba_tma.x.y`` of a source file (a package's ``__init__.py`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _as_module(name):
    """The module ``name`` lies in: itself, or the module a ``from m import attr`` took it from."""
    while name.count("."):
        rel = ROOT.joinpath(*name.split("."))
        if rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file():
            return name
        name = name.rpartition(".")[0]
    return name


def _imports(path, text=None):
    """Every module (or name in one) a file imports (``text``: its source, if not the file's),
    lazy imports inside functions included, relative imports resolved against the file's own
    package at any depth. The file's own packages (``from . import x`` names the package) are
    left out: they are imported already."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    parts = name.split(".")
    own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")
                assert node.level <= len(base), f"{name}: {'.' * node.level}{mod} leaves the package"
                mod = ".".join(base[:len(base) - node.level + 1] + ([mod] if mod else []))
            if mod not in own:
                yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def test_imports_resolve_relative_to_the_importing_file():
    tree = ROOT / "numba_tma"
    assert set(_imports(tree / "launch" / "direct.py")) >= {
        "numba_tma.launch.clusters", "numba_tma.launch.clusters.launch_cluster",
        "numba_tma.offline", "numba_tma.kernel_cache"}
    found = set(_imports(tree / "tensormap" / "__init__.py"))
    assert "numba_tma.tensormap.device" in found and "numba_tma.tensormap" not in found
    assert "numba_tma.tensormap.cache.descriptor" in set(
        _imports(tree / "ladders" / "transpose_tma.py"))


# The layers of numba_tma, top (imported by the others) first: a module may import its own layer
# and the layers above it, never one below (docs/architecture.md). An entry names a module
# relative to numba_tma and everything under it; the longest entry that matches wins
# (``tensormap.device`` is a device module, the rest of ``tensormap`` host code); "" is the
# package's own ``__init__.py``, which binds the public names and so imports every layer.
LAYERS = [
    # the front end: the only modules that import numba (and llvmlite) or numba_cuda_mlir
    ["_frontend", "_frontend_numba", "_frontend_mlir", "_unroll"],
    # device declarations over _bridge (the intrinsics; swizzle's numpy model beside them)
    ["_bridge", "mbarrier", "fence", "tma", "bulk", "cluster", "smem", "gmem", "warp", "wgmma",
     "barrier", "intmath", "fastmath", "swizzle", "griddep", "tensormap.device", "_address_space"],
    # host code that needs no other host module
    ["operands", "_device", "kernel_cache", "offline"],
    ["tensormap"],                                  # tensor maps: rules, driver, tile, im2col
    ["launch"],                                     # shared memory, clusters, streams, direct
    ["tensormap.cache", "_arrays", "_calls"],       # over both: cached maps, per-call plumbing
    ["kernels"],                                    # what the public API runs (kernels.gemm too)
    ["ladders"],                                    # the seed ladders, on the kernels' helpers
    # the public API (*_kernels() lists ladders), and the epilogues it ships
    ["transpose_api", "matmul_api", "matmul_fp8", "matmul_epilogue", "epilogues"],
    ["precompile", "bench"],                        # over the public API
    [""],                                           # numba_tma/__init__.py
]
# Imports that reach a layer below on purpose: (importer, imported), named as in LAYERS.
UPWARD_EXCEPTIONS = {
    ("bulk", "operands"),   # bulk.check_operand, the host check of a bulk copy's operand
}


def _layer(name):
    """(index, entry) of module ``name`` in LAYERS; None for a module outside numba_tma."""
    if name != "numba_tma" and not name.startswith("numba_tma."):
        return None
    rel = name[len("numba_tma."):] if name != "numba_tma" else ""
    best = None
    for i, entries in enumerate(LAYERS):
        for entry in entries:
            if rel == entry or (entry and rel.startswith(entry + ".")):
                if best is None or len(entry) > len(best[1]):
                    best = (i, entry)
    assert best is not None, f"{name} is in no layer: add it to LAYERS"
    return best


def _upward_imports(path, text=None):
    """The imports of ``path`` (``text``: its source) that reach a layer below its own."""
    me = _layer(_module_name(path))
    bad = set()
    for name in _imports(path, text):
        them = _layer(_as_module(name))
        if them is not None and them[0] > me[0] and (me[1], them[1]) not in UPWARD_EXCEPTIONS:
            bad.add(f"{_module_name(path)} ({me[1] or 'numba_tma'}) imports {_as_module(name)} "
                    f"({them[1] or 'numba_tma'}), a layer below it")
    return sorted(bad)


def test_no_module_imports_a_layer_below_its_own():
    bad = []
    for path in sorted((ROOT / "numba_tma").rglob("*.py")):
        bad += _upward_imports(path)
    assert not bad, "\n".join(bad)


def test_the_layer_check_sees_an_upward_import():
    # The host launch code reaching into the kernels, even lazily, is caught.
    path = ROOT / "numba_tma" / "launch" / "direct.py"
    text = path.read_text() + "\n\ndef _late():\n    from ..kernels import _grid\n"
    assert _upward_imports(path) == []
    assert _upward_imports(path, text) == [
        "numba_tma.launch.direct (launch) imports numba_tma.kernels (kernels), a layer below it",
        "numba_tma.launch.direct (launch) imports numba_tma.kernels._grid (kernels), a layer "
        "below it"]


def test_the_host_layers_old_paths_are_gone():
    # 0.1.0 moved them into numba_tma.tensormap and numba_tma.launch; no alias keeps them, and
    # nothing imports them (an import would not fail where another checkout is installed
    # editable: its finder still serves numba_tma's top-level modules).
    old = {f"numba_tma.{name}" for name in ("tensormap_rules", "tensormap_driver",
                                            "tensormap_device", "tensormap_im2col",
                                            "kernels._descriptors", "kernels._configure")}
    for name in old:
        path = ROOT.joinpath(*name.split("."))
        assert not path.with_suffix(".py").exists() and not path.exists(), name
    for tree in ("numba_tma", "tests", "benches"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            assert not set(_imports(path)) & old, path


def test_shipped_kernels_do_not_import_ladders():
    shims = {f"{name}.py" for name in MOVED}
    for path in sorted((ROOT / "numba_tma" / "kernels").rglob("*.py")):
        if path.name in shims or path.name == "__init__.py":
            continue
        bad = [m for m in _imports(path) if "ladders" in m or m.split(".")[-1] in MOVED]
        assert not bad, f"{path.name} imports {bad}: shipped kernels must not lean on a ladder"


@pytest.mark.parametrize("name", MOVED)
def test_ladder_docstrings_name_their_seed(name):
    doc = importlib.import_module(f"numba_tma.ladders.{name}").__doc__
    if name == "wgmma_probe":
        assert "No seed" in doc
    else:
        m = re.search(r"Seed (\d{3}) \(``(\d{3})_[0-9a-f]{16}\.txt``", doc)
        assert m and m.group(1) == m.group(2), doc[:400]


def test_pyproject_ships_every_package():
    text = (ROOT / "pyproject.toml").read_text()
    for pkg in ROOT.joinpath("numba_tma").rglob("__init__.py"):
        name = ".".join(pkg.parent.relative_to(ROOT).parts)
        assert f'"{name}"' in text, name


def test_transpose_kernels_are_labelled():
    from numba_tma.transpose_api import transpose_kernels

    kernels = transpose_kernels()
    shipped = {n for n, fn in kernels.items() if fn.kind == "shipped"}
    assert shipped == {"v6_packed", "v6_persistent", "v7_vec16", "v8_sector"}
    for name, fn in kernels.items():
        assert fn.__name__ == name and fn.__doc__
        assert fn.module.startswith("numba_tma.kernels." if name in shipped
                                    else "numba_tma.ladders."), (name, fn.module)
    assert {n for n in kernels if kernels[n].kind == "ladder"} == {
        "v1_naive", "v2_smem", "v3_rotate", "v3_padded", "v4_double_buffer", "v5_64x32",
        "tma_naive", "tma_swizzle128", "tma_batched", "tma_pipelined"}


def test_matmul_kernels_are_labelled():
    mm = importlib.import_module("numba_tma.matmul_api")

    kernels = mm.matmul_kernels()
    assert list(kernels) == ["wgmma_tile_per_block", "wgmma_persistent", "wgmma_persistent_c2",
                             "wgmma_persistent_m256", "mma_sync", "wgmma_stream_k",
                             "wgmma_pingpong", "simt_fp32", "warp16_smem", "warp16_padded",
                             "warp16_ldmatrix", "warp16_swizzle"]
    for name, fn in kernels.items():
        assert fn.__name__ == name and fn.__doc__, name
        want = "shipped" if fn.module.startswith("numba_tma.kernels.") else "ladder"
        assert fn.kind == want and fn.module.split(".")[1] in ("kernels", "ladders"), name
    assert kernels["wgmma_persistent"].module == "numba_tma.kernels.gemm.config"
    assert kernels["mma_sync"].module == "numba_tma.kernels.gemm.mma_sync"
    # (stream-K ships: fp8 block scales and decode-like products choose it)
    assert kernels["wgmma_stream_k"].module == "numba_tma.kernels.gemm.stream_k"
    assert kernels["wgmma_stream_k"].kind == "shipped"
    assert kernels["wgmma_pingpong"].module == "numba_tma.ladders.gemm_pingpong"
    assert {kernels[n].kind for n in ("simt_fp32", "warp16_swizzle",
                                      "wgmma_pingpong")} == {"ladder"}


def test_public_functions_and_their_modules_both_reachable():
    import numba_tma
    import numba_tma.matmul_api
    import numba_tma.transpose_api

    assert callable(numba_tma.transpose) and callable(numba_tma.matmul)
    assert numba_tma.transpose is numba_tma.transpose_api.transpose
    assert numba_tma.matmul is numba_tma.matmul_api.matmul
    # The functions are the only public names; the modules are matmul_api and transpose_api.
    for old in ("numba_tma.transpose", "numba_tma.matmul"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_only_the_front_end_module_imports_numba():
    # numba_tma reaches numba (public API, extension API, internals, llvmlite IR) only through
    # numba_tma._frontend, which takes each front end's forms from a _frontend_* module.
    bad = []
    for path in sorted((ROOT / "numba_tma").rglob("*.py")):
        if path.parent.name == "numba_tma" and path.name.startswith("_frontend"):
            continue
        found = {m.split(".")[0] for m in _imports(path)} & FRONT_END_PACKAGES
        if found:
            bad.append(f"{_module_name(path)} imports {sorted(found)}")
    assert not bad, "\n".join(bad)


#: The front ends' own packages (and numba-cuda's IR library): what only numba_tma._frontend
#: imports.
FRONT_END_PACKAGES = {"numba", "llvmlite", "numba_cuda_mlir"}
#: An import statement's line, also in the source of a script a test or bench runs.
_IMPORT_LINE = re.compile(r"^\s*(?:from|import)\s+(numba_cuda_mlir|numba|llvmlite)(?=[.\s,]|$)",
                          re.M)


def _front_end_imports(path, text=None):
    """The front-end packages a test or bench (``text``: its source) imports, lazy imports and
    the scripts it runs in child processes (import lines in its strings) included."""
    text = path.read_text() if text is None else text
    found = {m.split(".")[0] for m in _imports(path, text)} & FRONT_END_PACKAGES
    return sorted(found | set(_IMPORT_LINE.findall(text)))


def test_tests_and_benches_reach_numba_through_the_front_end():
    # A test or bench that imported numba itself would fail to import under numba-cuda-mlir (no
    # numba there) and, where both are installed, compile with the other front end than the
    # package's: they take cuda, types, errors and the internals from numba_tma._frontend.
    bad = []
    for tree in ("tests", "benches"):
        for path in sorted((ROOT / tree).rglob("*.py")):
            found = _front_end_imports(path)
            if found:
                bad.append(f"{path.relative_to(ROOT)} imports {found}")
    assert not bad, "\n".join(bad)


def test_the_front_end_check_sees_direct_imports():
    path = ROOT / "tests" / "test_offline.py"
    text = path.read_text()
    assert _front_end_imports(path, text) == []
    assert _front_end_imports(path, text + "\n\ndef _late():\n    import numba.cuda.compiler\n"
                              ) == ["numba"]
    assert _front_end_imports(path, text + '\nSCRIPT = """\nfrom llvmlite import ir\n"""\n'
                              ) == ["llvmlite"]
    assert _front_end_imports(path, text + "\nfrom numba_cuda_mlir import cuda\n") == [
        "numba_cuda_mlir"]
