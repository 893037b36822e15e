"""PassContext: the options of graph optimization, active inside a ``with`` block.

    with hidet.graph.PassContext() as ctx:
        ctx.set_precision('float16')        # run float32 parts of the graph in float16
        ctx.set_reduce_precision('float32')  # accumulate reductions in float32 (the default)
        ctx.set_use_tensor_core(True)
        graph = hidet.graph.optimize(graph)

The context is an object passed to every pass; ``current()`` reads the innermost active one of
this thread (a default context when none is active).
"""
from __future__ import annotations

import copy
import threading
from typing import List, Optional

from hidet.option import Options

_PRECISIONS = ('float16', 'bfloat16', 'float32')


class PassContext:
    def __init__(self):
        self.precision: Optional[str] = None
        self.reduce_precision: Optional[str] = None
        self.use_tensor_core: bool = False
        self.parallel_k: str = 'default'
        self.channels_last: Optional[bool] = None
        self.verbose: bool = False
        # how the kernels that passes run (constant folding) build: optimize fills it in (with the options it is
        # given, else the current ones) so that no pass reads hidet.option itself
        self.options: Optional[Options] = None

    def set_precision(self, dtype: Optional[str] = None) -> 'PassContext':
        """Run the graph's float32 computations in ``dtype`` (float16/bfloat16); None keeps them."""
        if dtype is not None and dtype not in _PRECISIONS:
            raise ValueError(f'precision must be one of {_PRECISIONS} or None, got {dtype!r}')
        self.precision = None if dtype == 'float32' else dtype
        return self

    def set_reduce_precision(self, dtype: Optional[str] = None) -> 'PassContext':
        """Accumulate reductions in ``dtype`` (default: float32 for 16-bit inputs, DESIGN contract 5)."""
        if dtype is not None and dtype not in _PRECISIONS:
            raise ValueError(f'reduce precision must be one of {_PRECISIONS} or None, got {dtype!r}')
        self.reduce_precision = dtype
        return self

    def set_use_tensor_core(self, flag: bool = True) -> 'PassContext':
        """Allow TF32 tensor cores in float32 matmuls and convolutions on CUDA (operands rounded to 10-bit
        mantissas, float32 accumulation; 16-bit ones always use tensor cores). Off: float32 stays exact."""
        self.use_tensor_core = bool(flag)
        return self

    def set_parallel_k(self, disabled: bool = False, search: bool = False, nparts: Optional[int] = None
                       ) -> 'PassContext':
        """Split-k of the tensor-core matmul template (a matmul whose M·N tiles do not fill the GPU splits
        its K among blocks): 'default' (a heuristic per shape), 'disabled' (never split), 'search' (tuning
        levels 1 and 2 also try 2, 4, 8 and 16 parts) or ``nparts`` (always that many, where K allows)."""
        if nparts is not None and (int(nparts) < 1 or int(nparts) > 16):
            raise ValueError(f'set_parallel_k: nparts must be in 1..16, got {nparts}')
        choices = [bool(disabled), bool(search), nparts is not None]
        if sum(choices) > 1:
            raise ValueError('set_parallel_k: choose at most one of disabled, search and nparts')
        self.parallel_k = 'disabled' if disabled else 'search' if search else \
            str(int(nparts)) if nparts is not None else 'default'
        return self

    def set_channels_last(self, flag: Optional[bool] = None) -> 'PassContext':
        """Run 2-D convolutions in channels-last layout (the channels_last pass): None (the default) where
        the tensor-core template gathers channels (float16/bfloat16 on CUDA, channels a multiple of 8),
        True for every ungrouped 2-D convolution, False never."""
        if flag is not None and not isinstance(flag, bool):
            raise TypeError(f'set_channels_last takes True, False or None, got {flag!r}')
        self.channels_last = flag
        return self

    def set_verbose(self, flag: bool = True) -> 'PassContext':
        """Print each pass's effect (node counts) while optimizing."""
        self.verbose = bool(flag)
        return self

    def with_options(self, options: Options) -> 'PassContext':
        """A copy of this context whose kernels build with ``options``."""
        ctx = copy.copy(self)
        ctx.options = options
        return ctx

    def __enter__(self) -> 'PassContext':
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()

    def __repr__(self) -> str:
        return (f'PassContext(precision={self.precision}, reduce_precision={self.reduce_precision}, '
                f'use_tensor_core={self.use_tensor_core}, parallel_k={self.parallel_k!r}, '
                f'channels_last={self.channels_last})')


_local = threading.local()


def _stack() -> List[PassContext]:
    if not hasattr(_local, 'stack'):
        _local.stack = []
    return _local.stack


def current() -> PassContext:
    stack = _stack()
    return stack[-1] if stack else PassContext()
