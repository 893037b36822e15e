"""Models for ``hidet bench model``: torchvision and transformers architectures with random
weights (nothing is downloaded)."""
from __future__ import annotations

from typing import List, Tuple

VISION = ('resnet18', 'resnet50', 'mobilenet_v2', 'efficientnet_b0', 'vit_b_16', 'convnext_tiny')
LANGUAGE = ('bert', 'gpt2', 'llama')


def make_model(name: str, batch: int, seq: int, device: str, dtype) -> Tuple[object, List]:
    import torch

    if name in VISION:
        try:
            import torchvision
        except ImportError as e:
            raise SystemExit(f'hidet bench model {name}: needs torchvision ({e})') from e
        model = getattr(torchvision.models, name)(weights=None)
        inputs = [torch.randn(batch, 3, 224, 224)]
    elif name in LANGUAGE:
        try:
            import transformers
        except ImportError as e:
            raise SystemExit(f'hidet bench model {name}: needs transformers ({e})') from e
        if name == 'bert':
            config = transformers.BertConfig()
            model = transformers.BertModel(config)
        elif name == 'llama':  # a Llama-style decoder from a small config (RMSNorm, rotary, GQA SDPA, SiLU gating)
            config = transformers.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                                              num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                                              max_position_embeddings=2048)
            model = transformers.LlamaModel(config)
        else:
            config = transformers.GPT2Config()
            model = transformers.GPT2Model(config)
        config.return_dict = False
        inputs = [torch.randint(0, config.vocab_size, (batch, seq))]
    else:
        raise SystemExit(f'hidet bench model: unknown model {name!r}; choose from {", ".join(VISION + LANGUAGE)}')
    model = model.eval().to(device=device, dtype=dtype)
    inputs = [t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device) for t in inputs]
    return model, inputs
