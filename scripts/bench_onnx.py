"""Latency of ONNX models through hidet against onnxruntime (CPU execution provider) and torch eager.

resnet50 (torchvision) and BERT-base (transformers), random weights, exported with torch.onnx.export;
hidet runs the compiled graph on CUDA when a GPU is present, else on the CPU.

    python scripts/bench_onnx.py [--models resnet50,bert] [--batch 1] [--seq 128]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import hidet
import hidet.onnx  # noqa: F401 (hidet does not import its frontends)


def _export(model, args, names):
    import io
    import warnings

    import onnx

    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter('ignore')
        torch.onnx.export(model.eval(), tuple(args), buf, dynamo=False, opset_version=17, input_names=names)
    return onnx.load_from_string(buf.getvalue())


def resnet50(batch: int, seq: int):
    import torchvision

    x = torch.randn(batch, 3, 224, 224)
    return torchvision.models.resnet50(weights=None).eval(), {'x': x}


def bert(batch: int, seq: int):
    import transformers

    class Wrapper(torch.nn.Module):  # positional inputs, one output, for the exporter
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128) if TINY else {}
    config = transformers.BertConfig(attn_implementation='eager', **small)
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    return Wrapper(transformers.BertModel(config)).eval(), {'input_ids': ids, 'attention_mask': torch.ones_like(ids)}


TINY = False  # --tiny: a 2-layer BERT, for smoke-testing the script


def _ms(fn, warmup=2, number=5, repeat=5) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number * 1e3)
    return float(np.median(times))


def bench(name: str, make, batch: int, seq: int) -> dict:
    import onnxruntime as ort

    torch.manual_seed(0)
    model, feeds = make(batch, seq)
    proto = _export(model, list(feeds.values()), list(feeds))
    device = 'cuda' if hidet.cuda.available() else 'cpu'
    row = {'model': name, 'device': device}

    t0 = time.perf_counter()
    module = hidet.onnx.from_onnx(proto, input_shapes={k: list(v.shape) for k, v in feeds.items()})
    graph = hidet.graph.optimize(module.flow_graph(device=device))
    hidet.drivers.build_tasks([(n.task, 'cuda' if device == 'cuda' else 'cpu') for n in graph.nodes])
    inputs = [hidet.from_torch(feeds[k].to(device)) for k in module.input_names]
    run = graph.build()
    row['hidet compile s'] = round(time.perf_counter() - t0, 1)
    row['hidet ms'] = hidet.utils.benchmark_func(lambda: run(*inputs), warmup=2, number=5, repeat=5)

    sess = ort.InferenceSession(proto.SerializeToString(), providers=['CPUExecutionProvider'])
    np_feeds = {k: v.numpy() for k, v in feeds.items()}
    row['onnxruntime-cpu ms'] = _ms(lambda: sess.run(None, np_feeds), number=2, repeat=3)
    want = sess.run(None, np_feeds)[0]
    got = run(*inputs)
    got = (got[0] if isinstance(got, list) else got).cpu().numpy()
    row['max abs err vs ort'] = float(np.abs(got - want).max())

    tmodel = model.to(device)
    tfeeds = {k: v.to(device) for k, v in feeds.items()}

    def torch_run():
        with torch.no_grad():
            out = tmodel(*tfeeds.values())
        if device == 'cuda':
            torch.cuda.synchronize()
        return out

    row[f'torch-{device} ms'] = _ms(torch_run)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--models', default='resnet50,bert')
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--seq', type=int, default=128)
    p.add_argument('--tiny', action='store_true', help='a 2-layer, 64-wide BERT (smoke test)')
    args = p.parse_args()
    global TINY
    TINY = args.tiny
    makers = {'resnet50': resnet50, 'bert': bert}
    rows = []
    for name in args.models.split(','):
        try:
            rows.append(bench(name, makers[name], args.batch, args.seq))
        except ImportError as e:
            print(f'{name}: skipped ({e})')
            continue
        print(rows[-1], flush=True)
    if rows:
        from tabulate import tabulate

        table = [{k: (f'{v:.3f}' if isinstance(v, float) else v) for k, v in r.items()} for r in rows]
        for r, t in zip(rows, table):
            t['hidet / ort'] = f"{r['hidet ms'] / r['onnxruntime-cpu ms']:.2f}x"
            torch_key = next(k for k in r if k.startswith('torch-'))
            t['hidet / torch'] = f"{r['hidet ms'] / r[torch_key]:.2f}x"
        print(tabulate(table, headers='keys'))


if __name__ == '__main__':
    main()
