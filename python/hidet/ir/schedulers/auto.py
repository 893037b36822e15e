"""The auto-scheduler: any injective or reduction Task → an IRModule for the CPU or CUDA.

Each output becomes one kernel. Reads of intermediate (computed) tensors are inlined, so the
kernel reads only the task's inputs, at flat row-major indices.
- CPU: one OpenMP-parallel loop over the output's elements; reductions run serially per element.
- CUDA, injective: a grid-stride loop, one element per thread per step.
- CUDA, reduction: one thread block per output element when the reduced extent is large (≥ 128),
  else one warp per output element: the threads stride over the reduced elements, then combine
  through warp shuffles (and shared memory across warps; hidet/kernel/cuda.h).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import DataType, int64
from hidet.ir.expr import BufferLoad, Constant, Expr, TensorElement, Var, binary, call, cast, convert
from hidet.ir.functors import collect, inline_computes, rewrite, substitute
from hidet.ir.stmt import Assign, Declare, For, Function, If, IRModule, Seq, Stmt, Store
from hidet.ir.task import Task

CUDA_BLOCK = 256
CUDA_MAX_GRID = 65536 * 8
BLOCK_REDUCE_MIN_EXTENT = 128


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def flat_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    index: Expr = convert(0)
    for i, (idx, extent) in enumerate(zip(indices, shape)):
        index = idx if i == 0 else index * extent + idx
    return index


def unflatten(flat: Expr, shape: Sequence[int]) -> List[Expr]:
    """The per-dimension indices of flat row-major index ``flat``."""
    out, stride = [], 1
    for extent in reversed(shape):
        if extent == 1:
            out.append(convert(0))
        else:
            idx = flat if stride == 1 else flat / stride
            out.append(idx % extent if stride * extent < _prod(shape) else idx)
        stride *= extent
    return list(reversed(out))


def reduce_init(kind: str, dtype: DataType) -> Expr:
    if kind in ('sum', 'mean'):
        return Constant(0, dtype)
    if kind == 'prod':
        return Constant(1, dtype)
    if kind in ('any', 'all'):
        return Constant(kind == 'all', dtype)
    return call('hidet_lowest' if kind == 'max' else 'hidet_highest', dtype=dtype)


def reduce_combine(kind: str, acc: Expr, value: Expr) -> Expr:
    value = cast(value, acc.dtype)
    if kind in ('sum', 'mean'):
        return binary('+', acc, value)
    if kind == 'prod':
        return binary('*', acc, value)
    if kind == 'any':
        return binary('||', acc, value)
    if kind == 'all':
        return binary('&&', acc, value)
    return binary(kind, acc, value)


class _Lowering:
    """Lowers the value of one output element into statements; reductions become accumulators."""

    def __init__(self, params: Dict[int, Var], target: str):
        self.params = params
        self.target = target
        self.counter = 0

    def fresh(self, prefix: str, dtype) -> Var:
        self.counter += 1
        return Var(f'{prefix}{self.counter}', dtype)

    def loads(self, expr: Expr) -> Expr:
        def fn(e):
            if isinstance(e, TensorElement):
                return BufferLoad(self.params[id(e.tensor)], flat_index(e.indices, e.tensor.shape), e.tensor.dtype)
            return None

        return rewrite(expr, fn)

    def value(self, expr: Expr, stmts: List[Stmt], mode: str) -> Expr:
        """Emit statements computing ``expr``; returns the expression of its value."""
        top_reduces = self._top_reduces(expr)
        mapping = {}
        for r in top_reduces:
            mapping[r] = self.reduction(r, stmts, mode)
        return self.loads(rewrite(expr, lambda e: mapping.get(e)) if mapping else expr)

    @staticmethod
    def _top_reduces(expr: Expr) -> List[ReduceCompute]:
        nested = set()
        reduces = collect(expr, ReduceCompute)
        for r in reduces:
            for inner in collect(r.value, ReduceCompute):
                if inner is not r:
                    nested.add(id(inner))
        return [r for r in reduces if id(r) not in nested]

    def reduction(self, r: ReduceCompute, stmts: List[Stmt], mode: str) -> Expr:
        """``mode``: 'thread' (one thread reduces alone), 'warp' or 'block' (the threads of a warp or
        block share the reduced elements, then combine through shuffles)."""
        acc = self.fresh('acc', r.acc_dtype)
        stmts.append(Declare(acc, reduce_init(r.kind, r.acc_dtype)))
        extent = _prod(r.shape)
        k = self.fresh('k', int64)
        start, step = {'thread': (convert(0), convert(1)),
                       'warp': (call('hidet_lane_idx', dtype=int64), convert(32)),
                       'block': (call('hidet_thread_idx', dtype=int64), convert(CUDA_BLOCK))}[mode]
        body: List[Stmt] = []
        value = substitute(r.value, dict(zip(r.axes, unflatten(k, r.shape))))
        v = self.value(value, body, mode='thread')  # nested reductions run per thread
        body.append(Assign(acc, reduce_combine(r.kind, acc, v)))
        stmts.append(For(k, start, extent, step, Seq(body)))
        if mode != 'thread':
            combine = f'hidet_{mode}_reduce_{_combine_name(r.kind)}'
            stmts.append(Assign(acc, call(combine, acc, dtype=r.acc_dtype)))
        result: Expr = acc
        if r.kind == 'mean':
            result = binary('/', result, Constant(extent, r.acc_dtype))
        return cast(result, r.dtype)


def _combine_name(kind: str) -> str:
    return {'mean': 'sum', 'any': 'or', 'all': 'and'}.get(kind, kind)


def _output_kernel(task: Task, out: TensorNode, out_param: Var, params: Dict[int, Var], target: str,
                   name: str) -> Function:
    axes = out.definition.axes
    value = inline_computes(out.definition.value)
    numel = _prod(out.shape)
    lowering = _Lowering(params, target)
    reduces = collect(value, ReduceCompute)
    largest_reduce = max((_prod(r.shape) for r in reduces), default=0)
    if target == 'cpu' or largest_reduce <= 1:
        mode = 'thread'
    else:
        mode = 'block' if largest_reduce >= BLOCK_REDUCE_MIN_EXTENT else 'warp'
    n = Var('n', int64)
    body: List[Stmt] = []
    element_value = lowering.value(substitute(value, dict(zip(axes, unflatten(n, out.shape)))), body, mode)
    store = Store(out_param, n, element_value)
    all_params = [params[id(t)] for t in task.inputs] + [out_param]
    if target == 'cpu':
        loop = For(n, 0, numel, 1, Seq(body + [store]), kind='parallel')
        return Function(name, all_params, loop, 'cpu')
    if mode == 'thread':
        grid = min((numel + CUDA_BLOCK - 1) // CUDA_BLOCK, CUDA_MAX_GRID)
        loop = For(n, call('hidet_global_thread_idx', dtype=int64), numel,
                   call('hidet_global_threads', dtype=int64), Seq(body + [store]))
        return Function(name, all_params, loop, 'cuda', grid=(max(grid, 1),), block=(CUDA_BLOCK,))
    # warp / block: a group of threads per output element; its first thread stores the result
    per_block, first, group, groups = {
        'warp': (CUDA_BLOCK // 32, 'hidet_lane_idx', 'hidet_global_warp_idx', 'hidet_global_warps'),
        'block': (1, 'hidet_thread_idx', 'hidet_block_idx', 'hidet_grid_dim')}[mode]
    guarded = Seq(body + [If(binary('==', call(first, dtype=int64), 0), store)])
    loop = For(n, call(group, dtype=int64), numel, call(groups, dtype=int64), guarded)
    grid = min((numel + per_block - 1) // per_block, CUDA_MAX_GRID)
    return Function(name, all_params, loop, 'cuda', grid=(max(grid, 1),), block=(CUDA_BLOCK,))


def schedule_task(task: Task, target: str) -> IRModule:
    """Lower ``task`` for ``target`` ('cpu' or 'cuda')."""
    if target not in ('cpu', 'cuda'):
        raise ValueError(f"unknown target {target!r}: expected 'cpu' or 'cuda'")
    params: Dict[int, Var] = {}
    for i, t in enumerate(task.inputs):
        params[id(t)] = Var(f'in{i}', t.dtype, pointer=True)
    functions = []
    for i, out in enumerate(task.outputs):
        if out.is_input():
            raise ValueError(f'task {task.name}: output {out.name} is an input; outputs must be computed')
        out_param = Var(f'out{i}', out.dtype, pointer=True)
        functions.append(_output_kernel(task, out, out_param, params, target, f'{task.name}_k{i}'))
    return IRModule(task.name, target, functions, len(task.inputs), len(task.outputs))
