"""The classic ladder's module (numba_tma.ladders.transpose_classic, also imported as
numba_tma.kernels.transpose_classic) lost the v6 configuration and the launch helpers to
numba_tma.kernels.transpose_v6 and numba_tma.kernels._grid. The old names are not re-exported;
asking for one (``module.name`` or ``from module import name``) raises an ImportError naming its
new module."""

import importlib
import re

import pytest

import numba_tma.kernels.transpose_classic as old_path
from numba_tma.ladders import transpose_classic as ladder

MOVED = {
    "v6_config": ("numba_tma.kernels.transpose_v6", "v6_config"),
    "V6_GROUP": ("numba_tma.kernels.transpose_v6", "V6_GROUP"),
    "V6_THREADS": ("numba_tma.kernels.transpose_v6", "V6_THREADS"),
    "V6_BLOCKS_PER_SM": ("numba_tma.kernels.transpose_v6", "V6_BLOCKS_PER_SM"),
    "V6_PACKED_MIN_BLOCKS": ("numba_tma.kernels.transpose_v6", "V6_PACKED_MIN_BLOCKS"),
    "MAX_GRID_YZ": ("numba_tma.kernels._grid", "MAX_GRID_YZ"),
    "_check": ("numba_tma.kernels._grid", "check_pair"),
    "_grid3": ("numba_tma.kernels._grid", "grid3"),
    "_cdiv": ("numba_tma.kernels._grid", "cdiv"),
    "_device_pointer": ("numba_tma.kernels._grid", "device_pointer"),
}
PATHS = ["numba_tma.ladders.transpose_classic", "numba_tma.kernels.transpose_classic"]


def test_old_path_is_the_ladder_module():
    assert old_path is ladder


@pytest.mark.parametrize("name", MOVED)
def test_the_new_home_has_the_name(name):
    where, new = MOVED[name]
    assert hasattr(importlib.import_module(where), new)
    assert name not in vars(ladder)                  # not re-exported


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", MOVED)
def test_from_import_names_the_new_module(name, path):
    where, new = MOVED[name]
    with pytest.raises(ImportError, match=re.escape(
            f"{name} moved out of numba_tma.ladders.transpose_classic")) as info:
        exec(f"from {path} import {name}", {})
    assert f"from {where} import {new}" in str(info.value)


@pytest.mark.parametrize("name", MOVED)
def test_attribute_access_names_the_new_module(name):
    where, new = MOVED[name]
    with pytest.raises(ImportError, match=re.escape(f"from {where} import {new}")):
        getattr(old_path, name)


def test_a_moved_name_beside_a_present_one_still_fails():
    with pytest.raises(ImportError, match="V6_GROUP moved out"):
        exec("from numba_tma.ladders.transpose_classic import LADDER, V6_GROUP", {})


def test_other_names_fail_as_usual():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        ladder.no_such_name                          # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec("from numba_tma.ladders.transpose_classic import no_such_name", {})
    # What stays is there: the ladder and its launchers.
    from numba_tma.ladders.transpose_classic import BEST, LADDER, v1_naive  # noqa: F401
