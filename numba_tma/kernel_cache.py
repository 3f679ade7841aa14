"""An on-disk cache of linked kernels: numba-cuda's ``cache=True`` refuses kernels that link
external files (every kernel calling a ``ptx/*.cu`` intrinsic), so without this each process
pays numba's typing, NVVM and the LTO link again on its first call of each kernel (what that
costs, cold and cached: ``docs/host.md``, ``docs/compile.md``).

An entry holds the linked cubin of one kernel for one signature and compute capability, keyed by
everything that changes the binary:

- the numba_tma sources (every ``numba_tma/**/*.py`` and ``ptx/*.cu[h]``), the front end in use
  and the versions of numba, numba-cuda, numba-cuda-mlir, numba_tma, cuda-bindings and the
  NVIDIA compiler wheels;
- the kernel's Python code: its bytecode and constants, the values its closure captured and the
  simple module globals it names (recursively through the device functions it calls), and, for
  kernels outside numba_tma, the whole source file that defines it;
- the ``@cuda.jit`` options (``link=``, ``launch_bounds``, ``max_registers``, ``fastmath``, ...),
  the argument types, the compute capability, every ``NUMBA_TMA_*`` environment variable (but
  the host-side switches ``_HOST_ONLY_ENV``), and
  the caller's own ``key``;
- and, checked on every load, the contents of every file the link read (a ``.cu`` file declared
  with ``declare_device(link=...)`` anywhere): an edited file means a rebuild.

Where: ``$NUMBA_CACHE_DIR/numba_tma`` when ``NUMBA_CACHE_DIR`` is set, else the platform's user
cache directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
``%LOCALAPPDATA%`` on Windows). ``NUMBA_TMA_DISABLE_CACHE=1`` turns it off; :func:`clear` empties
it. Every edit of numba_tma's sources or upgrade makes new keys, so the directory keeps at most
``NUMBA_TMA_CACHE_MAX_ENTRIES`` entries (default 2000; a store past it drops the least recently
used tenth: a load refreshes an entry's time).

Safety: an entry is written to a temporary file and renamed into place. Processes that miss the
same entry at once build it once: :func:`building` holds a lock file beside the entry while one
builds, and the others wait for it (at most ``NUMBA_TMA_CACHE_LOCK_WAIT`` seconds, default 300;
past that they build too, and the last rename wins). A load checks a magic word, the
full key text, a SHA-256 of the cubin and the link files' hashes; anything that fails is
rebuilt and overwritten, never loaded.

The library's kernels go through it by way of :class:`numba_tma.launch.DirectKernel`; a user's
``@cuda.jit`` kernel opts in the same way::

    from numba_tma.launch import DirectKernel
    k = DirectKernel(my_kernel, "void(float32[:, ::1], float32[:, ::1])", key="v2")
    k[grid, block, stream](x, y)       # compiled once per machine, then loaded from disk
"""

import contextlib
import functools
import hashlib
import inspect
import json
import os
import sys
import tempfile
import time
import types as pytypes

__all__ = ["building", "cache_dir", "enabled", "kernel_key", "load", "store", "package_fingerprint",
           "clear", "lock_wait", "max_entries"]

MAGIC = b"NBTMA\x00c1"
_SUFFIX = ".nbtma"
_LOCK_SUFFIX = ".lock"


#: NUMBA_TMA_* variables that change no kernel's code: left out of the keys.
_HOST_ONLY_ENV = ("NUMBA_TMA_DISABLE_CACHE", "NUMBA_TMA_DEPENDENT_LAUNCH",
                  "NUMBA_TMA_CACHE_MAX_ENTRIES", "NUMBA_TMA_CACHE_LOCK_WAIT")


def enabled():
    """Whether kernels are read from and written to disk (``NUMBA_TMA_DISABLE_CACHE`` unset/0)."""
    return os.environ.get("NUMBA_TMA_DISABLE_CACHE", "0") in ("", "0")


def cache_dir():
    """The directory entries live in (created on first store)."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return os.path.join(root, "numba_tma")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, "numba_tma", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numba_tma")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "numba_tma")


def max_entries():
    """How many entries the directory keeps (``NUMBA_TMA_CACHE_MAX_ENTRIES``, default 2000)."""
    try:
        return max(1, int(os.environ.get("NUMBA_TMA_CACHE_MAX_ENTRIES", "2000")))
    except ValueError:
        return 2000


def _entries(suffix=_SUFFIX):
    root = cache_dir()
    found = []
    try:
        subdirs = os.listdir(root)
    except OSError:
        return found
    for sub in subdirs:
        try:
            names = os.listdir(os.path.join(root, sub))
        except OSError:
            continue
        found += [os.path.join(root, sub, n) for n in names if n.endswith(suffix)
                  and not n.startswith(".tmp-")]
    return found


def clear():
    """Remove every entry and build lock file; returns how many entries went."""
    gone = 0
    for path in _entries():
        try:
            os.unlink(path)
            gone += 1
        except OSError:
            pass
    for path in _entries(_LOCK_SUFFIX):
        try:
            os.unlink(path)
        except OSError:
            pass
    return gone


def _prune():
    entries = _entries()
    limit = max_entries()
    if len(entries) <= limit:
        return

    def mtime(path):
        try:
            return os.stat(path).st_mtime
        except OSError:
            return 0.0

    entries.sort(key=mtime)
    for path in entries[:len(entries) - limit + max(1, limit // 10)]:
        for gone in (path, path + _LOCK_SUFFIX):         # an entry's lock file goes with it
            try:
                os.unlink(gone)
            except OSError:
                pass


def _versions():
    from importlib import metadata
    from ._frontend import front_end

    names = ("numba", "numba-cuda", "numba-cuda-mlir", "numba_tma", "cuda-bindings", "cuda-core",
             "nvidia-nvjitlink", "nvidia-cuda-nvrtc", "nvidia-cuda-nvcc", "nvidia-nvvm",
             "cuda-toolkit")
    out = [f"front_end={front_end()}"]     # (both may be installed in one environment)
    for name in names:
        try:
            out.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}=-")
    return out


def _package_files():
    from ._bridge import PTX_DIR

    here = os.path.dirname(os.path.abspath(__file__))
    files = []
    for base, exts in ((here, (".py",)), (PTX_DIR, (".cu", ".cuh"))):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(exts):
                    files.append(os.path.join(dirpath, f))
    return files


@functools.cache
def package_fingerprint():
    """SHA-256 of numba_tma's sources and the compiler stack's versions (once per process)."""
    h = hashlib.sha256()
    for v in _versions():
        h.update(v.encode() + b"\n")
    for path in _package_files():
        h.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def file_digest(path):
    """SHA-256 of a file's bytes, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


_SIMPLE = (int, float, complex, str, bytes, bool, type(None))


def _value_key(value, depth, seen):
    """A stable text for what a captured or global value contributes to the code."""
    if isinstance(value, _SIMPLE):
        return repr(value)
    if isinstance(value, (tuple, list, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, frozenset) else value
        return type(value).__name__ + "(" + ",".join(_value_key(v, depth, seen) for v in items) \
            + ")"
    if isinstance(value, dict) and len(value) <= 64:
        return "{" + ",".join(f"{_value_key(k, depth, seen)}:{_value_key(v, depth, seen)}"
                              for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    func = getattr(value, "py_func", value)
    if isinstance(func, pytypes.FunctionType):
        return _function_key(func, depth + 1, seen)
    if isinstance(value, pytypes.ModuleType):
        return f"module:{value.__name__}"
    text = repr(value)
    if " at 0x" in text or len(text) > 2000:      # an object's identity, not its content
        return f"<{type(value).__module__}.{type(value).__qualname__}>"
    return text


def _code_key(code):
    consts = []
    for c in code.co_consts:
        consts.append(_code_key(c) if isinstance(c, pytypes.CodeType) else repr(c))
    return hashlib.sha256(code.co_code + "\0".join(consts).encode()
                          + " ".join(code.co_names).encode()).hexdigest()


def _function_key(func, depth=0, seen=None):
    """Bytecode, captured values and named simple globals of ``func`` (and of the functions
    those name, to a depth of 4)."""
    seen = set() if seen is None else seen
    ident = f"{func.__module__}.{func.__qualname__}"
    if id(func) in seen or depth > 4:
        return ident
    seen.add(id(func))
    parts = [ident, _code_key(func.__code__)]
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            parts.append(f"{name}={_value_key(cell.cell_contents, depth, seen)}")
        except ValueError:                      # an empty cell
            parts.append(f"{name}=<empty>")
    names = set(func.__code__.co_names)
    for c in func.__code__.co_consts:
        if isinstance(c, pytypes.CodeType):
            names.update(c.co_names)
    for name in sorted(names):
        if name in func.__globals__:
            parts.append(f"g:{name}={_value_key(func.__globals__[name], depth, seen)}")
    return "(" + ";".join(parts) + ")"


def _option_text(value):
    """A ``@cuda.jit`` option as key text: a function by its name, not its address (whose
    repr changes from process to process: numba-cuda-mlir's ``inline`` default is one)."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return repr(value)


def kernel_key(kernel, argtypes, cc, key=()):
    """The full key text of ``kernel`` (a ``@cuda.jit`` dispatcher) compiled for ``argtypes``
    on compute capability ``cc``, with the caller's ``key``."""
    func = kernel.py_func
    opts = dict(getattr(kernel, "targetoptions", {}) or {})
    links = [str(p) for p in (opts.pop("link", None) or ())]
    parts = {
        "package": package_fingerprint(),
        "kernel": _function_key(func),
        "options": sorted((k, _option_text(v)) for k, v in opts.items()),
        "links": [(p, file_digest(p)) for p in links],
        "argtypes": [str(t) for t in argtypes],
        "cc": list(cc),
        "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("NUMBA_TMA_")
                      and k not in _HOST_ONLY_ENV),
        "key": _value_key(key, 0, set()),
    }
    if not func.__module__.startswith("numba_tma."):
        source = inspect.getsourcefile(func)
        parts["source"] = (source, source and file_digest(source))
    return json.dumps(parts, sort_keys=True)


def _path(key_text):
    digest = hashlib.sha256(key_text.encode()).hexdigest()
    return os.path.join(cache_dir(), digest[:2], digest + _SUFFIX)


def load(key_text):
    """``(cubin bytes, header dict)`` of a valid entry for ``key_text``, or None (missing,
    corrupt, built for another key, or a link file changed since)."""
    path = _path(key_text)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    try:
        if not blob.startswith(MAGIC):
            return None
        n = int.from_bytes(blob[len(MAGIC):len(MAGIC) + 4], "little")
        start = len(MAGIC) + 4
        header = json.loads(blob[start:start + n].decode())
        cubin = blob[start + n:]
        if header.get("key") != key_text:
            return None
        if hashlib.sha256(cubin).hexdigest() != header.get("cubin_sha256"):
            return None
        for path_, digest in header.get("link_files", ()):
            if file_digest(path_) != digest:
                return None
    except (ValueError, UnicodeDecodeError, TypeError, AttributeError):
        return None
    try:
        os.utime(path)                  # recently used: the last to be pruned
    except OSError:
        pass
    return cubin, header


def lock_wait():
    """Seconds a process waits for another's build of the same entry
    (``NUMBA_TMA_CACHE_LOCK_WAIT``, default 300)."""
    try:
        return max(0.0, float(os.environ.get("NUMBA_TMA_CACHE_LOCK_WAIT", "300")))
    except ValueError:
        return 300.0


@contextlib.contextmanager
def building(key_text):
    """Hold the build lock of ``key_text``'s entry: a process that enters while another holds
    it waits until that one is done (then :func:`load` finds its entry), so a warm-up in many
    processes (test chunks, workers of one server) builds each kernel once. Where no lock can
    be had (no ``fcntl``, an unwritable directory, ``lock_wait()`` seconds passed) it yields
    all the same: a lock only saves work, the entry's atomic rename keeps it correct."""
    try:
        import fcntl
    except ImportError:                 # Windows: every process builds
        yield
        return
    path = _path(key_text) + _LOCK_SUFFIX
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + lock_wait()
        held = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        try:
            yield
        finally:
            if held:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def store(key_text, cubin, link_files=(), **fields):
    """Write an entry atomically; returns its path, or None when the directory is unwritable
    (a read-only home still runs, it only compiles every time)."""
    path = _path(key_text)
    header = dict(fields, key=key_text, cubin_sha256=hashlib.sha256(cubin).hexdigest(),
                  link_files=[(p, file_digest(p)) for p in sorted(
                      {os.fspath(f) for f in link_files if isinstance(f, (str, os.PathLike))})])
    head = json.dumps(header, sort_keys=True).encode()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + len(head).to_bytes(4, "little") + head + bytes(cubin))
            os.replace(tmp, path)
            _prune()
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        return None
    return path
