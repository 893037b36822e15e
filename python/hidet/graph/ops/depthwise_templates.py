"""The depthwise 2-D convolution template (Hidet Script): ``conv2d`` in NCHW with groups == input channels
(weight ``[C * mult, 1, kh, kw]``), float16 / bfloat16 / float32 with float32 accumulation, any window,
stride, padding and dilation, fused prologues and epilogues included.

Why a template: a depthwise convolution does kh x kw multiply-adds per output, so it is bound by memory
traffic. The auto-scheduler gives each output a thread that reads its whole window from global memory (each
input element is read kh x kw times, through the padding test and index arithmetic each time).

The kernel: a block computes a TH x TW tile of one (n, channel) plane. It stages the input tile with its halo
((TH - 1) * stride + (kh - 1) * dilation + 1 rows, likewise columns) in shared memory as float32, zero in
the padding, evaluating any fused prologue once per element, with consecutive threads on consecutive
columns (coalesced); and the plane's kh x kw weights. Then each thread computes VW consecutive outputs of a
row: per window row it copies the (VW - 1) * stride + (kw - 1) * dilation + 1 input values its outputs share
into registers once and accumulates kw x VW products from them, in float32. The fused epilogue (bias,
batch-norm scale and shift, activation, residual add, cast, reshape) runs per output on the accumulator,
split from the task by the matmul templates' rules (matmul_templates/spec.py), so both accept the same fused
operators. In *staged* configs the accumulators first go to shared memory, so that the epilogue runs with
consecutive threads on consecutive outputs: its stores and residual reads coalesce.

The CPU twin is the same script: a block is an iteration of an OpenMP loop, its threads run one after
another (``for tid in range(THREADS)``), shared memory is a stack array, and the barrier is the boundary
between two loops over the threads. CI has no GPU: the CPU twin running against torch is what checks the
kernel's tiling and index arithmetic there.

Not taken (the auto-scheduler runs them): symbolic shapes, grouped convolutions with several channels per
group, operand dtypes other than the three above, a float16 accumulation (use_fp16_reduction), tensors
of 2^31 elements or more, epilogues that the matmul templates refuse (reductions, broadcasts, merged axes).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional, Sequence

from hidet.drivers.templates import Template
from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import Binary, BufferLoad, Constant, Expr, Select, TensorElement, Var, cast
from hidet.ir.functors import INT32_MAX, collect, inline_computes, narrow_index, rewrite
from hidet.ir.task import Task

from .matmul_templates.spec import NotGemm, _epilogue, _strip_cast, affine, match_gemm
from .matmul_templates.values import GemmValues

DTYPES = ('float16', 'bfloat16', 'float32')
MAX_THREADS = 1024
MAX_SHARED_BYTES = 48 * 1024  # static shared memory of a block
TARGETS = ('cuda',)  # the targets the finder serves (the CPU twin is built on request: the tests)
MAX_CPU_TILE_FLOATS = 16 * 1024  # the CPU twin's tile lives on the thread's stack (64 KiB)


class NotDepthwise(Exception):
    """Why a task is not a depthwise convolution this template runs."""


@dataclass(frozen=True)
class DepthwiseConfig:
    th: int  # output rows of a block's tile
    tw: int  # output columns of a block's tile
    vw: int  # consecutive outputs of a row per thread (tw is a multiple of it)
    staged: bool = True  # results pass through shared memory, so the epilogue's reads and stores coalesce

    @property
    def threads(self) -> int:
        return self.th * (self.tw // self.vw)

    def name(self) -> str:
        return f'{self.th}x{self.tw}v{self.vw}' + ('s' if self.staged else '')

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- the task
def _conjuncts(e: Expr) -> List[Expr]:
    if isinstance(e, Binary) and e.op == '&&':
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


class DepthwiseSpec:
    """A depthwise task: its sizes, stride, padding and dilation, and its values lowered onto the kernel's flat
    parameters (the task's inputs, then the output): the input (through any prologue) at (n, c, ih, iw) inside
    the image, the weight at (o, kh, kw), the output index and the epilogue at (n, o, oh, ow).

    The anchor (the tensor holding the task's reduction) must read ``select(in range, X[n, o / mult, oh * sh -
    ph + kh * dh, ow * sw - pw + kw * dw], 0) * W[o, 0, kh, kw]`` summed over (1, kh, kw) into float32, X and W
    4-D tensors of one of DTYPES (conv.py's ConvOp with groups == channels), the condition testing exactly
    the bounds the window can cross; the rest of the task splits as in match_gemm."""

    def __init__(self, task: Task):
        if task.symbols():
            raise NotDepthwise('symbolic shapes')
        if len(task.outputs) != 1:
            raise NotDepthwise('several outputs')
        out = task.outputs[0]
        reduces = collect(out, ReduceCompute)
        if len(reduces) != 1:
            raise NotDepthwise(f'{len(reduces)} reductions, not one')
        r = reduces[0]
        anchors = [t for t in collect(out, TensorNode) if t.definition is not None and t.definition.value is r]
        if len(anchors) != 1 or anchors[0].ndim != 4 or len(r.axes) != 3 or r.kind != 'sum':
            raise NotDepthwise('the reduction is not a 2-D convolution\'s sum over (channels, kh, kw)')
        if r.acc_dtype != float32:
            raise NotDepthwise(f'the sum accumulates in {r.acc_dtype}, not float32')
        anchor = anchors[0]
        if r.shape[0] != 1:
            raise NotDepthwise(f'{r.shape[0]} input channels per group: not depthwise')
        value = _strip_cast(r.value)
        if not (isinstance(value, Binary) and value.op == '*'):
            raise NotDepthwise('the summed value is not a product')
        xe, cond = _strip_cast(value.a), None
        if isinstance(xe, Select):
            f = _strip_cast(xe.f)
            if not (isinstance(f, Constant) and float(f.value) == 0.0):
                raise NotDepthwise('the input is selected against a value other than zero')
            xe, cond = _strip_cast(xe.t), xe.cond
        we = _strip_cast(value.b)
        for e in (xe, we):
            if not (isinstance(e, TensorElement) and e.tensor.ndim == 4):
                raise NotDepthwise('the product does not read two 4-D tensors')
        x, w = xe.tensor, we.tensor
        if x.dtype != w.dtype or x.dtype.name not in DTYPES:
            raise NotDepthwise(f'the operands are {x.dtype} and {w.dtype}; the template takes one of {DTYPES}')
        self.task, self.x, self.w, self.dtype = task, x, w, x.dtype
        self.n, self.c, self.h, self.wd = x.shape
        self.o, one, self.kh, self.kw = w.shape
        _, _, self.oh, self.ow = anchor.shape
        if anchor.shape[:2] != (self.n, self.o) or one != 1 or (self.kh, self.kw) != tuple(r.shape[1:]) \
                or self.o % self.c:
            raise NotDepthwise(f'input {list(x.shape)}, weight {list(w.shape)} and output {list(anchor.shape)} '
                               'are not those of a depthwise convolution')
        self.mult = self.o // self.c
        self._match_indices(anchor, r, xe, we, cond)
        if any(_numel(t.shape) > INT32_MAX for t in list(task.inputs) + [out]):
            raise NotDepthwise('a tensor of 2^31 elements or more')
        try:  # the same split as the matmul templates (and their refusals: reductions in the epilogue, ...)
            spec = match_gemm(task, DTYPES, fold_k=True)
        except NotGemm as e:
            raise NotDepthwise(str(e)) from None
        if spec.merged_epilogue:
            raise NotDepthwise('the epilogue merges the convolution\'s axes')
        self.values = GemmValues(spec)
        self.out_dtype = spec.out_dtype
        self._acc = Var('acc', float32)
        self._axes = [Var(f'c{i}', int64) for i in range(4)]  # (n, o, oh, ow) of the anchor
        self._epi, self._out_index, _, _ = _epilogue(task, anchor, r, self._acc, self._axes)

    def _match_indices(self, anchor: TensorNode, r: ReduceCompute, xe: TensorElement, we: TensorElement, cond):
        nn, oo, oh, ow = anchor.definition.axes
        cc, k0, k1 = r.axes
        q = Var('q', int64)  # stands for oo / mult
        names = [nn, oo, oh, ow, cc, k0, k1, q]
        extents = {id(nn): self.n, id(oo): self.o, id(oh): self.oh, id(ow): self.ow, id(cc): 1, id(k0): self.kh,
                   id(k1): self.kw, id(q): self.c}

        def form(e: Expr):
            """The affine form of index ``e``, without the variables that are always 0 (extent 1); or None."""
            e = rewrite(e, lambda x: q if isinstance(x, Binary) and x.op == '/' and x.a is oo and isinstance(
                x.b, Constant) and int(x.b.value) == self.mult else None)
            f = affine(e, names)
            if f is not None:
                f.coeffs = {k: c for k, c in f.coeffs.items() if extents[k] != 1}
            return f

        def expect(e: Expr, coeffs: Dict[Var, int], offset: int = 0) -> bool:
            f = form(e)
            want = {id(v): c for v, c in coeffs.items() if extents[id(v)] != 1}
            return f is not None and f.coeffs == want and f.offset == offset

        if not (expect(we.indices[0], {oo: 1}) and expect(we.indices[1], {}) and expect(we.indices[2], {k0: 1})
                and expect(we.indices[3], {k1: 1})):
            raise NotDepthwise('the weight is not read at [o, 0, kh, kw]')
        channel_ok = expect(xe.indices[1], {q: 1}) or (self.mult == 1 and expect(xe.indices[1], {oo: 1}))
        if not (expect(xe.indices[0], {nn: 1}) and channel_ok):
            raise NotDepthwise('the input is not read at [n, o / multiplier, ...]')
        self.stride, self.dilation, self.padding, spatial = [], [], [], []
        for d, (ov, kv, ext) in enumerate(((oh, k0, self.h), (ow, k1, self.wd))):
            f = form(xe.indices[2 + d])
            if f is None or set(f.coeffs) - {id(ov), id(kv)} or f.offset > 0:
                raise NotDepthwise('the input is not read at o * stride - padding + k * dilation')
            s, dl = f.coeffs.get(id(ov), 1), f.coeffs.get(id(kv), 1)
            if s < 1 or dl < 1:
                raise NotDepthwise('a stride or dilation below 1')
            self.stride.append(s)
            self.dilation.append(dl)
            self.padding.append(-f.offset)
            spatial.append((f, ext))
        # the condition: exactly bounds of the read rows / columns; every bound the window crosses present
        found = set()
        for c in _conjuncts(cond) if cond is not None else []:
            bound = None
            if isinstance(c, Binary) and c.op in ('>=', '<') and isinstance(c.b, Constant):
                f = form(c.a)
                for d, (fd, ext) in enumerate(spatial):
                    if f == fd and ((c.op == '>=' and c.b.value == 0) or (c.op == '<' and c.b.value == ext)):
                        bound = (d, c.op)
            if bound is None:
                raise NotDepthwise('the input is selected by a condition other than its bounds')
            found.add(bound)
        for d, (o_ext, k_ext, ext) in enumerate(((self.oh, self.kh, self.h), (self.ow, self.kw, self.wd))):
            last = (o_ext - 1) * self.stride[d] + (k_ext - 1) * self.dilation[d] - self.padding[d]
            if (self.padding[d] > 0 and (d, '>=') not in found) or (last >= ext and (d, '<') not in found):
                raise NotDepthwise('the window reads outside the input without a zero padding')

    # values on the kernel's parameters, at index expressions of the kernel
    def x_value(self, n, ci, ih, iw) -> Expr:
        """The input (its prologue applied) at a position inside the image, as float32."""
        return cast(self._lower(inline_computes(TensorElement(self.x, (n, ci, ih, iw))), {}), float32)

    def w_value(self, o, kh, kw) -> Expr:
        return cast(self._lower(inline_computes(TensorElement(self.w, (o, 0, kh, kw))), {}), float32)

    def out_index(self, n, o, oh, ow) -> Expr:
        return narrow_index(self._lower(self._out_index, dict(zip(self._axes, (n, o, oh, ow)))))

    def epilogue(self, n, o, oh, ow, acc) -> Expr:
        values = dict(zip(self._axes, (n, o, oh, ow)))
        values[self._acc] = acc
        return cast(self._lower(self._epi, values), self.out_dtype)

    def _lower(self, e: Expr, values: Dict[Var, Expr]) -> Expr:
        """``e`` on the flat parameters, its loads' index arithmetic in int32 (every tensor is smaller than 2^31
        elements: checked above)."""
        e = self.values.lower(e, values)
        return rewrite(e, lambda x: BufferLoad(x.buffer, narrow_index(x.index), x.dtype)
                       if isinstance(x, BufferLoad) else None)

    def text(self) -> str:
        s, p, d = self.stride, self.padding, self.dilation
        extra = ''.join([f' s{s[0]}x{s[1]}' if s != [1, 1] else '', f' p{p[0]}x{p[1]}' if any(p) else '',
                         f' d{d[0]}x{d[1]}' if d != [1, 1] else '', f' x{self.mult}' if self.mult > 1 else ''])
        return f'[{self.n}, {self.c}, {self.h}, {self.wd}] {self.kh}x{self.kw}{extra} {self.dtype.name}'


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------------------------------------- the kernel
class _Tiling:
    """The sizes a config gives a task: tiles per plane, the staged input tile and its row pitch."""

    def __init__(self, spec: DepthwiseSpec, cfg: DepthwiseConfig):
        (sh, sw), (dh, dw) = spec.stride, spec.dilation
        self.tiles_h, self.tiles_w = -(-spec.oh // cfg.th), -(-spec.ow // cfg.tw)
        self.tiles = self.tiles_h * self.tiles_w
        self.blocks = spec.n * spec.o * self.tiles
        self.rows = (cfg.th - 1) * sh + (spec.kh - 1) * dh + 1
        self.cols = (cfg.tw - 1) * sw + (spec.kw - 1) * dw + 1
        # an odd pitch: the threads of a warp on different rows read different banks
        self.pitch = self.cols | 1
        self.seg = (cfg.vw - 1) * sw + (spec.kw - 1) * dw + 1  # input values a thread's outputs share per row
        self.kh_kw = spec.kh * spec.kw
        self.res_pitch = cfg.tw | 1  # (odd: a thread's VW results are VW words apart from its neighbour's)
        self.res_floats = cfg.th * self.res_pitch if cfg.staged else 0

    @property
    def floats(self) -> int:
        """Shared memory (CUDA) or stack (CPU) of a block, in floats."""
        return self.rows * self.pitch + self.res_floats + self.kh_kw


def check_config(spec: DepthwiseSpec, cfg: DepthwiseConfig, target: str) -> str:
    """Why ``cfg`` cannot run ``spec`` on ``target`` ('' when it can)."""
    if min(cfg.th, cfg.tw, cfg.vw) <= 0:
        return 'sizes must be positive'
    if cfg.tw % cfg.vw:
        return 'the tile width is not a multiple of the outputs per thread'
    t = _Tiling(spec, cfg)
    if t.blocks > INT32_MAX:
        return 'too many blocks'
    if target == 'cuda':
        if cfg.threads > MAX_THREADS:
            return f'{cfg.threads} threads per block (at most {MAX_THREADS})'
        if t.floats * 4 > MAX_SHARED_BYTES:
            return 'the input tile does not fit in shared memory'
    elif t.floats > MAX_CPU_TILE_FLOATS:
        return 'the input tile does not fit the stack budget'
    return ''


def kernel_name(spec: DepthwiseSpec, cfg: DepthwiseConfig, target: str) -> str:
    return f'depthwise_{target}_{spec.task.key()[:12]}_{cfg.name()}'


def build_script_module(spec: DepthwiseSpec, cfg: DepthwiseConfig, target: str):
    """The Hidet Script module of the kernel for 'cuda' or 'cpu' (the same script; see the module's
    docstring); its parameters: the task's inputs, then the output."""
    import hidet
    from hidet.lang import attr, f32, grid, register_tensor
    from hidet.lang.constructs import range_spec
    from hidet.lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx

    why = check_config(spec, cfg, target)
    if why:
        raise ValueError(f'depthwise config {cfg.name()} for {spec.text()} on {target}: {why}')
    t = _Tiling(spec, cfg)
    CUDA = target == 'cuda'
    KIND = 'cuda_kernel' if CUDA else 'cpu_kernel'
    BLOCKS, THREADS, TILES, TILES_W = t.blocks, cfg.threads, t.tiles, t.tiles_w
    TH, TW, VW, TPR = cfg.th, cfg.tw, cfg.vw, cfg.tw // cfg.vw
    O, MULT, H, W, OH, OW, KH, KW = spec.o, spec.mult, spec.h, spec.wd, spec.oh, spec.ow, spec.kh, spec.kw
    (SH, SW), (DH, DW), (PH, PW) = spec.stride, spec.dilation, spec.padding
    ROWS, COLS, PITCH, SEG = t.rows, t.cols, t.pitch, t.seg
    STAGED, RES_PITCH, RES_FLOATS = cfg.staged, t.res_pitch, max(t.res_floats, 1)
    U = 'u' if CUDA else '.'  # register loops: unrolled by nvcc (so the arrays live in registers)
    alloc = shared_tensor if CUDA else register_tensor
    x_value, w_value, out_index, epilogue = spec.x_value, spec.w_value, spec.out_index, spec.epilogue
    out = spec.values.out
    name = kernel_name(spec, cfg, target)

    def blocks():  # (run while the script is translated) the loop over blocks: one iteration per CUDA block
        return range_spec(blockIdx.x, BLOCKS, BLOCKS) if CUDA else grid(BLOCKS, attrs='p')

    def threads():  # the loop over the block's threads: one iteration per CUDA thread
        return range_spec(threadIdx.x, THREADS, THREADS) if CUDA else range_spec(0, THREADS, 1)

    with hidet.script_module() as module:
        @hidet.script
        def depthwise_conv2d():
            attr.func_kind = KIND
            attr.func_name = name
            if CUDA:
                attr.cuda_grid_dim = BLOCKS
                attr.cuda_block_dim = THREADS
            for blk in blocks():
                tile = alloc(f32, [ROWS * PITCH])  # the input tile and its halo, zero in the padding
                wts = alloc(f32, [KH * KW])
                res = alloc(f32, [RES_FLOATS])  # the accumulators, rows RES_PITCH apart (staged configs)
                n = blk / (TILES * O)
                o = blk / TILES % O
                oh0 = blk % TILES / TILES_W * TH
                ow0 = blk % TILES_W * TW
                ci = o / MULT
                ih0 = oh0 * SH - PH
                iw0 = ow0 * SW - PW
                for tid in threads():
                    for i in range(tid, ROWS * COLS, THREADS):
                        r = i / COLS
                        q = i % COLS
                        ih = ih0 + r
                        iw = iw0 + q
                        v: f32 = 0.0
                        if ih >= 0 and ih < H and iw >= 0 and iw < W:
                            v = x_value(n, ci, ih, iw)
                        tile[r * PITCH + q] = v
                    for i in range(tid, KH * KW, THREADS):
                        wts[i] = w_value(o, i / KW, i % KW)
                if CUDA:
                    syncthreads()
                for tid in threads():
                    for item in range(tid, TH * TPR, THREADS):
                        r = item / TPR
                        j0 = item % TPR * VW
                        oh = oh0 + r
                        ow = ow0 + j0
                        if oh < OH and ow < OW:
                            acc = register_tensor(f32, [VW])
                            seg = register_tensor(f32, [SEG])
                            for j in grid(VW, attrs=U):
                                acc[j] = 0.0
                            for kh in grid(KH, attrs=U):
                                base = (r * SH + kh * DH) * PITCH + j0 * SW
                                for e in grid(SEG, attrs=U):
                                    seg[e] = tile[base + e]
                                for kw in grid(KW, attrs=U):
                                    wv = wts[kh * KW + kw]
                                    for j in grid(VW, attrs=U):
                                        acc[j] += seg[j * SW + kw * DW] * wv
                            if STAGED:
                                for j in grid(VW, attrs=U):
                                    res[r * RES_PITCH + j0 + j] = acc[j]
                            else:
                                for j in grid(VW, attrs=U):
                                    if ow + j < OW:
                                        out[out_index(n, o, oh, ow + j)] = epilogue(n, o, oh, ow + j, acc[j])
                if STAGED:  # the epilogue with consecutive threads on consecutive outputs
                    if CUDA:
                        syncthreads()
                    for tid in threads():
                        for i in range(tid, TH * TW, THREADS):
                            oh = oh0 + i / TW
                            ow = ow0 + i % TW
                            if oh < OH and ow < OW:
                                a = res[i / TW * RES_PITCH + i % TW]
                                out[out_index(n, o, oh, ow)] = epilogue(n, o, oh, ow, a)

    kernel = module.functions[-1]
    kernel.params[:0] = spec.values.ins + [out]
    return module


# ---------------------------------------------------------------------------------------------- search spaces
def _balanced(extent: int, cap: int, multiple: int) -> int:
    """A tile size of at most about ``cap`` (a multiple of ``multiple``) that splits ``extent`` evenly."""
    tiles = -(-extent // max(cap, 1))
    size = -(-extent // tiles)
    return -(-size // multiple) * multiple


def _tile(spec: DepthwiseSpec, vw: int, cap_w: int, threads: int) -> DepthwiseConfig:
    """Tiles of about ``cap_w`` columns and ``threads`` threads that split the plane evenly; staged unless a
    thread computes a single output (then a warp's stores are consecutive anyway)."""
    tw = _balanced(spec.ow, cap_w, vw)
    th = _balanced(spec.oh, max(1, threads // (tw // vw)), 1)
    return DepthwiseConfig(th, tw, vw, staged=vw > 1)


def default_vw(ow: int) -> int:
    return 4 if ow >= 16 else 2 if ow >= 8 else 1


def space(spec: DepthwiseSpec, target: str, level: int) -> List[DepthwiseConfig]:
    """Level 0: one config per shape class: 4 outputs per thread on rows of 16 or more (2 on rows of 8-15, else
    1), tiles of about 32 columns and 128 threads. Levels 1 and 2: up to 8 and 32 candidates over outputs per
    thread, tile widths, block sizes and staging. The CPU twin: 8 outputs per thread (g++ vectorizes the
    accumulation), tiles of about 64 columns."""
    if target == 'cpu':
        first = _tile(spec, 8, 64, 128)
        tiles = [_tile(spec, vw, cw, tn) for vw in (8, 4, 16) for cw in (64, 32) for tn in (128, 512)]
    else:
        first = _tile(spec, default_vw(spec.ow), 32, 128)
        tiles = [_tile(spec, vw, cw, tn) for vw in (4, 2, 8, 1) for cw in (32, 64, 16) for tn in (128, 256, 64)]
    cands = [first] + [c for t in tiles for c in (t, replace(t, staged=not t.staged))]
    seen, out = set(), []
    for c in cands:
        if c not in seen and c.vw <= spec.ow and not check_config(spec, c, target):
            seen.add(c)
            out.append(c)
    return out[:1 if level == 0 else 8 if level == 1 else 32]


class DepthwiseTemplate(Template):
    """The depthwise convolution template applied to one task on one target."""

    name = 'depthwise-conv2d-v1'
    config_class = DepthwiseConfig

    def __init__(self, spec: DepthwiseSpec, target: str):
        self.spec = spec
        self.target = target

    @property
    def title(self) -> str:
        return f'depthwise conv2d {self.spec.text()}'

    def space(self, level: int) -> List[DepthwiseConfig]:
        return space(self.spec, self.target, level)

    def source(self, config: DepthwiseConfig, fallback: bool = True) -> str:
        from hidet.backend.codegen import forwarding_launch, generate

        script = generate(build_script_module(self.spec, config, self.target).ir_module())
        name = kernel_name(self.spec, config, self.target)
        return '\n'.join([script, ''] + forwarding_launch('depthwise conv2d', name, len(self.spec.values.ins) + 1))

    def check(self, config: DepthwiseConfig) -> str:
        return check_config(self.spec, config, self.target)


def explain(task: Task) -> str:
    """'depthwise …' or why ``task`` is not one the template runs."""
    try:
        return f'depthwise {DepthwiseSpec(task).text()}'
    except NotDepthwise as e:
        return str(e)


def find_depthwise_template(task: Task, target: str) -> Optional[DepthwiseTemplate]:
    if target not in TARGETS:
        return None
    try:
        template = DepthwiseTemplate(DepthwiseSpec(task), target)
    except NotDepthwise:
        return None
    return template if template.space(0) else None  # (no config fits: a huge window)


def _register() -> None:
    from hidet.drivers.templates import register

    register(find_depthwise_template)


_register()
