"""The depthwise 2-D convolution template (Hidet Script): ``conv2d`` in NCHW with groups == input channels
(weight ``[C * mult, 1, kh, kw]``), float16 / bfloat16 / float32 with float32 accumulation, any window,
stride, padding and dilation, fused prologues and epilogues included. (The channels_last pass turns a float16 /
bfloat16 network's depthwise convolutions on CUDA into channels-last ones, which the auto-scheduler runs; this
template serves NCHW ones: float32, channels-last off, a channel multiplier.)

Why a template: a depthwise convolution does kh x kw multiply-adds per output, so it is bound by memory
traffic. The auto-scheduler gives each output a thread that reads its whole window from global memory (each
input element is read kh x kw times, through the padding test and index arithmetic each time).

The kernel: a block computes a TH x TW tile of one (n, channel) plane. It stages the input tile with its halo
((TH - 1) * stride + (kh - 1) * dilation + 1 rows, likewise columns) in shared memory as float32, zero in
the padding, evaluating any fused prologue once per element, with consecutive threads on consecutive
columns (coalesced), each thread issuing up to MAX_CHUNK loads before storing them; and the plane's kh x kw
weights. Then each thread computes a VH x VW patch of outputs (VW consecutive outputs of a row, VH rows): per
input row its windows read, it copies the (VW - 1) * stride + (kw - 1) * dilation + 1 values its outputs
share into registers once and accumulates them into every output whose window covers the row, in float32.
The tile's row pitch is chosen so that the reads of a warp spread over the banks (_pitch). *Direct* configs
stage nothing: each thread reads its rows from global memory (through L1; neighbouring threads share lines)
and its weights into registers, no barrier (for strides of 2 and more, where a staged tile holds ~4 inputs
per output). The fused epilogue (bias, batch-norm scale and shift, activation, residual add, cast, reshape)
runs per output on the accumulator, split from the task by the matmul templates' rules
(hidet/kernels/matmul/spec.py), so both accept the same fused operators. In *staged* configs the accumulators
first go to shared memory, so that the epilogue runs with consecutive threads on consecutive outputs: its
stores and residual reads coalesce.

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
from functools import lru_cache
from typing import Dict, List, Optional, Sequence

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import Binary, BufferLoad, Constant, Expr, Select, TensorElement, Var, cast
from hidet.ir.functors import INT32_MAX, collect, inline_computes, narrow_index, rewrite
from hidet.ir.task import Task
from hidet.kernels.matmul.epilogue import split_epilogue
from hidet.kernels.matmul.forms import NotGemm, affine, strip_cast
from hidet.kernels.matmul.spec import match_gemm, window_bounds
from hidet.kernels.matmul.values import GemmValues
from hidet.kernels.template import Template, sm_count

DTYPES = ('float16', 'bfloat16', 'float32')
MAX_THREADS = 1024
MAX_SHARED_BYTES = 48 * 1024  # static shared memory of a block
TARGETS = ('cuda',)  # the targets the finder serves (the CPU twin is built on request: the tests)
MAX_CPU_TILE_FLOATS = 16 * 1024  # the CPU twin's tile lives on the thread's stack (64 KiB)
THREADS_PER_SM = 200  # a default's fewest threads an SM where outputs per thread could fill it (5x5+ windows)
MAX_CHUNK = 16  # global loads a thread issues at once while staging the input tile


class NotDepthwise(Exception):
    """Why a task is not a depthwise convolution this template runs."""


@dataclass(frozen=True)
class DepthwiseConfig:
    th: int  # output rows of a block's tile (a multiple of vh)
    tw: int  # output columns of a block's tile (a multiple of vw)
    vw: int  # consecutive outputs of a row per thread
    staged: bool = True  # results pass through shared memory, so the epilogue's reads and stores coalesce
    vh: int = 1  # consecutive outputs of a column per thread (the input rows their windows share are read once)
    direct: bool = False  # no input tile: each thread reads its windows from global memory (through L1)

    @property
    def threads(self) -> int:
        return (self.th // self.vh) * (self.tw // self.vw)

    def name(self) -> str:
        return (f'{self.th}x{self.tw}v{self.vw}' + (f'h{self.vh}' if self.vh > 1 else '')
                + ('d' if self.direct else '') + ('s' if self.staged else ''))

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- the task
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
        value = strip_cast(r.value)
        if not (isinstance(value, Binary) and value.op == '*'):
            raise NotDepthwise('the summed value is not a product')
        xe, cond = strip_cast(value.a), None
        if isinstance(xe, Select):
            f = strip_cast(xe.f)
            if not (isinstance(f, Constant) and float(f.value) == 0.0):
                raise NotDepthwise('the input is selected against a value other than zero')
            xe, cond = strip_cast(xe.t), xe.cond
        we = strip_cast(value.b)
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
        self._epi, self._out_index, _, _, _ = split_epilogue(task, anchor, r, self._acc, self._axes)
        # the epilogue reads a tensor per output (a residual add), not just per channel (bias, batch norm)
        size = self.n * self.o * self.oh * self.ow
        self.reads_residual = any(_numel(e.tensor.shape) >= size for e in collect(self._epi, TensorElement))

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
        found = window_bounds(cond, form, spatial)
        if found is None:
            raise NotDepthwise('the input is selected by a condition other than its bounds')
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
@lru_cache(maxsize=None)
def _pitch(cols: int, threads: int, tpr: int, step: int, row_step: int) -> int:
    """The row pitch (cols to cols + 31 floats) of the staged input tile that spreads the compute loop's
    shared-memory reads over the most banks: thread k reads word (k / tpr) * row_step * pitch + k % tpr * step
    (plus an offset common to the block), cost = wavefronts (the most distinct words of one bank) summed over
    the block's first 4 warps. Threads of one row are ``step`` words apart whatever the pitch (a VW-way
    conflict for VW consecutive outputs per thread at stride 1); the pitch decides how the rows of a warp
    interleave (with vh = vw = 1 and tpr < 32, a pitch of row_step * pitch = tpr (mod 32) makes a warp's reads
    consecutive words)."""
    best = (None, cols)
    for p in range(cols, cols + 32):
        cost = 0
        for w0 in range(0, min(threads, 128), 32):
            banks: Dict[int, set] = {}
            for k in range(w0, min(w0 + 32, threads)):
                a = (k // tpr) * row_step * p + k % tpr * step
                banks.setdefault(a % 32, set()).add(a)
            cost += max(len(words) for words in banks.values())
        if best[0] is None or cost < best[0]:
            best = (cost, p)
    return best[1]


class _Tiling:
    """The sizes a config gives a task: tiles per plane, the staged input tile and its row pitch, the input rows
    a thread reads."""

    def __init__(self, spec: DepthwiseSpec, cfg: DepthwiseConfig):
        (sh, sw), (dh, dw) = spec.stride, spec.dilation
        self.tiles_h, self.tiles_w = -(-spec.oh // cfg.th), -(-spec.ow // cfg.tw)
        self.tiles = self.tiles_h * self.tiles_w
        self.blocks = spec.n * spec.o * self.tiles
        self.tpr = cfg.tw // cfg.vw  # threads per row of the tile
        self.rows = (cfg.th - 1) * sh + (spec.kh - 1) * dh + 1
        self.cols = (cfg.tw - 1) * sw + (spec.kw - 1) * dw + 1
        self.seg = (cfg.vw - 1) * sw + (spec.kw - 1) * dw + 1  # input values a thread's outputs share per row
        # the input rows of a thread's windows (offsets from the first one), each with the (output row, window
        # row) pairs that read it: with vh outputs in a column, a row shared by several is read once
        uses: Dict[int, List[tuple]] = {}
        for v in range(cfg.vh):
            for k in range(spec.kh):
                uses.setdefault(v * sh + k * dh, []).append((v, k))
        self.row_uses = sorted(uses.items())
        self.kh_kw = spec.kh * spec.kw
        self.res_pitch = cfg.tw | 1  # (odd: a thread's VW results are VW words apart from its neighbour's)
        self.res_floats = cfg.th * self.res_pitch if cfg.staged else 0
        if cfg.direct:  # no input tile; the weights go to registers straight from global memory
            self.pitch, self.tile_floats = 0, 0
        else:
            self.pitch = _pitch(self.cols, cfg.threads, self.tpr, cfg.vw * sw, cfg.vh * sh)
            self.tile_floats = self.rows * self.pitch + self.kh_kw

    @property
    def floats(self) -> int:
        """Shared memory (CUDA) or stack (CPU) of a block, in floats."""
        return self.tile_floats + self.res_floats


def check_config(spec: DepthwiseSpec, cfg: DepthwiseConfig, target: str) -> str:
    """Why ``cfg`` cannot run ``spec`` on ``target`` ('' when it can)."""
    if min(cfg.th, cfg.tw, cfg.vw, cfg.vh) <= 0:
        return 'sizes must be positive'
    if cfg.tw % cfg.vw:
        return 'the tile width is not a multiple of the outputs per thread'
    if cfg.th % cfg.vh:
        return 'the tile height is not a multiple of the outputs per thread vertically'
    if cfg.threads > MAX_THREADS and target == 'cuda':
        return f'{cfg.threads} threads per block (at most {MAX_THREADS})'
    t = _Tiling(spec, cfg)
    if t.blocks > INT32_MAX:
        return 'too many blocks'
    if target == 'cuda':
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
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
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
    TH, TW, VW, VH, TPR, GROUPS = cfg.th, cfg.tw, cfg.vw, cfg.vh, t.tpr, cfg.th // cfg.vh
    O, MULT, H, W, OH, OW, KH, KW = spec.o, spec.mult, spec.h, spec.wd, spec.oh, spec.ow, spec.kh, spec.kw
    (SH, SW), DW, (PH, PW) = spec.stride, spec.dilation[1], spec.padding  # (row dilation: in ROW_USES)
    ROWS, COLS, PITCH, SEG, ROW_USES = t.rows, t.cols, t.pitch, t.seg, t.row_uses
    STAGED, DIRECT, RES_PITCH, RES_FLOATS = cfg.staged, cfg.direct, t.res_pitch, max(t.res_floats, 1)
    TILE_FLOATS = max(ROWS * PITCH, 1)
    CHUNK = min(-(-ROWS * COLS // THREADS), MAX_CHUNK)  # staged input elements per thread and chunk
    CHUNKS = -(-ROWS * COLS // (THREADS * CHUNK))
    OUT_CHUNK = min(-(-TH * TW // THREADS), MAX_CHUNK)
    OUT_CHUNKS = -(-TH * TW // (THREADS * OUT_CHUNK))
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
                tile = alloc(f32, [TILE_FLOATS])  # the input tile and its halo, zero in the padding
                wts = alloc(f32, [KH * KW])
                res = alloc(f32, [RES_FLOATS])  # the accumulators, rows RES_PITCH apart (staged configs)
                n = blk / (TILES * O)
                o = blk / TILES % O
                oh0 = blk % TILES / TILES_W * TH
                ow0 = blk % TILES_W * TW
                ci = o / MULT
                ih0 = oh0 * SH - PH
                iw0 = ow0 * SW - PW
                if not DIRECT:  # (decided at translation) stage the input tile and the weights
                    for tid in threads():
                        # a thread's elements in chunks of CHUNK: the chunk's loads are all issued before its
                        # stores (a load in flight per thread is far from what hides the memory's latency)
                        buf = register_tensor(f32, [CHUNK])
                        for c in range(CHUNKS):
                            for k in grid(CHUNK, attrs=U):
                                i = tid + (c * CHUNK + k) * THREADS
                                ih = ih0 + i / COLS
                                iw = iw0 + i % COLS
                                v: f32 = 0.0
                                if i < ROWS * COLS and ih >= 0 and ih < H and iw >= 0 and iw < W:
                                    v = x_value(n, ci, ih, iw)
                                buf[k] = v
                            for k in grid(CHUNK, attrs=U):
                                i = tid + (c * CHUNK + k) * THREADS
                                if i < ROWS * COLS:
                                    tile[i / COLS * PITCH + i % COLS] = buf[k]
                        for i in range(tid, KH * KW, THREADS):
                            wts[i] = w_value(o, i / KW, i % KW)
                    if CUDA:
                        syncthreads()
                for tid in threads():
                    for item in range(tid, GROUPS * TPR, THREADS):
                        r0 = item / TPR * VH
                        j0 = item % TPR * VW
                        oh = oh0 + r0
                        ow = ow0 + j0
                        if oh < OH and ow < OW:
                            acc = register_tensor(f32, [VH * VW])
                            seg = register_tensor(f32, [SEG])
                            wr = register_tensor(f32, [KH * KW])
                            for j in grid(VH * VW, attrs=U):
                                acc[j] = 0.0
                            for i in grid(KH * KW, attrs=U):
                                if DIRECT:
                                    wr[i] = w_value(o, i / KW, i % KW)
                                else:
                                    wr[i] = wts[i]
                            for off, uses in ROW_USES:  # (unrolled at translation) the input rows
                                if DIRECT:  # from global memory
                                    ih = ih0 + r0 * SH + off
                                    iw = iw0 + j0 * SW
                                    for e in grid(SEG, attrs=U):
                                        x: f32 = 0.0
                                        if ih >= 0 and ih < H and iw + e >= 0 and iw + e < W:
                                            x = x_value(n, ci, ih, iw + e)
                                        seg[e] = x
                                else:
                                    base = (r0 * SH + off) * PITCH + j0 * SW
                                    for e in grid(SEG, attrs=U):
                                        seg[e] = tile[base + e]
                                for dv, kh in uses:  # (unrolled at translation) the outputs reading the row
                                    for kw in grid(KW, attrs=U):
                                        wv = wr[kh * KW + kw]
                                        for j in grid(VW, attrs=U):
                                            acc[dv * VW + j] += seg[j * SW + kw * DW] * wv
                            if STAGED:
                                for dv, j in grid(VH, VW, attrs=U):
                                    res[(r0 + dv) * RES_PITCH + j0 + j] = acc[dv * VW + j]
                            else:
                                for dv, j in grid(VH, VW, attrs=U):
                                    if oh + dv < OH and ow + j < OW:
                                        out[out_index(n, o, oh + dv, ow + j)] = epilogue(n, o, oh + dv, ow + j,
                                                                                         acc[dv * VW + j])
                if STAGED:  # the epilogue with consecutive threads on consecutive outputs
                    if CUDA:
                        syncthreads()
                    for tid in threads():
                        for c in range(OUT_CHUNKS):  # (unrolled chunks: the epilogue's loads, if any, overlap)
                            for k in grid(OUT_CHUNK, attrs=U):
                                i = tid + (c * OUT_CHUNK + k) * THREADS
                                oh = oh0 + i / TW
                                ow = ow0 + i % TW
                                if i < TH * TW and oh < OH and ow < OW:
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


def _tile(spec: DepthwiseSpec, vw: int, cap_w: int, threads: int, vh: int = 1, staged: bool = False,
          direct: bool = False) -> DepthwiseConfig:
    """Tiles of about ``cap_w`` columns (the whole row when it is narrower) and ``threads`` threads that split
    the plane evenly, rows in groups of ``vh`` (the most groups under the thread budget whose tiles overrun
    the plane by at most an eighth of its rows, or failing that the least overrun)."""
    tw = _balanced(spec.ow, cap_w, vw)
    if vh == 1:
        th = _balanced(spec.oh, max(1, threads // (tw // vw)), 1)
    else:
        groups = range(1, max(1, min(threads // (tw // vw), -(-spec.oh // vh))) + 1)
        overrun = {g: -(-spec.oh // (g * vh)) * g * vh - spec.oh for g in groups}
        fits = [g for g in groups if overrun[g] * 8 <= spec.oh]
        th = (max(fits) if fits else min(groups, key=lambda g: (overrun[g], -g))) * vh
    return DepthwiseConfig(th, tw, vw, staged, vh, direct)


def _fit(v: int, extent: int) -> int:
    """``v`` halved until it is at most ``extent`` (outputs per thread along an axis of ``extent`` outputs)."""
    while v > 1 and v > extent:
        v //= 2
    return v


def _outputs_per_thread(spec: DepthwiseSpec, most: int) -> int:
    """``most`` halved while the layer's outputs would give fewer than THREADS_PER_SM threads an SM (at least 1).

    The level-2 winners of efficientnet_b0's 5x5 windows at batch 1 on the H100 (132 SMs): 240x28x28 (188K
    outputs) 4 a thread, 672x14x14 and 480x14x14 (131K, 94K) 4 as 2 x 2, 1152x7x7 (56K) 2, 672x7x7 at stride
    2 (33K) 1; 8x384x14x14 7x7 (602K) kept 8. Each keeps at least ~26K threads, about 200 an SM."""
    threads = THREADS_PER_SM * sm_count()
    outputs = spec.n * spec.o * spec.oh * spec.ow
    v = most
    while v > 1 and outputs // v < threads:
        v //= 2
    return v


def default_config(spec: DepthwiseSpec) -> DepthwiseConfig:
    """Level 0, from the level-2 winners on the H100 (float16, CUDA-graph times against cuDNN; the unstaged
    configs won every shape: the staging barrier and shared-memory round trip cost more than the strided
    stores they avoid):

    - rows of at most 64 outputs: a tile as wide as the row, 4 outputs per thread (8 for windows of 5x5 and
      more), about 256 threads: 8x96x56x56 3x3 14x56v4 9.5 us (cuDNN 8.8, the old default 14x28v4s 14.0);
      8x384x14x14 7x7 14x16v8 7.6 us (cuDNN 26.1; 14x14v2s 11.3);
    - wider rows: tiles up to 128 outputs wide (the row of 112x112), 16 rows, a column of 8 outputs per thread
      (about 256 threads; its input tile's halo 14%, a 16x16 tile's 27%): 32x32x112x112 3x3 16x112v1h8 29.8 us,
      1.19x cuDNN's 35.5 (stop 18's level-2 winner; the previous default 16x16v4 0.75x);
    - stride 2 or more: no input tile (``direct``), a thread reads its windows through L1 (the staged tile of a
      stride-2 window holds ~4 inputs per output, loaded with index arithmetic and a barrier before any
      compute), a column of 2 outputs per thread (4 for 5x5 and larger windows: the rows between them are
      read once): the auto-scheduler's thread per output ran 8x144x56x56 3x3 s2 in 5.8 us against the tile's
      best 9.1 (14x28v2) and cuDNN's 10.1;
    - staged only when the epilogue reads a tensor per output (a residual add: its reads then coalesce).

    Those times predate the chunked staging loop: nvcc then unrolled the loop of 16x16v4 alone among the
    112x112 candidates (5 iterations; the others issued one load at a time), which may be why it won there.

    Windows of 5x5 and more take fewer outputs per thread where the layer has few outputs (``_outputs_per_thread``:
    halved while there would be fewer than ~200 threads an SM): efficientnet_b0's layers at batch 1 took 1-4
    at level 2 where 8 (4 at stride 2) was up to 1.45x slower.
    """
    big = max(spec.kh, spec.kw) >= 5
    staged = spec.reads_residual
    if max(spec.stride) > 1:
        v = _outputs_per_thread(spec, 4) if big else 2
        return _tile(spec, 1, 64, 256, vh=_fit(v, spec.oh), staged=staged, direct=True)
    vw = _fit(_outputs_per_thread(spec, 8) if big else 4, spec.ow)
    if spec.ow <= 64:
        return _tile(spec, vw, 64, 256, staged=staged)
    return _tile(spec, 1, 128, 256, vh=_fit(8, spec.oh), staged=staged)


def _cuda_candidates(spec: DepthwiseSpec) -> List[DepthwiseConfig]:
    """Level-1 and level-2 candidates, best guesses first (level 1 takes the first 8 that fit)."""
    first = default_config(spec)
    vw = _fit(8 if max(spec.kh, spec.kw) >= 5 else 4, spec.ow)
    kh = spec.kh
    level1 = [
        first,
        _tile(spec, vw, 64, 256),  # rows of <= 64 outputs: 14x56v4, 14x16v8 (the stride-1 winners)
        _tile(spec, 2, 64, 256),  # 14x28v2 (the staged tile's best at 8x144x56x56 s2)
        _tile(spec, 4, 16, 64),  # 16x16v4 (the best at 112x112)
        # a column of outputs per thread: a warp's tile reads are consecutive words (VW outputs of a row per
        # thread read VW-way conflicting banks), its stores coalesce unstaged
        _tile(spec, 1, 64, 256, vh=4),
        _tile(spec, 1, 128, 512, vh=8),  # 112x112: 24x112v1h8, its input tile 26x114 (halo 10%, 16x16's 27%)
        _tile(spec, 1, 64, 256, vh=2, direct=True),
        _tile(spec, 1, 64, 256, vh=4, direct=True),
    ]
    level2 = [
        _tile(spec, 2, 64, 256, vh=2, direct=True),
        _tile(spec, 1, 64, 128, direct=True),  # the auto-scheduler's thread per output
        _tile(spec, 2, 64, 256, direct=True),
        _tile(spec, 1, 64, 512, vh=8),  # 112x112: 56x56v1h8
        _tile(spec, 2, 64, 256, vh=4),
        _tile(spec, 2, 64, 256, vh=kh),  # a column of a window's height: 7x7 on 14x14 in two row groups
        _tile(spec, vw, 64, 256, vh=2),
        _tile(spec, 1, 128, 256, vh=8),  # 112x112: 16x112v1h8 (the default of rows wider than 64)
        _tile(spec, 1, 32, 128, vh=4),
        _tile(spec, 2, 128, 512, vh=8),  # 112x112: 56x112v2h8 (56 x 7 threads)
        _tile(spec, 1, 128, 1024, vh=4),  # 112x112: 28x112v1h4 (112 x 7 threads)
        replace(first, staged=not first.staged),
        _tile(spec, vw, 64, 256, staged=True),
        _tile(spec, 1, 64, 256, vh=2, direct=True, staged=True),
        _tile(spec, 1, 64, 256, vh=4, staged=True),
    ]
    older = [_tile(spec, v, cw, tn, staged=st) for st in (False, True) for v in (4, 2, 8, 1) for cw in (32, 64, 16)
             for tn in (128, 256, 64)]
    return level1 + level2 + older


def space(spec: DepthwiseSpec, target: str, level: int) -> List[DepthwiseConfig]:
    """Level 0: default_config (one config per shape class). Levels 1 and 2: up to 8 and 32 candidates over
    outputs per thread (along rows and columns), tile sizes, staging and direct reads (_cuda_candidates). The
    CPU twin: 8 outputs per thread (g++ vectorizes the accumulation), tiles of about 64 columns."""
    if target == 'cpu':
        first = _tile(spec, 8, 64, 128, staged=True)
        tiles = [_tile(spec, vw, cw, tn, staged=True) for vw in (8, 4, 16) for cw in (64, 32) for tn in (128, 512)]
        cands = [first] + [c for t in tiles for c in (t, replace(t, staged=not t.staged))]
    else:
        cands = _cuda_candidates(spec)
    seen, out = set(), []
    for c in cands:
        if c not in seen and c.vw <= spec.ow and c.vh <= spec.oh and not check_config(spec, c, target):
            seen.add(c)
            out.append(c)
    return out[:1 if level == 0 else 8 if level == 1 else 32]


class DepthwiseTemplate(Template):
    """The depthwise convolution template applied to one task on one target."""

    name = 'depthwise-conv2d-v2'
    config_class = DepthwiseConfig

    def __init__(self, spec: DepthwiseSpec, target: str):
        self.spec = spec
        self.target = target

    @property
    def title(self) -> str:
        return f'depthwise conv2d {self.spec.text()}'

    def space(self, level: int) -> List[DepthwiseConfig]:
        return space(self.spec, self.target, level)

    def source(self, config: DepthwiseConfig, fallback: bool = True, entry: str = 'launch') -> str:
        # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
        # templates through the fusion policy, stays light)
        from hidet.backend.codegen import forwarding_launch, generate

        script = generate(build_script_module(self.spec, config, self.target).ir_module())
        name = kernel_name(self.spec, config, self.target)
        return '\n'.join([script, ''] + forwarding_launch('depthwise conv2d', name, len(self.spec.values.ins) + 1,
                                                          self.spec.task.signature(), entry=entry))

    def candidates_source(self, configs: List[DepthwiseConfig]) -> Optional[str]:
        """CUDA: one library of tuning candidates (config i behind ``launch_<i>``; nvcc's fixed cost once)."""
        # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
        # templates through the fusion policy, stays light)
        from hidet.backend.codegen import merge_libraries

        if self.target != 'cuda':
            return None
        return merge_libraries([self.source(c, entry=f'launch_{i}') for i, c in enumerate(configs)])

    def check(self, config: DepthwiseConfig) -> str:
        return check_config(self.spec, config, self.target)


def explain(task: Task) -> str:
    """'depthwise …' or why ``task`` is not one the template runs."""
    try:
        return f'depthwise {DepthwiseSpec(task).text()}'
    except NotDepthwise as e:
        return str(e)


def find_depthwise_template(task: Task, target: str, arch: Optional[str] = None) -> Optional[DepthwiseTemplate]:
    """The template of ``task`` on ``target``, or None (``arch`` does not matter: one kernel serves sm_80 on)."""
    if target not in TARGETS:
        return None
    try:
        template = DepthwiseTemplate(DepthwiseSpec(task), target)
    except NotDepthwise:
        return None
    return template if template.space(0) else None  # (no config fits: a huge window)
