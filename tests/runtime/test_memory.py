"""The runtime's caching pools, seen from Python."""
import pytest

import hidet


def test_freed_blocks_are_reused(device):
    hidet.runtime.empty_cache(device)
    a = hidet.empty([1000], device=device)  # 4000 B, rounded to 4096
    addr = a.data_ptr()
    before = hidet.runtime.memory_stats(device)
    del a
    after_free = hidet.runtime.memory_stats(device)
    assert after_free['allocated'] == before['allocated'] - 4096
    assert after_free['cached'] == before['cached'] + 4096 and after_free['reserved'] == before['reserved']
    b = hidet.empty([1024], device=device)  # same rounded size
    assert b.data_ptr() == addr
    assert hidet.runtime.memory_stats(device)['num_reused'] == before['num_reused'] + 1


def test_stats_and_empty_cache(device):
    hidet.runtime.empty_cache(device)
    hidet.cuda.reset_peak_memory_stats(device)
    base = hidet.runtime.memory_stats(device)
    t = hidet.empty([3 << 20], dtype='uint8', device=device)  # 3 MiB → 4 MiB
    stats = hidet.runtime.memory_stats(device)
    assert stats['allocated'] == base['allocated'] + (4 << 20)
    assert stats['peak'] >= stats['allocated']
    del t
    hidet.runtime.empty_cache(device)
    stats = hidet.runtime.memory_stats(device)
    assert stats['cached'] == 0 and stats['reserved'] == stats['allocated']


def test_out_of_memory_names_request_and_pool(device):
    hidet.cuda.set_memory_limit(64 << 20, device)
    try:
        with pytest.raises(hidet.OutOfMemoryError, match=r'out of memory on .*cannot allocate.*pool: allocated'):
            hidet.empty([128 << 20], dtype='uint8', device=device)
        assert isinstance(hidet.OutOfMemoryError('x'), RuntimeError)
        hidet.empty([1 << 20], dtype='uint8', device=device)  # smaller requests still work
    finally:
        hidet.cuda.set_memory_limit(0, device)
