"""hidet.cuda: streams and events on the GPU machine; a clear absence elsewhere."""
import pytest
import torch

import hidet


def test_availability_is_consistent():
    assert hidet.cuda.available() == (hidet.cuda.device_count() > 0)
    assert (hidet.cuda.unavailable_reason() == '') == hidet.cuda.available()


@pytest.mark.cuda
def test_streams_and_events():
    s = hidet.cuda.Stream()
    assert s.handle != 0
    x = torch.randn(1 << 20, device='cuda')
    with hidet.cuda.stream(s):
        assert hidet.cuda.current_stream().handle == s.handle
        start, end = hidet.cuda.Event().record(), hidet.cuda.Event()
        with torch.cuda.stream(torch.cuda.ExternalStream(s.handle)):
            y = x * 2
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    s.synchronize()
    torch.testing.assert_close(y, x * 2)
    assert hidet.cuda.current_stream().handle == 0
    free, total = hidet.cuda.mem_get_info()
    assert 0 < free <= total
