"""Small torch models for the frontend tests, built from the same pieces as the models hidet targets:
a CNN (conv/bn/relu/pool/residual/depthwise/linear, as resnet and mobilenet), a pre-LN transformer
block (layer norm, multi-head attention, GELU MLP, as ViT/BERT/GPT-2), and a Llama-style decoder
layer (RMSNorm, rotary embeddings under a disabled autocast, grouped-query SDPA, SiLU gating)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)  # depthwise
        self.bn2 = nn.BatchNorm2d(8)
        self.act = nn.ReLU6(inplace=True)
        self.se_fc = nn.Linear(8, 8)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8, classes)
        for bn in (self.bn1, self.bn2):  # non-trivial running statistics
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = self.pool(F.relu(self.bn1(self.conv1(x)), inplace=True))
        z = self.act(self.bn2(self.conv2(y)))
        scale = torch.sigmoid(self.se_fc(z.mean((2, 3))))  # squeeze-and-excitation
        y = y + z * scale[:, :, None, None]
        y = torch.flatten(self.avg(y), 1)
        return self.fc(self.drop(y))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * dim, dim))
        self.cls = nn.Parameter(torch.randn(1, 1, dim))

    def forward(self, x):
        b = x.shape[0]
        x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1)
        y = self.ln1(x)
        a, _ = self.attn(y, y, y, need_weights=False)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return x[:, 0], x


class GPTAttention(nn.Module):
    """GPT-2 style: fused qkv projection, split, causal SDPA, tanh-GELU MLP."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(2 * dim, dim)
        self.wte = nn.Embedding(50, dim)
        self.wpe = nn.Embedding(32, dim)

    def forward(self, ids):
        b, s = ids.shape
        pos = torch.arange(0, s, dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=2)
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).contiguous().view(b, s, -1))
        h = self.fc(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.out(h)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class Rotary(nn.Module):
    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer('inv_freq', inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv.float() @ pos.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, kv_heads: int = 2, hidden: int = 64):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.act_fn = nn.SiLU()
        self.input_layernorm = RMSNorm(dim)
        self.post_attention_layernorm = RMSNorm(dim)
        self.rotary = Rotary(self.head_dim)

    def forward(self, x, position_ids):
        b, s, _ = x.shape
        cos, sin = self.rotary(x, position_ids)
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, s, -1, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads  # repeat_kv
        k = k[:, :, None, :, :].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(b, self.heads, s, -1)
        v = v[:, :, None, :, :].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(b, self.heads, s, -1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.head_dim ** -0.5)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.act_fn(self.gate_proj(h)) * self.up_proj(h))


class ResNetBlocks(nn.Module):
    """A stem and four resnet basic blocks (two of them downsampling, with a strided 1x1 convolution), pooled into
    a linear head: every convolution followed by a batch norm."""

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else \
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
            return F.relu(y + (x if self.down is None else self.down(x)))

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.Sequential(self.Block(32, 32, 1), self.Block(32, 64, 2), self.Block(64, 64, 1),
                                    self.Block(64, 128, 2))
        self.fc = nn.Linear(128, 100)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class VisionBlocks(nn.Module):
    """The building blocks of efficientnet (MBConv: SiLU, depthwise conv, squeeze-excitation) and
    convnext (7x7 depthwise conv, channels-last LayerNorm via permute, layer scale, LayerNorm2d)."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c),
                                  nn.SiLU(inplace=True))
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.se_reduce, self.se_expand = nn.Conv2d(c, 2, 1), nn.Conv2d(2, c, 1)
        self.cn_dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.cn_norm = nn.LayerNorm(c, eps=1e-6)
        self.cn_fc1, self.cn_fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.layer_scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)
        self.norm2d = nn.LayerNorm(c, eps=1e-6)
        self.head = nn.Linear(c, 5)

    def forward(self, x):
        x = self.stem(x)
        y = F.silu(self.dw(x))
        s = F.adaptive_avg_pool2d(y, 1)
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(s))))
        x = x + y * s                                  # MBConv with squeeze-excitation
        r = self.cn_dw(x).permute(0, 2, 3, 1)          # ConvNeXt block
        r = self.cn_fc2(F.gelu(self.cn_fc1(self.cn_norm(r)))).permute(0, 3, 1, 2)
        x = x + self.layer_scale * r
        x = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), self.norm2d.weight, self.norm2d.bias,
                         1e-6).permute(0, 3, 1, 2)     # LayerNorm2d
        x = F.hardswish(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))
        return self.head(x)


class MaskedEncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (batch first) with a causal attention mask and a key padding mask (both bool:
    torch deprecates mixing a float mask with a bool one). In inference (eval, no gradients) torch runs it as one
    op, torch._transformer_encoder_layer_fwd."""

    def __init__(self, norm_first: bool = False, activation: str = 'relu'):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation=activation, batch_first=True,
                                                norm_first=norm_first)

    def forward(self, x, padding):
        s = x.shape[1]
        causal = torch.ones(s, s, device=x.device, dtype=torch.bool).triu(1)
        return self.layer(x, src_mask=causal, src_key_padding_mask=padding)
