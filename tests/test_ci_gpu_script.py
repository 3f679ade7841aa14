"""The GPU script (.ci/gpu) cannot pass on nothing, checked without a GPU.

The script runs in a scratch copy of the repository layout (.ci/gpu and .ci/chunks.py copied as
they are, a fake tests/gpu tree of plain pytest files, a dummy wheel) with stubs first on PATH:
``python3`` (pip install and the version probe answered, everything else run by this
interpreter), ``nvidia-smi`` and ``compute-sanitizer`` (runs its command, then prints a memcheck
or racecheck summary with $STUB_SANITIZER_ERRORS errors and, unless $STUB_SANITIZER_EXIT0 is set,
exits with --error-exitcode when there are any). Each case is one run of the script (a few
seconds: a collection and a pytest process per chunk):

* every test of a file skipped -> non-zero exit and a FAIL line naming the file;
* a chunk whose pytest fails (the file's other chunk passing) -> non-zero, and failures.txt
  holds what failed (FAILED and assertion lines);
* a sanitizer summary with errors -> non-zero, also when the tool's exit status says 0;
* the CPU suite failing -> non-zero;
* a chunk still running at DEADLINE -> stopped, non-zero, and the other files' summaries and
  failures.txt written before the run ends (an outer time limit no longer loses them);
* a clean run (tests, memcheck and racecheck; and the tests with the CPU suite) -> exit 0;
* on a host with several GPUs the chunks take them in turn, the multi-GPU files see them all.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, ".ci", "gpu")


def _bash_fits():
    """Whether bash >= 4.3 (associative arrays, ``wait -n``) and coreutils' timeout are here."""
    if os.name != "posix" or shutil.which("bash") is None or shutil.which("timeout") is None:
        return False
    probe = 'v=("${BASH_VERSINFO[@]}"); (( v[0] > 4 || (v[0] == 4 && v[1] >= 3) ))'
    return subprocess.run(["bash", "-c", probe]).returncode == 0


pytestmark = pytest.mark.skipif(not _bash_fits(),
                                reason=".ci/gpu needs bash >= 4.3 and coreutils' timeout")

PYTHON3 = f"""#!/usr/bin/env bash
# python3 stub: no wheel install, a canned version line; anything else runs the real interpreter.
if [[ "$1" == -m && "$2" == pip ]]; then exit 0; fi
if [[ "$1" == -c ]]; then echo "numba stub, numba-cuda stub, numpy stub"; exit 0; fi
unset PYTHONPATH
exec {sys.executable} "$@"
"""

NVIDIA_SMI = """#!/usr/bin/env bash
# nvidia-smi stub: -L lists $STUB_GPUS GPUs (none unless set), anything else one query line.
if [[ "$1" == -L ]]; then
  for (( i = 0; i < ${STUB_GPUS:-0}; i++ )); do echo "GPU $i: NVIDIA H100 80GB HBM3 (stub)"; done
  exit 0
fi
echo "NVIDIA H100 80GB HBM3 (stub), 555.42, 81559 MiB"
"""

SANITIZER = """#!/usr/bin/env bash
# compute-sanitizer stub: --tool T [--error-exitcode N] [--print-limit K] COMMAND...
tool=memcheck code=0
while [[ "$1" == --* ]]; do
  case "$1" in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode) code=$2; shift 2 ;;
    *) shift 2 ;;
  esac
done
"$@"; rc=$?
n=${STUB_SANITIZER_ERRORS:-0}
if [[ $tool == racecheck ]]; then
  echo "========= RACECHECK SUMMARY: $n hazards displayed ($n errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: $n errors"
fi
if (( n > 0 )) && [[ -z "${STUB_SANITIZER_EXIT0:-}" ]] && (( code != 0 )); then exit "$code"; fi
exit $rc
"""

PASSING = """
import pytest

@pytest.mark.parametrize("x", [1, 2, 3])
def test_ok(x):
    assert x > 0
"""

ALL_SKIPPED = """
import pytest

@pytest.mark.parametrize("x", [1, 2, 3])
def test_needs_a_gpu(x):
    pytest.skip("no GPU (stub)")
"""

# With CHUNK=2 the first chunk (two ids) passes and the second (the failing test) fails.
LAST_FAILS = """
def test_a():
    pass

def test_b():
    pass

def test_c():
    assert False, "wrong answer"
"""


def _tree(tmp_path, gpu_files, cpu_files=None):
    """A scratch repository: .ci/gpu and .ci/chunks.py as committed, tests/gpu/<stem>.py for each
    of ``gpu_files`` ({stem: source}), tests/<stem>.py for ``cpu_files``, stubs in bin/."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / ".ci" / "gpu")
    shutil.copy(os.path.join(ROOT, ".ci", "chunks.py"), repo / ".ci" / "chunks.py")
    (repo / ".whl").mkdir()
    (repo / ".whl" / "numba_tma-0-py3-none-any.whl").write_bytes(b"")
    (repo / "pytest.ini").write_text("[pytest]\n")   # rootdir: the repo (pyproject.toml's role)
    gpu = repo / "tests" / "gpu"
    gpu.mkdir(parents=True)
    for stem, source in gpu_files.items():
        (gpu / f"{stem}.py").write_text(textwrap.dedent(source))
    for stem, source in (cpu_files or {}).items():
        (repo / "tests" / f"{stem}.py").write_text(textwrap.dedent(source))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("python3", PYTHON3), ("nvidia-smi", NVIDIA_SMI),
                       ("compute-sanitizer", SANITIZER)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    return repo, bin_


SLOW = """
import time

def test_slow():
    time.sleep(100)
"""


def _run(tmp_path, gpu_files, args, cpu_files=None, chunk=60, **env):
    repo, bin_ = _tree(tmp_path, gpu_files, cpu_files)
    out = tmp_path / "logs"
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTEST_", "NUMBA_TMA_", "STUB_"))}
    environ.update(PATH=f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}", OUT=str(out),
                   JOBS="4", CHUNK=str(chunk), **env)
    done = subprocess.run(["bash", ".ci/gpu", *args], cwd=repo, env=environ,
                          capture_output=True, text=True, timeout=120)
    failures = (out / "failures.txt").read_text() if (out / "failures.txt").exists() else ""
    return done, failures, out


def _explain(done):
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


def test_a_file_whose_tests_all_skip_fails_the_run(tmp_path):
    done, failures, _ = _run(tmp_path, {"test_tma": PASSING, "test_skipall": ALL_SKIPPED},
                             ["tests", "test_tma", "test_skipall"])
    assert done.returncode != 0, _explain(done)
    assert "FAIL: test_skipall: no test passed" in done.stdout, _explain(done)
    assert failures.splitlines() == ["FAIL: test_skipall: no test passed"], failures


def test_a_failing_chunk_fails_the_run(tmp_path):
    done, failures, out = _run(tmp_path, {"test_lastfails": LAST_FAILS},
                               ["tests", "test_lastfails"], chunk=2)
    assert done.returncode != 0, _explain(done)
    assert "FAIL: test_lastfails: exit status 1" in failures, _explain(done)
    # ... with what failed, the assertion's message included (a seeded test names its seed)
    assert "test_lastfails chunk 1: FAILED" in failures, failures
    assert any("test_lastfails chunk 1: E" in line and "wrong answer" in line
               for line in failures.splitlines()), failures
    # Two chunks of at most two ids; the first passed, the second failed.
    assert (out / "test_lastfails.0.rc").read_text().strip() == "0"
    assert (out / "test_lastfails.1.rc").read_text().strip() == "1"
    summary = (out / "pytest-summary.txt").read_text()
    assert "2 passed" in summary and "1 failed" in summary, summary


@pytest.mark.parametrize("exit0", [False, True], ids=["tool_exit_99", "tool_exit_0"])
def test_a_sanitizer_summary_with_errors_fails_the_run(tmp_path, exit0):
    env = {"STUB_SANITIZER_ERRORS": "3"}
    if exit0:
        env["STUB_SANITIZER_EXIT0"] = "1"
    done, failures, out = _run(tmp_path, {"test_tma": PASSING}, ["sanitize", "test_tma"], **env)
    assert done.returncode != 0, _explain(done)
    assert "FAIL: memcheck test_tma: no clean memcheck summary" in failures, _explain(done)
    assert ("FAIL: memcheck test_tma: exit status 99" in failures) == (not exit0), failures
    assert "ERROR SUMMARY: 3 errors" in (out / "sanitizer-summary.txt").read_text()


def test_a_failing_cpu_suite_fails_the_run(tmp_path):
    done, failures, _ = _run(tmp_path, {"test_tma": PASSING}, ["tests"],
                             cpu_files={"test_cpu": "def test_cpu():\n    assert False\n"})
    assert done.returncode != 0, _explain(done)
    assert "FAIL: cpu suite: pytest exit status 1" in failures, _explain(done)
    assert "cpu test_cpu: FAILED" in failures, failures


def test_a_clean_run_exits_0(tmp_path):
    # test_add_one is on both sanitizer lists: tests, memcheck and racecheck all run.
    done, failures, out = _run(tmp_path, {"test_tma": PASSING, "test_add_one": PASSING},
                               ["all", "test_tma", "test_add_one"])
    assert done.returncode == 0, _explain(done)
    assert failures == "", failures
    tests = (out / "pytest-summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in tests] == ["test_add_one", "test_tma"], tests
    assert all(": 3 passed in " in line for line in tests), tests
    sanitized = (out / "sanitizer-summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in sanitized] == \
        ["memcheck test_tma", "memcheck test_add_one", "racecheck test_add_one"], sanitized
    assert all("SUMMARY: 0" in line for line in sanitized), sanitized


def test_a_clean_run_with_the_cpu_suite_exits_0(tmp_path):
    done, failures, out = _run(tmp_path, {"test_tma": PASSING}, ["tests"],
                               cpu_files={"test_cpu": "def test_cpu():\n    pass\n"})
    assert done.returncode == 0, _explain(done)
    assert failures == ""
    assert "cpu test_cpu: 1 passed" in (out / "pytest-summary.txt").read_text()


def test_a_deadline_stops_the_run_and_keeps_the_summaries(tmp_path):
    import time
    t0 = time.monotonic()
    done, failures, out = _run(tmp_path, {"test_tma": PASSING, "test_slow": SLOW},
                               ["tests", "test_tma", "test_slow"], DEADLINE="8")
    assert time.monotonic() - t0 < 60, _explain(done)        # not the slow test's 100 s
    assert done.returncode != 0, _explain(done)
    assert "FAIL: test_slow: chunk 0 stopped by its time limit" in failures, _explain(done)
    assert "test_tma: 3 passed" in (out / "pytest-summary.txt").read_text()


# Each test records the CUDA_VISIBLE_DEVICES its process saw.
RECORDS_GPU = """
import os

import pytest

@pytest.mark.parametrize("x", range(4))
def test_gpu_seen(x):
    stem = os.path.splitext(os.path.basename(__file__))[0]
    with open(os.path.join(os.environ["OUT"], f"seen-{stem}-{x}"), "w") as f:
        f.write(os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
"""


@pytest.mark.parametrize("what", ["tests", "sanitize"])
def test_chunks_take_the_gpus_in_turn(tmp_path, what):
    done, failures, out = _run(tmp_path, {"test_tma": RECORDS_GPU, "test_multi_gpu": RECORDS_GPU},
                               [what, "test_tma", "test_multi_gpu"], chunk=1, STUB_GPUS="3")
    assert done.returncode == 0, _explain(done)
    seen = {p.name: p.read_text() for p in out.glob("seen-*")}
    assert sorted(seen[f"seen-test_tma-{x}"] for x in range(4)) == ["0", "0", "1", "2"], seen
    if what == "tests":     # test_multi_gpu is on no sanitizer list
        assert {seen[f"seen-test_multi_gpu-{x}"] for x in range(4)} == {"all"}, seen
