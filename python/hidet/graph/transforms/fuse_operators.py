"""Operator fusion: groups of operators become one operator, and so one kernel.

Operators with a reduction (matmul, conv, pooling, sums, norms' statistics) are *anchors*; the
rest are injective. A producer group merges into its consumer group when everything the producer
group computes is read only by that consumer group (and is not a graph output), and
- both are injective: a chain of elementwise/shape ops becomes one kernel;
- the producer is injective, the consumer anchored: a *prologue*, recomputed at each read by the anchor
  (a norm's input cast; for a matmul or dense convolution only a cheap one: _prologue_ok);
- the producer is anchored, the consumer injective: an *epilogue* (e.g. bias + activation after a
  matmul), allowed only when each consumer element reads each anchor element once (or, after a matmul, two
  of its columns that the GEMM template takes as a paired epilogue: a SwiGLU on the interleaved gate / up
  GEMM, merge_sibling_matmuls) and the consumer is no larger than the anchor (a broadcast would recompute
  the reduction per element), not when it ends in a wider dtype that a reduction reads (the norm takes that
  cast as its prologue), and after a matmul or dense convolution only where the GEMM template still takes the
  fused task;
- both anchored: never, but for a *row-broadcast* group: plain reductions (ReduceOp) and the elementwise
  ops that read them broadcast over a row (``x - mean``, ``centered * rsqrt(var + eps)``, ``e / sum``) merge
  when the group's one output is row-broadcast (hidet.ir.schedulers.lowering.row_split: every reduction
  depends only on the row, and none is recomputed inside another), so layer / RMS / group norm and softmax
  each become one kernel that reads its input and writes its output once per element;
- either holds an operator that is not ``fusible`` (attention, whose template reads q, k, v as they are): never.
Three sweeps: injective chains (backward), epilogues (forward), then the rest (backward). Every group then has
one sink (the last member) whose outputs are the group's outputs, so running groups in the order of their sinks
respects all dependencies.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Set

from hidet.graph.flow_graph import FlowGraph, display_name
from hidet.graph.operator import Operator
from hidet.graph.ops.conv import ConvChannelsLastOp, ConvOp
from hidet.graph.ops.fused import FusedOperator, is_anchor
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.ops.reduce import ReduceOp
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.compose import count_reads, reads_data_dependent
from hidet.ir.expr import Binary, Call, Cast, Expr, TensorElement, Unary, evaluate_dim, symbols_of
from hidet.ir.functors import inline_computes, walk
from hidet.ir.schedulers.lowering import row_split
from hidet.kernels.matmul import operand_modes, paired_epilogue
from hidet.utils import logs


class _Group:
    def __init__(self, node: Operator, index: int):
        self.members: List[Operator] = [node]
        self.positions: List[int] = [index]
        self.anchors: List[Operator] = [node] if is_anchor(node) else []

    @property
    def sink(self) -> Operator:
        return self.members[self.positions.index(max(self.positions))]


class FuseOperators(GraphPass):
    name = 'fuse_operators'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        position = {id(node): i for i, node in enumerate(graph.nodes)}
        group_of: Dict[int, _Group] = {id(node): _Group(node, i) for i, node in enumerate(graph.nodes)}
        users = graph.consumers()
        graph_outputs = {id(t) for t in graph.outputs}

        def readers_outside(group: _Group) -> Optional[Set[int]]:
            """ids of the groups reading what ``group`` computes; None if it computes a graph output."""
            readers = set()
            for member in group.members:
                for t in member.outputs:
                    if id(t) in graph_outputs:
                        return None
                    readers.update(id(group_of[id(u)]) for u in users.get(id(t), []))
            readers.discard(id(group))
            return readers

        # _prologue_ok's verdicts by (producer, its size, consumer, its size): the sweeps ask again after every
        # merge into the consumer, and the answer (two GEMM matchings) only changes when either group grows
        prologue_verdicts: Dict[tuple, bool] = {}

        def prologue_ok(producer: _Group, consumer: _Group) -> bool:
            key = (producer, len(producer.members), consumer, len(consumer.members))
            if key not in prologue_verdicts:
                prologue_verdicts[key] = _prologue_ok(producer, consumer)
            return prologue_verdicts[key]

        def try_merge(producer: _Group, consumer: _Group) -> bool:
            if producer is consumer or readers_outside(producer) != {id(consumer)}:
                return False
            if not all(m.fusible for m in producer.members + consumer.members):
                return False
            if producer.anchors and consumer.anchors:
                if not _row_broadcast_ok(producer, consumer, position):
                    return False
            elif producer.anchors and not (_epilogue_ok(producer, consumer)
                                           or _row_broadcast_ok(producer, consumer, position)):
                return False
            elif producer.anchors and _widens_for_a_reduction(producer, consumer, users, graph_outputs):
                return False
            elif consumer.anchors and not producer.anchors and not prologue_ok(producer, consumer):
                return False
            consumer.members = producer.members + consumer.members
            consumer.positions = producer.positions + consumer.positions
            consumer.anchors = producer.anchors + consumer.anchors
            for member in producer.members:
                group_of[id(member)] = consumer
            return True

        # Three sweeps. Injective chains first, walking back from the graph's end (an activation written out as
        # several operators, GELU-tanh's eight, becomes one group reading its input once); then epilogues, walking
        # forward (bias + activation + residual join the matmul/conv that produces their input, before they could
        # become a prologue of the next one); then everything else (prologues by _prologue_ok, row-broadcast
        # groups), walking back again.
        def sweep_back(only_injective: bool):
            for node in reversed(graph.nodes):
                changed = True
                while changed:
                    changed = False
                    group = group_of[id(node)]
                    if only_injective and group.anchors:
                        break
                    for member in list(group.members):
                        for t in member.inputs:
                            if t.trace is None:
                                continue
                            producer = group_of[id(t.trace[0])]
                            if only_injective and producer.anchors:
                                continue
                            if try_merge(producer, group):
                                changed = True

        sweep_back(only_injective=True)
        for node in graph.nodes:
            if not is_anchor(node):
                group = group_of[id(node)]
                for t in node.inputs:
                    if t.trace is not None and group_of[id(t.trace[0])].anchors:
                        try_merge(group_of[id(t.trace[0])], group)
        sweep_back(only_injective=False)
        groups = list({id(g): g for g in group_of.values()}.values())
        groups.sort(key=lambda g: max(g.positions))
        log = logs.logger('fusion')
        log.info('%d operators -> %d kernels (%d fused groups)', len(graph.nodes), len(groups),
                 sum(1 for g in groups if len(g.members) > 1))
        if log.isEnabledFor(logging.DEBUG):
            for g in groups:
                members = sorted(g.members, key=lambda m: position[id(m)])
                kind = 'reductions' if len(g.anchors) > 1 else 'anchored' if g.anchors else 'injective'
                log.debug('  %s: %s', kind, ', '.join(display_name(m) for m in members))
        return _rebuild(graph, groups, position)


def _epilogue_ok(producer: _Group, consumer: _Group) -> bool:
    """Fusing ``consumer`` after an anchored ``producer`` computes each anchor element once per
    consumer element: the consumer is one injective sink no larger than the anchor, reading the
    producer's output once and not through data-dependent indices."""
    produced = producer.sink.outputs
    sink = consumer.sink
    if len(sink.outputs) != 1 or len(produced) != 1:
        return False
    if not _no_larger(sink.outputs[0], produced[0]):
        return False
    probe = FusedOperator.compose(consumer.members, [produced[0]] + _external_inputs(consumer.members, produced))
    out_node, in_node = probe.outputs[0], probe.inputs[0]
    reads = count_reads(out_node, in_node)
    if reads > 2 or reads_data_dependent(out_node):
        return False
    if reads == 2:  # (two columns of a matmul a tile holds both of: a SwiGLU on the interleaved gate / up GEMM)
        members = producer.members + consumer.members
        return any(_copies_operands(a) for a in producer.anchors) and \
            paired_epilogue(FusedOperator.compose(members, _external_inputs(members)))
    return _keeps_the_template(producer, consumer)


def _keeps_the_template(producer: _Group, consumer: _Group) -> bool:
    """Whether a matmul or dense convolution with ``consumer`` as its epilogue is still a GEMM its template takes
    (an epilogue reading it at indices the template cannot map, a flip, would leave the whole GEMM to the
    auto-scheduler, as GPT-2's MLP at batch 8 was, 800 ms a call, while the template missed its reshape pair)."""
    if not any(_copies_operands(a) for a in producer.anchors):
        return True
    members = producer.members + consumer.members
    if operand_modes(FusedOperator.compose(producer.members, _external_inputs(producer.members))) is None:
        return True  # (not a GEMM the template takes before either)
    return operand_modes(FusedOperator.compose(members, _external_inputs(members))) is not None


def _widens_for_a_reduction(producer: _Group, consumer: _Group, users, graph_outputs) -> bool:
    """Whether the epilogue would end in a wider dtype (a float16 residual cast to float32) that a reduction
    reads (a norm computing in float32): the anchor would write the wide copy and the norm read it back. The
    injective group stays for the norm's kernel instead, as its prologue, reading the narrow values."""
    out, produced = consumer.sink.outputs[0], producer.sink.outputs[0]
    if out.dtype.nbytes <= produced.dtype.nbytes or id(out) in graph_outputs:
        return False
    return any(isinstance(r, ReduceOp) for r in users.get(id(out), []))


def _row_broadcast_ok(producer: _Group, consumer: _Group, position: Dict[int, int]) -> bool:
    """Whether the two groups merged compute one row-broadcast output from plain reductions (ReduceOp; never a
    matmul or convolution, whose templates need their operands as they are)."""
    if not all(isinstance(a, ReduceOp) for a in producer.anchors + consumer.anchors):
        return False
    members = sorted(producer.members + consumer.members, key=lambda m: position[id(m)])
    if len(members[-1].outputs) != 1:
        return False
    out = FusedOperator.compose(members, _external_inputs(members)).outputs[0]
    return row_split(inline_computes(out.definition.value), out.definition.axes, out.shape) is not None


def _prologue_ok(producer: _Group, consumer: _Group) -> bool:
    """Whether the injective ``producer`` may be recomputed at each read by the anchored ``consumer``. A
    reduction's or a depthwise convolution's prologue: always (a norm's input cast, a residual add). A matmul or
    dense convolution's (whose template copies an operand read as it is with cp.async / TMA, and evaluates any
    other per element of each tile it loads, so once per tile of the other dimension): only re-indexing
    (transpose, reshape, padding) and at most MAX_PROLOGUE_OPS arithmetic operations in the operand's own dtype,
    and only where the operands stay copies (_keeps_operand_copies). A cast, an activation (GELU, SiLU, exp) or
    longer arithmetic runs once per element instead: in the epilogue of its producer's kernel (the epilogue
    sweep) or in a kernel of its own."""
    if not any(_copies_operands(a) for a in consumer.anchors):
        return True
    task = FusedOperator.compose(producer.members, _external_inputs(producer.members))
    ops = [_arithmetic_ops(inline_computes(out.definition.value), out.dtype) for out in task.outputs]
    if any(n is None or n > MAX_PROLOGUE_OPS for n in ops):
        return False
    return _keeps_operand_copies(producer, consumer, arithmetic=any(ops))


def _keeps_operand_copies(producer: _Group, consumer: _Group, arithmetic: bool) -> bool:
    """Whether the operands the consumer's template copies (cp.async / TMA) stay copies with the producer fused
    in. A gathered one (a convolution's window) must stay gathered: permuting a network's NCHW input or padding
    its channels inside the convolution made resnet's stem read its input element by element (45 µs against
    13). A direct one may become computed only for arithmetic (a scale), not for re-indexing alone, which costs
    a copy kernel at most."""
    members = consumer.members
    before = operand_modes(FusedOperator.compose(members, _external_inputs(members)))
    if before is None:
        return True
    fused = producer.members + members
    after = operand_modes(FusedOperator.compose(fused, _external_inputs(fused)))
    if after is None:
        return False
    copies = ('direct', 'gather')
    return all(b == 'computed' or a in copies or (b == 'direct' and arithmetic) for a, b in zip(after, before))


MAX_PROLOGUE_OPS = 4


def _copies_operands(op: Operator) -> bool:
    """Operators whose tensor-core template copies its operands as they are: matmuls and dense convolutions
    (a depthwise convolution's template reads its input element by element anyway)."""
    return isinstance(op, (MatmulOp, ConvChannelsLastOp)) or (isinstance(op, ConvOp) and op.attrs['groups'] == 1)


def _arithmetic_ops(value: Expr, dtype) -> Optional[int]:
    """The arithmetic operations on values of ``dtype`` (index arithmetic aside); None where there is a call or
    a cast to another type of floats (work to run once per element, not per tile read)."""
    ops = 0
    # (a read's indices are addressing, not work on values: not looked into)
    for e in walk(value, descend=lambda n: not isinstance(n, TensorElement)):
        if isinstance(e, TensorElement) and e.tensor.dtype.is_float() and e.tensor.dtype != dtype:
            return None
        if isinstance(e, Call):
            return None
        if isinstance(e, Cast) and e.dtype.is_float() and e.a.dtype.is_float() and e.dtype != e.a.dtype:
            return None
        if isinstance(e, (Binary, Unary)) and e.dtype.is_float():
            ops += 1
    return ops


def _no_larger(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` has at most as many elements as ``b``; with symbolic dimensions, at two sample sizes of
    every symbol (sizes are products of dimensions, so this orders them for all sizes in practice)."""
    names = symbols_of(list(a.shape) + list(b.shape))
    if not names:
        return a.numel() <= b.numel()

    def numel(t: Tensor, size: int) -> int:
        n = 1
        for d in t.shape:
            n *= evaluate_dim(d, {name: size for name in names})
        return n

    return all(numel(a, size) <= numel(b, size) for size in (7, 1024))


def _external_inputs(members: List[Operator], extra: List[Tensor] = ()) -> List[Tensor]:
    produced = {id(t) for m in members for t in m.outputs}
    seen = {id(t) for t in extra}
    found = []
    for m in members:
        for t in m.inputs:
            if id(t) not in produced and id(t) not in seen:
                seen.add(id(t))
                found.append(t)
    return found


def _rebuild(graph: FlowGraph, groups: List[_Group], position: Dict[int, int]) -> FlowGraph:
    mapping: Dict[int, Tensor] = {}
    for group in groups:
        members = sorted(group.members, key=lambda m: position[id(m)])
        if len(members) == 1:
            node = members[0]
            inputs = [mapping.get(id(t), t) for t in node.inputs]
            new_outputs = node.clone(inputs).outputs if any(a is not b for a, b in zip(inputs, node.inputs)) \
                else node.outputs
        else:
            inputs = _external_inputs(members)
            fused = FusedOperator(members, inputs, [mapping.get(id(t), t) for t in inputs])
            new_outputs = fused.outputs
        for old, new in zip(group.sink.outputs, new_outputs):
            mapping[id(old)] = new
    return FlowGraph([mapping.get(id(t), t) for t in graph.outputs], graph.inputs)
