"""``pytest --procs N``: the collected test files run in N processes (``auto``: one per core).

This process and N - 1 workers, started with the same arguments, collect the same tests; each
then claims whole files from a shared directory (heaviest known files first) and runs those it
claimed, so every process stays busy until the files run out without a fixed schedule. The
suite is mostly single-threaded compiling, which a second core halves. Workers write each
test's report with pytest's own serialisation (as pytest-xdist does) and this process replays
them, so the progress, the ``-r`` summary and the exit status cover every test; a worker that
dies fails the tests it had claimed and not finished, with the tail of its log.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from _pytest.reports import TestReport

WORKER_DIR = "NUMBA_TMA_TEST_WORKER_DIR"

#: Files that take longest on the CI machine: claimed first, so none of them starts last.
HEAVY = ("test_benches", "test_wait_timeout_offline", "test_bulk_sass", "test_wgmma_offline",
         "test_ci_gpu_script", "test_transpose_classic_sim", "test_transpose_v6_sim",
         "test_seed_gemm_sass", "test_simt_gemm_sim", "test_compile_time", "test_gemm_sass")

# A worker runs pytest without this checkout's directory first on sys.path (as the `pytest`
# script does, and as the installed-package check in conftest.py requires).
_WORKER_MAIN = "import sys; sys.path.pop(0); import pytest; sys.exit(pytest.main())"


def add_option(parser):
    parser.addoption("--procs", default="1", metavar="N",
                     help="run the test files in N processes ('auto': one per CPU core)")


def procs(config):
    value = config.getoption("procs")
    if value == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        raise pytest.UsageError(f"--procs must be a positive integer or 'auto', got {value!r}")
    if n < 1:
        raise pytest.UsageError(f"--procs must be a positive integer or 'auto', got {value!r}")
    return n


def _files(items):
    """[(path, [items])] in collection order, the HEAVY files first."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {name: i for i, name in enumerate(HEAVY)}

    def order(path):
        stem = os.path.splitext(os.path.basename(path))[0]
        return rank.get(stem, len(rank))
    return sorted(files.items(), key=lambda kv: order(kv[0]))


def _claim_file(directory, path):
    return os.path.join(directory, "claim-" + hashlib.sha1(path.encode()).hexdigest()[:16])


def _claim(directory, path, who):
    """Whether ``who`` is the first to claim test file ``path``."""
    name = _claim_file(directory, path)
    try:
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(who)
    return True


class Parallel:
    """The plugin: the runtest loop of this process or of a worker, and a worker's reports."""

    def __init__(self, config):
        self.config = config
        # (taken out of the environment: a test that starts pytest itself starts no worker)
        self.directory = os.environ.pop(WORKER_DIR, None)
        self.who = f"worker {os.getpid()}" if self.directory else "main"
        self.reports = None
        if self.directory:
            self.reports = open(os.path.join(self.directory, f"reports-{os.getpid()}.jsonl"),
                                "a", buffering=1)

    # -- a worker sends its reports ---------------------------------------------------------

    def pytest_runtest_logreport(self, report):
        if self.reports is not None:
            self._send(report)

    def pytest_collectreport(self, report):
        if self.reports is not None and report.failed:
            self._send(report)

    def _send(self, report):
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        self.reports.write(json.dumps(data) + "\n")

    # -- the loop -----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        n = procs(self.config)
        files = _files(session.items)
        if self.directory is None and (n < 2 or len(files) < 2
                                       or self.config.option.collectonly):
            return None                         # pytest's own loop
        if session.testsfailed and not self.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        if self.directory is not None:
            self._run_claimed(session, files)
            return True
        self.directory = tempfile.mkdtemp(prefix="numba_tma-procs-")
        workers = []
        try:
            workers = [self._start_worker(i) for i in range(1, n)]
            replay = _Replay(self.config, self.directory)
            self._run_claimed(session, files, between=replay.poll)
            while any(w.poll() is None for w, _ in workers):
                replay.poll()
                time.sleep(0.2)
            replay.poll()
            replay.fail_unfinished(files, workers)
        finally:
            for w, log in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
                log.close()
            shutil.rmtree(self.directory, ignore_errors=True)
        return True

    def _start_worker(self, i):
        log = open(os.path.join(self.directory, f"worker-{i}.log"), "w")
        env = dict(os.environ, **{WORKER_DIR: self.directory})
        args = list(self.config.invocation_params.args) + ["-p", "no:cacheprovider"]
        proc = subprocess.Popen([sys.executable, "-c", _WORKER_MAIN, *args], env=env,
                                stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(self.config.invocation_params.dir))
        return proc, log

    def _run_claimed(self, session, files, between=lambda: None):
        """Run every file this process claims. A file's last test has no nextitem (its
        fixtures, session-scoped ones too, tear down): the next file is claimed only when
        this process is free to run it."""
        for path, items in files:
            between()
            if not _claim(self.directory, path, self.who):
                continue
            for item, nextitem in zip(items, items[1:] + [None]):
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldfail:
                    raise session.Failed(session.shouldfail)
                if session.shouldstop:
                    raise session.Interrupted(session.shouldstop)


class _Replay:
    """The main process's side: the workers' reports, logged here as they arrive."""

    def __init__(self, config, directory):
        self.config = config
        self.directory = directory
        self.offsets = {}
        self.finished = set()

    def poll(self):
        for name in sorted(os.listdir(self.directory)):
            if name.startswith("reports-"):
                self._read(os.path.join(self.directory, name))

    def _read(self, path):
        with open(path) as f:
            f.seek(self.offsets.get(path, 0))
            while True:
                line = f.readline()
                if not line.endswith("\n"):        # a line still being written: next time
                    break
                self.offsets[path] = f.tell()
                self._log(json.loads(line))

    def _log(self, data):
        # JSON turned the tuples pytest's summaries unpack and check into lists.
        for field in ("location", "longrepr"):
            if isinstance(data.get(field), list):
                data[field] = tuple(data[field])
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        if isinstance(report, TestReport):
            if report.when == "teardown":
                self.finished.add(report.nodeid)
            self.config.hook.pytest_runtest_logreport(report=report)
        else:
            self.config.hook.pytest_collectreport(report=report)

    def fail_unfinished(self, files, workers):
        """A failed report for each test a worker claimed and never finished (it crashed)."""
        codes = ", ".join(str(w.returncode) for w, _ in workers)
        for path, items in files:
            with open(_claim_file(self.directory, path)) as f:
                who = f.read()
            if who == "main":
                continue
            for item in items:
                if item.nodeid in self.finished:
                    continue
                why = (f"{who} (exit statuses of the workers: {codes}) claimed this test and "
                       f"never reported its end; the tail of the workers' logs:\n"
                       f"{self._log_tails()}")
                self.config.hook.pytest_runtest_logreport(report=TestReport(
                    item.nodeid, item.location, {}, "failed", why, "call"))

    def _log_tails(self):
        tails = []
        for name in sorted(os.listdir(self.directory)):
            if name.startswith("worker-"):
                with open(os.path.join(self.directory, name)) as f:
                    tails.append(f"--- {name}\n" + "".join(f.readlines()[-30:]))
        return "\n".join(tails)
