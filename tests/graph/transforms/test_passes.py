"""Graph passes, one behaviour each: constant folding, shape-op simplification, CSE, conv+bn
folding and the fusion rules. Every rewritten graph is checked against the original on random data."""
import numpy as np
import pytest
import torch

import hidet
from hidet import ops
from hidet.graph.flow_graph import display_name
from hidet.graph.tensor import _host_values
from hidet.graph.transforms import (EliminateCommonSubexpressions, FoldConstants, FoldConvBatchNorm, FuseOperators,
                                    PassContext, SimplifyTransforms)
from hidet.kernels.matmul import match_gemm, operand_modes


def _same(g1, g2, *shapes):
    xs = [hidet.randn(s) for s in shapes]
    a, b = g1(*xs), g2(*xs)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def _names(graph):
    return [display_name(n) for n in graph.nodes]


def test_fold_constants():
    x = hidet.symbol([4, 3])
    w = hidet.randn([3, 4])
    g = hidet.trace_from(ops.matmul(x, ops.transpose(w, 0, 1).transpose(0, 1) * 2.0), [x])
    folded = FoldConstants()(g, PassContext())
    assert _names(folded) == ['Matmul']
    _same(g, folded, [4, 3])


def test_deferred_constants_fold_on_the_host_without_kernels(monkeypatch):
    """Inside deferred_constants() operators on constants are traced, not run; fold_constants evaluates them on
    the host (hidet.ir.evaluate), building no kernel (the torch frontend converts weights this way)."""
    import importlib

    from hidet.graph.operator import deferred_constants

    # (the module, not the function hidet.drivers.build_task; imported here, as the drivers load lazily)
    build_task_module = importlib.import_module('hidet.drivers.build_task')

    x, w = hidet.symbol([4, 3]), hidet.randn([4, 3])
    with deferred_constants():
        wt = ops.transpose(ops.multiply(w, 2.0), 0, 1)
    assert wt.is_symbolic() and wt.trace is not None
    g = hidet.trace_from(ops.matmul(x, wt), [x])
    assert _names(g) == ['Multiply', 'Permute', 'Matmul']
    batches = []
    original = build_task_module.build_tasks
    monkeypatch.setattr(build_task_module, 'build_tasks',
                        lambda jobs, space=0, options=None: batches.append(len(jobs)) or original(jobs, space, options))
    folded = FoldConstants()(g, PassContext())
    assert batches == [] and _names(folded) == ['Matmul']
    np.testing.assert_array_equal(folded.constants[0].numpy(), (w.numpy() * 2).T)  # (exact: a copy and a product)
    xv = hidet.randn([4, 3])
    np.testing.assert_allclose(folded(xv).numpy(), xv.numpy() @ (w.numpy() * 2).T, rtol=1e-5, atol=1e-5)
    assert not ops.multiply(w, 2.0).is_symbolic()  # outside the context, operators on constants run at once


def test_simplify_transforms():
    x = hidet.symbol([2, 3, 4])
    y = ops.reshape(ops.reshape(x, [6, 4]), [2, 12])
    z = ops.permute(ops.permute(x, [1, 2, 0]), [2, 0, 1])  # identity overall
    g = hidet.trace_from([y, ops.reshape(z, [2, 3, 4]) + 1.0], [x])
    s = SimplifyTransforms()(g, PassContext())
    assert _names(s).count('Reshape') == 1 and 'Permute' not in _names(s)
    xs = hidet.randn([2, 3, 4])
    for a, b in zip(g(xs), s(xs)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_common_subexpressions():
    x = hidet.symbol([5])
    g = hidet.trace_from(ops.exp(x) + ops.exp(x), [x])
    c = EliminateCommonSubexpressions()(g, PassContext())
    assert len(g.nodes) == 3 and len(c.nodes) == 2
    _same(g, c, [5])


def test_fold_conv_batch_norm():
    x = hidet.symbol([1, 3, 6, 6])
    w, b = hidet.randn([4, 3, 3, 3]), hidet.randn([4])
    mean, var = hidet.randn([4]), hidet.from_torch(torch.rand(4) + 0.5)
    gamma, beta = hidet.randn([4]), hidet.randn([4])
    y = ops.relu(ops.batch_norm(ops.conv2d(x, w, b, padding=1), mean, var, gamma, beta))
    g = FoldConstants()(hidet.trace_from(y, [x]), PassContext())
    folded = FoldConvBatchNorm()(g, PassContext())
    assert _names(folded) == ['Conv2d', 'Add', 'Relu']
    _same(g, folded, [1, 3, 6, 6])
    assert _names(hidet.graph.optimize(hidet.trace_from(y, [x]))) == ['Fused[Conv2d, Add, Relu]']


def test_fold_conv_batch_norm_through_float32_casts():
    """A float16 model's batch norm computes in float32 between two casts (as torch's): the chain still folds,
    into one float32 scale and shift of the convolution's result (its float16 weights untouched), fused into
    one kernel, and agrees with the unfolded graph within float16's rounding."""
    x = hidet.symbol([2, 8, 6, 6], dtype='float16')
    w = hidet.from_torch(torch.randn(16, 8, 3, 3).half())
    mean, var = hidet.from_torch(torch.randn(16).half()), hidet.from_torch((torch.rand(16) + 0.3).half())
    gamma, beta = hidet.from_torch((torch.rand(16) + 0.5).half()), hidet.from_torch(torch.randn(16).half())
    y = ops.relu(ops.batch_norm(ops.conv2d(x, w, padding=1), mean, var, gamma, beta) * 0.5)
    g = FoldConstants()(hidet.trace_from(y, [x]), PassContext())
    assert 'CastF32' in _names(g)
    folded = FoldConvBatchNorm()(g, PassContext())
    assert _names(folded) == ['Conv2d', 'CastF32', 'Multiply', 'Add', 'CastF16', 'Relu']
    assert folded.nodes[0].inputs[1] is w  # the weights as they were
    assert [t.dtype.name for t in folded.nodes[2].inputs + folded.nodes[3].inputs] == ['float32'] * 4
    xv = hidet.from_torch(torch.randn(2, 8, 6, 6).half())
    want, got = g(xv).torch().float(), folded(xv).torch().float()
    assert (got - want).abs().max() <= 2e-3 * want.abs().max()
    assert _names(hidet.graph.optimize(hidet.trace_from(y, [x]))) == [
        'Fused[Conv2d, CastF32, Multiply, Add, CastF16, Relu]']


def test_fold_conv_batch_norm_chain_of_casts_alone_is_kept():
    x = hidet.symbol([1, 3, 6, 6], dtype='float16')
    w = hidet.from_torch(torch.randn(4, 3, 3, 3).half())
    g = hidet.trace_from(ops.cast(ops.conv2d(x, w, padding=1), 'float32'), [x])
    assert _names(FoldConvBatchNorm()(g, PassContext())) == _names(g)


def test_fold_conv_batch_norm_keeps_scales_past_the_dtype_range():
    """Two scales of 300 would fold into weights of ~9e4, past float16's 65504: a float16 convolution's scale
    stays in float32 (finite), a float32 convolution's folded weights are float32 anyway; a float16 result
    past the range rounds to infinity as the unfolded graph's does."""
    for dtype in ('float16', 'float32'):
        x = hidet.symbol([1, 3, 6, 6], dtype=dtype)
        w = hidet.from_torch((torch.rand(4, 3, 3, 3) + 0.5).to(getattr(torch, dtype)))
        scale = hidet.from_torch(torch.full([4, 1, 1], 300.0).to(getattr(torch, dtype)))
        g = hidet.trace_from(ops.conv2d(x, w, padding=1) * scale * scale, [x])
        folded = FoldConvBatchNorm()(g, PassContext())
        folded_names = ['Conv2d', 'CastF32', 'Multiply', 'CastF16'] if dtype == 'float16' else ['Conv2d', 'Add']
        assert _names(folded) == folded_names
        xv = hidet.from_torch(torch.rand(1, 3, 6, 6).to(getattr(torch, dtype)) * 1e-3)
        got, want = folded(xv).torch().double(), g(xv).torch().double()
        assert got.isfinite().all() and torch.allclose(got, want, rtol=2e-3), dtype


def test_precision_conversion_saturates_constants():
    """A float32 mask of -1e9 cast to float16 becomes -65504, not -inf; infinities stay infinite."""
    x = hidet.symbol([2, 4])
    mask = hidet.from_torch(torch.tensor([[0.0, -1e9, 0.0, -float('inf')]]))
    g = hidet.trace_from(ops.softmax(x + mask, -1), [x])
    with PassContext() as ctx:
        ctx.set_precision('float16')
        converted = hidet.graph.optimize(g)
    assert -65504 in _host_values(next(t for t in converted.constants if t.dtype.name == 'float16'))
    xv = hidet.randn([2, 4])
    torch.testing.assert_close(converted(xv).torch(), g(xv).torch(), rtol=2e-3, atol=1e-3)


def test_fusion_rules():
    x = hidet.symbol([8, 16])
    # epilogue: bias + gelu after a matmul; a cast before it is no prologue (the GEMM would read a computed
    # operand of another dtype): it runs once per element, in a kernel of its own here
    y = ops.gelu(ops.matmul(ops.cast(x, 'float16'), hidet.randn([16, 4], dtype='float16')) + 1.0)
    g = hidet.trace_from(y, [x])
    assert _names(hidet.graph.optimize(g)) == ['CastF16', 'Fused[Matmul, Add, Gelu]']
    # a reduction over a row read by a broadcast over that row joins it (computed once per row) ...
    m = ops.max(x, 1, keepdim=True)
    g = hidet.trace_from(x - m, [x])
    assert len(FuseOperators()(g, PassContext()).nodes) == 1
    # ... but not one broadcast along the reduced axis (it would be recomputed per element) ...
    g = hidet.trace_from(x - ops.max(x, 0, keepdim=True), [x])
    assert len(FuseOperators()(g, PassContext()).nodes) == 2
    # ... nor a matmul's output broadcast (the GEMM template reads its operands as they are)
    g = hidet.trace_from(x * ops.matmul(x, hidet.randn([16, 1])), [x])
    assert len(FuseOperators()(g, PassContext()).nodes) == 2
    # a tensor read by two consumers is computed once, not fused into either
    e = ops.exp(x)
    g = hidet.trace_from([ops.sum(e, 1), e * 2.0], [x])
    assert len(FuseOperators()(g, PassContext()).nodes) == 3
    # two anchors never share a kernel
    g = hidet.trace_from(ops.sum(ops.matmul(x, hidet.randn([16, 16])), 1), [x])
    assert len(FuseOperators()(g, PassContext()).nodes) == 2


def test_gemm_operands_stay_direct():
    x = hidet.symbol([32, 16], 'float16')
    w1, w2 = hidet.randn([16, 64], dtype='float16'), hidet.randn([64, 16], dtype='float16')
    h = ops.matmul(x, w1) + hidet.randn([64], dtype='float16')
    # GELU-tanh written out as eight operators (as GPT-2's): once per element, in the epilogue of the matmul that
    # produces its input, not recomputed by the next matmul at every tile it loads
    gelu = 0.5 * h * (1.0 + ops.tanh(0.7978845608 * (h + 0.044715 * ops.pow(h, 3.0))))
    g = hidet.trace_from(ops.matmul(gelu, w2) + x, [x])
    assert _names(hidet.graph.optimize(g)) == ['Fused[Matmul, Add, Multiply, Pow, Multiply, Add, Multiply, Tanh, Add, '
                                               'Multiply]', 'Fused[Matmul, Add]']
    # re-indexing and a scale in the operand's dtype (squeeze-excitation's x * s) stay prologues
    s = hidet.symbol([16], 'float16')
    g = hidet.trace_from(ops.matmul(ops.transpose(ops.reshape(x, [16, 32]), 0, 1) * s, w1), [x, s])
    assert _names(hidet.graph.optimize(g)) == ['Fused[Reshape, Permute, Multiply, Matmul]']
    # an activation of a graph input (no producer to carry it) runs in its own kernel
    g = hidet.trace_from(ops.matmul(ops.silu(x), w1), [x])
    assert _names(hidet.graph.optimize(g)) == ['Silu', 'Matmul']
    # bert's residual + bias cast to float32 for the layer norm: not the GEMM's epilogue (it would write the
    # float32 copy for the norm to read back) but the norm's prologue, which reads the float16 values
    r, b = hidet.symbol([32, 16], 'float16'), hidet.randn([16], dtype='float16')
    h = ops.cast(ops.matmul(h, w2) + b + r, 'float32')
    g = hidet.trace_from(ops.cast(ops.layer_norm(h, 16), 'float16'), [x, r])
    opt = hidet.graph.optimize(g)
    assert [n.outputs[0].dtype.name for n in opt.nodes] == ['float16', 'float16', 'float16'], _names(opt)
    assert _names(opt)[-1].startswith('Fused[Add, Add, CastF32, ReduceMean')


def test_epilogues_keep_the_gemm_template():
    # GPT-2's MLP at batch 8: [4096, 3072] seen as [8, 512, 3072] for GELU, then as [4096, 3072] again for the next
    # matmul: the epilogue reads the matmul at ((m / 512) * 512 + m % 512), its own row, and the template takes it
    x = hidet.symbol([4096, 768], 'float16')
    h = ops.reshape(ops.matmul(x, hidet.randn([768, 3072], dtype='float16')), [8, 512, 3072])
    gelu = 0.5 * h * (1.0 + ops.tanh(0.7978845608 * (h + 0.044715 * ops.pow(h, 3.0))))
    opt = hidet.graph.optimize(hidet.trace_from(ops.reshape(gelu, [4096, 3072]), [x]))
    assert len(opt.nodes) == 1 and operand_modes(opt.nodes[0].task) == ('direct', 'direct')
    # an epilogue the template cannot map (a flip of the columns) is not fused: the GEMM alone would otherwise be
    # the auto-scheduler's
    y = ops.flip(ops.matmul(x, hidet.randn([768, 64], dtype='float16')) + 1.0, [1])
    opt = hidet.graph.optimize(hidet.trace_from(y, [x]))
    gemms = [n for n in opt.nodes if 'Matmul' in display_name(n)]
    assert len(opt.nodes) == 2 and operand_modes(gemms[0].task) is not None, _names(opt)


@pytest.mark.parametrize('norm', ['layer_norm', 'rms_norm', 'group_norm', 'softmax', 'log_softmax'])
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_normalization_is_one_kernel(norm, dtype):
    # its reductions and the elementwise ops around them (casts, affine) in one row-broadcast kernel: the
    # input read and the output written once per element, no float32 copy of a float16 activation
    x = hidet.symbol([2, 8, 6, 4], dtype)
    w, b = hidet.randn([8], dtype=dtype), hidet.randn([8], dtype=dtype)
    build = {'layer_norm': lambda: ops.layer_norm(x, [6, 4]), 'rms_norm': lambda: ops.rms_norm(x, [4]),
             'group_norm': lambda: ops.group_norm(x, 2, w, b), 'softmax': lambda: ops.softmax(x, -1),
             'log_softmax': lambda: ops.log_softmax(x, -1)}[norm]
    g = hidet.trace_from(build(), [x])
    opt = hidet.graph.optimize(g)
    assert len(opt.nodes) == 1, _names(opt)
    assert [t.dtype.name for t in opt.nodes[0].inputs[:1] + opt.nodes[0].outputs] == [dtype, dtype]
    xv = hidet.randn([2, 8, 6, 4], dtype=dtype)
    tol = 1e-5 if dtype == 'float32' else 2e-3
    np.testing.assert_allclose(opt(xv).numpy().astype('float32'), g(xv).numpy().astype('float32'), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize('seed', [0, 1])
def test_fused_graph_matches(seed):
    torch.manual_seed(seed)
    x = hidet.symbol([4, 32])
    w1, w2 = hidet.randn([32, 32]), hidet.randn([32, 8])
    h = ops.silu(ops.layer_norm(ops.matmul(x, w1), 32)) * ops.sigmoid(x)
    y = ops.softmax(ops.matmul(h, w2), axis=-1)
    g = hidet.trace_from(y, [x])
    opt = hidet.graph.optimize(g)
    assert len(opt.nodes) < len(g.nodes)
    _same(g, opt, [4, 32])


def test_pass_context_options():
    with PassContext() as ctx:
        ctx.set_precision('float16').set_reduce_precision('float32').set_use_tensor_core(True)
        ctx.set_parallel_k(nparts=4)
        from hidet.graph.transforms import pass_context

        assert pass_context.current() is ctx
        assert ctx.parallel_k == '4'
    with pytest.raises(ValueError, match='precision'):
        PassContext().set_precision('int8')
    with pytest.raises(ValueError, match='at most one'):
        PassContext().set_parallel_k(disabled=True, nparts=2)


@pytest.mark.parametrize('precision', ['float16', 'bfloat16'])
def test_convert_precision(precision):
    x = hidet.symbol([4, 16])
    w, b = hidet.randn([16, 8]), hidet.randn([8])
    g = hidet.trace_from(ops.softmax(ops.gelu(x @ w + b), -1), [x])
    with PassContext() as ctx:
        ctx.set_precision(precision)
        low = hidet.graph.optimize(g)
    assert low.outputs[0].dtype.name == 'float32' and low.inputs[0].dtype.name == 'float32'
    assert all(c.dtype.name == precision for c in low.constants)
    assert any(n.outputs[0].dtype.name == precision for n in low.nodes)
    a = hidet.randn([4, 16])
    tol = 2e-3 if precision == 'float16' else 2e-2
    np.testing.assert_allclose(low(a).numpy(), g(a).numpy(), atol=tol, rtol=tol)


def test_reduce_precision():
    x = hidet.symbol([4, 64], dtype='float16')
    g = hidet.trace_from(ops.sum(x, 1), [x])
    assert 'sum<f32->f16>' in str(g.nodes[0].task)  # accumulate in f32 by default
    with PassContext() as ctx:
        ctx.set_reduce_precision('float16')
        low = hidet.graph.optimize(g)
    assert 'sum<f16->f16>' in str(low.nodes[0].task)
    a = hidet.randn([4, 64], dtype='float16')
    np.testing.assert_allclose(low(a).numpy().astype('float32'), g(a).numpy().astype('float32'), atol=0.1, rtol=0.02)


def test_merge_sibling_matmuls():
    from hidet.graph.transforms import MergeSiblingMatmuls

    x = hidet.symbol([2, 5, 8])
    ws = [hidet.randn([8, n]) for n in (8, 8, 4)]
    g = hidet.trace_from([ops.relu(x @ w) for w in ws] + [x @ hidet.randn([4, 4]).reshape([8, 2])], [x])
    merged = MergeSiblingMatmuls()(FoldConstants()(g, PassContext()), PassContext())
    assert _names(merged).count('Matmul') == 1
    a = hidet.randn([2, 5, 8])
    for u, v in zip(g(a), merged(a)):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-5, atol=1e-5)


def test_merge_sibling_matmuls_with_their_biases():
    """Linears' bias additions merge with their matmuls: one matmul, one addition of the concatenated biases,
    then the slices; a sibling without a bias keeps the plain merge."""
    from hidet.graph.transforms import MergeSiblingMatmuls

    x = hidet.symbol([2, 5, 8])
    ws, bs = [hidet.randn([8, n]) for n in (8, 8, 4)], [hidet.randn([n]) for n in (8, 8, 4)]
    g = hidet.trace_from([ops.relu(x @ w + b) for w, b in zip(ws, bs)], [x])
    merged = MergeSiblingMatmuls()(g, PassContext())
    assert _names(merged).count('Matmul') == 1 and _names(merged).count('Add') == 1
    add = next(n for n in merged.nodes if n.attrs.get('op') == 'add')
    assert type(add.inputs[0].trace[0]).__name__ == 'MatmulOp' and add.inputs[1].shape == (20,)
    mixed = hidet.trace_from([x @ ws[0] + bs[0], x @ ws[1]], [x])
    plain = MergeSiblingMatmuls()(mixed, PassContext())
    assert _names(plain).count('Matmul') == 1 and _names(plain).count('Add') == 1  # the bias stays after its slice
    a = hidet.randn([2, 5, 8])
    for before, after in ((g, merged), (mixed, plain)):
        for u, v in zip(before(a), after(a)):
            np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('bias', [False, True])
def test_gated_siblings_interleave_into_one_paired_gemm(bias):
    """A SwiGLU MLP's gate and up projections (two siblings of one width whose results meet in an elementwise
    operator) merge with their columns interleaved in blocks of PAIR_WIDTH, and silu(gate) * up fuses into the
    merged GEMM's epilogue (a paired epilogue, half the merged width): two kernels, the down projection the second;
    the result as float64's."""
    from hidet.graph.transforms.merge_sibling_matmuls import PAIR_WIDTH

    x = hidet.symbol([3, 5, 64])
    wg, wu, wd = hidet.randn([64, 128]), hidet.randn([64, 128]), hidet.randn([128, 48])
    bg, bu = hidet.randn([128]), hidet.randn([128])
    gate, up = x @ wg, x @ wu
    if bias:
        gate, up = gate + bg, up + bu
    g = hidet.trace_from((ops.silu(gate) * up) @ wd, [x])
    opt = hidet.graph.optimize(g)
    assert len(opt.nodes) == 2
    spec = match_gemm(opt.nodes[0].task, ('float32',))
    assert (spec.m, spec.n, spec.k, spec.pair) == (15, 256, 64, PAIR_WIDTH)
    a = hidet.randn([3, 5, 64])
    A, Wg, Wu, Wd, Bg, Bu = (torch.from_numpy(_host_values(t).astype('float64')) for t in (a, wg, wu, wd, bg, bu))
    G, U = A @ Wg, A @ Wu
    if bias:
        G, U = G + Bg, U + Bu
    expected = ((torch.nn.functional.silu(G) * U) @ Wd).numpy()
    np.testing.assert_allclose(opt(a).numpy(), expected, rtol=1e-4, atol=1e-3)


def test_two_reads_of_a_matmul_fuse_only_as_interleaved_pairs():
    """silu(y[:, :h]) * y[:, h:] of one matmul (two columns h apart, which no tile of the GEMM holds together) stays
    a kernel of its own after the GEMM; the same gating over 32-column blocks interleaved fuses as a paired
    epilogue. Both match float64."""
    x, w = hidet.symbol([6, 32]), hidet.randn([32, 128])
    y = x @ w
    halves = ops.silu(ops.strided_slice(y, [0], [64], [1])) * ops.strided_slice(y, [64], [128], [1])
    blocks = ops.reshape(y, [6, 2, 2, 32])
    gate, up = (ops.reshape(ops.strided_slice(blocks, [i], [i + 1], [2]), [6, 64]) for i in range(2))
    a = hidet.randn([6, 32])
    yv = torch.from_numpy(_host_values(a).astype('float64')) @ torch.from_numpy(_host_values(w).astype('float64'))
    for out, kernels, g, u in ((halves, 2, yv[:, :64], yv[:, 64:]),
                               (ops.silu(gate) * up, 1, yv.reshape(6, 2, 2, 32)[:, :, 0].reshape(6, 64),
                                yv.reshape(6, 2, 2, 32)[:, :, 1].reshape(6, 64))):
        fused = FuseOperators()(hidet.trace_from(out, [x]), PassContext())
        assert len(fused.nodes) == kernels
        np.testing.assert_allclose(fused(a).numpy(), (torch.nn.functional.silu(g) * u).numpy(), rtol=1e-4, atol=1e-4)


def test_siblings_read_apart_keep_plain_column_slices():
    """Two siblings of one width read by different consumers (a key and a value projection) are concatenated, not
    interleaved: each result stays a contiguous column slice (attention reads it in place)."""
    from hidet.graph.transforms import MergeSiblingMatmuls

    x = hidet.symbol([2, 5, 64])
    wk, wv = hidet.randn([64, 128]), hidet.randn([64, 128])
    g = hidet.trace_from([ops.relu(x @ wk), ops.sigmoid(x @ wv)], [x])
    merged = MergeSiblingMatmuls()(g, PassContext())
    assert _names(merged).count('Matmul') == 1 and 'Reshape' not in _names(merged)
    a = hidet.randn([2, 5, 64])
    for u, v in zip(g(a), merged(a)):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-5, atol=1e-5)


def _present_copies(qkvs):
    """GPT-2's present keys and values of each QKV projection: copies that only leave the graph."""
    outs = []
    for qkv in qkvs:
        for off in (768, 1536):
            head = ops.strided_slice(ops.reshape(qkv, [1, 128, 2304]), [off], [off + 768], [2])
            outs.append(ops.permute(ops.reshape(head, [1, 128, 12, 64]), [0, 2, 1, 3]))
    return outs


def test_output_only_copies_run_as_one_kernel():
    # kernels whose one output only leaves the graph, of one shape and dtype, become one operator, and the
    # auto-scheduler computes all its outputs in one kernel (one launch for GPT-2's 24 present copies)
    from hidet.graph.transforms.batch_output_copies import BatchedOperator
    from hidet.ir.schedulers import schedule_task

    qkvs = [hidet.symbol([128, 2304], 'float16', 'cuda') for _ in range(3)]
    kept = ops.permute(ops.reshape(qkvs[0], [128, 36, 64]), [1, 0, 2])  # read by another kernel: not batched
    outs = _present_copies(qkvs) + [kept, ops.sum(kept, 0)]
    g = hidet.graph.optimize(hidet.trace_from(outs, qkvs))
    batched = [n for n in g.nodes if isinstance(n, BatchedOperator)]
    assert len(batched) == 1 and len(batched[0].outputs) == 6 and len(batched[0].inputs) == 3
    assert [next(i for i, o in enumerate(g.outputs) if o is t) for t in batched[0].outputs] == list(range(6))
    module = schedule_task(batched[0].task, 'cuda')
    (kernel,) = module.functions
    assert kernel.outputs == tuple(range(6)) and kernel.fallback.outputs == kernel.outputs


@pytest.mark.cuda
def test_output_only_copies_compute_like_torch():
    qkvs = [hidet.symbol([128, 2304], 'float16', 'cuda') for _ in range(3)]
    g = hidet.graph.optimize(hidet.trace_from(_present_copies(qkvs), qkvs))
    values = [torch.randn(128, 2304, device='cuda').half() for _ in range(3)]
    got = g(*[hidet.from_torch(v) for v in values])
    for i, v in enumerate(values):
        for j, off in enumerate((768, 1536)):
            want = v.view(1, 128, 2304)[:, :, off:off + 768].reshape(1, 128, 12, 64).permute(0, 2, 1, 3)
            assert torch.equal(got[2 * i + j].torch(), want)
    offset = torch.zeros(1, device='cuda').half()  # an unaligned view: the scalar kernel
    odd = [torch.cat([offset, v.flatten()])[1:].view(128, 2304) for v in values]
    got = g(*[hidet.from_torch(v) for v in odd])
    want = odd[2].view(1, 128, 2304)[:, :, 1536:].reshape(1, 128, 12, 64).permute(0, 2, 1, 3)
    assert torch.equal(got[5].torch(), want)
