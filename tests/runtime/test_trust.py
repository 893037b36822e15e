"""Loading what the C++ loader validated (issue 25): digest pinning, damaged manifests as one clear error
naming the file, the entry and the field (never a raw KeyError/TypeError/RecursionError from Python),
what CompiledGraph knows coming from the loader, and meta tensors rejected by their device."""
import hashlib
import json

import numpy as np
import pytest
import torch

import hidet
from hidet.runtime import artifact


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    x = hidet.symbol(['batch', 4])
    graph = hidet.graph.optimize(hidet.trace_from(hidet.ops.relu(x @ hidet.randn([4, 2])), [x]))
    path = tmp_path_factory.mktemp('trust') / 'g.hidet'
    graph.build().save(path)
    return path


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _with_manifest(path, out, edit):
    entries = artifact.read(path.read_bytes())
    manifest = json.loads(entries['manifest.json'])
    manifest = edit(manifest) or manifest
    entries['manifest.json'] = json.dumps(manifest).encode()
    out.write_bytes(artifact.write(list(entries.items())))
    return out


def test_pinned_digest_loads(saved):
    x = torch.randn(3, 4)
    expected = hidet.load_compiled_graph(saved)(x)
    for digest in (_sha256(saved), _sha256(saved).upper()):
        torch.testing.assert_close(hidet.load_compiled_graph(saved, sha256=digest)(x), expected)


def test_other_file_is_refused_before_loading(saved, tmp_path):
    # A valid artifact, but not the pinned one: refused with both digests, before its manifest is read.
    other = _with_manifest(saved, tmp_path / 'other.hidet', lambda m: m['inputs'][0].update(name='renamed'))
    hidet.load_compiled_graph(other)  # loads when not pinned
    with pytest.raises(hidet.HidetRuntimeError) as info:
        hidet.load_compiled_graph(other, sha256=_sha256(saved))
    message = str(info.value)
    assert f'artifact {other}: its SHA-256 is {_sha256(other)}, expected {_sha256(saved)}' in message


@pytest.mark.parametrize('digest', ['', 'abc', 'g' * 64, _sha256.__name__ * 8])
def test_malformed_digest(saved, digest):
    with pytest.raises(hidet.HidetRuntimeError, match='is not 64 hex digits'):
        hidet.load_compiled_graph(saved, sha256=digest)


def test_what_compiled_graph_knows_comes_from_the_loader(saved):
    g = hidet.load_compiled_graph(saved)
    assert (g.target, g.arch, g.format_version, g.symbols) == ('cpu', 'x86-64', 2, ['batch'])
    assert [repr(s) for s in g.inputs] == ['x: float32[batch, 4]']
    assert g.outputs[0].shape_at({'batch': 5}) == (5, 2)
    assert g.num_kernels >= 1 and g.weights_nbytes >= 4 * 2 * 4 and g.arena_nbytes == 0
    assert g.manifest == artifact.read_manifest(str(saved))  # for inspection, parsed from the validated text


# Damaged manifests (hashes recomputed): each is one HidetRuntimeError naming the file and the field.
_DAMAGE = {
    'missing key': (lambda m: m.pop('tensors') and None, r'\(top level\): missing "tensors"'),
    'input without tensor': (lambda m: m['inputs'][0].pop('tensor') and None, r'inputs\[0\]: missing "tensor"'),
    'tensors not a list': (lambda m: m.update(tensors={'a': 1}), 'tensors: expected an array, got object'),
    'dtype a number': (lambda m: m['tensors'][0].update(dtype=7), r'tensors\[0\]\.dtype: expected a string'),
    'unknown dtype': (lambda m: m['tensors'][0].update(dtype='float8'), r"tensors\[0\]\.dtype: unknown dtype 'float8'"),
    'deep nesting': (lambda m: m['tensors'][0].update(shape=json.loads('[' * 500 + ']' * 500)), 'nesting deeper'),
    'tensor id out of range': (lambda m: m['outputs'][0].update(tensor=99), r'outputs\[0\]\.tensor: tensor id 99'),
    'not an object': (lambda m: [1, 2], 'expected a JSON object, got array'),
}


@pytest.mark.parametrize('case', sorted(_DAMAGE))
def test_damaged_manifest_is_one_clear_error(saved, tmp_path, case):
    edit, pattern = _DAMAGE[case]
    path = _with_manifest(saved, tmp_path / 'bad.hidet', edit)
    with pytest.raises(hidet.HidetRuntimeError, match=pattern) as info:
        hidet.load_compiled_graph(path)
    assert str(info.value).startswith(f'artifact {path}'), str(info.value)


def test_meta_tensor_is_rejected_by_its_device(saved):
    g = hidet.load_compiled_graph(saved)
    with pytest.raises(ValueError, match=r'input 0 \(x\) is on the meta device \(a meta tensor has a shape and a '
                                         r'dtype but no data\); the compiled graph runs on cpu'):
        g(torch.empty(3, 4, device='meta'))


def test_meta_tensor_static_graph(tmp_path):
    x = hidet.symbol([2, 4])
    graph = hidet.graph.optimize(hidet.trace_from(hidet.ops.relu(x), [x]))
    g = graph.build()
    with pytest.raises(ValueError, match='is on the meta device'):
        g(torch.empty(2, 4, device='meta'))
    np.testing.assert_array_equal(g(torch.ones(2, 4)).numpy(), np.ones((2, 4), np.float32))
