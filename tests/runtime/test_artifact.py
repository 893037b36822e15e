"""The .hidet artifact: round trips, and clear errors for corrupt, truncated, wrong-version and
wrong-target files (never a crash)."""
import ctypes
import json
import struct

import numpy as np
import pytest

import hidet
from hidet.runtime import artifact
from hidet.runtime.compiled_graph import CompiledGraph, load_compiled_graph


_reference = {}  # the saved graph, for round trips


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    x = hidet.symbol([3, 4])
    graph = hidet.graph.optimize(hidet.trace_from(hidet.ops.relu(x @ hidet.randn([4, 2])), [x]))
    path = tmp_path_factory.mktemp('art') / 'g.hidet'
    graph.build().save(path)
    _reference['graph'] = graph
    return path


def _rewrite(path, out, fn):
    entries = artifact.read(path.read_bytes())
    manifest = json.loads(entries['manifest.json'])
    fn(manifest)
    entries['manifest.json'] = json.dumps(manifest).encode()
    out.write_bytes(artifact.write(list(entries.items())))
    return out


def test_manifest(saved):
    m = artifact.read_manifest(str(saved))
    assert m['format_version'] == artifact.FORMAT_VERSION and m['target'] == 'cpu'
    assert [t['storage'] for t in m['tensors']].count('weight') == 1
    assert m['inputs'][0]['name'] == 'x' and len(m['kernels']) == 1


def test_round_trip(saved):
    g = hidet.load_compiled_graph(saved)
    a = hidet.randn([3, 4])
    np.testing.assert_allclose(g(a).numpy(), _reference['graph'](a).numpy(), rtol=1e-6)


def test_entries_of_parts_are_their_concatenation():
    # a graph's weights go to write() as parts (their storage, padding), copied once into place: the entry reads
    # back as the concatenation of the parts' bytes, whatever their kind, dtype, rank and strides
    class CopiesItself:  # (a tensor's storage: copied to where write() says)
        def __init__(self, data: bytes):
            self.data, self.nbytes = data, len(data)

        def copy_to(self, address: int):
            ctypes.memmove(address, self.data, self.nbytes)

    parts = [np.arange(6, dtype=np.float32).reshape(2, 3), bytes(40), np.array(7, dtype=np.uint16),
             CopiesItself(b'stored bytes'), np.arange(5, dtype=np.int64)[::2]]
    data = artifact.write([('a', b'head'), ('weights.bin', parts), ('empty', [])])
    entries = artifact.read(bytes(data))
    assert entries['a'] == b'head' and entries['empty'] == b''
    expected = [p if isinstance(p, bytes) else p.data if isinstance(p, CopiesItself) else p.tobytes() for p in parts]
    assert entries['weights.bin'] == b''.join(expected)


def test_built_graphs_load_without_hashes_and_save_with_them(tmp_path):
    # build() hands its bytes straight to the runtime with no entry hashes (a large model's weights took a second
    # each to hash and to check); save() fills them in, so the file loads and reads as any artifact
    x = hidet.symbol([3, 4])
    w = hidet.randn([4, 2])
    compiled = hidet.graph.optimize(hidet.trace_from(hidet.ops.relu(x @ w), [x])).build()
    data = bytes(compiled._data)  # (as built: the runtime took these)
    assert all(digest == 0 for digest in _digests(data))
    with pytest.raises(hidet.runtime.HidetRuntimeError, match='hash mismatch'):  # (unhashed bytes, hashed load)
        CompiledGraph(data)
    with pytest.raises(ValueError, match='pinned digest'):
        CompiledGraph(bytearray(data), sha256='0' * 64, hashed=False)
    xv = hidet.randn([3, 4])
    expected = compiled(xv).numpy()
    compiled.save(tmp_path / 'g.hidet')
    saved = (tmp_path / 'g.hidet').read_bytes()
    assert all(digest != 0 for digest in _digests(saved)) and artifact.read(saved)  # (read checks every hash)
    np.testing.assert_allclose(load_compiled_graph(str(tmp_path / 'g.hidet'))(xv).numpy(), expected)
    np.testing.assert_allclose(compiled(xv).numpy(), expected)


def _digests(data: bytes):
    _, count = struct.unpack_from('<II', data, 8)
    pos, out = 16, []
    for _ in range(count):
        (n,) = struct.unpack_from('<I', data, pos)
        out.append(struct.unpack_from('<Q', data, pos + 4 + n + 16)[0])
        pos += 4 + n + 24
    return out


def test_not_an_artifact(tmp_path):
    p = tmp_path / 'x.hidet'
    p.write_bytes(b'hello world, not an artifact at all')
    with pytest.raises(hidet.HidetRuntimeError, match='not a hidet artifact'):
        hidet.load_compiled_graph(p)


def test_truncated(saved, tmp_path):
    data = saved.read_bytes()
    for cut in sorted({8, 16, 40, len(data) // 3, len(data) // 2, len(data) - 1}):
        p = tmp_path / f'cut{cut}.hidet'
        p.write_bytes(data[:cut])
        with pytest.raises(hidet.HidetRuntimeError, match='truncated|not a hidet artifact'):
            hidet.load_compiled_graph(p)


def test_corrupt(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    data[-100] ^= 0xFF  # inside the last entry (a kernel library)
    p = tmp_path / 'corrupt.hidet'
    p.write_bytes(bytes(data))
    with pytest.raises(hidet.HidetRuntimeError, match='corrupt: hash mismatch'):
        hidet.load_compiled_graph(p)


def test_wrong_format_version(saved, tmp_path):
    p = _rewrite(saved, tmp_path / 'v.hidet', lambda m: m.update(format_version=99))
    with pytest.raises(hidet.HidetRuntimeError, match='format version 99'):
        hidet.load_compiled_graph(p)


def test_wrong_target(saved, tmp_path):
    p = _rewrite(saved, tmp_path / 't.hidet', lambda m: m.update(target='cuda', arch='sm_90'))
    if hidet.cuda.available():
        pytest.skip('a GPU is present: a cuda manifest is loadable here')
    with pytest.raises(hidet.HidetRuntimeError, match='(?i)cuda'):
        hidet.load_compiled_graph(p)


def test_bad_manifest_is_an_error_in_the_runtime(saved, tmp_path):
    def break_tensor_id(m):
        m['instructions'][0]['inputs'][0] = 1000

    p = _rewrite(saved, tmp_path / 'bad.hidet', break_tensor_id)
    with pytest.raises(hidet.HidetRuntimeError, match='1000|tensor'):
        hidet.load_compiled_graph(p)
