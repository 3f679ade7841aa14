"""The GPU-test gate in conftest.py: skip only where there is no GPU; where nvidia-smi lists one
but CUDA cannot use it, stop loudly instead of skipping every GPU test."""

import subprocess

import pytest

from conftest import GpuUnusable, gpu_listed, skip_or_raise


def fake_run(stdout, returncode=0):
    def run(cmd, **kw):
        assert cmd[1:] == ["-L"] and kw["timeout"] > 0
        return subprocess.CompletedProcess(cmd, returncode, stdout=stdout, stderr="")
    return run


def test_gpu_listed_reads_nvidia_smi():
    assert not gpu_listed(which=lambda name: None)
    which = lambda name: "/usr/bin/nvidia-smi"           # noqa: E731
    assert gpu_listed(which, fake_run("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n"))
    assert not gpu_listed(which, fake_run("", returncode=9))
    assert not gpu_listed(which, fake_run("No devices were found\n"))

    def broken(cmd, **kw):
        raise OSError("exec format error")

    assert not gpu_listed(which, broken)


def test_skip_only_without_a_gpu():
    assert skip_or_raise(None, lambda: True) is None                  # it can run: no skip
    assert skip_or_raise("no CUDA driver", lambda: False) == "no CUDA driver"
    with pytest.raises(GpuUnusable, match="nvidia-smi lists a GPU, but CUDA is unusable"):
        skip_or_raise("CUDA is unusable here: CUDA_ERROR_NO_DEVICE", lambda: True)
