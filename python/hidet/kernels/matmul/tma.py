"""TMA copies of the tensor-core template's operands (sm_90): which operands TMA can copy, and their tensor
maps — kernel parameters (hidet.ir.type.TensorMapType) built by the kernel's launch entry. A direct operand
is copied in boxes of [rows][64 k] (k-major) or [64 k][64 m/n] (m/n-major); a convolution's channels-last
input by TMA's im2col mode, a column of pixels x 64 channels per k-tile (spec.ConvWindow). Every box lands
in the 128-byte swizzled layout of mma.tile_offset."""
from __future__ import annotations

from typing import Optional

from hidet.ir.type import Im2col, TensorMapType

from .spec import ConvWindow, GemmSpec
from .values import GemmValues

BOX_K = 64  # k of a box: one 128-byte row of 16-bit values (a wgmma config's k-tile)


def tma_unsupported(spec: GemmSpec) -> str:
    """Why TMA cannot copy the operands of ``spec`` ('' when it can): both read straight from 16-byte aligned
    rows (direct), or A through a 2-D convolution's window (im2col_window), static sizes, at most one batch
    dimension."""
    if not ((spec.a.vector_ok or im2col_window(spec) is not None) and spec.b.vector_ok):
        return ('TMA copies operands read straight from aligned rows of an input, or A through a 2-D convolution\'s '
                'window with channels a multiple of 64 (not other gathers or computed operands)')
    if spec.task.symbols():
        return 'TMA configs need static sizes'
    if len(spec.batch_vars) > 1:
        return 'TMA configs take at most one batch dimension'
    return ''


def im2col_corners(window: ConvWindow):
    """The bounding box of TMA's im2col mode over ``window``'s input, as (lower, upper) corners of (w, h): the
    window origins of its output positions, -padding to -padding + (out - 1) * stride, relative to (0, 0) and
    to the input's far side."""
    lower, upper = [], []
    for i in (1, 0):  # w, then h
        size, out, s, p = window.input[1 + i], window.out[i], window.stride[i], window.padding[i]
        lower.append(-p)
        upper.append(-p + (out - 1) * s + 1 - size)
    return lower, upper


def im2col_window(spec: GemmSpec) -> Optional[ConvWindow]:
    """The convolution window of a gathered A that TMA's im2col mode can copy, or None: channels a multiple of
    the k-tile (each k-tile lies at one window position), bounding-box corners within [-128, 127], strides up
    to 8, window offsets under 2^16."""
    gather = spec.a.gather
    window = gather.window if gather is not None else None
    if window is None or window.input[3] % BOX_K:
        return None
    lower, upper = im2col_corners(window)
    if not all(-128 <= c <= 127 for c in lower + upper) or max(window.stride) > 8:
        return None
    if any((r - 1) * d >= 1 << 16 for r, d in zip(window.kernel, window.dilation)):
        return None
    return window


def im2col_map(values: GemmValues, window: ConvWindow, rows: int):
    """The im2col tensor map of A's convolution input: columns of ``rows`` pixels of 64 channels, landing as
    the rows of a k-major tile in the 128-byte swizzled layout of ``tile_offset``."""
    n, h, w, c = window.input
    nbytes = values.spec.mma_dtype.nbytes
    lower, upper = im2col_corners(window)
    im2col = Im2col(lower, upper, [1, window.stride[1], window.stride[0], 1])
    return TensorMapType(values.ins[values.spec.a.gather.pos], [c, w, h, n], [c * nbytes, w * c * nbytes,
                         h * w * c * nbytes], [BOX_K, rows], 0, im2col)


def tensor_map(values: GemmValues, op, mn: int, rows: int):
    """The TMA tensor map of direct operand ``op`` (``mn`` its m or n size, ``rows`` its tile's m or n rows):
    k-major, boxes of [rows][64 k]; m/n-major, boxes of [64 k][64 m/n] (one per 64 of the tile's m/n); a batch
    dimension where the operand moves along the batch. Its boxes land in the 128-byte swizzled layout of
    ``tile_offset``."""
    spec = values.spec
    pos, index = op.direct
    tensor = values.ins[pos]
    nbytes = spec.mma_dtype.nbytes
    smn = index.coeff(spec.m_var if op is spec.a else spec.n_var)
    sk = index.coeff(spec.k_var)
    if op.k_major:
        dims, strides, box = [spec.k, mn], [smn * nbytes], [BOX_K, rows]
    else:
        dims, strides, box = [mn, spec.k], [sk * nbytes], [64, BOX_K]
    sb = index.coeff(spec.batch_vars[0]) if spec.batch_vars else 0
    if sb:
        dims, strides, box = dims + [spec.batch], strides + [sb * nbytes], box + [1]
    return TensorMapType(tensor, dims, strides, box, index.offset), bool(sb)
