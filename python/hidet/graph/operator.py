"""Operator: a Task applied to tensors. On concrete inputs it runs at once (compiling its kernel on
first use) — except inside ``deferred_constants()`` —; on symbolic inputs it records itself in its
outputs' ``trace``."""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Dict, List, Optional, Sequence

from hidet.graph.tensor import Tensor, _empty, bind_symbols
from hidet.ir.expr import evaluate_dim
from hidet.ir.task import Task
from hidet.option import Options
from hidet.runtime.device import device as _device

_deferral = threading.local()


@contextlib.contextmanager
def deferred_constants():
    """Inside, operators on concrete tensors are traced like symbolic ones instead of running one by one:
    graph frontends convert weights (batch-norm scales, transposes, casts) this way, and the graph's
    ``fold_constants`` pass evaluates them all on the host from their compute definitions (hidet.ir.evaluate)
    — rather than one kernel compile per operator while the model is being converted."""
    _deferral.depth = getattr(_deferral, 'depth', 0) + 1
    try:
        yield
    finally:
        _deferral.depth -= 1


class Operator:
    """Subclasses build their Task in ``__init__``; the arguments of that call are kept so
    ``reforward`` can build the same operator for inputs of other dtypes (graph passes use it)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get('__init__')
        if init is None:
            return

        @functools.wraps(init)
        def recording_init(self, *args, **kw):
            if not hasattr(self, '_construction'):  # the outermost subclass's call
                self._construction = (args, kw)
            init(self, *args, **kw)

        cls.__init__ = recording_init

    # False for operators whose template reads their own inputs and writes their own output as they are
    # (attention): the fusion pass leaves them alone
    fusible = True

    def __init__(self, inputs: Sequence[Tensor], attrs: Dict[str, Any], task: Task, device=None):
        """``device``: where an operator without inputs (a creation of a symbolic size) runs."""
        self.inputs: List[Tensor] = list(inputs)
        self.attrs = attrs
        self.task = task
        devices = {t.device for t in self.inputs}
        if len(devices) > 1:
            raise ValueError(f'{task.name}: inputs are on different devices ({", ".join(sorted(map(str, devices)))}); '
                             'move them to one device with .to(device)')
        if not devices:
            if device is None:
                raise ValueError(f'{task.name}: an operator without input tensors needs a device')
            devices = {_device(device)}
        self.device = devices.pop()
        self.outputs: List[Tensor] = [
            Tensor(out.shape, out.dtype, self.device, None, trace=(self, i)) for i, out in enumerate(task.outputs)
        ]

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def target(self) -> str:
        return 'cuda' if self.device.is_cuda() else 'cpu'

    def run(self) -> List[Tensor]:
        """Compute the outputs from concrete inputs."""
        return self.compute(self.inputs)

    def compute(self, inputs: Sequence[Tensor], symbol_values: Optional[Dict[str, int]] = None,
                options: Optional[Options] = None) -> List[Tensor]:
        """Run this operator's kernel on concrete ``inputs`` (shaped like ``self.inputs``) into new tensors.
        The symbolic dimensions' values are read from the inputs' shapes, or given (by a graph run); the kernel
        builds with ``options`` (hidet.option.Options; without them, the current ones)."""
        # (the drivers load at the first kernel built: import hidet stays light)
        from hidet.drivers import build_task
        symbols = self.task.symbols()
        values = {} if not symbols else dict(symbol_values) if symbol_values is not None else \
            bind_symbols(self.inputs, inputs)
        outputs = [_empty([evaluate_dim(d, values) for d in t.shape], t.dtype, self.device) for t in self.outputs]
        # Empty inputs still launch: a kernel reads only the elements its outputs need (a matmul with
        # k = 0 writes zeros, a constant pad of an empty tensor writes the padding).
        if all(t.numel() > 0 for t in outputs):
            dims = [values[name] for name in symbols]
            build_task(self.task, self.target, options=options)['launch'](*inputs, *outputs, dims=dims)
        return outputs

    def clone(self, inputs: Sequence[Tensor]) -> 'Operator':
        """The same operator (task and attributes) applied to other inputs of the same shapes and dtypes;
        graph passes rebuild graphs with it."""
        for old, new in zip(self.inputs, inputs):
            if old.shape != new.shape or old.dtype != new.dtype:
                raise ValueError(f'{self.name}.clone: input {new.signature()} does not match {old.signature()}')
        op = object.__new__(type(self))
        op.inputs, op.attrs, op.task, op.device = list(inputs), self.attrs, self.task, self.device
        op.outputs = [Tensor(t.shape, t.dtype, self.device, None, trace=(op, i)) for i, t in enumerate(self.outputs)]
        if hasattr(self, '_construction'):
            op._construction = _substitute(self._construction, dict(zip(map(id, self.inputs), inputs)))
        return op

    def reforward(self, inputs: Sequence[Tensor]) -> 'Operator':
        """This operator built anew for ``inputs`` (which may differ in dtype from ``self.inputs``)."""
        if not hasattr(self, '_construction'):
            raise TypeError(f'{self.name} cannot be rebuilt for new inputs (it was not made by a constructor call)')
        args, kwargs = _substitute(self._construction, dict(zip(map(id, self.inputs), inputs)))
        return type(self)(*args, **kwargs)

    def get_outputs(self) -> List[Tensor]:
        """All outputs: computed at once for concrete inputs, symbolic otherwise."""
        # (symbols with concrete inputs: a size only a graph run knows, as a slice of a table to the sequence length)
        if any(t.is_symbolic() for t in self.inputs) or getattr(_deferral, 'depth', 0) or self.task.symbols():
            return list(self.outputs)
        return self.run()

    def get_output(self, index: int = 0) -> Tensor:
        return self.get_outputs()[index]

    def __repr__(self) -> str:
        attrs = ', '.join(f'{k}={v!r}' for k, v in self.attrs.items())
        return f'{self.name}({attrs})'


def _substitute(value, mapping: Dict[int, Tensor]):
    """``value`` with the tensors of ``mapping`` (by identity) replaced, inside tuples, lists and dicts."""
    if isinstance(value, Tensor):
        return mapping.get(id(value), value)
    if isinstance(value, (list, tuple)):
        items = [_substitute(v, mapping) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _substitute(v, mapping) for k, v in value.items()}
    return value
