"""Conversions of torch.nn.Module leaves (fx ``call_module`` nodes: graphs from
``torch.fx.symbolic_trace``, and dynamo graphs of torch versions that keep built-in modules as
calls). Each reads its module's configuration and parameters (``self.param``) and delegates to the
function conversions."""
from torch import nn

import hidet
from hidet import ops
from hidet.frontend.torch import register_linalg_functions as la, register_nn_functions as F
from hidet.frontend.torch.register_methods import unflatten
from hidet.frontend.torch.registry import HidetModule, register_module


@register_module(nn.Conv1d, nn.Conv2d)
class HidetConv(HidetModule):
    def __call__(self, x):
        m = self.mod
        if m.padding_mode != 'zeros':
            mode = {'reflect': 'reflect', 'replicate': 'replicate'}.get(m.padding_mode)
            if mode is None:
                raise NotImplementedError(f'{type(m).__name__} with padding_mode={m.padding_mode!r} is not supported')
            x = ops.pad(x, list(m._reversed_padding_repeated_twice), mode)
            padding = 0
        else:
            padding = m.padding
        conv = F.conv2d if isinstance(m, nn.Conv2d) else F.conv1d
        return conv(x, self.param('weight'), self.param('bias', optional=True), m.stride, padding, m.dilation,
                    m.groups)


@register_module(nn.ConvTranspose2d)
class HidetConvTranspose2d(HidetModule):
    def __call__(self, x, output_size=None):
        m = self.mod
        if output_size is not None:
            raise NotImplementedError('ConvTranspose2d with output_size is not supported')
        return F.conv_transpose2d(x, self.param('weight'), self.param('bias', optional=True), m.stride, m.padding,
                                  m.output_padding, m.groups, m.dilation)


@register_module(nn.Linear)
class HidetLinear(HidetModule):
    def __call__(self, x):
        return F.linear(x, self.param('weight'), self.param('bias', optional=True))


@register_module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
class HidetBatchNorm(HidetModule):
    def __call__(self, x):
        m = self.mod
        training = m.training and not m.track_running_stats or m.running_mean is None
        return F.batch_norm(x, self.param('running_mean', optional=True), self.param('running_var', optional=True),
                            self.param('weight', optional=True), self.param('bias', optional=True), training,
                            m.momentum, m.eps)


@register_module(nn.LayerNorm)
class HidetLayerNorm(HidetModule):
    def __call__(self, x):
        m = self.mod
        return F.layer_norm(x, m.normalized_shape, self.param('weight', optional=True), self.param('bias', optional=True),
                            m.eps)


@register_module(nn.GroupNorm)
class HidetGroupNorm(HidetModule):
    def __call__(self, x):
        m = self.mod
        return F.group_norm(x, m.num_groups, self.param('weight', optional=True), self.param('bias', optional=True),
                            m.eps)


if hasattr(nn, 'RMSNorm'):
    @register_module(nn.RMSNorm)
    class HidetRMSNorm(HidetModule):
        def __call__(self, x):
            m = self.mod
            return F.rms_norm(x, m.normalized_shape, self.param('weight', optional=True), m.eps)


@register_module(nn.Embedding)
class HidetEmbedding(HidetModule):
    def __call__(self, x):
        if self.mod.max_norm is not None:
            raise NotImplementedError('Embedding with max_norm is not supported')
        return ops.embedding(x, self.param('weight'))


# ---------------------------------------------------------------- activations
def _activation(fn):
    class Converted(HidetModule):
        def __call__(self, x):
            return fn(self.mod, x)

    return Converted


for _cls, _fn in ((nn.ReLU, lambda m, x: ops.relu(x)), (nn.ReLU6, lambda m, x: ops.clamp(x, 0.0, 6.0)),
                  (nn.GELU, lambda m, x: ops.gelu(x, m.approximate)), (nn.SiLU, lambda m, x: ops.silu(x)),
                  (nn.Sigmoid, lambda m, x: ops.sigmoid(x)), (nn.Tanh, lambda m, x: ops.tanh(x)),
                  (nn.Hardswish, lambda m, x: ops.hardswish(x)), (nn.Hardsigmoid, lambda m, x: F.hardsigmoid(x)),
                  (nn.Hardtanh, lambda m, x: ops.clamp(x, float(m.min_val), float(m.max_val))),
                  (nn.LeakyReLU, lambda m, x: ops.leaky_relu(x, m.negative_slope)),
                  (nn.ELU, lambda m, x: F.elu(x, m.alpha)), (nn.Mish, lambda m, x: F.mish(x)),
                  (nn.Softplus, lambda m, x: F.softplus(x, m.beta, m.threshold)),
                  (nn.Softmax, lambda m, x: F.softmax(x, m.dim)), (nn.LogSoftmax, lambda m, x: F.log_softmax(x, m.dim)),
                  (nn.GLU, lambda m, x: F.glu(x, m.dim)), (nn.SELU, lambda m, x: F.selu(x)),
                  (nn.CELU, lambda m, x: F.celu(x, m.alpha)), (nn.LogSigmoid, lambda m, x: F.logsigmoid(x)),
                  (nn.Softsign, lambda m, x: F.softsign(x)), (nn.Softshrink, lambda m, x: F.softshrink(x, m.lambd)),
                  (nn.Hardshrink, lambda m, x: F.hardshrink(x, m.lambd)), (nn.Tanhshrink, lambda m, x: F.tanhshrink(x)),
                  (nn.Threshold, lambda m, x: F.threshold(x, m.threshold, m.value)),
                  (nn.RReLU, lambda m, x: F.rrelu(x, m.lower, m.upper, m.training)),
                  (nn.Softmin, lambda m, x: F.softmin(x, m.dim)),
                  (nn.LocalResponseNorm, lambda m, x: F.local_response_norm(x, m.size, m.alpha, m.beta, m.k)),
                  (nn.PixelShuffle, lambda m, x: la.pixel_shuffle(x, m.upscale_factor)),
                  (nn.PixelUnshuffle, lambda m, x: la.pixel_unshuffle(x, m.downscale_factor))):
    _conv = _activation(_fn)
    _conv.__name__ = _conv.__qualname__ = f'Hidet{_cls.__name__}'
    register_module(_cls)(_conv)


@register_module(nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.Identity)
class HidetIdentity(HidetModule):
    """Dropout is the identity in inference (eval mode)."""

    def __call__(self, x, *args, **kwargs):
        if isinstance(self.mod, nn.modules.dropout._DropoutNd) and self.mod.training and self.mod.p > 0:
            raise NotImplementedError('dropout in training mode is random; call model.eval() before compiling')
        return x


# ---------------------------------------------------------------- shape and pooling
@register_module(nn.Flatten)
class HidetFlatten(HidetModule):
    def __call__(self, x):
        return ops.flatten(x, self.mod.start_dim, self.mod.end_dim)


@register_module(nn.Unflatten)
class HidetUnflatten(HidetModule):
    def __call__(self, x):
        return unflatten(x, self.mod.dim, self.mod.unflattened_size)


@register_module(nn.PReLU)
class HidetPReLU(HidetModule):
    def __call__(self, x):
        return F.prelu(x, self.param('weight'))


@register_module(nn.AvgPool1d)
class HidetAvgPool1d(HidetModule):
    def __call__(self, x):
        m = self.mod
        return F.avg_pool1d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad)


@register_module(nn.CosineSimilarity)
class HidetCosineSimilarity(HidetModule):
    def __call__(self, x1, x2):
        return la.cosine_similarity(x1, x2, self.mod.dim, self.mod.eps)


@register_module(nn.PairwiseDistance)
class HidetPairwiseDistance(HidetModule):
    def __call__(self, x1, x2):
        return la.pairwise_distance(x1, x2, self.mod.norm, self.mod.eps, self.mod.keepdim)


@register_module(nn.MaxPool1d, nn.MaxPool2d)
class HidetMaxPool(HidetModule):
    def __call__(self, x):
        m = self.mod
        pool = F.max_pool2d if isinstance(m, nn.MaxPool2d) else F.max_pool1d
        return pool(x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices)


@register_module(nn.AvgPool2d)
class HidetAvgPool2d(HidetModule):
    def __call__(self, x):
        m = self.mod
        return F.avg_pool2d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                            m.divisor_override)


@register_module(nn.AdaptiveAvgPool2d)
class HidetAdaptiveAvgPool2d(HidetModule):
    def __call__(self, x):
        return ops.adaptive_avg_pool2d(x, self.mod.output_size)


@register_module(nn.AdaptiveMaxPool2d)
class HidetAdaptiveMaxPool2d(HidetModule):
    def __call__(self, x):
        return F.adaptive_max_pool2d(x, self.mod.output_size, self.mod.return_indices)


@register_module(nn.Upsample)
class HidetUpsample(HidetModule):
    def __call__(self, x):
        m = self.mod
        return F.interpolate(x, m.size, m.scale_factor, m.mode, m.align_corners)


@register_module(nn.ZeroPad2d, nn.ConstantPad1d, nn.ConstantPad2d)
class HidetConstantPad(HidetModule):
    def __call__(self, x):
        return ops.pad(x, list(self.mod.padding), 'constant', self.mod.value)


@register_module(nn.MultiheadAttention)
class HidetMultiheadAttention(HidetModule):
    def __call__(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                 average_attn_weights=True, is_causal=False):
        m = self.mod
        if m.batch_first:
            query, key, value = (ops.transpose(t, 0, 1) if t.ndim == 3 else t for t in (query, key, value))
        separate = not m._qkv_same_embed_dim
        out, weights = F.multi_head_attention_forward(
            query, key, value, m.embed_dim, m.num_heads, self.param('in_proj_weight', optional=True),
            self.param('in_proj_bias', optional=True), m.bias_k, m.bias_v, m.add_zero_attn, m.dropout,
            self._out_proj('weight'), self._out_proj('bias'),
            training=m.training, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate,
            q_proj_weight=self.param('q_proj_weight', optional=True),
            k_proj_weight=self.param('k_proj_weight', optional=True),
            v_proj_weight=self.param('v_proj_weight', optional=True),
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if m.batch_first and out.ndim == 3:
            out = ops.transpose(out, 0, 1)
        return out, weights

    def _out_proj(self, name):
        value = getattr(self.mod.out_proj, name)
        return None if value is None else self._convert(value)

    def _convert(self, value):
        if self._to_constant is None:
            return hidet.from_torch(value)
        return self._to_constant(value)
