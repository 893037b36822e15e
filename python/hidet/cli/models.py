"""Models for ``hidet bench model`` and the model tests: torchvision and transformers architectures with
random weights drawn away from their initialization's constants (nothing is downloaded)."""
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
        elif name == 'llama':  # a Llama-style decoder (RMSNorm, rotary, GQA SDPA, SiLU gating): 8 layers of
            # TinyLlama's width, the transformer issue's model (hidden 2048, 32 / 8 heads, MLP 5632)
            config = transformers.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                                              num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=8,
                                              max_position_embeddings=2048)
            model = transformers.LlamaModel(config)
        else:
            config = transformers.GPT2Config()
            model = transformers.GPT2Model(config)
        config.return_dict = False
        inputs = [torch.randint(0, config.vocab_size, (batch, seq))]
    else:
        raise SystemExit(f'hidet bench model: unknown model {name!r}; choose from {", ".join(VISION + LANGUAGE)}')
    model = non_default_parameters(model, inputs).eval().to(device=device, dtype=dtype)
    inputs = [t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device) for t in inputs]
    return model, inputs


def non_default_parameters(model, inputs=None, seed: int = 0):
    """``model`` (in place) with every parameter and buffer its initialization leaves at a constant drawn
    afresh at realistic scales, so that a rewrite that is only right when a statistic or weight is 0 or 1
    (norm folding, scaling, fp16 casts of folded constants) cannot pass unseen:
    - batch norms: weight ~ U(0.5, 1.5), bias ~ N(0, 0.1), running statistics measured on ``inputs`` (one batch
      in training mode, as a trained network's track its activations), without ``inputs`` mean ~ N(0, 0.1) and
      var ~ U(0.5, 1.5). (Statistics measured and then moved make efficientnet_b0 ill-conditioned: outputs of
      ~2,000 on which eager float16 is 30% off float32.)
    - any other floating-point tensor left all ones (layer / group / RMS norm weights, layer scales) ~ U(0.5, 1.5),
      all zeros (biases, heads such as torchvision ViT's) ~ N(0, 0.1) for vectors and N(0, 1/fan_in) for matrices;
    - embedding tables ~ N(0, 1) (torch's own), whatever their initialization.
    Without measured statistics the activations of a deep CNN drift far from 1 (resnet50's reach ~5,000: a test
    of float16's range; mobilenet_v2's outputs stop depending on the input)."""
    import torch  # (hidet's CLI imports torch only for the commands that need it)

    generator = torch.Generator().manual_seed(seed)

    def draw(t, kind, *args):
        values = torch.empty(t.shape, dtype=torch.float32)
        t.copy_((values.uniform_ if kind == 'uniform' else values.normal_)(*args, generator=generator))

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
             and m.track_running_stats]
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding):
                draw(module.weight, 'normal', 0.0, 1.0)
        for tensor in list(model.parameters()) + list(model.buffers()):
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            if bool((tensor == 1).all()):
                draw(tensor, 'uniform', 0.5, 1.5)
            elif bool((tensor == 0).all()):
                draw(tensor, 'normal', 0.0, 0.1 if tensor.ndim < 2 else tensor[0].numel() ** -0.5)
        if norms and inputs is not None:
            training = model.training
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # a cumulative average: the one batch sets the statistics
            model.train()
            model(*inputs)
            model.train(training)
        else:
            for m in norms:
                draw(m.running_mean, 'normal', 0.0, 0.1)
                draw(m.running_var, 'uniform', 0.5, 1.5)
    return model
