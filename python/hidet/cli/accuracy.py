"""The result check of ``hidet bench``: a benchmark of a wrong kernel measures nothing.

Every backend's first output is compared with a float32 computation of the same case (the model's or
the operator's inputs and weights in float32, TF32 off). A low-precision result is never exact, so the
verdict is the test suite's: hidet's largest error may exceed eager's own by at most ``tol`` of the
output's largest magnitude.
"""
from __future__ import annotations

from typing import Dict, List, Optional

# how far hidet's largest error may exceed eager's, in units of the output's largest magnitude
TOLERANCE = {'float16': 2e-2, 'bfloat16': 2e-2, 'float32': 1e-4, 'tf32': 1e-2}


def float_tensors(out) -> List:
    """The floating-point tensors of a (nested) output, in order: tensors, lists, tuples, dict values."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in float_tensors(o)]
    return []  # (e.g. a transformers cache object: not compared)


def max_error(out, ref) -> Optional[float]:
    """The largest absolute difference between the float tensors of ``out`` and ``ref`` (None where their
    tensors do not pair up: another count, or another shape)."""
    outs, refs = float_tensors(out), float_tensors(ref)
    if not refs or len(outs) != len(refs) or any(o.shape != r.shape for o, r in zip(outs, refs)):
        return None
    error = 0.0
    for o, r in zip(outs, refs):
        diff = (o.double() - r.double()).abs()
        error = max(error, float('inf') if diff.isnan().any() else diff.max().item())
    return error


def rms_error(out, ref) -> Optional[float]:
    """The root mean square of the differences over all float elements of ``out`` and ``ref`` (None where their
    tensors do not pair up). Steadier than the largest difference, which one element decides: on resnet18 in
    float16 over three sets of weights, one hidet build's largest error was 0.86-1.18x eager fp16's, its RMS
    error 1.00-1.03x."""
    outs, refs = float_tensors(out), float_tensors(ref)
    if not refs or len(outs) != len(refs) or any(o.shape != r.shape for o, r in zip(outs, refs)):
        return None
    squares, count = 0.0, 0
    for o, r in zip(outs, refs):
        diff = o.double() - r.double()
        squares += float('inf') if diff.isnan().any() else diff.pow(2).sum().item()
        count += diff.numel()
    return (squares / count) ** 0.5 if count else 0.0


def scale(ref) -> float:
    """The largest magnitude among the reference's float tensors."""
    return max((t.abs().max().item() for t in float_tensors(ref) if t.numel()), default=0.0)


def verdict(errors: Dict[str, Optional[float]], ref_scale: float, tol: float) -> Optional[str]:
    """None where each hidet backend's error (``hidet``, ``hidet-ma``) is within ``tol * ref_scale`` of eager's,
    else what is wrong, in words."""
    eager_error = errors.get('eager') or 0.0
    allowed = eager_error + tol * ref_scale
    for name in ('hidet', 'hidet-ma'):
        if name not in errors:
            continue
        error = errors[name]
        if error is None:
            return f"{name}'s outputs do not match the reference's in number or shape"
        if not error <= allowed:  # (NaN and inf fail too)
            return (f"{name}'s result is off: its largest error against float32 is {error:.4g}, eager's "
                    f'{eager_error:.4g}, on outputs as large as {ref_scale:.4g} (at most {allowed:.4g} allowed)')
    return None
