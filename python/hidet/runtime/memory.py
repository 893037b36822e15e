"""The runtime's caching memory pools, one per device (see cpp/runtime/memory_pool.cpp)."""
from __future__ import annotations

from typing import Dict

from hidet import _C
from hidet.runtime.device import device as _device


def memory_stats(device='cuda') -> Dict[str, int]:
    """Pool statistics in bytes: allocated, reserved, peak, cached; and counts num_allocations, num_reused."""
    d = _device(device)
    return _C.memory_stats(d.dl_kind, d.id)


def memory_allocated(device='cuda') -> int:
    return memory_stats(device)['allocated']


def max_memory_allocated(device='cuda') -> int:
    return memory_stats(device)['peak']


def memory_reserved(device='cuda') -> int:
    return memory_stats(device)['reserved']


def reset_peak_memory_stats(device='cuda') -> None:
    d = _device(device)
    _C.reset_peak_memory(d.dl_kind, d.id)


def empty_cache(device='cuda') -> None:
    """Give the pool's cached (freed) blocks back to the device."""
    d = _device(device)
    _C.empty_cache(d.dl_kind, d.id)


def set_memory_limit(limit_bytes: int, device='cuda') -> None:
    """Cap the bytes the pool may reserve (0 removes the cap); beyond it allocations raise OutOfMemoryError."""
    d = _device(device)
    _C.set_memory_limit(d.dl_kind, d.id, int(limit_bytes))
