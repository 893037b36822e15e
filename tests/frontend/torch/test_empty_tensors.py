"""Empty tensors through torch.compile(backend='hidet'): for every OpInfo the frontend maps (the cases of
opinfo_cases.py), the first sample of its function variant whose main input has a first dimension, with that
dimension made 0. Where eager takes the empty input, hidet must give the same outputs (dtypes, shapes and the
values of what is not empty: ``sum`` of an empty tensor is a tensor of zeros); where eager raises, hidet must raise
too (returning a value is not a fall-back: eager would raise), and not a Python exception from inside its own code
(IndexError, ZeroDivisionError, ...): an empty tensor is a valid input, and a conversion that trips over it is a
bug. What still fails: ``EXCLUDED_EMPTY``.
``python tests/frontend/torch/test_empty_tensors.py`` prints the counts."""
import os
import time
import traceback
from typing import Any, Dict, Optional, Tuple

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

import hidet
from tests.frontend.torch.opinfo_cases import (EAGER, TOLERANCES, Case, Part, _tensors_ok,
                                               build_cases, case_dtype, eager_takes, excluded_samples, run_eager,
                                               run_pairs)
from hidet.frontend.torch import hidet_backend

CASES = build_cases()

# Python exceptions that, raised by Python itself (not by a ``raise`` statement) below hidet's conversion of a
# node, say that a conversion or an operator tripped over its input: ``shape[0]`` of nothing, ``n // 0``,
# ``a, b = [x]``. (Those raised in torch's sources are eager's own errors, from dynamo's fake tensors.)
INTERNAL_ERRORS = (IndexError, ZeroDivisionError, AttributeError, KeyError, UnboundLocalError, NameError,
                   RecursionError, ValueError, TypeError)

HIDET_SOURCES = os.path.dirname(os.path.abspath(hidet.__file__))
TORCH_SOURCES = os.path.dirname(os.path.abspath(torch.__file__))

# OpInfos whose empty sample still fails, each with its reason.
EXCLUDED_EMPTY: Dict[str, str] = {
}


_EMPTY_SAMPLES: Dict[str, Optional[Tuple[Part, Any]]] = {}


def empty_sample(case: Case) -> Optional[Tuple[Part, Any]]:
    """The function variant and the first of its samples that eager takes whose main input is a tensor with a
    first dimension, with that dimension made 0 (the other arguments as they are); None where there is none."""
    if case.name not in _EMPTY_SAMPLES:
        _EMPTY_SAMPLES[case.name] = _empty_sample(case)
    return _EMPTY_SAMPLES[case.name]


def _empty_sample(case: Case, device: str = 'cpu') -> Optional[Tuple[Part, Any]]:
    dtype = case_dtype(case, device, TOLERANCES[device][0])
    if dtype is None:
        return None
    part = case.parts[0]
    excluded = excluded_samples(case)
    torch.manual_seed(0)
    for sample in case.opinfo.sample_inputs(device, dtype, requires_grad=False):
        x = sample.input
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] == 0 or 'out' in sample.kwargs or \
                not _tensors_ok(sample, dtype) or excluded(sample) or not eager_takes(part, sample):
            continue
        return part, SampleInput(x[:0].clone(), args=sample.args, kwargs=sample.kwargs)
    return None


def _internal_error(error: BaseException) -> Optional[str]:
    """The first exception of the chain that tripped inside a conversion, as text: an INTERNAL_ERRORS whose
    traceback passes through hidet and whose innermost frame is neither in torch nor a ``raise`` statement
    (hidet's own ``raise IndexError('gather: cannot index dimension 0 of size 0 ...')`` is a clear error)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = traceback.extract_tb(error.__traceback__)
        if isinstance(error, INTERNAL_ERRORS) and any(f.filename.startswith(HIDET_SOURCES) for f in frames):
            where = frames[-1]
            if not where.filename.startswith(TORCH_SOURCES) and not (where.line or '').startswith('raise'):
                return f'{type(error).__name__}: {str(error)[:200]} ({where.filename}:{where.lineno}: {where.line})'
        error = error.__cause__ or error.__context__
    return None


def outcome(part: Part, sample) -> Tuple[str, Optional[str]]:
    """How the empty sample went: ('eager raises' | 'compared' | 'dynamo ran it in eager', None if hidet did as
    the contract asks, else what went wrong)."""
    try:
        with torch.no_grad():
            run_eager(part, sample)
    except Exception:  # noqa: BLE001  (eager refuses the empty input: hidet must refuse it too, clearly)
        inp = sample.input

        def fn(x):
            return part.call(x.clone() if part.inplace else x, *sample.args, **sample.kwargs)

        torch._dynamo.reset()
        try:
            with torch.no_grad():
                torch.compile(fn, backend=hidet_backend)(inp)
        except Exception as e:  # noqa: BLE001
            return 'eager raises', _internal_error(e)
        return 'eager raises', 'hidet returns a value (a fall-back to eager would raise too)'
    rtol, atol = TOLERANCES['cpu'][1:]
    error = run_pairs([(part, sample)], rtol, atol)
    return ('dynamo ran it in eager', None) if error == EAGER else ('compared', error)


def check_empty(part: Part, sample) -> Optional[str]:
    """None if hidet handles the empty sample as the contract asks, else what went wrong."""
    return outcome(part, sample)[1]


@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_empty_input(case):
    pair = empty_sample(case)
    if pair is None:
        pytest.skip(f'{case.name}: no sample with a tensor input that has a first dimension')
    if case.name in EXCLUDED_EMPTY:
        error = check_empty(*pair)
        assert error is not None, f'{case.name} is excluded ({EXCLUDED_EMPTY[case.name]}) but passes: drop it'
        pytest.xfail(EXCLUDED_EMPTY[case.name])
    error = check_empty(*pair)
    assert error is None, f'{pair[0].name} on an input of shape {tuple(pair[1].input.shape)}: {error}'


def test_the_sweep_covers_the_mapped_operators():
    names = {c.name for c in CASES}
    assert len(CASES) >= 250, len(CASES)
    assert all(name in names for name in EXCLUDED_EMPTY), set(EXCLUDED_EMPTY) - names
    assert all(reason.startswith('bug: ') for reason in EXCLUDED_EMPTY.values())
    covered = [c.name for c in CASES if empty_sample(c) is not None]
    assert len(covered) >= 250, len(covered)  # (289 of 308 with torch 2.13)
    for name in ('roll', 'sum', 'add', 'matmul', 'nn.functional.conv2d', 'chunk', 'index_select'):
        assert name in covered, name


def test_the_sweep_tells_a_trip_from_a_clear_error():
    """Eager refuses index_select of an empty input; hidet's clear IndexError passes, a conversion that trips
    over the empty input (``[][0]``) fails, so does one that returns a value there, and one that returns the wrong
    shape where eager returns."""
    from hidet import ops
    from hidet.frontend.torch import default_registry

    select = empty_sample(next(c for c in CASES if c.name == 'index_select'))
    roll = empty_sample(next(c for c in CASES if c.name == 'roll'))
    assert check_empty(*select) is None and check_empty(*roll) is None
    snapshot = default_registry.copy()
    try:
        default_registry.register_function(torch.index_select)(lambda input, dim, index: [][0])
        error = check_empty(*select)
        assert error is not None and error.startswith('IndexError: list index out of range'), error
        default_registry.register_function(torch.index_select)(lambda input, dim, index: input)
        error = check_empty(*select)
        assert error is not None and 'returns a value' in error, error
        default_registry.register_function(torch.roll)(lambda input, shifts, dims=None: ops.reshape(input, [-1]))
        error = check_empty(*roll)
        assert error is not None and 'shape' in error, error
    finally:
        default_registry.restore(snapshot)
        torch._dynamo.reset()


def main():
    start = time.time()
    kinds: Dict[str, int] = {}
    covered, failing = 0, []
    for case in CASES:
        pair = empty_sample(case)
        if pair is None:
            continue
        covered += 1
        kind, error = outcome(*pair)
        kinds[kind] = kinds.get(kind, 0) + 1
        if error:
            failing.append((case.name, error))
        print(f'{"FAIL" if error else "ok":4} {case.name:40} {tuple(pair[1].input.shape)} {kind} {error or ""}',
              flush=True)
    print(f'\n{len(CASES)} OpInfos, {covered} with an empty sample ({kinds}): {covered - len(failing)} pass, '
          f'{len(failing)} fail; {len(EXCLUDED_EMPTY)} excluded; {time.time() - start:.0f} s')
    for name, error in failing:
        print(f'  {name}: {error}')


if __name__ == '__main__':
    main()
