"""The ONNX Attention operator beyond the node tests (which feed every input at run time): masks and key
lengths known at import (folded into one constant bias), the fused path where it applies, and built graphs,
each against onnx's reference implementation."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import hidet
import hidet.onnx
from hidet.graph.ops.attention import AttentionOp
from onnx_test_utils import assert_close


def _model(attrs, shapes, initializers=(), inputs=('Q', 'K', 'V'), outputs=('Y',), opset=24, dtype='float32'):
    elem = {'float32': TensorProto.FLOAT, 'float16': TensorProto.FLOAT16}[dtype]
    node = helper.make_node('Attention', list(inputs), list(outputs), **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, elem, shapes[n]) for n in ('Q', 'K', 'V')]
    graph_outputs = [helper.make_tensor_value_info(n, elem, None) for n in outputs if n]
    graph = helper.make_graph([node], 'attention', graph_inputs, graph_outputs,
                              [numpy_helper.from_array(v, name) for name, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid('', opset)])


def _check(model, shapes, build=False, device='cpu', reference=None, tol=1e-5):
    """``model`` traced, optimized and run (or built) on ``device`` against onnx's reference run of
    ``reference`` (default: the model itself) on the same values."""
    dtype = 'float16' if model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16 else 'float32'
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(shapes[n]).astype(dtype) for n in ('Q', 'K', 'V')}
    want = ReferenceEvaluator(reference or model).run(None, {n: v.astype(np.float32) for n, v in feeds.items()}
                                                      if reference else feeds)
    module = hidet.onnx.from_onnx(model)
    syms = [hidet.symbol(list(shapes[n]), dtype, device) for n in ('Q', 'K', 'V')]
    graph = hidet.graph.optimize(hidet.trace_from(module(*syms), syms))
    args = [hidet.asarray(feeds[n], device=device) for n in ('Q', 'K', 'V')]
    got = graph.build()(*args) if build else graph(*args)
    for g, w in zip(got if isinstance(got, (list, tuple)) else [got], want):
        assert_close(g.to('float32').cpu().numpy(), w, rtol=tol * 10, atol=tol)
    return graph


def test_constant_mask_and_key_lengths_become_one_bias():
    # an external cache of 6 keys, batch 2 with 5 and 3 valid ones, a constant bool mask that hides key 1 of
    # every query, causal from the per-batch offsets and a left window of 2; query 0 of batch 1 sees no key
    shapes = {'Q': [2, 2, 4, 8], 'K': [2, 2, 6, 8], 'V': [2, 2, 6, 8]}
    mask = np.ones([4, 6], bool)
    mask[:, 1] = False
    model = _model({'is_causal': 1, 'left_window_size': 2}, shapes, opset=25,
                   initializers=[('mask', mask), ('lengths', np.array([5, 3], np.int64))],
                   inputs=('Q', 'K', 'V', 'mask', '', '', 'lengths'))
    graph = _check(model, shapes, build=True)
    assert any(isinstance(n, AttentionOp) for n in graph.nodes)  # the fused kernel, rows seen by nobody zeroed


@pytest.mark.parametrize('attrs,fused', [({'is_causal': 1}, True), ({'softcap': 2.0}, False),
                                         ({'qk_matmul_output_mode': 2}, False)])
def test_fused_where_it_applies(attrs, fused):
    shapes = {'Q': [1, 4, 5, 16], 'K': [1, 2, 7, 16], 'V': [1, 2, 7, 16]}  # grouped-query heads
    outputs = ('Y', '', '', 'QK') if 'qk_matmul_output_mode' in attrs else ('Y',)
    graph = _check(_model(attrs, shapes, outputs=outputs), shapes)
    assert any(isinstance(n, AttentionOp) for n in graph.nodes) == fused


def test_3d_inputs_need_head_counts():
    shapes = {'Q': [1, 5, 16], 'K': [1, 5, 16], 'V': [1, 5, 16]}
    with pytest.raises(hidet.onnx.OnnxConversionError, match='q_num_heads and kv_num_heads'):
        hidet.onnx.from_onnx(_model({}, shapes))(*[hidet.symbol(shapes[n], 'float32') for n in ('Q', 'K', 'V')])


GPU_CASES = {  # attrs, inputs, initializers
    'causal': ({'is_causal': 1}, ('Q', 'K', 'V'), []),
    'mask': ({}, ('Q', 'K', 'V', 'mask'), [('mask', np.tril(np.ones([5, 7], bool), 2))]),
    'lengths': ({'is_causal': 1}, ('Q', 'K', 'V', '', '', '', 'lengths'), [('lengths', np.array([7, 6], np.int64))]),
    'softcap': ({'softcap': 3.0}, ('Q', 'K', 'V'), []),
}


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
@pytest.mark.parametrize('case', list(GPU_CASES))
def test_on_the_gpu(case, dtype):
    attrs, inputs, initializers = GPU_CASES[case]
    shapes = {'Q': [2, 4, 5, 64], 'K': [2, 2, 7, 64], 'V': [2, 2, 7, 64]}
    model = _model(attrs, shapes, initializers, inputs, dtype=dtype)
    reference = _model(attrs, shapes, initializers, inputs)
    _check(model, shapes, build=True, device='cuda', reference=reference, tol=1e-4 if dtype == 'float32' else 2e-2)
