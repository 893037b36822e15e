"""The ``.hidet`` artifact container (docs/artifact.md): named entries with FNV-1a-64 hashes.

Python writes artifacts; the C++ runtime reads them (and so runs every CompiledGraph). ``read``
here is for inspection and tests (e.g. ``hidet.runtime.artifact.read_manifest(path)``).
"""
from __future__ import annotations

import json
import struct
from typing import Dict, List, Tuple

import numpy as np

from hidet import _C

MAGIC = b'HIDETART'
CONTAINER_VERSION = 1
FORMAT_VERSION = 1            # static graphs
SYMBOLIC_FORMAT_VERSION = 2   # graphs with symbolic dimensions (manifest "symbols", dims as expressions)
ALIGN = 64

_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a64(data) -> int:
    """FNV-1a 64-bit hash of ``data`` (bytes-like; computed by the C++ runtime: the loader checks the same)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    return _C.fnv1a64(arr.ctypes.data if arr.nbytes else 0, arr.nbytes)


def fold_dim(entry, leaf, apply):
    """Walk a manifest shape entry (hidet.ir.expr.dim_postfix): ``leaf(int or symbol name)`` for each operand,
    ``apply(op, a, b)`` for each operator of a postfix expression."""
    if isinstance(entry, (int, str)):
        return leaf(entry)
    stack = []
    for tok in entry:
        if tok in ('+', '-', '*', '/', '%'):
            b, a = stack.pop(), stack.pop()
            stack.append(apply(tok, a, b))
        else:
            stack.append(leaf(tok))
    return stack[0]


def eval_dim(entry, values: Dict[str, int]) -> int:
    """The value of a manifest shape entry for the symbols' ``values`` (C integer semantics)."""
    def apply(op: str, a: int, b: int) -> int:
        if op in ('+', '-', '*'):
            return a + b if op == '+' else a - b if op == '-' else a * b
        if b == 0:
            raise ValueError('a shape divides by zero')
        q = abs(a) // abs(b)  # C truncates toward zero
        q = q if (a >= 0) == (b >= 0) else -q
        return q if op == '/' else a - q * b

    return fold_dim(entry, lambda t: t if isinstance(t, int) else values[t], apply)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _byte_view(part) -> memoryview:
    """``part`` (bytes-like, or a numpy array) as a flat view of its bytes."""
    if isinstance(part, np.ndarray):
        return memoryview(np.ascontiguousarray(part).reshape(-1).view(np.uint8))
    view = memoryview(part)
    return view if view.format == 'B' and view.ndim == 1 else view.cast('B')


def _copies_itself(part) -> bool:
    """Whether ``part`` copies its bytes where it is told (``nbytes``, ``copy_to(address)``: a tensor's storage)."""
    return hasattr(part, 'copy_to')


def write(entries: List[Tuple[str, object]], hashes: bool = True) -> bytearray:
    """The container bytes holding ``entries`` (name, data) in order. An entry's data is bytes-like or a list of
    parts that it concatenates: bytes-like objects, numpy arrays, or objects with ``nbytes`` and
    ``copy_to(address)`` that copy their bytes to host memory (a graph's weights, from their tensors' storage on
    the host or a GPU straight into place: gpt2's 500 MB of float32 weights had been copied six times, 4 s on a
    2-core CPU).
    ``hashes`` False: the entries' hashes are left 0, for bytes handed straight to the runtime in this process
    (hidet_graph_load_built); ``add_hashes`` fills them in before such bytes go anywhere else."""
    parts_of = [list(data) if isinstance(data, (list, tuple)) else [data] for _, data in entries]
    views_of = [[p if _copies_itself(p) else _byte_view(p) for p in parts] for parts in parts_of]
    sizes = [sum(v.nbytes for v in views) for views in views_of]
    header_size = 16 + sum(4 + len(name.encode()) + 24 for name, _ in entries)
    offsets, offset = [], _align(header_size)
    for size in sizes:
        offsets.append(offset)
        offset = _align(offset + size)
    end = offsets[-1] + sizes[-1] if entries else _align(header_size)
    out = bytearray(end)  # no padding after the last entry: any truncation cuts into data
    base = np.frombuffer(out, dtype=np.uint8).ctypes.data if end else 0
    with memoryview(out) as view:
        headers = []
        for (name, _), views, at, size in zip(entries, views_of, offsets, sizes):
            pos = at
            for v in views:
                if _copies_itself(v):
                    v.copy_to(base + pos)
                else:
                    view[pos:pos + v.nbytes] = v
                pos += v.nbytes
            raw = name.encode()
            digest = fnv1a64(view[at:at + size]) if hashes else 0
            headers.append(struct.pack('<I', len(raw)) + raw + struct.pack('<QQQ', at, size, digest))
        head = MAGIC + struct.pack('<II', CONTAINER_VERSION, len(entries)) + b''.join(headers)
        view[:len(head)] = head
    return out


def add_hashes(data: bytearray) -> None:
    """Fill in the entry hashes of container ``data`` written with ``write(..., hashes=False)``, in place."""
    with memoryview(data) as view:
        for _, offset, size, _, digest_at in _entry_table(data):
            struct.pack_into('<Q', data, digest_at, fnv1a64(view[offset:offset + size]))


def _entry_table(data, source: str = '<memory>'):
    """The entries of container ``data`` as (name, offset, size, digest, where the digest is stored), each checked
    to lie inside ``data``; errors name ``source`` and what is wrong."""
    if len(data) < 16 or data[:8] != MAGIC:
        raise ValueError(f'{source} is not a hidet artifact (bad magic)')
    version, count = struct.unpack_from('<II', data, 8)
    if version != CONTAINER_VERSION:
        raise ValueError(f'{source}: container version {version}; this hidet reads version {CONTAINER_VERSION}')
    pos = 16
    for _ in range(count):
        if pos + 4 > len(data):
            raise ValueError(f'{source} is truncated (entry table)')
        (n,) = struct.unpack_from('<I', data, pos)
        name = bytes(data[pos + 4:pos + 4 + n]).decode()
        pos += 4 + n
        if pos + 24 > len(data):
            raise ValueError(f'{source} is truncated (entry table)')
        offset, size, digest = struct.unpack_from('<QQQ', data, pos)
        if offset + size > len(data):
            raise ValueError(f'{source} is truncated: entry {name} ends at byte {offset + size} but the file has '
                             f'{len(data)} bytes')
        yield name, offset, size, digest, pos + 16
        pos += 24


def read(data: bytes, source: str = '<memory>') -> Dict[str, bytes]:
    """The entries of container ``data``; errors name ``source`` and what is wrong."""
    entries = {}
    for name, offset, size, digest, _ in _entry_table(data, source):
        blob = data[offset:offset + size]
        if fnv1a64(blob) != digest:
            raise ValueError(f'{source} is corrupt: hash mismatch in {name}')
        entries[name] = blob
    return entries


def read_manifest(path: str) -> dict:
    with open(path, 'rb') as f:
        return json.loads(read(f.read(), path)['manifest.json'])
