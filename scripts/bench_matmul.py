"""Kernel-level timing of hidet's matmul kernels against torch.matmul (cuBLAS), on the GPU.

Each side runs ``--calls`` launches captured in one CUDA graph, replayed ``--repeat`` times (median): the
time is the GPU's alone, with no host overhead (which ``hidet bench`` includes). Also prints the config
each search level chose and the tuning time.

    python scripts/bench_matmul.py 4096x4096x4096 1x4096x4096 128x4096x4096 --space 0 2 --dtype f16

``--candidates``: also every candidate of the level-2 space, each checked against torch (max error) and timed;
``--twins``: with every wgmma candidate's twin of the other copy mechanism (TMA for cp.async, and back) where
TMA can copy the operands, to compare the two tile by tile. ``--epilogue [KIND]``: hidet's kernel with an
epilogue fused beside the bare one, to see what the epilogue costs (torch stays the bare GEMM): a residual block's
(``resnet``, the default: relu(C * scale + shift + residual), a float32 batch-norm scale and shift per column, as
the fold_conv_batch_norm pass leaves them), ``bias-residual``, ``gelu-tanh`` and ``gelu-erf`` (of C + bias),
``silu-gate`` (silu(C) * up, up an input) or ``swiglu`` (silu(gate) * up of C's interleaved gate / up column
blocks, the paired epilogue a SwiGLU MLP's merged GEMM takes: N is the merged width, the output half of it).
``--configs``: named configs (as the table prints them, e.g. ``64x64x64_w64x64_p6_s8_wg_tma``) timed as candidates
too.

``--cold``: each launch of a timed CUDA graph reads B (the weights) from its own copy, enough copies that they
outrun the L2 cache, as a model's weights come from DRAM (a GEMM timed on one B reads it from L2 after the first
launch). ``--linear``: torch's side is the model's ``F.linear(a, w, bias)`` (w [N, K]), not ``torch.matmul``.

    python scripts/bench_matmul.py 128x768x3072 --cold --linear --candidates --configs 64x64x64_w64x64_p8_s8_wg_tma

``--resnet50 N``: the shapes are resnet50's distinct convolutions at batch N (each layer once: 1x1, 3x3, strided,
the downsampling 1x1s), the per-layer table against cuDNN; with ``--epilogue``, each with a residual block's
epilogue beside it.

    python scripts/bench_matmul.py --resnet50 32 --epilogue
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace


def graph_time(fn, calls: int, repeat: int) -> float:
    """Median ms of one ``fn()`` call, from CUDA-graph replays of ``calls`` calls."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


L2_OUTRUN_BYTES = 160 << 20  # --cold: B's copies together, at least (an H100's L2 holds 50 MB, an H200's 60)


def weight_copies(b, cold: bool) -> list:
    """B alone, or (``cold``) copies of it that together outrun the L2 cache."""
    if not cold:
        return [b]
    n = max(2, -(-L2_OUTRUN_BYTES // (b.numel() * b.element_size())))
    return [b] + [b.clone() for _ in range(n - 1)]


def rotating(fn, copies: list):
    """``fn(b)`` called on the next copy of B at each call (a CUDA graph captures the copy each launch reads)."""
    state = {'i': 0}

    def call():
        b = copies[state['i'] % len(copies)]
        state['i'] += 1
        return fn(b)

    return call


def parse_config(template, name: str):
    """A config from its name: ``BMxBNxBK_wWMxWN_pS[_sK][_wg][_tma]``."""
    import re

    m = re.fullmatch(r'(\d+)x(\d+)x(\d+)_w(\d+)x(\d+)_p(\d+)(?:_s(\d+))?(_wg)?(_tma)?', name)
    if not m:
        raise SystemExit(f'bad config name {name!r}: expected BMxBNxBK_wWMxWN_pS[_sK][_wg][_tma]')
    bm, bn, bk, wm, wn, stages = (int(x) for x in m.groups()[:6])
    return template.config_class(bm, bn, bk, wm, wn, stages, int(m.group(7) or 1), bool(m.group(8)), bool(m.group(9)))


def candidate_rows(template, shape, inputs, expected, flops, t_torch, args, copies, what='candidate'):
    """A row per candidate of the level-2 space (and of ``--configs``): its time and its max error against
    torch. ``inputs``: the kernel's, B (rotated over ``copies``) among them."""
    import torch

    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    configs = template.space(2) if args.candidates else []
    if args.twins:
        twins = [replace(c, tma=not c.tma) for c in configs if c.wgmma]
        configs += [c for c in twins if c not in configs and not template.check(c)]
    for name in args.configs:
        cfg = parse_config(template, name)
        why = template.check(cfg)
        if why:
            print(f'{shape}: config {name} does not fit: {why}', flush=True)
        elif cfg not in configs:
            configs.append(cfg)
    if not configs:
        return []
    groups = [configs[i:i + 4] for i in range(0, len(configs), 4)]  # 4 to a library, as tuning compiles them
    paths = build_libraries([(template.candidates_source(g), 'cuda', 'candidates') for g in groups])
    rows = []
    for i, cfg in enumerate(configs):
        launch = CompiledModule(paths[i // 4])[f'launch_{i % 4}']
        out = torch.full(expected.shape, float('nan'), dtype=inputs[0].dtype, device='cuda')
        try:
            launch(*inputs, out)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - report and go on
            rows.append([shape, what, '', '', '', cfg.name(), f'failed: {e}'[:80]])
            continue
        err = (out.float() - expected.float()).abs().max().item()
        at = next(i for i, x in enumerate(inputs) if x is copies[0])
        t = graph_time(rotating(lambda b: launch(*inputs[:at], b, *inputs[at + 1:], out), copies),
                       len(copies) if args.cold else args.calls, args.repeat)
        rows.append([shape, what, f'{t * 1e3:.1f}', f'{flops / t / 1e9:.0f}', f'{t_torch / t:.2f}', cfg.name(),
                     f'max err {err:.3g}'])
        print('  '.join(rows[-1]), flush=True)  # (as it goes: a run cut short keeps what it measured)
    return rows


def _conv_shape(shape: str):
    """conv:NxCxHxWxKxRxS[pP][sS] → (n, c, h, w, k, r, s, padding, stride)."""
    import re

    m = re.fullmatch(r'conv:(\d+)x(\d+)x(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(?:p(\d+))?(?:s(\d+))?', shape)
    if not m:
        raise SystemExit(f'bad conv shape {shape!r}: expected conv:NxCxHxWxKxRxS[pP][sS]')
    return tuple(int(x) for x in m.groups()[:7]) + (int(m.group(8) or 0), int(m.group(9) or 1))


def gemm_task(shape: str, dtype: str):
    """(the fused task of ``shape`` on the GPU, the hidet op of two tensors it is): MxNxK a matmul of A [M, K] and
    B [K, N], conv:... a channels-last convolution (input NHWC, weight KRSC). No GPU needed to build it."""
    import hidet

    if not shape.startswith('conv'):
        m, n, k = (int(x) for x in shape.split('x'))
        return hidet.ops.matmul(hidet.symbol([m, k], dtype, 'cuda'),
                                hidet.symbol([k, n], dtype, 'cuda')).trace[0].task, hidet.ops.matmul
    bn, ci, h, w, co, r, s_, pad, stride = _conv_shape(shape)

    def op_fn(x_, w_):
        return hidet.ops.conv2d_channels_last(x_, w_, padding=pad, stride=stride)

    xs, ws = hidet.symbol([bn, h, w, ci], dtype, 'cuda'), hidet.symbol([co, r, s_, ci], dtype, 'cuda')
    (node,) = hidet.graph.optimize(hidet.trace_from(op_fn(xs, ws), [xs, ws])).nodes
    return node.task, op_fn


def matmul_case(shape: str, dtype: str):
    """MxNxK: (task, inputs, torch's output, FLOPs, torch's call, the hidet op of two tensors)."""
    import torch

    m, n, k = (int(x) for x in shape.split('x'))
    a = torch.randn(m, k, device='cuda').to(getattr(torch, dtype))
    b = (torch.randn(k, n, device='cuda') / k ** 0.5).to(getattr(torch, dtype))
    c = torch.empty(m, n, device='cuda', dtype=a.dtype)
    task, op_fn = gemm_task(shape, dtype)
    return task, (a, b), c, 2.0 * m * n * k, lambda b_: torch.matmul(a, b_, out=c), op_fn


def conv_case(shape: str, dtype: str):
    """conv:NxCxHxWxKxRxS[pP][sS]: a channels-last convolution (the implicit GEMM of the template, input NHWC,
    weight KRSC) against cuDNN (torch, channels-last)."""
    import torch

    bn, ci, h, w, co, r, s_, pad, stride = _conv_shape(shape)
    t = getattr(torch, dtype)
    x = torch.randn(bn, h, w, ci, device='cuda').to(t)
    wt = (torch.randn(co, r, s_, ci, device='cuda') / (ci * r * s_) ** 0.5).to(t)
    task, op_fn = gemm_task(shape, dtype)
    x_nchw = x.permute(0, 3, 1, 2)  # NCHW view of channels-last memory: cuDNN's NHWC kernels
    ref = torch.nn.functional.conv2d(x_nchw, wt.permute(0, 3, 1, 2), padding=pad, stride=stride)
    c = ref.permute(0, 2, 3, 1).contiguous()
    oh, ow = c.shape[1], c.shape[2]
    flops = 2.0 * bn * oh * ow * co * ci * r * s_
    return (task, (x, wt), c, flops,
            lambda w_: torch.nn.functional.conv2d(x_nchw, w_.permute(0, 3, 1, 2), padding=pad, stride=stride), op_fn)


def resnet50_convolutions(batch: int):
    """conv: shapes of resnet50's distinct convolutions at ``batch``, stem aside (torchvision's v1.5: a
    bottleneck's stride on its 3x3; each stage's first block also has a strided 1x1 downsampling)."""
    shapes, size, channels = [], 56, 64
    for width, first_stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        out, after = width * 4, size // first_stride
        strided = f's{first_stride}' if first_stride > 1 else ''
        shapes += [f'conv:{batch}x{channels}x{size}x{size}x{width}x1x1',  # first block's reduce
                   f'conv:{batch}x{width}x{size}x{size}x{width}x3x3p1{strided}',
                   f'conv:{batch}x{width}x{after}x{after}x{out}x1x1',  # expand
                   f'conv:{batch}x{channels}x{size}x{size}x{out}x1x1{strided}']  # downsampling
        if first_stride > 1:  # later blocks: reduce and 3x3 at the stage's own size
            shapes += [f'conv:{batch}x{out}x{after}x{after}x{width}x1x1',
                       f'conv:{batch}x{width}x{after}x{after}x{width}x3x3p1']
        else:
            shapes += [f'conv:{batch}x{out}x{after}x{after}x{width}x1x1']
        size, channels = after, out
    return list(dict.fromkeys(shapes))


EPILOGUES = ('resnet', 'bias-residual', 'gelu-tanh', 'gelu-erf', 'silu-gate', 'swiglu')


def with_epilogue(op_fn, a, b, c, kind: str = 'resnet'):
    """(task, inputs, expected output) of ``op_fn(a, b)`` with an epilogue fused, one kernel: ``resnet``, a resnet
    block's end, relu(cast(cast(C, float32) * scale + shift, dtype) + residual) (a float32 scale and shift per
    column, constants: a batch norm as the fold_conv_batch_norm pass leaves it); ``bias-residual``, C + bias +
    residual (a transformer's output or MLP down-projection); ``gelu-tanh`` / ``gelu-erf``, gelu(C + bias) (its MLP
    up-projection); ``silu-gate``, silu(C) * up (a Llama MLP's gate, its up-projection computed before); ``swiglu``,
    silu(gate) * up of C's interleaved column blocks (merge_sibling_matmuls' layout of a Llama MLP's gate and up:
    a paired epilogue, the output half C's width). Residual and up are inputs of C's shape. The expected output
    from torch's C."""
    import torch
    import torch.nn.functional as F

    import hidet

    xs, ws, rs = (hidet.symbol(list(t.shape), str(t.dtype)[6:], 'cuda') for t in (a, b, c))
    other = torch.randn_like(c)
    bias = torch.randn(c.shape[-1], device='cuda').to(c.dtype)
    hc, cf = op_fn(xs, ws), c.float()
    if kind == 'resnet':
        scale, shift = torch.rand(c.shape[-1], device='cuda') + 0.5, torch.randn(c.shape[-1], device='cuda')
        bn = hidet.ops.cast(hc, 'float32') * hidet.from_torch(scale) + hidet.from_torch(shift)
        y = hidet.ops.relu(hidet.ops.cast(bn, str(c.dtype)[6:]) + rs)
        expected = torch.relu(cf * scale + shift + other.float())
    elif kind == 'bias-residual':
        y = hc + hidet.from_torch(bias) + rs
        expected = cf + bias.float() + other.float()
    elif kind in ('gelu-tanh', 'gelu-erf'):
        approximate = 'tanh' if kind == 'gelu-tanh' else 'none'
        y = hidet.ops.gelu(hc + hidet.from_torch(bias), approximate=approximate)
        expected = F.gelu(cf + bias.float(), approximate=approximate)
    elif kind == 'silu-gate':
        y = hidet.ops.silu(hc) * rs
        expected = F.silu(cf) * other.float()
    elif kind == 'swiglu':
        from hidet.graph.transforms.merge_sibling_matmuls import PAIR_WIDTH, pair_slices

        m, width = c.shape[0], c.shape[-1] // 2
        gate, up = pair_slices(hc)
        y = hidet.ops.silu(gate) * up
        pairs = cf.reshape(m, width // PAIR_WIDTH, 2, PAIR_WIDTH)
        expected = (F.silu(pairs[:, :, 0]) * pairs[:, :, 1]).reshape(m, width)
    else:
        raise SystemExit(f'unknown epilogue {kind!r}: one of {", ".join(EPILOGUES)}')
    graph = hidet.graph.optimize(hidet.trace_from(y, [xs, ws, rs] if kind in ('resnet', 'bias-residual', 'silu-gate')
                                                  else [xs, ws]))
    (node,) = graph.nodes
    values = {id(xs): a, id(ws): b, id(rs): other}
    return node.task, [values[id(t)] if id(t) in values else t.torch() for t in node.inputs], expected


def main() -> None:
    import torch

    from hidet.drivers.build_task import build_task
    from hidet.kernels import find

    parser = argparse.ArgumentParser()
    parser.add_argument('shapes', nargs='*', help='MxNxK or conv:NxCxHxWxKxRxS[pP][sS] (channels-last)')
    parser.add_argument('--resnet50', type=int, metavar='N', help="also resnet50's convolutions at batch N")
    parser.add_argument('--space', type=int, nargs='+', default=[0])
    parser.add_argument('--dtype', default='f16', choices=['f16', 'bf16'])
    parser.add_argument('--calls', type=int, default=20)
    parser.add_argument('--repeat', type=int, default=10)
    parser.add_argument('--candidates', action='store_true', help='time every candidate of the level-2 space')
    parser.add_argument('--twins', action='store_true', help='--candidates: with the cp.async / TMA twin of each')
    parser.add_argument('--configs', nargs='*', default=[], help='named configs to time as candidates too')
    parser.add_argument('--cold', action='store_true', help='B read from DRAM: each launch on its own copy')
    parser.add_argument('--linear', action='store_true', help="torch's side as F.linear(a, w [N, K], bias)")
    parser.add_argument('--epilogue', nargs='?', const='resnet', choices=EPILOGUES,
                        help="also hidet's kernel with an epilogue fused (default resnet: relu(C * scale + shift + "
                             "residual)), at each --space")
    args = parser.parse_args()
    dtype = {'f16': 'float16', 'bf16': 'bfloat16'}[args.dtype]
    shapes = args.shapes + (resnet50_convolutions(args.resnet50) if args.resnet50 else [])
    if not shapes:
        parser.error('no shapes: name some, or --resnet50 N')
    rows = []
    for shape in shapes:
        if shape.startswith('conv'):
            task, (a, b), c, flops, torch_fn, op_fn = conv_case(shape, dtype)
        else:
            task, (a, b), c, flops, torch_fn, op_fn = matmul_case(shape, dtype)
        torch_fn(b)  # (the matmul's reference output c: --linear times F.linear, which writes a fresh tensor)
        copies = weight_copies(b, args.cold)
        calls = len(copies) if args.cold else args.calls
        if args.linear and not shape.startswith('conv'):  # the model's layer: weight [N, K], a bias
            bias = torch.randn(b.shape[1], device='cuda').to(b.dtype)
            t_torch = graph_time(rotating(lambda w: torch.nn.functional.linear(a, w, bias),
                                          [w.t().contiguous() for w in copies]), calls, args.repeat)
        else:
            t_torch = graph_time(rotating(torch_fn, copies), calls, args.repeat)
        rows.append([shape, 'torch', f'{t_torch * 1e3:.1f}', f'{flops / t_torch / 1e9:.0f}', '1.00', '', ''])
        template = find(task, 'cuda')
        for space in args.space:
            t0 = time.perf_counter()
            launch = build_task(task, 'cuda', space)['launch']
            build_s = time.perf_counter() - t0
            out = torch.empty_like(c)
            launch(a, b, out)
            torch.cuda.synchronize()
            err = (out.float() - c.float()).abs().max().item()
            t = graph_time(rotating(lambda b_: launch(a, b_, out), copies), calls, args.repeat)
            from hidet.drivers.tuning import choose_configs

            cfg = choose_configs([(task, 'cuda', template)], space)[0].name() if template else 'auto-scheduler'
            rows.append([shape, f'hidet space {space}', f'{t * 1e3:.1f}', f'{flops / t / 1e9:.0f}',
                         f'{t_torch / t:.2f}', cfg, f'{build_s:.1f} s, max err {err:.3g}'])
            if args.epilogue:
                e_task, e_inputs, e_expected = with_epilogue(op_fn, a, b, c, args.epilogue)
                t0 = time.perf_counter()
                e_launch = build_task(e_task, 'cuda', space)['launch']
                build_s = time.perf_counter() - t0
                e_out = torch.full(e_expected.shape, float('nan'), dtype=c.dtype, device='cuda')
                e_launch(*e_inputs, e_out)
                torch.cuda.synchronize()
                e_err = (e_out.float() - e_expected).abs().max().item()
                at = next(i for i, x in enumerate(e_inputs) if x is b)
                t = graph_time(rotating(lambda b_: e_launch(*e_inputs[:at], b_, *e_inputs[at + 1:], e_out), copies),
                               calls, args.repeat)
                e_template = find(e_task, 'cuda')
                e_cfg = choose_configs([(e_task, 'cuda', e_template)], space)[0].name() if e_template else \
                    'auto-scheduler'
                rows.append([shape, f'+ epilogue, space {space}', f'{t * 1e3:.1f}', f'{flops / t / 1e9:.0f}',
                             f'{t_torch / t:.2f}', e_cfg, f'{build_s:.1f} s, max err {e_err:.3g}, {e_task.name[:32]}'])
                if e_template is not None and space == args.space[-1] and args.configs:  # (named configs only)
                    rows += candidate_rows(e_template, shape, e_inputs, e_expected, flops, t_torch,
                                           argparse.Namespace(**{**vars(args), 'candidates': False, 'twins': False}),
                                           copies, '+ epilogue')
        if template is not None:
            rows += candidate_rows(template, shape, (a, b), c, flops, t_torch, args, copies)
    from tabulate import tabulate

    print(f'{torch.cuda.get_device_name()} {dtype}: CUDA-graph kernel times')
    print(tabulate(rows, headers=['MxNxK', 'kernel', 'us', 'TFLOP/s', 'vs torch', 'config', 'build']))


if __name__ == '__main__':
    main()
