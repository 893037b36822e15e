"""The fused attention operator (hidet/graph/ops/attention.py): its templates on the CPU and CUDA, its
compute definition through the auto-scheduler, and the graph pass that rewrites matmul → softmax →
matmul into it (hidet/graph/transforms/fuse_attention.py). Everything against torch on random data."""
import math
import os
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet.graph import ops
from hidet.graph.ops.attention import AttentionOp
from hidet.kernels.attention import AttentionConfig, find_attention_template

H = hidet.from_torch
TOL = {'float32': 2e-5, 'float16': 2e-3}


def _tensors(shape_q, sk, dv, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    *batch, sq, d = shape_q
    q = torch.randn(*batch, sq, d, generator=g).to(dt).to(device)
    k = torch.randn(*batch, sk, d, generator=g).to(dt).to(device)
    v = torch.randn(*batch, sk, dv, generator=g).to(dt).to(device)
    return q, k, v


def _expected(q, k, v, mask=None, causal=False, scale=None):
    m = None if mask is None else (mask if mask.dtype == torch.bool else mask.float())
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=m, is_causal=causal,
                                          scale=scale).to(q.dtype)


def _check(actual, expected, dtype):
    torch.testing.assert_close(actual.torch(), expected, rtol=TOL[dtype], atol=TOL[dtype])


# 37 and 70 keys: a partial key tile of the CUDA template; heads 64 and 40 (not a multiple of 32)
CASES = [([2, 3, 5, 16], 7, 16), ([1, 2, 37, 64], 37, 64), ([3, 9, 40], 70, 24)]


@pytest.mark.parametrize('case', CASES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
@pytest.mark.parametrize('kind', ['plain', 'add', 'bool', 'causal'])
def test_attention_matches_torch(case, dtype, kind, device):
    shape_q, sk, dv = case
    if kind == 'causal':
        sk = shape_q[-2]
    q, k, v = _tensors(shape_q, sk, dv, dtype, device)
    mask = None
    if kind == 'add':
        mask = torch.randn(shape_q[-2], sk).to(q.dtype).to(device)  # broadcast over the batch
    elif kind == 'bool':
        mask = torch.rand(*shape_q[:-2], 1, sk, device=device) > 0.4
        mask[..., 0] = True  # every query keeps a key
    scale = 0.3
    out = ops.attention(H(q), H(k), H(v), None if mask is None else H(mask), scale, kind == 'causal')
    assert out.dtype.name == dtype
    _check(out, _expected(q, k, v, mask, kind == 'causal', scale), dtype)


def test_fully_masked_rows_are_nan_like_torch():
    q, k, v = _tensors([1, 4, 8], 6, 8, 'float32', 'cpu')
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[2] = False
    out = ops.attention(H(q), H(k), H(v), H(mask), 0.5).torch()
    assert torch.isnan(out[0, 2]).all() and not torch.isnan(out[0, [0, 1, 3]]).any()
    torch.testing.assert_close(out[0, [0, 1, 3]], _expected(q, k, v, mask, scale=0.5)[0, [0, 1, 3]])


def test_compute_definition_through_the_auto_scheduler():
    """The task's compute definition (what runs where no template applies) is the same function."""
    from hidet.backend.cache import build_libraries
    from hidet.backend.codegen import generate
    from hidet.runtime.compiled_module import CompiledModule
    from hidet.ir.schedulers import schedule_task

    q, k, v = _tensors([2, 6, 8], 11, 5, 'float32', 'cpu', seed=1)
    mask = torch.randn(6, 11)
    op = AttentionOp(H(q), H(k), H(v), H(mask), 0.7)
    path = build_libraries([(generate(schedule_task(op.task, 'cpu')), 'cpu', 'attention')])[0]
    out = torch.empty(2, 6, 5)
    CompiledModule(path)['launch'](H(q), H(k), H(v), H(mask), H(out))
    torch.testing.assert_close(out, _expected(q, k, v, mask, scale=0.7), rtol=1e-5, atol=1e-5)


def test_templates_and_their_limits():
    q, k, v = (hidet.symbol([2, 4, 8, 64]) for _ in range(3))
    task = AttentionOp(q, k, v, scale=0.1).task
    assert find_attention_template(task, 'cpu') is not None
    cuda = find_attention_template(task, 'cuda')
    assert cuda is not None and 'attention [8, 8, 64]' in cuda.title
    big = AttentionOp(*(hidet.symbol([1, 4, 8, 256]) for _ in range(3))).task
    assert find_attention_template(big, 'cuda') is None  # heads over 128: the auto-scheduler
    with pytest.raises(ValueError, match='same batch dimensions'):
        ops.attention(hidet.symbol([2, 4, 8]), hidet.symbol([3, 4, 8]), hidet.symbol([3, 4, 8]))
    q1, kv = hidet.symbol([2, 1, 8]), hidet.symbol([2, 5, 8])  # one query row: scores [2, 1, 5]
    with pytest.raises(ValueError, match=r'mask \(1, 4, 5\) does not broadcast to the scores \(2, 1, 5\)'):
        ops.attention(q1, kv, kv, mask=hidet.symbol([1, 4, 5]))
    with pytest.raises(ValueError, match='more dimensions than the scores'):
        ops.attention(q1, kv, kv, mask=hidet.symbol([1, 2, 1, 5]))
    assert ops.attention(q1, kv, kv, mask=hidet.symbol([1, 1, 5])).shape == (2, 1, 8)


# ---------------------------------------------------------------- the tensor-core kernel (kernels/attention/mma.py)
# (batch dims, query rows, keys, head size, value head size, dtype, mask kind): sequence lengths that are not
# tile multiples, head sizes 64 / 80 / 96 / 128 and one whose q·k and value sizes differ, fp16 and bf16
MMA_CASES = [([2, 3], 77, 77, 64, 64, 'float16', 'causal'), ([1, 2], 130, 200, 128, 128, 'bfloat16', 'add'),
             ([4], 197, 197, 80, 80, 'float16', 'none'), ([1, 4], 33, 33, 96, 96, 'bfloat16', 'causal'),
             ([2, 2], 45, 70, 32, 64, 'float16', 'bool')]


def _mma_task(batch, sq, sk, d, dv, dtype, kind, device='cuda'):
    q = hidet.symbol(batch + [sq, d], dtype, device)
    k, v = hidet.symbol(batch + [sk, d], dtype, device), hidet.symbol(batch + [sk, dv], dtype, device)
    mask = None if kind in ('none', 'causal') else \
        hidet.symbol([sq, sk] if kind == 'add' else batch[:1] + [1] * (len(batch) - 1) + [sq, sk],
                     dtype if kind == 'add' else 'bool', device)
    return AttentionOp(q, k, v, mask, 0.3, kind == 'causal').task


def test_tensor_core_kernel_space_and_sources_compile_with_nvcc():
    """fp16 / bf16 tasks with head sizes that are multiples of 16 up to 128 take the tensor-core kernel (every
    config of the space at level 2), others the fp32 one; the sources compile for sm_90 and sm_80."""
    from hidet.backend.cache import build_libraries
    from hidet.backend.compiler import CompilerNotFoundError, find_nvcc

    templates = [find_attention_template(_mma_task(*case, device='cpu'), 'cuda') for case in MMA_CASES]
    for t in templates:
        assert t.default().mma and all(c.mma for c in t.space(2)) and len(t.space(2)) == 8, t.title
    # under half a wave of 64-row blocks: 32 x 32; else 64 rows, and 32 keys for head sizes over 64
    assert [t.default().name() for t in templates[:3]] == ['mma_r32_k32'] * 3
    large = [find_attention_template(_mma_task(*case, device='cpu'), 'cuda').default().name() for case in
             (([8, 12], 512, 512, 64, 64, 'float16', 'causal'), ([1, 32], 1024, 1024, 128, 128, 'float16', 'causal'))]
    assert large == ['mma_r64_k64', 'mma_r64_k32']
    # sm_90: static sizes with head sizes 64 and 128 take the warpgroup kernel's TMA twin, large or small (keys in
    # one tile of 128 where they fit one and nothing is causal); symbolic sizes the cp.async kernels (the small
    # ones mma.sync's); head size 80 stays on mma.sync's
    sm90 = [find_attention_template(_mma_task(*case, device='cpu'), 'cuda', 'sm_90').default().name() for case in
            (([8, 12], 512, 512, 64, 64, 'float16', 'causal'), ([1, 32], 1024, 1024, 128, 128, 'bfloat16', 'add'),
             ([1, 12], 128, 128, 64, 64, 'float16', 'causal'), ([1, 12], 128, 128, 64, 64, 'float16', 'add'),
             ([1, 12], 197, 197, 64, 64, 'float16', 'none'), ([8, 12], 512, 512, 80, 80, 'float16', 'none'))]
    assert sm90 == ['wg_r64_k64_tma', 'wg_r64_k64_tma', 'wg_r64_k64_tma', 'wg_r64_k128_tma', 'wg_r64_k64_tma',
                    'mma_r64_k32']
    dynamic = find_attention_template(_mma_task([1, 12], 'seq', 'seq', 64, 64, 'float16', 'causal', device='cpu'),
                                      'cuda', 'sm_90')
    assert dynamic.default().name() == 'mma_r64_k64'
    for odd in ([2], 8, 8, 40, 40, 'float16', 'none'), ([2], 8, 8, 64, 64, 'float32', 'none'):
        assert not find_attention_template(_mma_task(*odd), 'cuda').default().mma
    try:
        find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')
    sources = [t.source(t.default()) for t in templates] + [templates[1].source(AttentionConfig(128, 64))]
    assert all('mma_m16n8k16' in s and 'ldmatrix<4, true>' in s for s in sources)
    # sm_90: the warpgroup kernel's configs too, for head sizes 64 and 128 (q·k and v sizes may differ)
    wg_sources = []
    for case in MMA_CASES:
        t = find_attention_template(_mma_task(*case, device='cpu'), 'cuda', 'sm_90')
        wg = [c for c in t.space(2) if c.wgmma and not c.tma]
        assert len(wg) == (4 if case[3] in (64, 128) and case[4] in (64, 128) else 0), t.title
        # static sizes, contiguous inputs: each has its TMA twin (a producer warp, a ring of k and v buffers)
        assert [replace(c, tma=True) for c in wg] == [c for c in t.space(2) if c.tma], t.title
        assert not [c for c in find_attention_template(_mma_task(*case, device='cpu'), 'cuda', 'sm_80').space(2)
                    if c.wgmma]
        # (64 rows in tiles of 64 keys, 128 in tiles of 128; with cp.async and with TMA)
        wg_sources += [t.source(c) for c in wg[::3]] + [t.source(replace(c, tma=True)) for c in wg[::3]]
    assert len(wg_sources) == 8 and all('wgmma_m64k16_rs' in s for s in wg_sources)
    assert sum('tma_load(' in s and 'cp_async' not in s for s in wg_sources) == 4
    with hidet.option.context(cuda_arch='sm_90'):
        paths = build_libraries([(s, 'cuda', 'attention-template-test') for s in sources + wg_sources])
    with hidet.option.context(cuda_arch='sm_80'):
        paths += build_libraries([(sources[0], 'cuda', 'attention-template-test')])
    assert all(os.path.exists(p) for p in paths)


def test_tma_maps_of_strided_heads():
    """How TMA copies q, k, v rows (wgmma.tma_layout): contiguous batch dimensions merge into one; heads read in
    place from a QKV projection (head stride = head size) join the row's columns; a broadcast dimension (stride
    0) takes no part; three dimensions that do not merge have no map."""
    from types import SimpleNamespace

    from hidet.ir.dtypes import float16
    from hidet.ir.expr import SymbolVar, evaluate_dim
    from hidet.kernels.attention.wgmma import tma_layout

    def layout(batch_shape, logical, offset, strides, b, col, row):
        shape = SimpleNamespace(layouts=[(logical, offset, strides)], batch_shape=batch_shape, in_dtype=float16)
        found = tma_layout(shape, 0)
        if found is None:
            return None
        dims, byte_strides, off, coords = found
        var = SymbolVar('b')
        return dims, byte_strides, off, [evaluate_dim(x, {'b': b}) for x in coords(var, col, row)]

    # [2, 3, 77, 64] contiguous: one batch dimension of 6; entry 4 (batch 1, head 1), column 0, row 5
    assert layout((2, 3), (2, 3, 77, 64), 0, (3 * 77 * 64, 77 * 64, 64, 1), 4, 0, 5) == \
        ([64, 77, 6], [128, 77 * 64 * 2], 0, [0, 5, 4])
    # gpt2's k read from the QKV projection [2, 9, 3 * 4 * 64] as [2, 4, 9, 64]: heads side by side in a row
    qkv_row = 3 * 4 * 64
    assert layout((2, 4), (2, 4, 9, 64), 4 * 64, (9 * qkv_row, 64, qkv_row, 1), 6, 64, 3) == \
        ([4 * 64, 9, 2], [qkv_row * 2, 9 * qkv_row * 2], 256, [2 * 64 + 64, 3, 1])
    # a head dimension broadcast (stride 0): the map has the batch dimension alone
    assert layout((2, 4), (2, 4, 9, 64), 0, (9 * 64, 0, 64, 1), 6, 0, 2) == ([64, 9, 2], [128, 9 * 128], 0,
                                                                            [0, 2, 1])
    # three batch dimensions that do not merge
    assert layout((2, 3, 5), (2, 3, 5, 9, 64), 0, (10000, 3000, 128, 64 * 3, 1), 0, 0, 0) is None


def test_causal_blocks_run_longest_first():
    """Causal attention's blocks take the query tiles from the last (the most keys) to the first, every batch
    entry's longest tile first (the grid: batch entries along x, tiles along y, counted down); others keep a batch
    entry's tiles together (tiles along x). Both kernels, mma.sync's and the warpgroup one."""
    import re

    for arch in ('sm_80', 'sm_90'):
        for kind, grid in (('causal', (96, 8)), ('none', (8, 96))):
            t = find_attention_template(_mma_task([8, 12], 512, 512, 64, 64, 'float16', kind, device='cpu'), 'cuda',
                                        arch)
            source = t.source(t.default())
            dims = re.search(r'dim3 grid_\(\(unsigned\)\((\d+)ll\), \(unsigned\)\((\d+)ll\)', source)
            assert dims and tuple(map(int, dims.groups())) == grid, (arch, kind, t.default().name())
            assert ('(int32_t(7) - ((int32_t)blockIdx.y))' in source) == (kind == 'causal'), (arch, kind)


def test_mask_pairs_read_two_keys_in_one_load():
    """A mask with a row per key of even length reads a lane's two neighbouring keys in one load (load_pair); a
    mask broadcast along the keys, or of an odd number of them, element by element."""
    from hidet.kernels.attention.template import AttentionShape

    def task(mask_shape, sk, dtype='float16'):
        q = hidet.symbol([2, 4, 64, 64], 'float16', 'cpu')
        k = v = hidet.symbol([2, 4, sk, 64], 'float16', 'cpu')
        return AttentionOp(q, k, v, hidet.symbol(mask_shape, dtype, 'cpu'), 0.125, False).task

    cases = [(([64, 128], 128), True), (([2, 1, 1, 128], 128, 'bool'), True), (([2, 4, 64, 1], 128), False),
             (([64, 127], 127), False)]
    for args, pairs in cases:
        t = task(*args)
        assert AttentionShape(t).mask_pairs == pairs, args
        source = find_attention_template(t, 'cuda', 'sm_90').source(AttentionConfig(64, 64, True, True))
        assert ('hidet::lang::load_pair(' in source) == pairs, args
    assert not AttentionShape(_mma_task([2], 64, 64, 64, 64, 'float16', 'causal', device='cpu')).mask_pairs


def test_tensor_core_library_falls_back_where_buffers_are_misaligned():
    """A tensor-core config's launch entry tests the alignment its vector accesses need (q, k, v: 16 bytes; the
    output's and a paired mask's element pairs) and runs the float32 kernel otherwise; a tuning candidate's
    library (fallback=False) fails with a message instead."""
    from hidet.kernels.attention.template import FALLBACK

    task = _mma_task([1, 2], 130, 200, 128, 128, 'bfloat16', 'add', device='cpu')
    t = find_attention_template(task, 'cuda', 'sm_90')
    cfg = t.default()
    source = t.source(cfg)
    kernel, fallback = (f'attention_cuda_{t.shape.task.key()[:12]}_{c.name()}' for c in (cfg, FALLBACK))
    needs = ((0, 16), (1, 16), (2, 16), (4, 4), (3, 4))  # q, k, v, the output, the mask
    checks = ' && '.join(f'hidet::is_aligned(buffers[{i}], {n})' for i, n in needs)
    assert f'if ({checks})\n    return {kernel}(buffers, 5, dims, 0, stream);\n  return {fallback}(buffers' in source
    bare = t.source(cfg, fallback=False)
    assert fallback not in bare and 'is not aligned for the tensor-core kernel' in bare
    # (an odd number of keys: no mask pairs, so no mask test)
    odd = find_attention_template(_mma_task([1, 2], 64, 63, 64, 64, 'float16', 'add', device='cpu'), 'cuda', 'sm_90')
    assert 'hidet::is_aligned(buffers[3]' not in odd.source(odd.default())


@pytest.mark.cuda
@pytest.mark.parametrize('kind', ['causal', 'add'])
def test_misaligned_buffers_take_the_fallback_and_match_torch(kind):
    """q, k, v and a mask at an odd element offset (contiguous torch views of a larger buffer) run the float32
    kernel instead of faulting in 16-byte copies."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    case = ([2, 3], 64, 64, 64, 64, 'float16', kind)
    template = find_attention_template(_mma_task(*case), 'cuda')
    g = torch.Generator().manual_seed(5)

    def odd(*shape):
        flat = torch.randn(math.prod(shape) + 1, generator=g).half().cuda()
        return flat[1:].view(*shape)

    q, k, v = odd(2, 3, 64, 64), odd(2, 3, 64, 64), odd(2, 3, 64, 64)
    mask = odd(64, 64) if kind == 'add' else None
    expected = _expected(q, k, v, mask, kind == 'causal', 0.3)
    path, = build_libraries([(template.source(template.default()), 'cuda', 'attention-test')])
    out = torch.full(expected.shape, float('nan'), dtype=torch.float16, device='cuda')
    CompiledModule(path)['launch'](*[x for x in (q, k, v, mask) if x is not None], out)
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.cuda
@pytest.mark.parametrize('case', MMA_CASES, ids=str)
def test_tensor_core_kernel_every_config_matches_torch(case):
    """Each config of the level-2 space against torch's sdpa in fp32 on random inputs."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    batch, sq, sk, d, dv, dtype, kind = case
    task = _mma_task(*case)
    template = find_attention_template(task, 'cuda')
    g = torch.Generator().manual_seed(3)
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(*batch, n, e, generator=g).to(dt).cuda() for n, e in ((sq, d), (sk, d), (sk, dv)))
    mask = None
    if kind == 'add':
        mask = torch.randn(sq, sk, generator=g).to(dt).cuda()
    elif kind == 'bool':
        mask = torch.rand(*task.inputs[3].shape, generator=g).cuda() > 0.4
        mask[..., 0] = True
    expected = _expected(q, k, v, mask, kind == 'causal', 0.3)
    configs = template.space(2)
    if torch.cuda.get_device_capability() == (9, 0) and d in (64, 128) and dv in (64, 128):
        assert any(c.wgmma for c in configs)  # the warpgroup kernel's configs are checked too
    paths = build_libraries([(template.source(c), 'cuda', 'attention-test') for c in configs])
    for cfg, path in zip(configs, paths):
        out = torch.full(expected.shape, float('nan'), dtype=dt, device='cuda')
        CompiledModule(path)['launch'](*[x for x in (q, k, v, mask) if x is not None], out)
        torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2, msg=lambda m: f'{cfg.name()}: {m}')


# ---------------------------------------------------------------- the graph pass
def _composed(q, k, v, mask, scale_op, cast=None):
    """Attention as a model written without sdpa: matmul, scale, mask, softmax, matmul."""
    s = ops.matmul(q, ops.transpose(k, -1, -2))
    s = ops.divide(s, 1.0 / scale_op) if scale_op else s
    if mask is not None:
        s = ops.add(s, mask)
    p = ops.softmax(s, -1)
    if cast:
        p = ops.cast(p, cast)
    return ops.matmul(p, v)


def _attention_nodes(graph):
    return [n for n in graph.nodes if isinstance(n, AttentionOp)]


@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_pass_rewrites_matmul_softmax_matmul(dtype, device):
    q, k, v = _tensors([2, 2, 9, 16], 9, 16, dtype, device)
    mask = torch.randn(1, 1, 9, 9).to(q.dtype).to(device)
    syms = [hidet.symbol_like(H(t)) for t in (q, k, v, mask)]
    out = _composed(*syms, scale_op=0.25)
    graph = hidet.trace_from(out, syms)
    optimized = hidet.graph.optimize(graph)
    (node,) = _attention_nodes(optimized)
    assert node.attrs['scale'] == pytest.approx(0.25) and node.attrs['mask'] == 'add'
    print(f'{len(graph.nodes)} operators -> {len(optimized.nodes)} after optimize')
    expected = _expected(q, k, v, mask, scale=0.25)
    _check(optimized(*[H(t) for t in (q, k, v, mask)]), expected, dtype)
    _check(optimized.build()(*[H(t) for t in (q, k, v, mask)]), expected, dtype)


def test_pass_takes_k_through_a_permute_and_tensor_scales():
    """BERT's form: heads split by reshape + permute, kᵀ a permute of k's projection, a 0-d constant scale."""
    b, s, h, d = 2, 5, 2, 8
    x = torch.randn(b, s, h * d)
    sym = hidet.symbol_like(H(x))
    heads = [ops.permute(ops.reshape(ops.multiply(sym, float(i + 1)), [b, s, h, d]), [0, 2, 1, 3]) for i in range(3)]
    q, k, v = heads
    kt = ops.permute(ops.reshape(ops.multiply(sym, 2.0), [b, s, h, d]), [0, 2, 3, 1])
    scores = ops.divide(ops.matmul(q, kt), hidet.asarray(math.sqrt(d)))
    out = ops.matmul(ops.softmax(scores, -1), v)
    graph = hidet.trace_from(out, [sym])
    optimized = hidet.graph.optimize(graph)
    assert len(_attention_nodes(optimized)) == 1
    xk = (x * 2).reshape(b, s, h, d).permute(0, 2, 1, 3)
    xv = (x * 3).reshape(b, s, h, d).permute(0, 2, 1, 3)
    xq = x.reshape(b, s, h, d).permute(0, 2, 1, 3)
    torch.testing.assert_close(optimized(H(x)).torch(), _expected(xq, xk, xv), rtol=2e-5, atol=2e-5)


def test_pass_keeps_chains_whose_weights_are_used():
    q, k, v = (hidet.symbol([2, 6, 8]) for _ in range(3))
    scores = ops.matmul(q, ops.transpose(k, -1, -2))
    p = ops.softmax(scores, -1)
    graph = hidet.trace_from([ops.matmul(p, v), p], [q, k, v])  # the weights are an output too
    assert not _attention_nodes(hidet.graph.optimize(graph))
    # a scale applied before the matmul, or a softmax over another axis, is not attention either
    other = hidet.trace_from(ops.matmul(ops.softmax(scores, 1), v), [q, k, v])
    assert not _attention_nodes(hidet.graph.optimize(other))


def test_sdpa_is_one_attention_kernel():
    q, k, v = (hidet.symbol([1, 2, 8, 16]) for _ in range(3))
    graph = hidet.trace_from(ops.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])
    optimized = hidet.graph.optimize(graph)
    assert [type(n).__name__ for n in optimized.nodes] == ['AttentionOp']


@pytest.mark.parametrize('kind', ['bool', 'add', 'not causal', 'shifted', 'all kept'])
def test_constant_causal_masks_become_causal_attention(kind):
    """A decoder's constant lower-triangular mask (boolean, or 0 / -inf) becomes the causal flag and a constant
    mask keeping every key goes: no mask is read; other constant masks stay masks. Values against torch with
    the mask as given."""
    tril = torch.ones(9, 9, dtype=torch.bool).tril()
    if kind == 'shifted':
        tril = torch.ones(9, 9, dtype=torch.bool).tril(1)
    if kind == 'all kept':
        tril = torch.ones(9, 9, dtype=torch.bool)
    mask = tril
    if kind in ('add', 'not causal'):
        mask = torch.zeros(9, 9).masked_fill(~tril, float('-inf' if kind == 'add' else -1e4))
    q, k, v = _tensors([1, 2, 9, 16], 9, 16, 'float32', 'cpu', seed=4)
    hq, hk, hv = (hidet.symbol_like(H(t)) for t in (q, k, v))
    out = ops.scaled_dot_product_attention(hq, hk, hv, attn_mask=H(mask.view(1, 1, 9, 9)))
    optimized = hidet.graph.optimize(hidet.trace_from(out, [hq, hk, hv]))
    (node,) = optimized.nodes
    assert isinstance(node, AttentionOp)
    assert node.attrs['causal'] == (kind in ('bool', 'add'))
    assert len(node.inputs) == (3 if kind in ('bool', 'add', 'all kept') else 4)
    torch.testing.assert_close(optimized(H(q), H(k), H(v)).torch(), _expected(q, k, v, mask.view(1, 1, 9, 9)),
                               rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- views (graph/transforms/attention_views.py)
def _heads(x, n_heads, b, s):
    """[b, s, n_heads * 64] → [b, n_heads, s, 64], as a model writes it."""
    return ops.permute(ops.reshape(x, [b, s, n_heads, 16]), [0, 2, 1, 3])


@pytest.mark.parametrize('style', ['split', 'slice', 'gqa'])
def test_attention_reads_heads_in_place_and_writes_merged_heads(style):
    """The QKV projection's output split (gpt2) or sliced (merged sibling linears), reshaped and permuted to
    heads: attention reads them through views, and writes the permute back to merged heads itself. The
    optimized graph has no kernel that only copies, and gives torch's values. GQA's key/value heads broadcast
    over the query heads (head h reads key head h // 2: no stride does that) stay copies; q is a view."""
    from hidet.graph.transforms.attention_views import view_of

    b, s, h, kvh = 2, 11, 4, (2 if style == 'gqa' else 4)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(b, s, 32, generator=g)
    w = torch.randn(32, (h + 2 * kvh) * 16, generator=g) / 6
    wo = torch.randn(h * 16, 32, generator=g) / 6
    hx = hidet.symbol([b, s, 32])
    qkv = ops.matmul(hx, H(w))
    if style == 'split':
        q, k, v = ops.split(qkv, [h * 16, kvh * 16, kvh * 16], axis=2)
    else:
        q, k, v = (ops.strided_slice(qkv, [a], [a + n], axes=[2]) for a, n in
                   ((0, h * 16), (h * 16, kvh * 16), ((h + kvh) * 16, kvh * 16)))
    q, k, v = _heads(q, h, b, s), _heads(k, kvh, b, s), _heads(v, kvh, b, s)
    if style == 'gqa':  # each key/value head serves two query heads (repeat_kv)
        k, v = (ops.reshape(ops.broadcast(ops.reshape(t, [b, kvh, 1, s, 16]), [b, kvh, 2, s, 16]), [b, h, s, 16])
                for t in (k, v))
    mask = torch.randn(b, 1, 1, s, generator=g) if style == 'slice' else None  # bert's padding mask: 4-D
    y = ops.attention(q, k, v, H(mask) if mask is not None else None, scale=0.25, causal=mask is None)
    out = ops.matmul(ops.reshape(ops.permute(y, [0, 2, 1, 3]), [b, s, h * 16]), H(wo))
    graph = hidet.graph.optimize(hidet.trace_from(out, [hx]))
    (att,) = _attention_nodes(graph)
    assert att.out_dims == (0, 2, 1, 3) and att.views[0] is not None
    names = [n.name for n in graph.nodes]
    if style != 'gqa':
        assert all(view is not None for view in att.views)
        assert len(graph.nodes) == 3, names  # QKV matmul, attention, output projection (its reshape a prologue)
    ref_qkv = x @ w
    rq, rk, rv = ref_qkv.split([h * 16, kvh * 16, kvh * 16], dim=2)
    rq, rk, rv = (t.reshape(b, s, -1, 16).transpose(1, 2) for t in (rq, rk, rv))
    rk, rv = (t.repeat_interleave(h // kvh, dim=1) for t in (rk, rv))
    ref = F.scaled_dot_product_attention(rq, rk, rv, attn_mask=mask, is_causal=mask is None, scale=0.25)
    ref = ref.transpose(1, 2).reshape(b, s, -1) @ wo
    torch.testing.assert_close(graph(H(x)).torch(), ref, rtol=1e-4, atol=1e-4)
    # a view that would break the 16-byte rows the tensor had stops the walk there
    odd = ops.permute(ops.reshape(ops.strided_slice(hidet.symbol([2, 5, 40]), [4], [36], axes=[2]), [2, 5, 2, 16]),
                      [0, 2, 1, 3])
    base, view = view_of(odd)
    assert view is None or view.offset % 8 == 0


def test_views_follow_no_computation_and_no_carry():
    from hidet.graph.ops.attention import View
    from hidet.graph.transforms.attention_views import _digits, view_of

    x = hidet.symbol([2, 6, 64])
    e = ops.exp(ops.reshape(x, [2, 6, 4, 16]))
    assert view_of(ops.permute(e, [0, 2, 1, 3]))[0] is e  # the walk stops at exp, which computes
    base, view = view_of(ops.permute(ops.reshape(x, [2, 6, 4, 16]), [0, 2, 1, 3]))
    assert base is x and view == View((2, 4, 6, 16), 0, (384, 16, 64, 1))
    assert _digits(View((3,), 2, (2,)), [2, 4]) is None  # 2, 4, 6: a carry from the last digit into the first
    assert _digits(View((2, 2), 1, (4, 2)), [2, 4]) == ([0, 1], [[1, 0], [0, 2]])  # 1, 3, 5, 7
