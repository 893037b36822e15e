"""einsum: an equation over operands as permutes, reshapes, one batched matmul where two operands contract,
else broadcast products and sums."""
from __future__ import annotations

import numpy as np

from hidet.graph.ops.arithmetic import multiply
from hidet.graph.ops.matmul import matmul
from hidet.graph.ops.reduce import sum as reduce_sum
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.transform import broadcast, permute
from hidet.graph.tensor import Tensor


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """torch.einsum / numpy.einsum: ``equation`` over ``operands`` ('...' for broadcast dimensions; implicit
    output without '->'). Two operands that contract become one batched matmul; otherwise broadcast products
    and sums. A label repeated within one operand (a diagonal) is not supported."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(' ', '')
    tensors = list(operands)
    lhs, _, rhs = eq.partition('->')
    terms = lhs.split(',')
    if len(terms) != len(tensors):
        raise ValueError(f'einsum: equation {eq!r} names {len(terms)} operands, got {len(tensors)}')
    # '...' becomes fresh upper-case labels, as many as the broadcast dims of each operand
    ell_rank = max([t.ndim - len(term.replace('...', '')) for term, t in zip(terms, tensors) if '...' in term],
                   default=0)
    ell = ''.join(chr(ord('A') + i) for i in range(ell_rank))
    subs = []
    for term, t in zip(terms, tensors):
        if '...' in term:
            k = t.ndim - len(term.replace('...', ''))
            term = term.replace('...', ell[ell_rank - k:])
        if len(term) != t.ndim:
            raise ValueError(f'einsum: term {term!r} does not match an operand of shape {t.shape}')
        if len(set(term)) != len(term):
            raise NotImplementedError(f'einsum: repeated labels in one operand ({term!r}, a diagonal) are not '
                                      'supported')
        subs.append(term)
    if '->' not in eq:
        counts = {}
        for s in subs:
            for ch in s:
                counts[ch] = counts.get(ch, 0) + 1
        rhs = ell + ''.join(sorted(ch for ch, n in counts.items() if n == 1 and ch not in ell))
    else:
        rhs = rhs.replace('...', ell)
    labels = list(dict.fromkeys(rhs + ''.join(subs)))
    sizes = {}
    for s, t in zip(subs, tensors):
        for ch, n in zip(s, t.shape):
            if n != 1:
                sizes[ch] = n
    # two operands contracting over labels: one batched matmul; otherwise broadcast products and sums
    if len(tensors) == 2:
        out = _einsum_matmul(subs, tensors, rhs, sizes)
        if out is not None:
            return out
    aligned = []
    for s, t in zip(subs, tensors):
        order = [s.index(ch) for ch in labels if ch in s]
        t = permute(t, order) if order != list(range(t.ndim)) else t
        shape = [t.shape[[ch for ch in labels if ch in s].index(ch)] if ch in s else 1 for ch in labels]
        aligned.append(reshape(t, shape) if tuple(shape) != t.shape else t)
    prod = aligned[0]
    for t in aligned[1:]:
        prod = multiply(prod, t)
    summed = [i for i, ch in enumerate(labels) if ch not in rhs]
    out = reduce_sum(prod, summed) if summed else prod
    kept = [ch for ch in labels if ch in rhs]
    order = [kept.index(ch) for ch in rhs]
    out = permute(out, order) if order != list(range(len(order))) else out
    target = [sizes.get(ch, 1) for ch in rhs]
    return broadcast(out, target) if tuple(target) != out.shape else out


def _einsum_matmul(subs, tensors, rhs, sizes):
    (sa, sb), (a, b) = subs, tensors
    if any(a.shape[sa.index(ch)] != b.shape[sb.index(ch)] for ch in set(sa) & set(sb)):
        return None  # a broadcast dim of size 1: leave it to the generic path
    batch = [ch for ch in rhs if ch in sa and ch in sb]
    contract = [ch for ch in sa if ch in sb and ch not in rhs]
    m = [ch for ch in sa if ch not in sb]
    n = [ch for ch in sb if ch not in sa]
    if not contract or any(ch not in rhs for ch in m + n):
        return None
    pa = permute(a, [sa.index(ch) for ch in batch + m + contract])
    pb = permute(b, [sb.index(ch) for ch in batch + contract + n])

    def size(chs):
        return int(np.prod([sizes.get(ch, 1) for ch in chs])) if chs else 1

    bs = [sizes.get(ch, 1) for ch in batch]
    ma = reshape(pa, bs + [size(m), size(contract)])
    mb = reshape(pb, bs + [size(contract), size(n)])
    out = reshape(matmul(ma, mb), bs + [sizes.get(ch, 1) for ch in m + n])
    cur = batch + m + n
    order = [cur.index(ch) for ch in rhs]
    return permute(out, order) if order != list(range(len(order))) else out
