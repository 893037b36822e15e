"""PyTorch's own OpInfo samples through torch.compile(backend='hidet'), compared with eager: every OpInfo of
``op_db`` whose function, alias, method, in-place method or operator the frontend maps, up to
``MAX_SAMPLES`` small samples of the function and one of each other variant, on the CPU in float32 (integer
or bool where the op takes no floats) and, marked ``cuda``, on the GPU in float16. What is left out, and why:
``EXCLUDED`` and ``EXCLUDED_SAMPLES`` in opinfo_cases.py. ``python tests/frontend/torch/opinfo_cases.py``
prints the counts."""
import pytest
import torch

from tests.frontend.torch.opinfo_cases import EAGER, EXCLUDED, TOLERANCES, build_cases, items, run_case

CASES = build_cases()


def _check(case, device: str):
    dtype, rtol, atol = TOLERANCES[device]
    pairs = items(case, device, dtype)
    if not pairs:
        pytest.skip(f'{case.name}: no sample small enough, real and taken by eager')
    errors = run_case(case, pairs, rtol, atol)
    failed = [f'{part.name} on sample {i}: {error}' for i, ((part, _), error) in enumerate(zip(pairs, errors))
              if error not in (None, EAGER)]
    assert not failed, '\n'.join(failed)
    if all(e == EAGER for e in errors):
        pytest.skip(f'{case.name}: dynamo runs every sample in eager (a graph break before the call)')


@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_opinfo_cpu_float32(case):
    _check(case, 'cpu')


@pytest.mark.cuda
@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_opinfo_cuda_float16(case):
    _check(case, 'cuda')


def test_opinfo_covers_the_mapped_operators():
    names = {c.name for c in CASES}
    parts = {p.name for c in CASES for p in c.parts}
    assert len(CASES) >= 250, len(CASES)  # (310 with torch 2.13)
    for name in ('add', 'matmul', 'nn.functional.conv2d', 'nn.functional.max_pool2d', 'softmax', 'sum', 'cumsum',
                 'nn.functional.layer_norm', 'index_put', 'nn.functional.interpolate.bilinear', 'where', 'topk'):
        assert name in names, name
    for part in ('add.inplace', 'add.method', 'add.operator', 'abs.absolute.alias', 'clamp.inplace',
                 'masked_fill.inplace', 'index_put.inplace'):
        assert part in parts, part
    assert all(reason.strip() for reason in EXCLUDED.values())


def test_the_harness_compares_values():
    """A conversion that computes the wrong values fails its case (the harness is not vacuous)."""
    from hidet import ops
    from hidet.frontend.torch import default_registry

    default_registry.register_function(torch.exp)(lambda input: ops.add(ops.exp(input), 1e-3))
    case = next(c for c in CASES if c.name == 'exp')
    dtype, rtol, atol = TOLERANCES['cpu']
    errors = run_case(case, items(case, 'cpu', dtype), rtol, atol)
    assert errors and errors[0] not in (None, EAGER) and 'not close' in errors[0]
