"""Templates of the attention task (hidet/graph/ops/attention.py), in Hidet Script.

- CUDA, fp16 / bf16 with head sizes that are multiples of 16 up to 128: the tensor-core kernel of mma.py
  (static or symbolic batch and sequence lengths).
- CPU (float32 arithmetic): OpenMP over (batch, query row); a row's scores go to a stack buffer of Sk floats,
  then the softmax and the weighted sum of v's rows.
- CUDA otherwise (float32 arithmetic): a warp per query row, ``rows`` rows per
  block. The block walks the keys in tiles of 32: it stages the tile of k and v in shared memory (as
  float32), each lane scores one key of the tile, and the warp updates its running maximum, running sum and
  output accumulators (lane c holds output columns c, c + 32, ...) online, so the scores never reach memory.
  Head sizes up to 128.

All three address q, k, v and the output rows through the task's views (AttentionShape.base / row_stride).
The finder takes only the bare attention task (AttentionOp is not fused with its neighbours).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

from hidet.ir.dtypes import boolean, float32
from hidet.ir.expr import BufferLoad, SymbolVar, Var, binary, call, cast, convert, select
from hidet.ir.schedulers.lowering import broadcast_indices, flat_index, prod as _prod, row_major_strides, unflatten
from hidet.ir.task import Task
from hidet.ir.type import TensorType
from hidet.kernels.attention import mma, wgmma
from hidet.kernels.template import WGMMA_ARCH, Template, arch_number, sm_count

CPU_MAX_KEYS = 16384  # the row buffer lives on the thread's stack (64 KiB)
CUDA_MAX_HEAD = 128
KEY_TILE = 32  # keys per tile on CUDA: one per lane
LOWEST = -3.4028234663852886e38
MMA_ROWS = (16, 32, 64, 128)  # tensor-core kernel: query rows per block (16 per warp)
MMA_KEYS = (32, 64)  # and keys per tile


@dataclass(frozen=True)
class AttentionConfig:
    rows: int  # query rows per CUDA block (a warp per row, with mma 16 per warp, with wgmma 64 a warpgroup)
    keys: int = 0  # mma / wgmma: keys per tile (0: the fp32 kernel, a tile of 32)
    wgmma: bool = False  # sm_90: the warpgroup kernel (wgmma.py) instead of mma.sync's (mma.py)
    tma: bool = False  # (wgmma) k and v copied by TMA from a producer warp into a ring of buffers

    @property
    def mma(self) -> bool:
        return self.keys > 0

    def name(self) -> str:
        if self.wgmma:
            return f'wg_r{self.rows}_k{self.keys}' + ('_tma' if self.tma else '')
        return f'mma_r{self.rows}_k{self.keys}' if self.mma else f'r{self.rows}'

    def as_dict(self) -> dict:
        return asdict(self)


# the float32 kernel (its level 0) that a tensor-core config's library runs where the buffers are not aligned for
# the tensor-core kernel's vector accesses (AttentionTemplate._alignment_checks), e.g. a torch view at an odd offset
FALLBACK = AttentionConfig(8)


class AttentionShape:
    """The task's sizes, its flat parameters, where each (batch, row) of q, k, v and the output starts in
    them (the task's ``views`` and ``out_dims``: see hidet/graph/ops/attention.py), and the mask's value at
    (batch, i, j) lowered onto them."""

    def __init__(self, task: Task):
        q, k, v = task.inputs[:3]
        self.task = task
        # per q, k, v: (logical shape, element offset, strides) in its input's flat elements
        views = task.attrs.get('views') or (None, None, None)
        self.layouts = [tuple(view) if view is not None else (tuple(t.shape), 0, row_major_strides(t.shape))
                        for t, view in zip((q, k, v), views)]
        (qs, _, _), (ks, _, _), (vs, _, _) = self.layouts
        self.batch_shape = tuple(qs[:-2])
        self.batch = _prod(self.batch_shape)
        self.sq, self.d = qs[-2:]
        self.sk, self.dv = ks[-2], vs[-1]
        self.scale = task.attrs['scale']
        self.causal = task.attrs['causal']
        self.mask_kind = task.attrs['mask']
        self.in_dtype = q.dtype
        self.out_dtype = task.outputs[0].dtype
        logical = self.batch_shape + (self.sq, self.dv)
        self.out_dims = tuple(task.attrs.get('out_dims') or range(len(logical)))
        stored = row_major_strides([logical[d] for d in self.out_dims])
        out_strides = [0] * len(logical)
        for pos, d in enumerate(self.out_dims):
            out_strides[d] = stored[pos]
        self.out_layout = (logical, 0, tuple(out_strides))
        self.ins = [Var(f'in{i}', t.dtype, type=TensorType(t.dtype, [_prod(t.shape)], 'pointer'))
                    for i, t in enumerate(task.inputs)]
        self.out = Var('out', self.out_dtype, type=TensorType(self.out_dtype, [self.batch * self.sq * self.dv],
                                                              'pointer'))

    def base(self, which: int, b):
        """The flat element where row 0 of flat batch entry ``b`` starts: in q, k, v (which = 0, 1, 2) or the
        output (which = 3)."""
        _, offset, strides = self.layouts[which] if which < 3 else self.out_layout
        total = convert(offset)
        for idx, stride in zip(unflatten(b, self.batch_shape), strides[:-2]):
            if not (isinstance(stride, int) and stride == 0):  # (a symbolic stride is an expression)
                total = total + idx * stride
        return total

    def row_stride(self, which: int):
        """Elements between consecutive rows (query or key positions) of q, k, v (0, 1, 2) or the output (3)."""
        return (self.layouts[which] if which < 3 else self.out_layout)[2][-2]

    def aligned(self, elements: int) -> bool:
        """Whether every row of q, k, v and the output starts at a multiple of ``elements`` (for vector copies;
        a row-major layout's strides are multiples of its last extent, symbolic or not)."""
        for shape, offset, strides in self.layouts + [self.out_layout]:
            if all(isinstance(x, int) for x in (offset,) + tuple(strides)):
                if any(x % elements for x in (offset,) + tuple(strides[:-1])):
                    return False
            elif not (offset == 0 and isinstance(shape[-1], int) and shape[-1] % elements == 0):
                return False
        return True

    def text(self) -> str:
        mask = '' if self.mask_kind == 'none' else f', {self.mask_kind} mask'
        return (f'[{self.batch}, {self.sq}, {self.d}] x [{self.batch}, {self.sk}, {self.dv}] {self.in_dtype.name}'
                + mask + (', causal' if self.causal else ''))

    def mask_value(self, b, i, j):
        """The mask's element of query i and key j of flat batch b (its own dtype; a mask is there)."""
        node = self.task.inputs[3]
        idx = broadcast_indices(list(unflatten(b, self.batch_shape)) + [i, j], node.shape)
        return BufferLoad(self.ins[3], flat_index(idx, node.shape), node.dtype)

    @property
    def mask_pairs(self) -> bool:
        """Whether a mask's two elements of keys j and j + 1 (j even) are neighbours at an even offset, so a lane's
        two columns of a score tile read them in one load: the mask has a row per key (not broadcast along
        keys) of an even length (its outer strides are multiples of it)."""
        if self.mask_kind == 'none':
            return False
        last = self.task.inputs[3].shape[-1]
        return isinstance(last, int) and isinstance(self.sk, int) and last == self.sk and last % 2 == 0

    def apply_mask(self, score, m):
        """``score`` after the mask's element ``m`` (mask_value): plus it, or -inf where a bool mask is False."""
        if self.mask_kind == 'bool':
            return select(cast(m, boolean), score, convert(float('-inf'), float32))
        return score + cast(m, float32)

    def masked(self, score, b, i, j, causal: bool = True):
        """``score`` of query i and key j of flat batch b after the mask (and the causal rule, unless
        ``causal`` is False: the caller tests it)."""
        if self.mask_kind != 'none':
            score = self.apply_mask(score, self.mask_value(b, i, j))
        if self.causal and causal:
            score = select(binary('<=', j, i), score, call('hidet_lowest', dtype=float32))
        return score


def _kernel_name(shape: AttentionShape, cfg: AttentionConfig, target: str) -> str:
    return f'attention_{target}_{shape.task.key()[:12]}_{cfg.name()}'


def _cpu_module(shape: AttentionShape, cfg: AttentionConfig):
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, grid, math, register_tensor

    q, k, v = shape.ins[:3]
    out = shape.out
    NB, SQ, SK, D, DV = shape.batch, shape.sq, shape.sk, shape.d, shape.dv
    scale = shape.scale
    name = _kernel_name(shape, cfg, 'cpu')
    Q_RS, K_RS, V_RS, O_RS = (shape.row_stride(w) for w in range(4))

    with hidet.script_module() as module:
        @hidet.script
        def cpu_attention():
            attr.func_kind = 'cpu_kernel'
            attr.func_name = name
            for t in grid(NB * SQ, attrs='p'):
                b = t / SQ
                i = t % SQ
                q_row = shape.base(0, b) + i * Q_RS
                k_base = shape.base(1, b)
                v_base = shape.base(2, b)
                o_row = shape.base(3, b) + i * O_RS
                row = register_tensor(f32, [SK])
                acc = register_tensor(f32, [DV])
                top: f32 = LOWEST
                for j in range(SK):
                    s: f32 = 0.0
                    for e in range(D):
                        s += f32(q[q_row + e]) * f32(k[k_base + j * K_RS + e])
                    s = shape.masked(s * scale, b, i, j)
                    row[j] = s
                    top = math.max(top, s)
                total: f32 = 0.0
                for j in range(SK):
                    p = math.exp(row[j] - top)
                    row[j] = p
                    total += p
                for c in range(DV):
                    acc[c] = 0.0
                for j in range(SK):
                    p = row[j]
                    for c in range(DV):
                        acc[c] += p * f32(v[v_base + j * V_RS + c])
                for c in range(DV):
                    out[o_row + c] = cast(acc[c] / total, shape.out_dtype)

    kernel = module.functions[-1]
    kernel.params[:0] = shape.ins + [out]
    return module


def _cuda_module(shape: AttentionShape, cfg: AttentionConfig):
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, math, register_tensor
    from hidet.lang.cuda import blockIdx, shared_tensor, shfl_sync, shfl_xor_sync, syncthreads, threadIdx

    q, k, v = shape.ins[:3]
    out = shape.out
    NB, SQ, SK, D, DV = shape.batch, shape.sq, shape.sk, shape.d, shape.dv
    ROWS, KT = cfg.rows, KEY_TILE
    THREADS = ROWS * 32
    COLS = -(-DV // 32)  # output columns per lane
    scale = shape.scale
    name = _kernel_name(shape, cfg, 'cuda')
    FULL = 0xFFFFFFFF
    OFFSETS = [16, 8, 4, 2, 1]
    Q_RS, K_RS, V_RS, O_RS = (shape.row_stride(w) for w in range(4))

    with hidet.script_module() as module:
        @hidet.script
        def cuda_attention():
            attr.func_name = name
            attr.cuda_grid_dim = (SQ + (ROWS - 1)) // ROWS, NB
            attr.cuda_block_dim = THREADS
            qs = shared_tensor(f32, [ROWS, D])
            ks = shared_tensor(f32, [KT, D + 1])  # padded: lane l reads row l without bank conflicts
            vs = shared_tensor(f32, [KT, DV])
            tid = threadIdx.x
            lane = tid % 32
            w = tid / 32
            b = blockIdx.y
            k_base = shape.base(1, b)
            v_base = shape.base(2, b)
            i = blockIdx.x * ROWS + w
            ic = i if i < SQ else SQ - 1  # rows past the end compute row SQ - 1 and store nothing
            for e in range(lane, D, 32):
                qs[w, e] = f32(q[shape.base(0, b) + ic * Q_RS + e])
            acc = register_tensor(f32, [COLS])
            for c in range(COLS):
                acc[c] = 0.0
            top: f32 = LOWEST
            total: f32 = 0.0
            for j0 in range(0, SK, KT):
                syncthreads()  # every warp is done with the previous tile
                for x in range(tid, KT * D, THREADS):
                    r = x / D
                    ks[r, x % D] = f32(k[k_base + (j0 + r) * K_RS + x % D]) if j0 + r < SK else 0.0
                for x in range(tid, KT * DV, THREADS):
                    r = x / DV
                    vs[r, x % DV] = f32(v[v_base + (j0 + r) * V_RS + x % DV]) if j0 + r < SK else 0.0
                syncthreads()
                j = j0 + lane
                valid = j < SK
                jc = j if valid else SK - 1  # keys past the end read the mask in bounds, and count for nothing
                s: f32 = 0.0
                for e in range(D):
                    s += qs[w, e] * ks[lane, e]
                s = shape.masked(s * scale, b, ic, jc)
                tile_top = s if valid else LOWEST
                for o in OFFSETS:
                    tile_top = math.max(tile_top, shfl_xor_sync(FULL, tile_top, o))
                new_top = math.max(top, tile_top)
                p: f32 = 0.0
                if valid:
                    p = math.exp(s - new_top)  # a -inf score (bool mask) gives 0
                correction = math.exp(top - new_top)
                tile_sum = p
                for o in OFFSETS:
                    tile_sum += shfl_xor_sync(FULL, tile_sum, o)
                total = total * correction + tile_sum
                top = new_top
                for c in range(COLS):
                    acc[c] = acc[c] * correction
                for jj in range(KT):
                    pj = shfl_sync(FULL, p, jj)
                    for c in range(COLS):
                        if lane + c * 32 < DV:
                            acc[c] += pj * vs[jj, lane + c * 32]
            if i < SQ:
                for c in range(COLS):
                    if lane + c * 32 < DV:
                        out[shape.base(3, b) + i * O_RS + lane + c * 32] = cast(acc[c] / total, shape.out_dtype)

    kernel = module.functions[-1]
    kernel.params[:0] = shape.ins + [out]
    kernel.params += [SymbolVar(name) for name in shape.task.symbols()]  # (batch, sequence lengths)
    return module


class AttentionTemplate(Template):
    """The attention template of one task on one target."""

    name = 'attention-v1'
    config_class = AttentionConfig

    def __init__(self, task: Task, target: str, wgmma: bool = False):
        self.shape = AttentionShape(task)
        self.target = target
        self.wgmma = wgmma  # an sm_90 GPU: the spaces hold the warpgroup kernel's configs where it applies

    @property
    def title(self) -> str:
        return f'attention {self.shape.text()}'

    def space(self, level: int) -> List[AttentionConfig]:
        if self.target == 'cpu':
            return [AttentionConfig(1)]
        if not mma.unsupported(self.shape):
            if level == 0:
                return [self._default()]
            configs = [AttentionConfig(r, k) for r in MMA_ROWS for k in MMA_KEYS
                       if mma.smem_bytes(self.shape, r, k) <= mma.MAX_SMEM]
            if self._takes_wgmma():
                configs += [AttentionConfig(r, k, True) for r in wgmma.WG_ROWS for k in wgmma.WG_KEYS
                            if wgmma.smem_bytes(self.shape, r, k) <= wgmma.MAX_SMEM]
                if not wgmma.tma_unsupported(self.shape):  # each one's TMA twin
                    configs += [AttentionConfig(r, k, True, True) for r in wgmma.WG_ROWS for k in wgmma.WG_KEYS
                                if wgmma.tma_smem_bytes(self.shape, r, k) <= wgmma.MAX_SMEM]
            return configs
        return [FALLBACK] if level == 0 else [AttentionConfig(r) for r in (8, 4, 16)]

    def _takes_wgmma(self) -> bool:
        """Whether the warpgroup kernel (sm_90) can run this task."""
        return self.wgmma and not wgmma.unsupported(self.shape)

    def _default(self) -> AttentionConfig:
        """64 query rows a block (4 warps); key tiles of 64, or 32 for head sizes over 64. Where blocks of 64
        rows fill less than half the SMs, 32 rows and tiles of 32 keys. On the H100 (``python
        scripts/bench_ops.py --attention``, µs): gpt2 at batch 1, 24 blocks of 64 rows, 6.17 in 32 x 32 against
        6.65 in 64 x 64; llama 6.05 against 6.56; vit (48 blocks) 7.90 against 8.13; bert 7.35 against 7.32.
        With more blocks 64 x 64 was the fastest, or within 1.5% of it: gpt2 and bert at batch 8 and 512
        tokens, head size 128 at 1024 tokens, 80 at 300 (120 blocks: 32 x 32 took 13.59 against 12.04). 16 rows
        a block lost up to 10% at batch 1 and 2x at 512 tokens.

        On sm_90, with those larger problems at static sizes, the warpgroup kernel in 64 rows and tiles of 64 keys
        (wg_r64_k64) where it applies: gpt2 at batch 8 and 512 tokens 32.5 against mma.sync's 35.9 (torch's sdpa
        19.6), bert 61.5 against 69.4 (34.5), head size 128 at 1024 tokens 71.0 against 74.2 (31.4). At batch 1
        it won only bert's (6.42 in 64 x 128 against 7.51).

        Where TMA can copy k and v (static sizes, wgmma.tma_unsupported), the TMA twin at every size: 64 rows, 64
        keys, or 128 keys when one tile takes every key of a non-causal problem. H100, µs against the cp.async
        default: gpt2 at batch 8 and 512 tokens 27.7 against 33.5 (sdpa 18.9), bert 58.9 against 60.4 (34.4),
        head size 128 at 1024 tokens, causal, 41.8 against 53.8 (32.2); at batch 1 gpt2 5.15 against mma.sync's
        32 x 32 5.63, vit 6.74 against 7.45, llama 5.17 against 5.62, bert 4.88 in 64 x 128 (5.96 in 64 x 64)
        against 6.88."""
        shape = self.shape
        static = all(isinstance(x, int) for x in (shape.batch, shape.sq, shape.sk))
        if static and self._takes_wgmma() and not wgmma.tma_unsupported(shape):
            one_tile = not shape.causal and shape.sk <= 128 and wgmma.tma_smem_bytes(shape, 64, 128) <= wgmma.MAX_SMEM
            return AttentionConfig(64, 128 if one_tile else 64, True, True)
        if static and -(-shape.sq // 64) * shape.batch < sm_count() // 2:
            return AttentionConfig(32, 32)
        if static and self._takes_wgmma():
            return AttentionConfig(64, 64, True)
        return AttentionConfig(64, 64 if max(shape.d, shape.dv) <= 64 else 32)

    def source(self, config: AttentionConfig, fallback: bool = True) -> str:
        """The library of ``config``'s kernel. A tensor-core config's launch entry runs it where the buffers are
        aligned for its vector accesses (_alignment_checks), else the float32 kernel (``fallback``; without it,
        as tuning candidates are built, misaligned buffers are an error)."""
        # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
        # templates through the fusion policy, stays light)
        from hidet.backend.codegen import forwarding_launch, generate, merge_libraries

        kernel = _kernel_name(self.shape, config, self.target)
        n, dims, signature = len(self.shape.ins) + 1, len(self.shape.task.symbols()), self.shape.task.signature()
        if not config.mma:
            build = _cpu_module if self.target == 'cpu' else _cuda_module
            script = generate(build(self.shape, config).ir_module())
            return '\n'.join([script, ''] + forwarding_launch('attention', kernel, n, signature, dims))
        kernels = wgmma if config.wgmma else mma
        scripts = [generate(kernels.build_module(self.shape, config, kernel).ir_module())]
        if fallback:
            scripts.append(generate(_cuda_module(self.shape, FALLBACK).ir_module()))
        aligned = ' && '.join(f'hidet::is_aligned(buffers[{i}], {nbytes})' for i, nbytes in self._alignment_checks())
        otherwise = (f'return {_kernel_name(self.shape, FALLBACK, "cuda")}(buffers, {n}, dims, {dims}, stream);'
                     if fallback else 'return hidet::fail("attention: q, k, v, the mask or the output is not aligned '
                     f'for the tensor-core kernel {config.name()}");')
        launch = forwarding_launch('attention', kernel, n, signature, dims, guard=(aligned, otherwise))
        return '\n'.join([merge_libraries(scripts), ''] + launch)

    def _alignment_checks(self) -> List[Tuple[int, int]]:
        """(buffer, bytes) of the tensor-core kernels' vector accesses: q, k and v copied 16 bytes at a time
        (cp.async, TMA; their rows start at multiples of 8 elements: mma.unsupported), the output stored two
        elements at a time (store_pair), a mask's pairs of keys read in one load (load_pair)."""
        n = len(self.shape.ins)
        checks = [(0, 16), (1, 16), (2, 16), (n, 2 * self.shape.task.outputs[0].dtype.nbytes)]
        if self.shape.mask_pairs:
            checks.append((3, 2 * self.shape.task.inputs[3].dtype.nbytes))
        return checks

    def check(self, config: AttentionConfig) -> str:
        return '' if config in self.space(2) else f'{config.name()} is not a config of {self.name} on {self.target}'


def find_attention_template(task: Task, target: str, arch: Optional[str] = None) -> Optional[AttentionTemplate]:
    """The template of ``task`` on ``target``, or None. ``arch`` (None: the current options' or the GPU's): on
    sm_90 the spaces hold the warpgroup kernel's configs too."""
    if task.name != 'attention' or 'causal' not in task.attrs:
        return None
    if task.symbols() and target != 'cuda':  # the CPU kernel keeps a row of scores on the stack: static lengths
        return None
    if target == 'cuda' and arch is None:
        # (Hidet Script and the code generator load when a kernel is built: import hidet stays light)
        from hidet.backend.compiler import cuda_arch

        try:
            arch = cuda_arch()
        except Exception:  # noqa: BLE001 - no GPU and no arch set: mma.sync's kernels, as on sm_80
            arch = None
    template = AttentionTemplate(task, target, wgmma=arch is not None and arch_number(arch) == WGMMA_ARCH)
    shape = template.shape
    if not (isinstance(shape.d, int) and isinstance(shape.dv, int)):
        return None
    if target == 'cpu' and shape.sk <= CPU_MAX_KEYS:
        return template
    if target == 'cuda' and shape.d <= CUDA_MAX_HEAD and shape.dv <= CUDA_MAX_HEAD:
        return template
    return None
