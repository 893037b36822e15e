"""Fuzzing the artifact loader (issue 25): mutated copies of CPU artifacts are loaded and run in child
processes, through Python (``load_compiled_graph``, in a forked child) and through C++ (``run_model``, a
subprocess), and each outcome is classified:

- ``ok``: loaded and ran (a mutation the format allows, e.g. a renamed input);
- ``rejected``: a clear error (HidetRuntimeError from the loader, or a ValueError/TypeError of
  CompiledGraph's own input checks; run_model's "error: ..." and exit status 1);
- ``unexpected``: any other Python exception (a raw KeyError, TypeError, RecursionError...): a bug;
- ``crash``: the child died of a signal (or of a loader assertion's exit 127): a bug;
- ``hang``: the child outlived the time limit: a bug.

Mutation kinds (all but ``truncate`` and ``container_field`` recompute the container hashes, so the
loader's own checks, not the hash, must catch them):

- ``manifest_field``: a value anywhere in manifest.json but the kernel bindings (below) replaced, a key
  deleted, a list element dropped or duplicated (type confusion, out-of-range ids, huge and negative
  numbers, deep nesting);
- ``manifest_text``: bytes of manifest.json's text flipped, deleted or inserted;
- ``shape``: one tensor dimension changed to a nearby value;
- ``dtype``: one tensor's dtype changed;
- ``swap_kernels``: two kernel entries (or their functions) swapped, or an instruction bound to another kernel;
- ``binding``: which tensors a kernel gets changed: an instruction's inputs, outputs or dims, an input's or
  output's tensor id (a value from the ``manifest_field`` pool, or inputs and outputs exchanged);
- ``swap_instructions``: two instructions swapped;
- ``drop_instruction``: an instruction deleted (a later one reads what nothing wrote);
- ``entries``: container entries swapped, renamed, dropped or duplicated;
- ``library_header``: bytes of a kernel library's ELF header or program headers changed (not its code);
- ``container_field``: a field of the container header or entry table overwritten (hash not recomputed);
- ``truncate``: the file cut short (hash not recomputed).

Kinds ``shape``, ``dtype``, ``swap_kernels`` and ``binding`` change what a kernel is told without the kernel
knowing (the kernel-contract kinds): the loader checks every instruction against the signature its kernel
declares (hidet/kernel_abi.h, cpp/runtime/kernel_contract.hpp), so a kernel is never given a buffer other than
it was built for; what passes that check (two kernels of one signature exchanged) runs and computes other
values, which is not a crash.

Run as a script for the long run (tests/runtime/test_fuzz_artifacts.py runs a short one in CI):

    PYTHONPATH=/tmp/dev python tests/runtime/fuzz_artifacts.py --cases 10000 [--run-model PATH]
        [--seed 0] [--kinds shape,truncate] [--keep DIR] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ['manifest_field', 'manifest_text', 'swap_instructions', 'drop_instruction', 'entries', 'library_header',
         'container_field', 'truncate', 'shape', 'dtype', 'swap_kernels', 'binding']
TIMEOUT_S = 20.0
SYMBOL_VALUE = 3  # the value given to every symbolic dimension of a seed

# ---------------------------------------------------------------------------------------- seeds


def build_seeds(out_dir: str) -> Dict[str, str]:
    """CPU artifacts to mutate: an MLP, a small CNN, a two-input/two-output graph and a symbolic-batch graph."""
    import hidet

    def save(name, outputs, inputs):
        graph = hidet.graph.optimize(hidet.trace_from(outputs, inputs))
        path = os.path.join(out_dir, f'{name}.hidet')
        graph.build().save(path)
        return path

    seeds = {}
    x = hidet.symbol([4, 16])
    seeds['mlp'] = save('mlp', hidet.ops.relu(x @ hidet.randn([16, 8])) + hidet.randn([8]), [x])
    img = hidet.symbol([1, 3, 8, 8])
    conv = hidet.ops.relu(hidet.ops.conv2d(img, hidet.randn([4, 3, 3, 3]), padding=1))
    seeds['cnn'] = save('cnn', hidet.ops.reshape(conv, [1, 256]) @ hidet.randn([256, 5]), [img])
    a, b = hidet.symbol([4, 8]), hidet.symbol([4, 8])
    seeds['two_io'] = save('two_io', [a + b, (a * b) @ hidet.randn([8, 6])], [a, b])
    s = hidet.symbol(['batch', 16])
    seeds['sym'] = save('sym', hidet.ops.relu(s @ hidet.randn([16, 8])) + hidet.randn([8]), [s])
    return seeds


# ---------------------------------------------------------------------------------------- container


def read_container(data: bytes) -> List[Tuple[str, bytes]]:
    """The entries of a valid container, in order (only seeds are read here: they are valid)."""
    _, count = struct.unpack_from('<II', data, 8)
    pos, entries = 16, []
    for _ in range(count):
        (n,) = struct.unpack_from('<I', data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        offset, size, _ = struct.unpack_from('<QQQ', data, pos + 4 + n)
        pos += 4 + n + 24
        entries.append((name, data[offset:offset + size]))
    return entries


def write_container(entries: List[Tuple[str, bytes]]) -> bytes:
    from hidet.runtime import artifact

    return artifact.write(entries)


def header_fields(data: bytes) -> List[Tuple[int, int]]:
    """(offset, size) of every field of the container header and entry table."""
    fields = [(8, 4), (12, 4)]
    _, count = struct.unpack_from('<II', data, 8)
    pos = 16
    for _ in range(count):
        (n,) = struct.unpack_from('<I', data, pos)
        fields += [(pos, 4), (pos + 4, n), (pos + 4 + n, 8), (pos + 12 + n, 8), (pos + 20 + n, 8)]
        pos += 4 + n + 24
    return fields


# ---------------------------------------------------------------------------------------- mutations

_INTERESTING = [0, 1, -1, 2, 3, 7, 63, 64, 255, 256, 4096, 2**31 - 1, 2**31, 2**32, 2**53, 2**62, 2**63 - 1, -2**63,
                1.5, -0.0, 1e308, True, False, None, '', 'x', 'float8', 'float16', 'int64', 'bool', 'abort', 'launch',
                'batch', '+', '/', 'input', 'output', 'weight', 'arena', 'kernels/0.so', 'kernels/9.so', 'weights.bin',
                'manifest.json', 'cpu', 'cuda', 'sm_90', [], {}, [0], [1, 2], ['batch', 0, '/'],
                ['batch', -1, '*'], [2**62, 'batch', '*'], {'kernel': 0}]


def _nodes(value, path=()):
    """Every (path, value) of a JSON tree, the root included."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, path + (i,))


def _set(root, path, value):
    if not path:
        return value
    node = root
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return root


def _get(root, path):
    for p in path:
        root = root[p]
    return root


def _near(rng: random.Random, v):
    if isinstance(v, bool) or not isinstance(v, int):
        return rng.choice(_INTERESTING)
    return rng.choice([v + 1, v - 1, v * 2, v // 2, 0, 1, -v, v + 64, v + 2**32, 2**63 - 1])


def _deep(depth: int):
    v = 0
    for _ in range(depth):
        v = [v]
    return v


def _is_binding(path) -> bool:
    """Whether a manifest path decides what a kernel is given (its buffers' sizes and roles, its function):
    the kinds shape, dtype, swap_kernels and binding edit those."""
    p = [x for x in path if isinstance(x, str)]
    if len(path) == 2 and p in (['tensors'], ['kernels'], ['instructions'], ['inputs'], ['outputs']):
        return True  # a whole element: deleting or duplicating one renumbers the rest
    return (p[:1] == ['tensors'] and p[1:2] in (['shape'], ['dtype'])) or \
        (p[:1] == ['kernels'] and p[1:2] in (['function'], ['library'])) or \
        (p[:1] == ['instructions'] and p[1:2] in (['kernel'], ['inputs'], ['outputs'], ['dims'], ['copy'], ['to'])) or \
        (p[:1] in (['inputs'], ['outputs']) and p[1:2] == ['tensor'])


def mutate_manifest_field(rng, m, binding: bool = False):
    nodes = [(path, v) for path, v in _nodes(m) if _is_binding(path) == binding and
             (binding or not any(_is_binding(path[:i]) for i in range(len(path))))]
    path, value = rng.choice(nodes)
    parent = _get(m, path[:-1]) if path else None
    op = rng.random()
    if path and op < 0.15:  # delete the key / the element
        del parent[path[-1]]
        return m, f'delete {path}'
    if path and isinstance(parent, list) and op < 0.25:  # duplicate the element
        parent.insert(path[-1], copy.deepcopy(value))
        return m, f'duplicate {path}'
    if op < 0.3:
        new = _deep(rng.choice([10, 300, 600]))  # past the loader's 256, within json.dumps' recursion
    elif op < 0.65:
        new = _near(rng, value)
    else:
        new = copy.deepcopy(rng.choice(_INTERESTING))
    return _set(m, path, new), f'{path} = {json.dumps(new)[:60]}'


def _tensor_dims(m):
    return [(t, d) for t, spec in enumerate(m.get('tensors', [])) for d in range(len(spec.get('shape', [])))]


def mutate_shape(rng, m):
    dims = _tensor_dims(m)
    if not dims:
        return mutate_manifest_field(rng, m)
    t, d = rng.choice(dims)
    old = m['tensors'][t]['shape'][d]
    if isinstance(old, int):
        new = rng.choice([old + 1, old - 1, old * 2, max(old // 2, 0), 0, 1])
    else:
        new = rng.choice([1, 0, 5, ['batch', 2, '*'], ['batch', 1, '-'], ['batch', 2, '/']])
    m['tensors'][t]['shape'][d] = new
    return m, f'tensors[{t}].shape[{d}]: {json.dumps(old)} -> {json.dumps(new)}'


def mutate_dtype(rng, m):
    t = rng.randrange(len(m['tensors']))
    old = m['tensors'][t]['dtype']
    new = rng.choice(['float32', 'float16', 'float64', 'int8', 'int64', 'bool', 'bfloat16', 'uint8'])
    m['tensors'][t]['dtype'] = new
    return m, f'tensors[{t}].dtype: {old} -> {new}'


def mutate_swap_kernels(rng, m):
    kernels, insts = m['kernels'], [i for i in m['instructions'] if 'kernel' in i]
    op = rng.random()
    if len(kernels) >= 2 and op < 0.4:
        a, b = rng.sample(range(len(kernels)), 2)
        kernels[a], kernels[b] = kernels[b], kernels[a]
        return m, f'kernels {a} <-> {b}'
    if len(kernels) >= 2 and op < 0.7:
        a, b = rng.sample(range(len(kernels)), 2)
        kernels[a]['function'], kernels[b]['function'] = kernels[b]['function'], kernels[a]['function']
        return m, f'kernels {a}, {b}: functions swapped'
    if insts:
        inst = rng.choice(insts)
        old, inst['kernel'] = inst['kernel'], rng.randrange(len(kernels))
        return m, f'instruction kernel {old} -> {inst["kernel"]}'
    return mutate_manifest_field(rng, m)


def mutate_swap_instructions(rng, m):
    insts = m['instructions']
    if len(insts) < 2:
        return mutate_drop_instruction(rng, m)
    a, b = rng.sample(range(len(insts)), 2)
    insts[a], insts[b] = insts[b], insts[a]
    return m, f'instructions {a} <-> {b}'


def mutate_binding(rng, m):
    if rng.random() < 0.3:
        i = rng.randrange(len(m['instructions']))
        inst = m['instructions'][i]
        if 'kernel' in inst:
            inst['inputs'], inst['outputs'] = inst['outputs'], inst['inputs']
        else:
            inst['copy'], inst['to'] = inst['to'], inst['copy']
        return m, f'instruction {i}: inputs <-> outputs'
    return mutate_manifest_field(rng, m, binding=True)


def mutate_drop_instruction(rng, m):
    i = rng.randrange(len(m['instructions']))
    del m['instructions'][i]
    return m, f'drop instruction {i}'


MANIFEST_MUTATIONS: Dict[str, Callable] = {
    'manifest_field': mutate_manifest_field, 'shape': mutate_shape, 'dtype': mutate_dtype,
    'swap_kernels': mutate_swap_kernels, 'swap_instructions': mutate_swap_instructions,
    'drop_instruction': mutate_drop_instruction, 'binding': mutate_binding,
}


def mutate(rng: random.Random, kind: str, seed: bytes) -> Tuple[bytes, str]:
    """The mutated artifact and a description of the mutation."""
    entries = read_container(seed)
    names = [n for n, _ in entries]
    if kind in MANIFEST_MUTATIONS:
        i = names.index('manifest.json')
        m, what = MANIFEST_MUTATIONS[kind](rng, json.loads(entries[i][1]))
        entries[i] = ('manifest.json', json.dumps(m).encode())
        return write_container(entries), what
    if kind == 'manifest_text':
        i = names.index('manifest.json')
        text = bytearray(entries[i][1])
        what = []
        for _ in range(rng.choice([1, 1, 2, 4])):
            at, op = rng.randrange(len(text)), rng.random()
            if op < 0.4:
                text[at] = rng.randrange(256)
            elif op < 0.7:
                del text[at]
            else:
                text.insert(at, rng.choice(b'{}[]",:0123456789-eE.\\ \x00\xff'))
            what.append(at)
        entries[i] = ('manifest.json', bytes(text))
        return write_container(entries), f'manifest bytes at {what}'
    if kind == 'entries':
        op = rng.random()
        # Two kernel libraries' bytes exchanged would rebind kernels (the swap_kernels kind): not here.
        pairs = [(a, b) for a in range(len(entries)) for b in range(a + 1, len(entries))
                 if not (names[a].startswith('kernels/') and names[b].startswith('kernels/'))]
        if op < 0.3 and pairs:
            a, b = rng.choice(pairs)
            entries[a], entries[b] = (entries[a][0], entries[b][1]), (entries[b][0], entries[a][1])
            what = f'data of {names[a]} <-> {names[b]}'
        elif op < 0.55:
            a = rng.randrange(len(entries))
            new = rng.choice(['manifest.json', 'weights.bin', 'kernels/0.so', 'kernels/1.so', 'x', '../x.so'])
            entries[a] = (new, entries[a][1])
            what = f'rename {names[a]} -> {new}'
        elif op < 0.8:
            a = rng.randrange(len(entries))
            del entries[a]
            what = f'drop {names[a]}'
        else:
            a = rng.randrange(len(entries))
            entries.append(entries[a])
            what = f'duplicate {names[a]}'
        return write_container(entries), what
    if kind == 'library_header':
        libs = [i for i, n in enumerate(names) if n.startswith('kernels/')]
        i = rng.choice(libs)
        lib = bytearray(entries[i][1])
        phoff, phentsize, phnum = struct.unpack_from('<Q', lib, 32)[0], *struct.unpack_from('<HH', lib, 54)
        end = min(len(lib), max(64, phoff + phentsize * phnum))
        what = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            at = rng.randrange(end)
            lib[at] = rng.choice([0, 0xff, lib[at] ^ (1 << rng.randrange(8)), rng.randrange(256)])
            what.append(at)
        entries[i] = (names[i], bytes(lib))
        return write_container(entries), f'{names[i]} header bytes at {what}'
    data = bytearray(seed)
    if kind == 'container_field':
        at, size = rng.choice(header_fields(seed))
        if size in (4, 8):
            old = int.from_bytes(data[at:at + size], 'little')
            new = rng.choice([0, 1, old + 1, old - 1, old * 2, old + 64, (1 << (8 * size)) - 1, 1 << (8 * size - 1),
                              rng.randrange(1 << (8 * size))]) % (1 << (8 * size))
            data[at:at + size] = new.to_bytes(size, 'little')
            return bytes(data), f'header field at {at} ({size} bytes): {old} -> {new}'
        if size:
            data[at + rng.randrange(size)] = rng.randrange(256)
        return bytes(data), f'entry name at {at}'
    if kind == 'truncate':
        cut = rng.choice([rng.randrange(len(data)), rng.randrange(64), len(data) - 1 - rng.randrange(64)])
        return bytes(data[:max(cut, 0)]), f'cut to {cut} of {len(data)} bytes'
    raise ValueError(f'unknown mutation kind {kind}')


# ---------------------------------------------------------------------------------------- running


def _python_child(path: str, out_fd: int) -> None:
    """In the forked child: load and run; report the outcome on out_fd; never return."""
    status, message = 'ok', ''
    try:
        import torch

        import hidet
        from hidet.runtime.compiled_graph import load_compiled_graph

        try:
            g = load_compiled_graph(path)
            values = {name: SYMBOL_VALUE for name in g.symbols}
            inputs = []
            for sig in g.inputs:
                shape = sig.shape_at(values)
                n = 1
                for d in shape:
                    n *= d
                if any(d < 0 for d in shape) or n > (1 << 24):
                    raise ValueError(f'input {sig.name}: shape {shape} is not one to allocate here')
                dtype = getattr(torch, sig.dtype.name)
                inputs.append(torch.randn(shape).to(dtype) if dtype.is_floating_point else
                              torch.randint(0, 4, shape).to(dtype))
            g.run(inputs)
        except hidet.HidetRuntimeError as e:
            status, message = 'rejected', str(e)
        except (ValueError, TypeError) as e:
            # CompiledGraph's own checks raise these with a message; a raw one from reading a dict would not
            # come from hidet.runtime.compiled_graph (the traceback says where).
            import traceback

            where = traceback.extract_tb(e.__traceback__)[-1].filename
            ok = where.endswith(('compiled_graph.py', 'artifact.py', os.path.basename(__file__)))
            status, message = ('rejected' if ok else 'unexpected'), f'{type(e).__name__}: {e} (at {where})'
    except RuntimeError as e:  # torch refusing to allocate an output of a (mutated) huge shape: an honest error
        status, message = ('rejected' if "can't allocate memory" in str(e) else 'unexpected'), f'{type(e).__name__}: {e}'
    except BaseException as e:  # noqa: BLE001 (every other exception is a finding)
        status, message = 'unexpected', f'{type(e).__name__}: {e}'
    os.write(out_fd, json.dumps({'status': status, 'message': message[:400]}).encode())
    os._exit(0)


def run_python(path: str, timeout: float = TIMEOUT_S) -> Tuple[str, str]:
    """(status, message) of loading and running ``path`` in a forked child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _python_child(path, w)
    os.close(w)
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return 'hang', f'no answer in {timeout} s'
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 'crash', f'signal {signal.Signals(os.WTERMSIG(status)).name}'
    if os.WEXITSTATUS(status) != 0 or not chunks:
        return 'crash', f'exit status {os.WEXITSTATUS(status)} without an answer'
    answer = json.loads(b''.join(chunks))
    return answer['status'], answer['message']


def run_cpp(run_model: str, path: str, symbols: List[str], timeout: float = TIMEOUT_S) -> Tuple[str, str]:
    """(status, message) of ``run_model path --random`` (the C++ path, no Python)."""
    cmd = [run_model, path, '--random', '--warmup', '0', '--repeat', '1']
    for name in symbols:
        cmd += ['--dim', f'{name}={SYMBOL_VALUE}']
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors='replace', timeout=timeout)
    except subprocess.TimeoutExpired:
        return 'hang', f'no exit in {timeout} s'
    if done.returncode < 0:
        return 'crash', f'signal {signal.Signals(-done.returncode).name}'
    if done.returncode == 0:
        return 'ok', ''
    if done.returncode == 1 and done.stderr.startswith('error: '):
        return 'rejected', done.stderr.strip()[:400]
    return 'crash', f'exit status {done.returncode}: {done.stderr.strip()[-300:]}'


def fuzz(seeds: Dict[str, str], cases: int, seed: int = 0, kinds: Optional[List[str]] = None,
         run_model: Optional[str] = None, keep: Optional[str] = None, log=None) -> dict:
    """Run ``cases`` mutated artifacts (kinds in turn, seed artifacts at random) through Python and, given
    ``run_model``, C++. Returns {'counts': {path: {kind: {status: n}}}, 'findings': [...]}; findings are
    crashes, hangs and unexpected exceptions (their artifacts are written to ``keep`` if given)."""
    kinds = kinds or KINDS
    # Imported here, once: each forked child then starts loading at once (importing torch takes seconds).
    # Nothing here runs a kernel, so no OpenMP thread pool exists to be broken by fork.
    import torch  # noqa: F401

    import hidet.runtime.compiled_graph  # noqa: F401

    data = {name: open(p, 'rb').read() for name, p in seeds.items()}
    symbols = {name: list(json.loads(dict(read_container(b))['manifest.json']).get('symbols', []))
               for name, b in data.items()}
    counts = {'python': collections.defaultdict(collections.Counter),
              'cpp': collections.defaultdict(collections.Counter)}
    findings = []
    work = tempfile.mkdtemp(prefix='hidet-fuzz-')
    path = os.path.join(work, 'case.hidet')
    start = time.monotonic()
    for case in range(cases):
        kind = kinds[case % len(kinds)]
        rng = random.Random(f'{seed}:{case}')
        name = rng.choice(sorted(data))
        mutated, what = mutate(rng, kind, data[name])
        with open(path, 'wb') as f:
            f.write(mutated)
        runs = [('python', lambda: run_python(path))]
        if run_model:
            runs.append(('cpp', lambda: run_cpp(run_model, path, symbols[name])))
        for side, run in runs:
            status, message = run()
            counts[side][kind][status] += 1
            if status in ('crash', 'hang', 'unexpected'):
                finding = {'case': case, 'seed': seed, 'side': side, 'kind': kind, 'artifact': name, 'mutation': what,
                           'status': status, 'message': message}
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    finding['file'] = os.path.join(keep, f'case{case}-{name}-{kind}.hidet')
                    with open(finding['file'], 'wb') as f:
                        f.write(mutated)
                findings.append(finding)
                if log:
                    log(f'[{side}] case {case} {kind} {name}: {status}: {message[:200]} ({what})')
        if log and (case + 1) % 500 == 0:
            log(f'{case + 1}/{cases} cases, {time.monotonic() - start:.0f} s, {len(findings)} finding(s)')
    os.remove(path) if os.path.exists(path) else None
    os.rmdir(work)
    return {'cases': cases, 'seconds': round(time.monotonic() - start, 1),
            'counts': {side: {k: dict(c) for k, c in per.items()} for side, per in counts.items() if per},
            'findings': findings}


def table(result: dict) -> str:
    """The counts as a text table: one row per side and kind."""
    statuses = ['ok', 'rejected', 'unexpected', 'crash', 'hang']
    lines = [f'{"side":7}{"kind":20}' + ''.join(f'{s:>11}' for s in statuses)]
    for side, per in result['counts'].items():
        for kind in KINDS:
            if kind in per:
                lines.append(f'{side:7}{kind:20}' + ''.join(f'{per[kind].get(s, 0):>11}' for s in statuses))
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--cases', type=int, default=int(os.environ.get('HIDET_FUZZ_CASES', '1000')))
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--kinds', default='', help='comma-separated subset of ' + ','.join(KINDS))
    parser.add_argument('--run-model', default=os.environ.get('HIDET_RUN_MODEL'), help='the run_model binary (C++ path)')
    parser.add_argument('--seeds-dir', default=None, help='where the seed artifacts are (built there when absent)')
    parser.add_argument('--keep', default=None, help='write the artifacts of findings here')
    parser.add_argument('--json', default=None, help='write the result here')
    args = parser.parse_args()
    seeds_dir = args.seeds_dir or tempfile.mkdtemp(prefix='hidet-fuzz-seeds-')
    names = ['mlp', 'cnn', 'two_io', 'sym']
    if all(os.path.exists(os.path.join(seeds_dir, f'{n}.hidet')) for n in names):
        seeds = {n: os.path.join(seeds_dir, f'{n}.hidet') for n in names}
    else:  # built in a child: this process must not run kernels (OpenMP) before it forks
        subprocess.run([sys.executable, '-c', f'import sys; sys.path.insert(0, {HERE!r}); import fuzz_artifacts; '
                        f'fuzz_artifacts.build_seeds({seeds_dir!r})'], check=True)
        seeds = {n: os.path.join(seeds_dir, f'{n}.hidet') for n in names}
    kinds = [k for k in args.kinds.split(',') if k] or None
    result = fuzz(seeds, args.cases, args.seed, kinds, args.run_model, args.keep,
                  log=lambda s: print(s, file=sys.stderr, flush=True))
    print(table(result))
    print(f'{result["cases"]} cases in {result["seconds"]} s; {len(result["findings"])} finding(s)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
