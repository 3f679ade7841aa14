"""The package's layout: the seed ladders in ``numba_tma.ladders``, the kernels the public API
runs in ``numba_tma.kernels`` (which never import a ladder), and no alias of an old path."""

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


def _imports(path):
    """Every module a file imports (relative imports resolved against numba_tma.kernels)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "numba_tma.kernels" if node.level == 1 else "numba_tma" if node.level == 2 else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def test_shipped_kernels_do_not_import_ladders():
    shims = {f"{name}.py" for name in MOVED}
    for path in sorted((ROOT / "numba_tma" / "kernels").glob("*.py")):
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
    assert kernels["wgmma_stream_k"].module == "numba_tma.ladders.gemm_stream_k"
    assert kernels["wgmma_pingpong"].module == "numba_tma.ladders.gemm_pingpong"
    assert {kernels[n].kind for n in ("simt_fp32", "warp16_swizzle", "wgmma_stream_k",
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
