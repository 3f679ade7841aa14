"""What a repeated public call reads of its operands: a cheap key per array (address, shape,
strides, dtype, device) for the launch caches of ``matmul()`` and ``transpose()``, and the stream
the call runs on when the caller names none.

The stream rule (documented on the public ops): an explicit ``stream=`` wins; otherwise a call on
torch tensors runs on torch's current stream of the tensor's device, a call on CuPy arrays on
CuPy's current stream, and anything else on the legacy default stream (numba's default). So
``with torch.cuda.stream(s): numba_tma.matmul(a, b)`` is ordered after the work queued on ``s``
before it, as a torch op would be.
"""

import collections
import threading

from .launch import stream_handle

__all__ = ["operand_key", "call_stream", "BoundedCache"]


class BoundedCache:
    """The public ops' launch caches: at most ``size`` entries; a lookup takes no lock (a dict
    read is atomic under the GIL), an insertion does and drops the oldest entries past ``size``."""

    def __init__(self, size):
        self.size = size
        self._entries = collections.OrderedDict()
        self._lock = threading.Lock()
        self.get = self._entries.get        # (the dict's own method: no Python frame per call)

    def put(self, key, value):
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def values(self):
        return list(self._entries.values())

    def __len__(self):
        return len(self._entries)

_keyers = {}


def _torch_key(t):
    # get_device() is -1 for a CPU tensor: such a key never matches a CUDA one, and the slow
    # path's validation reports it.
    return (t.data_ptr(), t.shape, t.stride(), t.dtype, t.get_device())


def _cai_key(x):
    cai = x.__cuda_array_interface__
    return (cai["data"][0], tuple(cai["shape"]), cai.get("strides"), cai["typestr"])


def _numba_key(x):
    # numba's interface builds a dict and tests contiguity on every access; the attributes
    # behind it are cheaper (the address as the interface gives it, strides always explicit).
    return (x.device_ctypes_pointer.value or 0, x.shape, x.strides, x.dtype.str)


def _cupy_key(x):
    # CuPy builds its interface dict on every access; its own attributes are cheaper.
    return (x.data.ptr, x.shape, x.strides, x.dtype.str)


def _no_key(x):
    return None


def _keyer(x):
    kind = type(x)
    if hasattr(kind, "data_ptr") and hasattr(kind, "stride") and hasattr(kind, "get_device"):
        return _torch_key
    if kind.__module__.split(".")[0] == "cupy" and hasattr(kind, "data"):
        return _cupy_key
    if _is_numba_array_type(kind):
        return _numba_key
    if hasattr(kind, "__cuda_array_interface__"):
        return _cai_key
    return None                 # decided per object (an interface set on the instance)


def _is_numba_array_type(kind):
    try:
        from ._frontend import DeviceNDArrayBase
    except ImportError:
        return False
    return issubclass(kind, DeviceNDArrayBase)


def _keyer_of(x):
    """The key function of ``x``'s kind (decided once per type where the type decides)."""
    f = _keyers.get(type(x))
    if f is None:
        f = _keyer(x)
        if f is None:
            f = _cai_key if hasattr(x, "__cuda_array_interface__") else _no_key
        else:
            _keyers[type(x)] = f
    return f


def is_torch_tensor(x):
    """Whether :func:`operand_key` reads ``x`` as a torch tensor."""
    return _keyer_of(x) is _torch_key


def operand_key(x):
    """A hashable key of what the public ops' checks read of ``x``; None when ``x`` is not a CUDA
    array of a known kind (the caller then takes its slow path, which reports the error)."""
    f = _keyer_of(x)
    try:
        return f(x)
    except (AttributeError, TypeError, KeyError, RuntimeError):   # e.g. torch bf16 has no CAI
        return None


_torch_raw_stream = None


def torch_current_stream(device):
    """The handle of torch's current stream on GPU ``device`` (an ordinal)."""
    global _torch_raw_stream
    if _torch_raw_stream is None:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_raw_stream = raw if raw is not None else \
            (lambda dev: torch.cuda.current_stream(dev).cuda_stream)
    return _torch_raw_stream(device)


def _torch_stream(t):
    return torch_current_stream(t.get_device())


def _cupy_stream(x):
    import cupy

    try:                                # the current stream of the array's own device
        return cupy.cuda.get_current_stream(x.device.id).ptr
    except TypeError:                   # a CuPy without the device argument
        with x.device:
            return cupy.cuda.get_current_stream().ptr


_stream_of = {}


def call_stream(stream, array):
    """The stream handle a call on ``array`` runs on: ``stream`` when given (anything
    :func:`numba_tma.launch.stream_handle` takes), else the array's framework's current stream
    (torch, CuPy), else 0."""
    if stream is not None:
        return stream if type(stream) is int else stream_handle(stream)
    f = _stream_of.get(type(array))
    if f is None:
        kind = type(array)
        mod = kind.__module__.split(".")[0]
        if mod == "torch" or (hasattr(kind, "data_ptr") and hasattr(kind, "get_device")):
            f = _torch_stream
        elif mod == "cupy":
            f = _cupy_stream
        else:
            f = None
        _stream_of[kind] = f or (lambda x: 0)
        f = _stream_of[kind]
    return f(array)
