"""PyTorch's OpInfo samples for the torch functions and methods the frontend maps (test_opinfo.py).

A *case* is one variant of one OpInfo that exercises a registered conversion: the function (``torch.add``),
an alias (``torch.absolute``), the method (``Tensor.add``), the in-place method (``Tensor.add_``, applied to a
clone of the input inside the compiled function) or the operator (``operator.add``). Every tensor of a sample
(input, args, kwargs, lists of tensors) is an input of the compiled function, so the call reaches hidet's
conversion instead of being folded; the backend records the fx targets it received, and a case passes only if
hidet compiled the call it tests and matched eager.

``python tests/frontend/torch/opinfo_cases.py [cpu|cuda]`` runs every case and prints the counts: cases, ops,
samples, passing, failing with their errors, the exclusions and the registered targets no OpInfo exercises.
"""
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.common_methods_invocations import op_db

# Importing torch's test utilities freezes torch.backends' flags for the whole process (a guard of torch's own
# suite, torch.backends.disable_global_flags): other tests that set torch.backends.cudnn flags (hidet bench)
# would then fail. Undo it, in the module namespace those functions read (torch.backends itself is a wrapper).
torch.backends.flags_frozen.__globals__['__allow_nonbracketed_mutation_flag'] = True
assert not torch.backends.flags_frozen()

from hidet.frontend.torch import default_registry, hidet_backend
from hidet.frontend.torch.registry import target_name

MAX_SAMPLES = 3           # samples of the function variant per OpInfo (the others get one: they test dispatch)
MAX_NUMEL = 4096          # elements per tensor: small shapes keep the kernels and the suite fast

# OpInfos excluded, each with its reason (the name is the OpInfo's name, with '.variant' where it has one).
EXCLUDED: Dict[str, str] = {
    'nn.functional.interpolate.area': 'unsupported: mode="area" (adaptive average pooling; the error says so)',
    'nn.functional.interpolate.nearest-exact': 'unsupported: mode="nearest-exact" (the error says so)',
    'nn.functional.pad.circular': 'unsupported: circular padding (the error says so)',
    'norm.nuc': 'unsupported: the nuclear norm needs an SVD (the error says so)',
    'empty': 'uninitialized memory: eager and hidet values are both arbitrary',
    'empty_like': 'uninitialized memory: eager and hidet values are both arbitrary',
    'new_empty': 'uninitialized memory: eager and hidet values are both arbitrary',
    'empty_strided': 'uninitialized memory: eager and hidet values are both arbitrary',
    # -- random numbers: hidet cannot reproduce torch's generator stream
    'bernoulli': 'random: values depend on torch\'s generator',
    'nn.functional.dropout': 'random in training mode (the samples use training=True)',
    'nn.functional.dropout2d': 'random in training mode',
    'nn.functional.dropout3d': 'random in training mode',
    'nn.functional.alpha_dropout': 'random in training mode',
    'nn.functional.feature_alpha_dropout.with_train': 'random in training mode',
    'nn.functional.rrelu': 'random slopes in training mode',
    'rand_like': 'random', 'randn_like': 'random', 'randint_like': 'random', 'multinomial': 'random',
    'normal': 'random', 'normal.number_mean': 'random', 'uniform': 'random', 'randint': 'random',
}



def _not_4d(sample) -> bool:
    return sample.input.dim() != 4


# Samples excluded, by OpInfo (or variant) name: (which samples, why). hidet gives a clear error for each.
EXCLUDED_SAMPLES: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    **{f'nn.functional.interpolate.{mode}': (_not_4d, 'unsupported: interpolate of 3-D and 5-D inputs (hidet resizes '
                                                      'N, C, H, W only; the error says so)')
       for mode in ('nearest', 'linear', 'bilinear', 'bicubic', 'trilinear')},
    'nn.functional.avg_pool3d': (lambda s: s.kwargs.get('divisor_override') is not None,
                                 'unsupported: avg_pool3d with divisor_override (the error says so)'),
    'nn.functional.avg_pool2d': (lambda s: len(s.args) >= 6 and s.args[5] is not None and s.args[3],
                                 'unsupported: divisor_override with ceil_mode=True (the error says so)'),
    'narrow': (lambda s: isinstance(s.args[1], torch.Tensor),
               'unsupported: a tensor start is a data-dependent slice (the error says so)'),
    'nn.functional.batch_norm': (lambda s: bool(s.kwargs.get('training')) and bool(s.args) and s.args[0] is not None
                                 or s.input.dim() < 2,
                                 'unsupported: training mode with running statistics, which it updates in place '
                                 '(the error says so; fallback_to_eager runs it in torch); a 1-D input (torch gives '
                                 'it 0 channels: only empty statistics pass; hidet asks for rank 2 or more and says '
                                 'so)'),
}


@dataclass
class Part:
    """One variant of an OpInfo: what the compiled function calls, ``call(input, *args, **kwargs)``."""
    name: str                 # e.g. 'add', 'add.method', 'add.inplace', 'add.absolute.alias', 'add.operator'
    call: Callable
    targets: Tuple            # the registered fx targets it exercises (functions, or method names)
    inplace: bool = False     # applied to a clone of the input inside the compiled function
    max_samples: int = 1      # the function variant gets MAX_SAMPLES; the others one (they test dispatch)


@dataclass
class Case:
    """An OpInfo and the variants of it whose targets the registry maps."""
    name: str
    opinfo: Any
    parts: List[Part]


def _resolve(name: str):
    obj = torch
    for part in name.split('.'):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _method(fn) -> Optional[str]:
    name = getattr(fn, '__name__', None)
    return name if name is not None and default_registry.has_method(name) else None


def _parts(op, name: str) -> List[Part]:
    parts: List[Part] = []
    function = _resolve(op.name)
    if function is not None and default_registry.has_function(function):
        parts.append(Part(name, op.op, (function,), max_samples=MAX_SAMPLES))
    elif default_registry.has_function(op.op):
        parts.append(Part(name, op.op, (op.op,), max_samples=MAX_SAMPLES))
    elif op.name.startswith('__r') and op.name.endswith('__'):  # __radd__ & co: lambdas over operator.*
        parts.append(Part(name, op.op, (), max_samples=MAX_SAMPLES))
    variants = [('method', op.method_variant, False), ('inplace', op.inplace_variant, True)]
    for alias in op.aliases:
        if default_registry.has_function(alias.op):
            parts.append(Part(f'{name}.{alias.name}.alias', alias.op, (alias.op,)))
        variants += [(f'{alias.name}.alias_method', alias.method_variant, False),
                     (f'{alias.name}.alias_inplace', alias.inplace_variant, True)]
    for kind, variant, inplace in variants:
        method = _method(variant) if variant is not None else None
        if method is not None and all(p.targets != (method,) for p in parts):
            parts.append(Part(f'{name}.{kind}', variant, (method,), inplace=inplace))
    for kind, variant, inplace in (('operator', getattr(op, 'operator_variant', None), False),
                                   ('inplace_operator', getattr(op, 'inplace_operator_variant', None), True)):
        if variant is not None and default_registry.has_function(variant):
            parts.append(Part(f'{name}.{kind}', variant, (variant,), inplace=inplace))
    if parts and parts[0].max_samples == 1:  # no function variant: the first variant gets the samples
        parts[0].max_samples = MAX_SAMPLES
    return [p for p in parts if p.name not in EXCLUDED]


def build_cases() -> List[Case]:
    """Every OpInfo (but the excluded) with a variant whose target the default registry maps."""
    cases: List[Case] = []
    for op in op_db:
        name = op.name + (f'.{op.variant_test_name}' if op.variant_test_name else '')
        if name in EXCLUDED or any(c.name == name for c in cases):
            continue
        parts = _parts(op, name)
        if parts:
            cases.append(Case(name, op, parts))
    return cases


# ---------------------------------------------------------------- samples
def _tensors_ok(sample, dtype) -> bool:
    """Small tensors of dtypes hidet has (no complex), none in float64 where the sample is float32."""
    for v in pytree.tree_leaves((sample.input, sample.args, sample.kwargs)):
        if isinstance(v, torch.Tensor) and (v.numel() > MAX_NUMEL or v.dtype.is_complex or v.dtype == torch.float64):
            return False
        if isinstance(v, torch.dtype) and (v.is_complex or v == torch.float64 and dtype != torch.float64):
            return False  # (conversions to complex or float64: not what the dtype under test asks)
    return True


def case_dtype(case: Case, device: str, dtype: torch.dtype) -> Optional[torch.dtype]:
    """``dtype`` where the OpInfo supports it, else an integer or bool dtype it does (bitwise ops)."""
    supported = case.opinfo.supported_dtypes(device)
    for d in (dtype, torch.int64, torch.int32, torch.bool):
        if d in supported:
            return d
    return None


def run_eager(part: Part, sample):
    inp = sample.input.clone() if part.inplace else sample.input
    return part.call(inp, *sample.args, **sample.kwargs)


def eager_takes(part: Part, sample) -> bool:
    """Whether eager runs ``part`` on ``sample`` (an in-place variant does not take a sample that broadcasts
    its input, for instance)."""
    try:
        with torch.no_grad():
            run_eager(part, sample)
    except Exception:  # noqa: BLE001  (a sample this variant does not take)
        return False
    return True


def excluded_samples(case: Case) -> Callable[[Any], bool]:
    """Which of the case's samples EXCLUDED_SAMPLES leaves out (an OpInfo's variants, such as
    nn.functional.batch_norm.without_cudnn, share its exclusions)."""
    default = EXCLUDED_SAMPLES.get(case.opinfo.name, (lambda s: False, ''))
    return EXCLUDED_SAMPLES.get(case.name, default)[0]


def items(case: Case, device: str, dtype: torch.dtype) -> List[Tuple[Part, Any]]:
    """(part, sample) pairs: each part's first ``max_samples`` samples that are small and real and that eager
    runs (an in-place variant does not take a sample that broadcasts its input, for instance)."""
    dtype = case_dtype(case, device, dtype)
    if dtype is None:
        return []
    torch.manual_seed(0)
    usable = []
    excluded = excluded_samples(case)
    for sample in case.opinfo.sample_inputs(device, dtype, requires_grad=False):
        if len(usable) == MAX_SAMPLES + 2:
            break
        first = sample.input[0] if isinstance(sample.input, (list, tuple)) and sample.input else sample.input
        if isinstance(first, torch.Tensor) and 'out' not in sample.kwargs and _tensors_ok(sample, dtype) and \
                not excluded(sample):
            usable.append(sample)
    chosen = []
    for part in case.parts:
        taken = 0
        for sample in usable:
            if taken == part.max_samples:
                break
            if eager_takes(part, sample):
                chosen.append((part, sample))
                taken += 1
    return chosen


def _function(pairs: Sequence[Tuple[Part, Any]]):
    """A function of every tensor of the samples that runs each part on its sample (non-tensor arguments are
    constants of it), and its tensor arguments."""
    flat, spec = pytree.tree_flatten([(s.input, s.args, s.kwargs) for _, s in pairs])
    positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    # (the callables themselves, not Part objects: torch 2.11's dynamo cannot trace `part.call(...)`, a call of a
    # field of a user-defined object, and ran every sample in eager)
    calls = [(p.call, p.inplace) for p, _ in pairs]

    def fn(*inputs):
        values = list(flat)
        for i, t in zip(positions, inputs):
            values[i] = t
        outputs = []
        for (call, inplace), (inp, args, kwargs) in zip(calls, pytree.tree_unflatten(values, spec)):
            if inplace:
                inp = inp.clone()
            outputs.append(call(inp, *args, **kwargs))
        return outputs

    return fn, [flat[i] for i in positions]


def _fx_targets(gm: torch.fx.GraphModule):
    return {node.target for node in gm.graph.nodes if node.op in ('call_function', 'call_method')}


def _conversions(target) -> list:
    return default_registry.methods(target) if isinstance(target, str) else default_registry.functions(target)


def _received(target, seen) -> bool:
    """Whether hidet received ``target``, or a call dynamo put in its place that converts the same way
    (``torch.threshold`` for ``F.threshold``, ``torch.rsub`` for ``Tensor.__rsub__``)."""
    if target in seen:
        return True
    mine = _conversions(target)
    name = (target if isinstance(target, str) else getattr(target, '__name__', '')).strip('_')
    for s in seen:
        theirs = _conversions(s)
        if any(c in mine for c in theirs) or name and (s if isinstance(s, str) else getattr(s, '__name__', '')) == name:
            return True
    return False


EAGER = 'eager'  # the outcome of a pair dynamo ran in eager (a graph break before the call): nothing to test


def compare(actual, expected, rtol, atol, path='output', reference=None):
    """``actual`` (hidet) against ``expected`` (eager). A float16/bfloat16 output that differs from eager by more
    than the tolerance passes when it is as accurate as eager against ``reference``, the same function in float32
    on the same input values: its largest error at most twice eager's (both round; as torch._dynamo's own
    accuracy check, which compares against a float64 reference with a multiplier of 2)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f'{path}: {type(actual).__name__} instead of a tensor'
        assert actual.dtype == expected.dtype, f'{path}: dtype {actual.dtype}, eager {expected.dtype}'
        assert actual.shape == expected.shape, f'{path}: shape {tuple(actual.shape)}, eager {tuple(expected.shape)}'
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f'{path}: {m}')
        except AssertionError:
            if not _as_accurate_as_eager(actual, expected, reference, atol):
                raise
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f'{path}: {actual!r}'
        refs = reference if isinstance(reference, (list, tuple)) and len(reference) == len(expected) else \
            [None] * len(expected)
        for i, (a, e, r) in enumerate(zip(actual, expected, refs)):
            compare(a, e, rtol, atol, f'{path}[{i}]', r)
    else:
        assert actual == expected, f'{path}: {actual!r}, eager {expected!r}'


def _as_accurate_as_eager(actual, expected, reference, atol) -> bool:
    if expected.dtype not in (torch.float16, torch.bfloat16) or not isinstance(reference, torch.Tensor) or \
            reference.shape != expected.shape:
        return False
    ref = reference.double()
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(actual), finite):
        return False
    hidet_error = (actual.double() - ref)[finite].abs().max().item() if finite.any() else 0.0
    eager_error = (expected.double() - ref)[finite].abs().max().item() if finite.any() else 0.0
    return hidet_error <= 2 * eager_error + atol / 10


def _float32_reference(fn, tensors):
    """``fn`` in eager on the float16/bfloat16 tensors' values in float32, or None where it does not run so."""
    try:
        return fn(*[t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors])
    except Exception:  # noqa: BLE001 - an op that insists on its dtypes: no reference, the plain comparison stands
        return None


def run_pairs(pairs: Sequence[Tuple[Part, Any]], rtol: float, atol: float) -> Optional[str]:
    """Compile the pairs together with hidet and compare with eager: None, EAGER where dynamo handed hidet no call
    at all, or what went wrong."""
    seen = set()

    def backend(gm, example_inputs):
        seen.update(_fx_targets(gm))
        return hidet_backend(gm, example_inputs)

    torch._dynamo.reset()  # (one code object for every case: without a reset dynamo would recompile it)
    fn, tensors = _function(pairs)
    try:
        with torch.no_grad():
            expected = fn(*tensors)
            actual = torch.compile(fn, backend=backend)(*tensors)
            low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)
            reference = _float32_reference(fn, tensors) if low else None
        compare(actual, expected, rtol, atol, reference=reference)
    except Exception as e:  # noqa: BLE001
        text = ' | '.join(line for line in str(e).strip().splitlines()[:4] if line.strip())
        return f'{type(e).__name__}: {text}'[:500]
    if not seen:
        return EAGER
    missing = {target_name(t) for p, _ in pairs for t in p.targets if not _received(t, seen)}
    if missing:
        return f'hidet never received {sorted(missing)} (dynamo handed it {sorted(map(target_name, seen))})'
    return None


def run_case(case: Case, pairs: Sequence[Tuple[Part, Any]], rtol: float, atol: float) -> List[Optional[str]]:
    """The error of each pair (None: passed): all pairs in one compiled function, and one by one again where
    that fails (to tell which)."""
    error = run_pairs(pairs, rtol, atol)
    if error in (None, EAGER) or len(pairs) == 1:
        return [error] * len(pairs)
    return [run_pairs([pair], rtol, atol) for pair in pairs]


TOLERANCES = {'cpu': (torch.float32, 1e-4, 1e-4), 'cuda': (torch.float16, 1e-2, 1e-2)}


def main(device: str = 'cpu'):
    dtype, rtol, atol = TOLERANCES[device]
    start = time.time()
    cases = build_cases()
    n_pairs = n_pass = n_eager = 0
    failed: List[Tuple[str, str]] = []
    no_samples = []
    for case in cases:
        pairs = items(case, device, dtype)
        if not pairs:
            no_samples.append(case.name)
            continue
        t = time.time()
        errors = run_case(case, pairs, rtol, atol)
        n_pairs += len(pairs)
        n_pass += errors.count(None)
        n_eager += errors.count(EAGER)
        bad = [(p.name, e) for (p, _), e in zip(pairs, errors) if e not in (None, EAGER)]
        print(f'{"FAIL" if bad else "ok":4} {case.name:40} {errors.count(None)}/{len(pairs)} {time.time() - t:5.1f}s'
              + (f'  {bad[0][0]}: {bad[0][1]}' if bad else ''), flush=True)
        failed.extend(bad)
    n_parts = sum(len(c.parts) for c in cases)
    print(f'\n{len(cases)} OpInfos ({n_parts} variants), {n_pairs} samples: {n_pass} pass, {len(failed)} fail, '
          f'{n_eager} run in eager by dynamo (nothing for hidet); {len(no_samples)} OpInfos without a usable sample: '
          f'{no_samples}; {len(EXCLUDED)} OpInfos and the samples of {len(EXCLUDED_SAMPLES)} excluded; '
          f'{time.time() - start:.0f} s')
    for name, error in failed:
        print(f'  {name}: {error}')


if __name__ == '__main__':
    main(*sys.argv[1:])
