"""CUDA devices, streams and events, as ``hidet.cuda``.

CUDA is loaded at run time: on a machine without a GPU everything here imports, ``available()`` is
False, and any call that needs a GPU raises ``HidetRuntimeError`` saying why CUDA is unavailable.
The current device and stream are per thread, as in PyTorch.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional, Tuple

from hidet import _C
from hidet.runtime.memory import (  # noqa: F401  (re-exported as hidet.cuda.*)
    empty_cache,
    max_memory_allocated,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_peak_memory_stats,
    set_memory_limit,
)

_thread_state = threading.local()


def available() -> bool:
    """Whether a CUDA driver and at least one GPU are present."""
    return _C.cuda_available()


def device_count() -> int:
    return _C.cuda_device_count()


def unavailable_reason() -> str:
    """Why CUDA cannot be used here ('' when it can)."""
    return _C.cuda_unavailable_reason()


def current_device() -> int:
    return getattr(_thread_state, 'device', 0)


def set_device(device_id: int) -> None:
    """Make ``device_id`` the device that ``'cuda'`` means on this thread."""
    count = device_count()
    if not 0 <= device_id < max(count, 1):
        raise ValueError(f'cuda:{device_id} does not exist: this machine has {count} CUDA device(s)')
    _thread_state.device = device_id


def synchronize(device_id: Optional[int] = None) -> None:
    """Block until all work on the device has finished."""
    _C.cuda_device_synchronize(current_device() if device_id is None else device_id)


def mem_get_info(device_id: Optional[int] = None) -> Tuple[int, int]:
    """(free, total) bytes of the device's memory."""
    return _C.cuda_mem_get_info(current_device() if device_id is None else device_id)


class Stream:
    """A CUDA stream. ``Stream()`` creates a new non-blocking stream that hidet owns;
    ``Stream.borrow(handle)`` wraps one owned elsewhere (e.g. ``torch.cuda.current_stream().cuda_stream``)."""

    def __init__(self, device_id: Optional[int] = None, _impl=None):
        self._impl = _impl if _impl is not None else _C.Stream.create(current_device() if device_id is None else device_id)

    @staticmethod
    def borrow(handle: int, device_id: Optional[int] = None) -> 'Stream':
        return Stream(_impl=_C.Stream.borrow(int(handle), current_device() if device_id is None else device_id))

    @property
    def handle(self) -> int:
        """The CUstream / cudaStream_t as an integer (0 is the legacy default stream)."""
        return self._impl.handle

    @property
    def device_id(self) -> int:
        return self._impl.device

    def synchronize(self) -> None:
        self._impl.synchronize()

    def __repr__(self) -> str:
        return f'Stream(handle=0x{self.handle:x}, device=cuda:{self.device_id})'


def default_stream(device_id: Optional[int] = None) -> Stream:
    return Stream.borrow(0, device_id)


def current_stream(device_id: Optional[int] = None) -> Stream:
    """The stream hidet launches on in this thread: the innermost ``with hidet.cuda.stream(s)``, else the
    default stream."""
    stack = getattr(_thread_state, 'streams', None)
    if stack:
        return stack[-1]
    return default_stream(device_id)


@contextlib.contextmanager
def stream(s: Stream) -> Iterator[Stream]:
    """Make ``s`` the current stream of this thread within the block."""
    if not hasattr(_thread_state, 'streams'):
        _thread_state.streams = []
    _thread_state.streams.append(s)
    try:
        yield s
    finally:
        _thread_state.streams.pop()


class Event:
    """A CUDA event, for ordering streams and timing (``elapsed_time`` in milliseconds)."""

    def __init__(self, enable_timing: bool = True, device_id: Optional[int] = None):
        self._impl = _C.Event(current_device() if device_id is None else device_id, enable_timing)

    def record(self, s: Optional[Stream] = None) -> 'Event':
        self._impl.record((s or current_stream())._impl)
        return self

    def synchronize(self) -> None:
        self._impl.synchronize()

    def elapsed_time(self, end: 'Event') -> float:
        return self._impl.elapsed_ms(end._impl)
