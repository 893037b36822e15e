"""Small models written with hidet.ops, and their torch twins, for graph-level tests: a CNN
(conv, batch norm, relu, pooling, depthwise conv, linear) and a transformer block (layer norm,
attention, GELU MLP, residuals)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import hidet
from hidet import ops


def cnn_weights(device: str, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=0.3):
        return (torch.randn(*shape, generator=g) * scale).to(device)

    return {'w1': r(8, 3, 3, 3), 'b1': r(8), 'mean': r(8), 'var': r(8).abs() + 0.5, 'gamma': r(8) + 1,
            'beta': r(8), 'w2': r(8, 1, 3, 3), 'fc_w': r(10, 8), 'fc_b': r(10)}


def cnn_hidet(x, w):
    h = {k: hidet.from_torch(v) for k, v in w.items()}
    y = ops.conv2d(x, h['w1'], h['b1'], padding=1)
    y = ops.relu(ops.batch_norm(y, h['mean'], h['var'], h['gamma'], h['beta']))
    y = ops.max_pool2d(y, 2)
    y = ops.relu(ops.conv2d(y, h['w2'], padding=1, groups=8))
    y = ops.flatten(ops.adaptive_avg_pool2d(y, 1), 1)
    return ops.matmul(y, ops.transpose(h['fc_w'], 0, 1)) + h['fc_b']


def cnn_torch(x, w):
    y = F.conv2d(x, w['w1'], w['b1'], padding=1)
    y = F.relu(F.batch_norm(y, w['mean'], w['var'], w['gamma'], w['beta'], training=False))
    y = F.max_pool2d(y, 2)
    y = F.relu(F.conv2d(y, w['w2'], padding=1, groups=8))
    y = torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)
    return F.linear(y, w['fc_w'], w['fc_b'])


def transformer_weights(device: str, d: int = 16, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=0.2):
        return (torch.randn(*shape, generator=g) * scale).to(device)

    return {'ln1_w': r(d) + 1, 'ln1_b': r(d), 'qkv_w': r(3 * d, d), 'qkv_b': r(3 * d), 'proj_w': r(d, d),
            'proj_b': r(d), 'ln2_w': r(d) + 1, 'ln2_b': r(d), 'fc1_w': r(4 * d, d), 'fc1_b': r(4 * d),
            'fc2_w': r(d, 4 * d), 'fc2_b': r(d)}


def transformer_hidet(x, w, heads: int = 2):
    h = {k: hidet.from_torch(v) for k, v in w.items()}
    b, s, d = x.shape

    def linear(t, name):
        return ops.matmul(t, ops.transpose(h[f'{name}_w'], 0, 1)) + h[f'{name}_b']

    y = ops.layer_norm(x, d, h['ln1_w'], h['ln1_b'])
    qkv = ops.permute(ops.reshape(linear(y, 'qkv'), [b, s, 3, heads, d // heads]), [2, 0, 3, 1, 4])
    q, k, v = ops.split(qkv, 1, axis=0)
    q, k, v = (ops.squeeze(t, 0) for t in (q, k, v))
    a = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    a = ops.reshape(ops.permute(a, [0, 2, 1, 3]), [b, s, d])
    x = x + linear(a, 'proj')
    y = ops.layer_norm(x, d, h['ln2_w'], h['ln2_b'])
    return x + linear(ops.gelu(linear(y, 'fc1')), 'fc2')


def transformer_torch(x, w, heads: int = 2):
    b, s, d = x.shape
    y = F.layer_norm(x, (d,), w['ln1_w'], w['ln1_b'])
    qkv = F.linear(y, w['qkv_w'], w['qkv_b']).reshape(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
    x = x + F.linear(a.permute(0, 2, 1, 3).reshape(b, s, d), w['proj_w'], w['proj_b'])
    y = F.layer_norm(x, (d,), w['ln2_w'], w['ln2_b'])
    return x + F.linear(F.gelu(F.linear(y, w['fc1_w'], w['fc1_b'])), w['fc2_w'], w['fc2_b'])
