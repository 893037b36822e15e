"""CUDA for Hidet Script: thread indices, barriers, warp shuffles, atomics, shared / register / dynamic
shared memory, cp.async, ldmatrix and mma.sync (m16n8k16 with f16/bf16 inputs, m16n8k8 with f32 inputs rounded
to TF32; f32 accumulators), and on sm_90a wgmma (m64nNk16 from shared memory), mbarriers and TMA copies of
tensor maps (hidet.ir.type.TensorMapType kernel parameters).

Pointers are written ``~a[i, j]`` (the address of an element); a tensor stands for its first element.
The C++ side is cpp/include/hidet/kernel/lang.h; the C spellings are in hidet/backend/primitives.py.
"""
from __future__ import annotations

from hidet.ir.dtypes import data_type, int32
from hidet.ir.expr import Expr, cast, convert
from hidet.ir.lowlevel import PrimCall
from hidet.ir.type import Im2col, PointerType, TensorMapType, TensorType, is_scalar, type_of, void

from .constructs import as_pointer, describe, pointee, register_tensor, shared_tensor

__all__ = ['threadIdx', 'blockIdx', 'blockDim', 'gridDim', 'warp_size', 'syncthreads', 'syncthreads_count',
           'syncthreads_and', 'syncthreads_or', 'syncwarp', 'threadfence', 'threadfence_block', 'shfl_sync',
           'shfl_up_sync', 'shfl_down_sync', 'shfl_xor_sync', 'ballot_sync', 'activemask', 'atomic_add',
           'atomic_sub', 'atomic_max', 'atomic_min', 'atomic_exchange', 'atomic_cas', 'shared_tensor',
           'register_tensor', 'dynamic_shared_memory', 'cp_async', 'cp_async_commit_group', 'cp_async_wait_group',
           'cp_async_wait_all', 'ldmatrix', 'mma_sync', 'wgmma', 'wgmma_rs', 'wgmma_fence', 'wgmma_commit_group',
           'wgmma_wait_group', 'fence_proxy_async', 'mbarrier_init', 'fence_mbarrier_init', 'mbarrier_arrive',
           'mbarrier_arrive_expect_tx', 'mbarrier_wait', 'tma_load', 'cluster_rank', 'cluster_sync',
           'cluster_load_f32x4', 'store_pair', 'load_pair']

warp_size = 32
FULL_MASK = 0xFFFFFFFF


class _Dim3:
    """``threadIdx.x`` etc.: int32 values."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, axis: str):
        if axis not in ('x', 'y', 'z'):
            raise AttributeError(f'{self._name} has x, y and z, not {axis!r}')
        return PrimCall(f'cuda_{self._name}_{axis}', [], int32)

    def __repr__(self) -> str:
        return self._name


threadIdx, blockIdx, blockDim, gridDim = _Dim3('threadIdx'), _Dim3('blockIdx'), _Dim3('blockDim'), _Dim3('gridDim')


def _scalar(x, what: str) -> Expr:
    if isinstance(x, Expr):
        if not is_scalar(x):
            raise TypeError(f'{what} must be a scalar, got {describe(x)}')
        return x
    if isinstance(x, (bool, int, float)):
        return convert(x)
    raise TypeError(f'{what} must be a scalar, got {describe(x)}')


def _const_int(x, what: str, allowed=None) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f'{what} must be a Python int (a compile-time constant), got {describe(x)}')
    if allowed is not None and x not in allowed:
        raise ValueError(f'{what} must be one of {allowed}, got {x}')
    return x


def syncthreads():
    """Barrier of the thread block (``__syncthreads()``)."""
    return PrimCall('cuda_syncthreads', [], void)


def named_barrier_sync(barrier: int, threads: int):
    """Wait at named barrier ``barrier`` (1 to 15; 0 is syncthreads') until ``threads`` threads (whole warps) of
    the block have (``bar.sync``): a barrier of some warps only, e.g. those left once a producer warp exits."""
    barrier = _const_int(barrier, 'named_barrier_sync: barrier')
    threads = _const_int(threads, 'named_barrier_sync: threads')
    if not 1 <= barrier <= 15 or threads % 32 or threads <= 0:
        raise ValueError(f'named_barrier_sync: barrier must be 1 to 15 and threads a positive multiple of 32, got '
                         f'{barrier} and {threads}')
    return PrimCall('cuda_named_barrier_sync', [], void, {'barrier': barrier, 'threads': threads})


def cluster_rank():
    """This CTA's rank in its thread-block cluster (sm_90; ``attr.cuda_cluster_dim``)."""
    return PrimCall('cuda_cluster_rank', [], int32)


def cluster_sync():
    """Every thread of every CTA of the cluster arrives, then waits for the others; shared-memory writes before it
    are seen by reads after it anywhere in the cluster (sm_90). A thread that exited does not arrive: every thread
    of the cluster calls it the same number of times."""
    return PrimCall('cuda_cluster_sync', [], void)


def cluster_load_f32x4(dst, src, rank):
    """Copy 4 floats of cluster CTA ``rank``'s shared memory, at the offset ``src`` (this CTA's shared float32
    memory, 16-byte aligned) has in this CTA's, to ``dst`` (sm_90: distributed shared memory)."""
    return PrimCall('cuda_cluster_load_f32x4', [as_pointer(dst, 'cluster_load_f32x4: dst'),
                                                as_pointer(src, 'cluster_load_f32x4: src'),
                                                _scalar(rank, 'the rank')], void)


def store_pair(dst, a, b):
    """Store ``a`` and ``b`` (rounded from float32 to the element type) at ``dst`` and the element after it in one
    store (``dst`` at a multiple of two elements; float16, bfloat16 or float32)."""
    ptr = as_pointer(dst, 'store_pair: dst')
    if pointee(ptr).name not in ('float16', 'bfloat16', 'float32'):
        raise TypeError(f'store_pair stores float16, bfloat16 or float32 pairs, not {pointee(ptr).name}')
    return PrimCall('cuda_store_pair', [ptr, _scalar(a, 'the first value'), _scalar(b, 'the second value')], void)


def load_pair(dst, src):
    """Load the element at ``src`` and the one after it into ``dst`` and the element after it, in one load (``src``
    at a multiple of two elements; both of one element type, e.g. a global tensor's row into a register tensor)."""
    d, s = as_pointer(dst, 'load_pair: dst'), as_pointer(src, 'load_pair: src')
    if pointee(d).name != pointee(s).name:
        raise TypeError(f'load_pair copies between one element type, not {pointee(s).name} into {pointee(d).name}')
    return PrimCall('cuda_load_pair', [d, s], void)


def syncthreads_count(pred):
    return PrimCall('cuda_syncthreads_count', [_scalar(pred, 'the predicate')], int32)


def syncthreads_and(pred):
    return PrimCall('cuda_syncthreads_and', [_scalar(pred, 'the predicate')], int32)


def syncthreads_or(pred):
    return PrimCall('cuda_syncthreads_or', [_scalar(pred, 'the predicate')], int32)


def syncwarp(mask=FULL_MASK):
    return PrimCall('cuda_syncwarp', [_scalar(mask, 'the mask')], void)


def threadfence():
    return PrimCall('cuda_threadfence', [], void)


def threadfence_block():
    return PrimCall('cuda_threadfence_block', [], void)


def _shfl(name: str, mask, var, arg, width):
    var = _scalar(var, 'the shuffled value')
    return PrimCall(name, [_scalar(mask, 'the mask'), var, _scalar(arg, 'the lane argument'),
                           _scalar(width, 'the width')], var.dtype)


def shfl_sync(mask, var, src_lane, width=32):
    """``var`` of lane ``src_lane`` (``__shfl_sync``)."""
    return _shfl('cuda_shfl_sync', mask, var, src_lane, width)


def shfl_up_sync(mask, var, delta, width=32):
    return _shfl('cuda_shfl_up_sync', mask, var, delta, width)


def shfl_down_sync(mask, var, delta, width=32):
    """``var`` of lane ``lane + delta`` (``__shfl_down_sync``)."""
    return _shfl('cuda_shfl_down_sync', mask, var, delta, width)


def shfl_xor_sync(mask, var, lane_mask, width=32):
    """``var`` of lane ``lane ^ lane_mask`` (``__shfl_xor_sync``)."""
    return _shfl('cuda_shfl_xor_sync', mask, var, lane_mask, width)


def ballot_sync(mask, pred):
    return PrimCall('cuda_ballot_sync', [_scalar(mask, 'the mask'), _scalar(pred, 'the predicate')], int32)


def activemask():
    return PrimCall('cuda_activemask', [], int32)


_ATOMIC_DTYPES = {
    'add': ('float32', 'float64', 'int32', 'int64', 'float16', 'bfloat16'),
    'sub': ('float32', 'float64', 'int32', 'int64', 'float16', 'bfloat16'),
    'max': ('float32', 'int32', 'int64'),
    'min': ('float32', 'int32', 'int64'),
    'exchange': ('float32', 'int32', 'int64'),
    'cas': ('int32', 'int64'),
}


def _atomic(op: str, addr, *values):
    ptr = as_pointer(addr, f'atomic_{op}: the address')
    dtype = pointee(ptr)
    if dtype.name not in _ATOMIC_DTYPES[op]:
        raise TypeError(f"atomic_{op} works on {', '.join(_ATOMIC_DTYPES[op])}, not {dtype}")
    args = [ptr] + [cast(_scalar(v, f'atomic_{op}: the value'), dtype) for v in values]
    return PrimCall(f'cuda_atomic_{op}', args, dtype)


def atomic_add(addr, value):
    """``*addr += value`` atomically; returns the old value."""
    return _atomic('add', addr, value)


def atomic_sub(addr, value):
    return _atomic('sub', addr, value)


def atomic_max(addr, value):
    return _atomic('max', addr, value)


def atomic_min(addr, value):
    return _atomic('min', addr, value)


def atomic_exchange(addr, value):
    return _atomic('exchange', addr, value)


def atomic_cas(addr, compare, value):
    """If ``*addr == compare`` then ``*addr = value``, atomically; returns the old value."""
    return _atomic('cas', addr, compare, value)


def dynamic_shared_memory(byte_offset, dtype, align: int = 16):
    """A pointer (``~dtype``) ``byte_offset`` bytes into the block's dynamic shared memory, whose size is
    ``attr.cuda_dynamic_smem_bytes``. View it as a tensor with ``view(ptr, f16[64, 32])``.

    ``align`` > 16 (a power of two, e.g. 1024 for wgmma's swizzled tiles): the memory starts at the next
    multiple of ``align`` of the shared window; ask for ``align - 16`` bytes more."""
    align = _const_int(align, 'dynamic_shared_memory: align')
    if align < 16 or align & (align - 1):
        raise ValueError(f'dynamic_shared_memory: align must be a power of two of at least 16, got {align}')
    offset = _scalar(byte_offset, 'the byte offset')
    if align == 16:
        return PrimCall('cuda_dynamic_smem', [offset], PointerType(data_type(dtype)))
    return PrimCall('cuda_dynamic_smem_aligned', [offset], PointerType(data_type(dtype)), {'align': align})


def cp_async(dst, src, cp_size: int = 16, src_size=None):
    """Copy ``cp_size`` (4, 8 or 16) bytes from global ``src`` to shared ``dst`` asynchronously (sm_80+);
    bytes past ``src_size`` (default ``cp_size``) are filled with zeros. Both addresses must be aligned."""
    cp_size = _const_int(cp_size, 'cp_async: cp_size', (4, 8, 16))
    src_size = cp_size if src_size is None else src_size
    return PrimCall('cuda_cp_async', [as_pointer(dst, 'cp_async: dst'), as_pointer(src, 'cp_async: src'),
                                      _scalar(src_size, 'cp_async: src_size')], void, {'cp_size': cp_size})


def cp_async_commit_group():
    return PrimCall('cuda_cp_async_commit_group', [], void)


def cp_async_wait_group(n: int):
    """Wait until at most ``n`` (a constant) committed cp.async groups are pending."""
    return PrimCall('cuda_cp_async_wait_group', [], void, {'n': _const_int(n, 'cp_async_wait_group: n')})


def cp_async_wait_all():
    return PrimCall('cuda_cp_async_wait_all', [], void)


def ldmatrix(dst, src, num: int = 4, trans: bool = False):
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: the warp loads ``num`` 8x8 matrices of
    16-bit elements from shared memory. Lane ``l`` gives in ``src`` the address of row ``l % 8`` of
    matrix ``l // 8``; each lane receives one 32-bit word (two elements) per matrix at ``dst``, e.g. a
    ``register_tensor(f16, [2 * num])``."""
    num = _const_int(num, 'ldmatrix: num', (1, 2, 4))
    if not isinstance(trans, bool):
        raise TypeError('ldmatrix: trans must be a Python bool')
    return PrimCall('cuda_ldmatrix', [as_pointer(dst, 'ldmatrix: dst'), as_pointer(src, 'ldmatrix: src')], void,
                    {'num': num, 'trans': 'true' if trans else 'false'})


def mma_sync(a, b, c, shape: str = 'm16n8k16'):
    """``c += a @ b`` on tensor cores for one warp (``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}``):
    ``a`` points to 8 f16/bf16 values per lane, ``b`` to 4, ``c`` to 4 f32 accumulators, in the PTX
    fragment layouts (lane = 4 * group + t: a[0:2] is A[group, 2t:2t+2], a[2:4] A[group+8, 2t:2t+2],
    a[4:6] A[group, 2t+8:2t+10], a[6:8] A[group+8, 2t+8:2t+10]; b[0:2] is B[2t:2t+2, group], b[2:4]
    B[2t+8:2t+10, group]; c[0:2] is C[group, 2t:2t+2], c[2:4] C[group+8, 2t:2t+2]).

    ``shape='m16n8k8'``: float32 operands rounded to TF32 (``mma.sync.aligned.m16n8k8.row.col.f32.tf32``), 4
    values of ``a`` per lane (A[group, t], A[group+8, t], A[group, t+4], A[group+8, t+4]) and 2 of ``b``
    (B[t, group], B[t+4, group]); ``c`` as above."""
    if shape not in ('m16n8k16', 'm16n8k8'):
        raise ValueError(f"mma_sync supports shapes 'm16n8k16' (f16/bf16) and 'm16n8k8' (tf32), not {shape!r}")
    a, b, c = as_pointer(a, 'mma_sync: a'), as_pointer(b, 'mma_sync: b'), as_pointer(c, 'mma_sync: c')
    ab = pointee(a)
    if pointee(c).name != 'float32':
        raise TypeError(f'mma_sync: c must point to float32 accumulators, got {pointee(c)}')
    if shape == 'm16n8k8':
        if ab.name != 'float32' or pointee(b) != ab:
            raise TypeError(f"mma_sync(shape='m16n8k8'): a and b must both point to float32 values (rounded to TF32), "
                            f'got {ab} and {pointee(b)}')
        return PrimCall('cuda_mma_m16n8k8_tf32_f32', [a, b, c], void)
    if ab.name not in ('float16', 'bfloat16') or pointee(b) != ab:
        raise TypeError(f'mma_sync: a and b must both point to float16 or bfloat16 values, got {ab} and {pointee(b)}')
    name = 'cuda_mma_m16n8k16_f16_f32' if ab.name == 'float16' else 'cuda_mma_m16n8k16_bf16_f32'
    return PrimCall(name, [a, b, c], void)


WGMMA_NS = (16, 32, 64, 128, 192, 256)


def _wgmma_operands(what: str, acc, a, b):
    """(acc, a, b) of a wgmma as pointers: float32 accumulators, A and B both float16 or both bfloat16."""
    acc, a, b = as_pointer(acc, f'{what}: acc'), as_pointer(a, f'{what}: a'), as_pointer(b, f'{what}: b')
    if pointee(acc).name != 'float32':
        raise TypeError(f'{what}: acc must point to float32 accumulators, got {pointee(acc)}')
    if pointee(a).name not in ('float16', 'bfloat16') or pointee(b) != pointee(a):
        raise TypeError(f'{what}: a and b must both point to float16 or bfloat16 values, got {pointee(a)} and '
                        f'{pointee(b)}')
    return acc, a, b


def wgmma(acc, a, b, n: int, trans_a: bool = False, trans_b: bool = False, a_lbo: int = 0, b_lbo: int = 0,
          accumulate=True):
    """``acc += A @ B`` for a warpgroup (128 threads; ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32``, sm_90a):
    ``a`` and ``b`` point into shared memory at a 64 x 16 tile of A and a 16 x ``n`` tile of B (f16 or bf16),
    laid out with the 128-byte swizzle (the 16-byte chunk c of 128-byte row r stored at chunk c ^ (r % 8) of
    a 1024-byte aligned block of 8 rows): K-major, rows of 64 k values (``trans_*=False``); M/N-major
    (``trans_*=True``), blocks of [k rows][64 values] ``*_lbo`` bytes apart. ``acc`` points to ``n / 2`` f32
    accumulators per thread, in the layout of ``n / 8`` mma m16n8 tiles (warp w of the group: rows 16w…).
    ``accumulate`` (a bool, or a condition evaluated at run time) false: ``acc = A @ B`` — start a sum this way
    rather than zeroing the accumulators, which would serialize the wgmma pipeline.
    Asynchronous: ``wgmma_fence()`` before the first (after the accumulators were written), then
    ``wgmma_commit_group()`` and ``wgmma_wait_group(k)`` before reading them or reusing the shared memory."""
    n = _const_int(n, 'wgmma: n', WGMMA_NS)
    for what, flag in (('trans_a', trans_a), ('trans_b', trans_b)):
        if not isinstance(flag, bool):
            raise TypeError(f'wgmma: {what} must be a Python bool')
    a_lbo, b_lbo = _const_int(a_lbo, 'wgmma: a_lbo'), _const_int(b_lbo, 'wgmma: b_lbo')
    acc, a, b = _wgmma_operands('wgmma', acc, a, b)
    accumulate = cast(_scalar(accumulate, 'wgmma: accumulate'), 'int32')
    return PrimCall('cuda_wgmma_m64k16', [acc, a, b, accumulate], void,
                    {'n': n, 'trans_a': int(trans_a), 'trans_b': int(trans_b), 'a_lbo': a_lbo, 'b_lbo': b_lbo})


WGMMA_RS_NS = (64, 128)


def wgmma_rs(acc, a, b, n: int, trans_b: bool = False, b_lbo: int = 0, accumulate=True):
    """``acc += A @ B`` for a warpgroup as ``wgmma`` does, with A (64 x 16) from registers: ``a`` points to the
    warp's 8 values of its 16 rows, laid out as mma m16n8k16's A fragment (rows lane / 4 and + 8, k 2 (lane % 4)
    .. + 1 and + 8: the accumulators of two neighbouring n8 tiles of an earlier wgmma, converted to f16 / bf16,
    are one). ``b``: a 16 x ``n`` tile in shared memory (``n`` 64 or 128), as for ``wgmma``."""
    n = _const_int(n, 'wgmma_rs: n', WGMMA_RS_NS)
    if not isinstance(trans_b, bool):
        raise TypeError('wgmma_rs: trans_b must be a Python bool')
    b_lbo = _const_int(b_lbo, 'wgmma_rs: b_lbo')
    acc, a, b = _wgmma_operands('wgmma_rs', acc, a, b)
    accumulate = cast(_scalar(accumulate, 'wgmma_rs: accumulate'), 'int32')
    return PrimCall('cuda_wgmma_rs_m64k16', [acc, a, b, accumulate], void,
                    {'n': n, 'trans_b': int(trans_b), 'b_lbo': b_lbo})


def wgmma_fence():
    return PrimCall('cuda_wgmma_fence', [], void)


def wgmma_commit_group():
    return PrimCall('cuda_wgmma_commit_group', [], void)


def wgmma_wait_group(n: int):
    """Wait until at most ``n`` (a constant) committed wgmma groups of the warpgroup are pending."""
    return PrimCall('cuda_wgmma_wait_group', [], void, {'n': _const_int(n, 'wgmma_wait_group: n')})


def fence_proxy_async():
    """Make this thread's writes to shared memory visible to wgmma (the async proxy) after a barrier."""
    return PrimCall('cuda_fence_proxy_async', [], void)


def _barrier(bar, what: str):
    bar = as_pointer(bar, what)
    if pointee(bar).name != 'int64':
        raise TypeError(f'{what} must point to an mbarrier (an int64 of shared memory), got {pointee(bar)}')
    return bar


def mbarrier_init(bar, count):
    """Initialize the mbarrier at ``bar`` (an int64 of shared memory, e.g. of ``shared_tensor(i64, [n])``) for ``count`` arrivals per phase (one thread, before a
    ``fence_mbarrier_init()`` and a block barrier)."""
    return PrimCall('cuda_mbarrier_init', [_barrier(bar, 'mbarrier_init: bar'), _scalar(count, 'the count')], void)


def fence_mbarrier_init():
    """Make mbarrier initializations visible to TMA (the async proxy); a block barrier follows."""
    return PrimCall('cuda_fence_mbarrier_init', [], void)


def mbarrier_arrive(bar):
    return PrimCall('cuda_mbarrier_arrive', [_barrier(bar, 'mbarrier_arrive: bar')], void)


def mbarrier_arrive_expect_tx(bar, nbytes):
    """Arrive at ``bar`` announcing ``nbytes`` more bytes of TMA copies that complete this phase."""
    return PrimCall('cuda_mbarrier_arrive_expect_tx', [_barrier(bar, 'mbarrier_arrive_expect_tx: bar'),
                                                      _scalar(nbytes, 'the byte count')], void)


def mbarrier_wait(bar, phase):
    """Wait until the phase of parity ``phase`` of ``bar`` completes (its n-th phase has parity n % 2)."""
    return PrimCall('cuda_mbarrier_wait', [_barrier(bar, 'mbarrier_wait: bar'), _scalar(phase, 'the phase')], void)


def tensor_map(tensor, dims, strides, box, offset=0, im2col: Im2col = None) -> TensorMapType:
    """The type of a TMA tensor-map kernel parameter over tensor parameter ``tensor`` (a parameter annotation:
    ``tmap: tensor_map(a, [k, m], [k * 2], [64, 128])``): ``dims`` innermost first, ``strides`` the byte
    strides of dims 1.. (multiples of 16), ``box`` the elements of one copy, ``offset`` the first element;
    ``im2col`` (hidet.ir.type.Im2col) for TMA's im2col mode over a channels-last input. The kernel's launch
    entry builds the map from the tensor's buffer; callers pass the tensor alone. See TensorMapType."""
    if not isinstance(type_of(tensor), TensorType) or type_of(tensor).scope != 'pointer':
        raise TypeError(f'tensor_map: the tensor must be a tensor parameter of the kernel, got {describe(tensor)}')
    if type_of(tensor).dtype.nbytes != 2:
        raise TypeError(f'tensor_map: tensor maps hold 16-bit floats, got a {type_of(tensor).dtype} tensor')
    return TensorMapType(tensor, dims, strides, box, offset, im2col)


def tma_load(dst, tensor_map, bar, *coords):
    """Copy the box of ``tensor_map`` (a TensorMapType kernel parameter) at element coordinates ``coords``
    (innermost first, one per dim) to shared ``dst`` (1024-byte aligned: the 128-byte swizzle), completing
    ``bar``'s transaction bytes (sm_90). Elements outside the tensor are zeros."""
    t = type_of(tensor_map)
    if not isinstance(t, TensorMapType):
        raise TypeError(f'tma_load: tensor_map must be a tensor-map kernel parameter, got {describe(tensor_map)}')
    if len(coords) != len(t.dims):
        raise TypeError(f'tma_load: the tensor map has {len(t.dims)} dims, got {len(coords)} coordinates')
    args = [as_pointer(dst, 'tma_load: dst'), tensor_map, _barrier(bar, 'tma_load: bar')]
    args += [cast(_scalar(c, 'a coordinate'), 'int32') for c in coords]
    return PrimCall(f'cuda_tma_load_{len(coords)}d', args, void)


def tma_load_im2col(dst, tensor_map, bar, coords, offsets):
    """Copy a column of pixels of ``tensor_map`` (a TensorMapType kernel parameter with ``im2col``, over a
    channels-last [n, h, w, c] input) to shared ``dst`` (1024-byte aligned), completing ``bar``'s transaction
    bytes (sm_90): ``coords`` (c, w, h, n) is the first pixel's window origin (inside the map's bounding box),
    ``offsets`` (w, h) the window position added to every pixel (0 to 65535). Pixels outside the input read
    zeros; ``dst`` receives (pixels per column) rows of (channels per pixel) elements."""
    t = type_of(tensor_map)
    if not isinstance(t, TensorMapType) or t.im2col is None:
        raise TypeError(f'tma_load_im2col: tensor_map must be an im2col tensor-map kernel parameter, got '
                        f'{describe(tensor_map)}')
    if len(coords) != 4 or len(offsets) != 2:
        raise TypeError(f'tma_load_im2col: expected 4 coordinates (c, w, h, n) and 2 offsets (w, h), got '
                        f'{len(coords)} and {len(offsets)}')
    args = [as_pointer(dst, 'tma_load_im2col: dst'), tensor_map, _barrier(bar, 'tma_load_im2col: bar')]
    args += [cast(_scalar(c, 'a coordinate'), 'int32') for c in coords]
    args += [cast(_scalar(o, 'an offset'), 'int32') for o in offsets]
    return PrimCall('cuda_tma_load_im2col_4d', args, void)
