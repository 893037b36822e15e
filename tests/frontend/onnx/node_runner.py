"""Runs the node tests of ``onnx.backend.test`` through hidet's ONNX frontend on the CPU.

Cases come from the installed onnx: its data directories (onnx/backend/test/data/node/*/model.onnx
with test_data_set_*/{input,output}_*.pb) where the wheel ships them, else the same cases generated
in memory by ``onnx.backend.test.case.node.collect_testcases()``. A case is *covered* when every node
of its model has a converter in the registry; covered cases whose model the frontend rejects
(an unsupported attribute or dtype) are skipped with that reason, the rest run and are compared with
their expected outputs.

Kernels are built in two phases to make the most of the cores: every case is first traced
symbolically and the kernels of all traces are compiled together in parallel (through the on-disk
cache); then each case runs imperatively on its inputs, finding its kernels already built.

    python tests/frontend/onnx/node_runner.py [-k substring] [-v]
"""
from __future__ import annotations

import glob
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np


@dataclass
class Case:
    name: str
    model: object
    data_sets: List[Tuple[List[np.ndarray], List[np.ndarray]]]
    rtol: float = 1e-3
    atol: float = 1e-7


@dataclass
class Result:
    name: str
    status: str  # 'passed', 'failed', 'skipped'
    reason: str = ''


@dataclass
class Report:
    results: List[Result] = field(default_factory=list)
    uncovered: int = 0
    expanded: int = 0
    seconds: float = 0.0

    def of(self, status: str) -> List[Result]:
        return [r for r in self.results if r.status == status]

    def summary(self) -> str:
        p, f, s = (len(self.of(k)) for k in ('passed', 'failed', 'skipped'))
        return (f'onnx node tests through hidet (CPU): {p} passed, {f} failed, {s} skipped of {len(self.results)} '
                f'covered cases ({self.uncovered} cases use operators without a converter; {self.expanded} '
                f'*_expanded cases, function bodies of the ops above, not run: pass --expanded) in {self.seconds:.0f} s')


# ---------------------------------------------------------------- collecting
def collect_cases() -> List[Case]:
    import onnx

    data_dir = os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data', 'node')
    if os.path.isdir(data_dir):
        return _cases_from_dir(data_dir)
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        cases = node.collect_testcases()
    return [Case(c.name, c.model, [(_arrays(i), _arrays(o)) for i, o in c.data_sets], c.rtol, c.atol)
            for c in cases if c.model is not None and c.data_sets]


def _arrays(values) -> List[np.ndarray]:
    from onnx import numpy_helper

    return [numpy_helper.to_array(v) if hasattr(v, 'data_type') and hasattr(v, 'dims') else v for v in values]


def _cases_from_dir(data_dir: str) -> List[Case]:
    import onnx
    from onnx import numpy_helper

    def load(path):
        t = onnx.TensorProto()
        with open(path, 'rb') as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    cases = []
    for d in sorted(glob.glob(os.path.join(data_dir, '*'))):
        model_path = os.path.join(d, 'model.onnx')
        if not os.path.exists(model_path):
            continue
        sets = []
        for ds in sorted(glob.glob(os.path.join(d, 'test_data_set_*'))):
            ins = [load(p) for p in sorted(glob.glob(os.path.join(ds, 'input_*.pb')), key=_index)]
            outs = [load(p) for p in sorted(glob.glob(os.path.join(ds, 'output_*.pb')), key=_index)]
            sets.append((ins, outs))
        if sets:
            cases.append(Case(os.path.basename(d), onnx.load(model_path), sets))
    return cases


def _index(path: str) -> int:
    return int(os.path.basename(path).split('_')[1].split('.')[0])


def is_covered(case: Case) -> bool:
    from hidet.frontend.onnx.registry import domain_opsets, lookup, registered

    registered()
    opset = domain_opsets(case.model).get('', 0)
    return all(not n.domain and lookup(n.op_type, opset) is not None for n in case.model.graph.node) \
        and len(case.model.graph.node) > 0


# ---------------------------------------------------------------- running
def _module(case: Case):
    from hidet.frontend.onnx import OnnxUnsupportedError, from_onnx

    try:
        return from_onnx(case.model), None
    except OnnxUnsupportedError as e:
        return None, '; '.join(line.strip() for line in str(e).split('\n')[1:])


def _inputs(module, arrays):
    names = [v.name for v in module.model.graph.input if v.name not in module.initializers]
    return {n: a for n, a in zip(names, arrays) if n in module.input_names}


def _prebuild(prepared) -> None:
    """Trace every case symbolically and compile the kernels of all traces together."""
    import hidet
    from hidet.backend.cache import build_libraries

    try:  # the driver's own choice of source (a template's, else the auto-scheduler's)
        from hidet.drivers.build_task import task_sources

        def source(task):
            return task_sources([(task, 'cpu')])[0]
    except ImportError:
        from hidet.backend.codegen import generate
        from hidet.ir.schedulers import schedule_task

        def source(task):
            return generate(schedule_task(task, 'cpu'))

    jobs, seen = [], set()
    for case, module in prepared:
        try:
            feeds = _inputs(module, case.data_sets[0][0])
            symbols = {n: hidet.symbol(a.shape, 'bfloat16' if a.dtype.name == 'bfloat16' else a.dtype)
                       for n, a in feeds.items()}
            outs = module(**symbols)
            graph = hidet.trace_from(outs if isinstance(outs, list) else [outs], list(symbols.values()))
        except Exception:  # noqa: BLE001 - the imperative run reports it
            continue
        for node in graph.nodes:
            key = node.task.key()
            if key in seen:
                continue
            seen.add(key)
            try:
                jobs.append((source(node.task), 'cpu', node.task.name))
            except Exception:  # noqa: BLE001
                continue
    if jobs:
        try:
            build_libraries(jobs)
        except Exception:  # noqa: BLE001 - the failing kernel fails its case below
            pass


def _tensor(a: np.ndarray):
    import hidet

    if a.dtype.name == 'bfloat16':  # ml_dtypes' bfloat16
        return hidet.asarray(a.astype(np.float32)).to('bfloat16')
    return hidet.asarray(a)


def run_case(case: Case, module) -> Result:
    from hidet.frontend.onnx import OnnxConversionError

    try:
        for ins, expected in case.data_sets:
            feeds = {n: _tensor(a) for n, a in _inputs(module, ins).items()}
            outs = module(**feeds)
            outs = outs if isinstance(outs, list) else [outs]
            if len(outs) != len(expected):
                return Result(case.name, 'failed', f'{len(outs)} outputs, expected {len(expected)}')
            for i, (got, want) in enumerate(zip(outs, expected)):
                msg = _compare(got.numpy() if got.dtype.name != 'bfloat16' else got.to('float32').numpy(),
                               np.asarray(want), case)
                if msg:
                    return Result(case.name, 'failed', f'output {i}: {msg}')
        return Result(case.name, 'passed')
    except OnnxConversionError as e:
        if isinstance(e.__cause__, NotImplementedError):  # a feature only found unsupported while converting
            return Result(case.name, 'skipped', str(e).rsplit(': ', 1)[-1])
        return Result(case.name, 'failed', str(e)[:400])
    except Exception as e:  # noqa: BLE001
        text = ''.join(traceback.format_exception_only(type(e), e)).strip().splitlines()
        return Result(case.name, 'failed', text[-1][:400] if text else type(e).__name__)


def _compare(got: np.ndarray, want: np.ndarray, case: Case) -> Optional[str]:
    if got.shape != want.shape:
        return f'shape {got.shape}, expected {want.shape}'
    if want.dtype.kind in 'biu':
        if not np.array_equal(got.astype(want.dtype), want):
            return f'values differ ({int(np.sum(got.astype(want.dtype) != want))} of {want.size})'
        return None
    low = np.float16 in (got.dtype, want.dtype) or want.dtype.itemsize == 2
    rtol, atol = (1e-2, 1e-2) if low else (max(case.rtol, 1e-3), max(case.atol, 1e-5))
    got, want = got.astype(np.float64), want.astype(np.float32).astype(np.float64)
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        err = np.nanmax(np.abs(got - want)) if got.size else 0.0
        return f'max abs error {err:.3g} (rtol={rtol}, atol={atol})'
    return None


def run_all(name_filter: Optional[str] = None, verbose: bool = False, expanded: bool = False) -> Report:
    start = time.time()
    report = Report()
    cases = collect_cases()
    if name_filter:
        cases = [c for c in cases if name_filter in c.name]
    prepared = []
    for case in cases:
        if '_expanded' in case.name and not expanded:
            report.expanded += 1
            continue
        if not is_covered(case):
            report.uncovered += 1
            continue
        module, why = _module(case)
        if module is None:
            report.results.append(Result(case.name, 'skipped', why))
        else:
            prepared.append((case, module))
    _prebuild(prepared)
    for case, module in prepared:
        r = run_case(case, module)
        report.results.append(r)
        if verbose:
            print(f'{r.status:8s} {r.name} {r.reason}', flush=True)
    report.results.sort(key=lambda r: r.name)
    report.seconds = time.time() - start
    return report


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('-k', help='only the cases whose name contains this')
    p.add_argument('-v', action='store_true', help='print every case')
    p.add_argument('--expanded', action='store_true', help='also the *_expanded cases (function bodies)')
    args = p.parse_args(argv)
    report = run_all(args.k, args.v, args.expanded)
    for status in ('failed', 'skipped'):
        for r in report.of(status):
            print(f'{status.upper():8s} {r.name}: {r.reason}')
    print(report.summary())
    return 0 if not report.of('failed') else 1


if __name__ == '__main__':
    sys.exit(main())
