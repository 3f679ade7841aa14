"""``pytest --procs N`` (tests/parallel_run.py), run on small suites of its own in a temporary
directory: every process runs files, the summary and exit status cover the workers' tests, and a
worker that dies fails the tests it never finished."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFTEST = f"""
import sys
sys.path.insert(0, {HERE!r})
import parallel_run

def pytest_addoption(parser):
    parallel_run.add_option(parser)

def pytest_configure(config):
    config.pluginmanager.register(parallel_run.Parallel(config), "numba_tma_parallel")
"""

# A worker is started as `python -c ...`; the main process is the harness's pytest.
IS_WORKER = "import sys\nWORKER = sys.argv[0] == '-c'\n"

# test_a is claimed by the main process first (workers start after it has begun) and waits
# until a worker has run a test, so the workers' share is never empty.
WAIT_FOR_A_WORKER = IS_WORKER + """import os, time
def wait_for(name):
    for _ in range(600):
        if os.path.exists(name):
            return
        time.sleep(0.05)
    raise AssertionError("no worker ran a test")
"""


def _suite(tmp_path, files):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, text in files.items():
        (tmp_path / name).write_text(text)


def _pytest(tmp_path, *args):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "--procs", "2", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_workers_reports_count_in_the_summary(tmp_path):
    _suite(tmp_path, {
        "test_a.py": WAIT_FOR_A_WORKER + """import pytest
def test_waits_for_a_worker():
    assert not WORKER
    wait_for("worker-ran")
def test_fails_here():
    assert 1 == 2, "one is not two"
""",
        "test_b.py": IS_WORKER + """import os, pytest
def test_b_marks_a_worker():
    if WORKER:
        open("worker-ran", "w").close()
def test_b_fails():
    assert WORKER and False, "failed in a worker"
@pytest.mark.skip(reason="skipped in its process")
def test_b_skips():
    pass
def test_b_environment_is_clean():
    assert "NUMBA_TMA_TEST_WORKER_DIR" not in os.environ
""",
    })
    rc, out = _pytest(tmp_path)
    assert rc == 1, out
    assert "2 failed, 3 passed, 1 skipped" in out, out
    assert "failed in a worker" in out and "one is not two" in out, out
    assert "SKIPPED [1] test_b.py" in out and "skipped in its process" in out, out


def test_a_worker_that_dies_fails_what_it_claimed(tmp_path):
    _suite(tmp_path, {
        "test_a.py": WAIT_FOR_A_WORKER + """
def test_waits_for_a_worker():
    wait_for("worker-dies")
""",
        "test_b.py": IS_WORKER + """import os
def test_b_dies_in_a_worker():
    if WORKER:
        open("worker-dies", "w").close()
        os._exit(3)
def test_b_never_runs():
    pass
""",
    })
    rc, out = _pytest(tmp_path)
    assert rc == 1, out
    assert "2 failed, 1 passed" in out, out
    assert "never reported its end" in out and "exit statuses of the workers: 3" in out, out


def test_one_process_is_pytest_itself(tmp_path):
    _suite(tmp_path, {"test_a.py": "def test_a():\n    pass\n",
                      "test_b.py": "def test_b():\n    pass\n"})
    rc, out = _pytest(tmp_path, "--procs", "1")
    assert rc == 0 and "2 passed" in out, out
    rc, out = _pytest(tmp_path, "--procs", "0")
    assert rc != 0 and "--procs must be a positive integer or 'auto'" in out, out
