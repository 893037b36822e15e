"""The kernel library of a matmul task built by a template: the Hidet Script kernel, and a ``launch`` entry
point with the task's buffers (kernel ABI) that passes the split-k workspace and, when the buffers are not
aligned for the template's vector accesses, runs the auto-scheduler's kernels instead."""
from __future__ import annotations

from typing import List

from hidet.kernels.matmul.mma import build_script_module

from .config import MmaConfig, kernel_name, tiles, vector_store, vector_width, workspace_floats
from .values import GemmValues
from .spec import GemmSpec


def _generic_lines(spec: GemmSpec) -> List[str]:
    """The auto-scheduler's kernels of the task and ``generic_launch`` running them."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    from hidet.backend.codegen import CodeGen, _guarded_launch, symbol_bindings
    from hidet.ir.schedulers import schedule_task

    module = schedule_task(spec.task, 'cuda')
    gen = CodeGen('cuda')
    lines = ['// the auto-scheduler\'s kernels: run when the buffers are not aligned for the template']
    for f in module.functions:
        if f.fallback is not None:
            lines += gen.function(f.fallback, module.num_inputs, module.symbols)
        lines += gen.function(f, module.num_inputs, module.symbols)
    lines += ['static int32_t generic_launch(void* const* buffers, const int64_t* dims, void* stream) {']
    lines += symbol_bindings(spec.task.name, spec.task.symbols())
    for i, f in enumerate(module.functions):
        lines += _guarded_launch(gen, f, module, i)
    lines += ['  return 0;', '}', '']
    return lines


def template_source(spec: GemmSpec, cfg, fallback: bool = True, entry: str = 'launch') -> str:
    """CUDA source of the library; ``fallback=False`` (tuning candidates) leaves the auto-scheduler's kernels
    out, and misaligned buffers are then an error. ``cfg``: one MmaConfig, or for a symbolic m a dispatch,
    ``[(largest m, config), ..., (None, config)]`` in increasing ranges: the launch entry (named ``entry``)
    runs the kernel of the first range holding the m it computes from the dims."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    from hidet.backend.codegen import CodeGen, declare_kernel, generate, merge_libraries, symbol_bindings

    ranges = [(None, cfg)] if isinstance(cfg, MmaConfig) else list(cfg)
    symbols = spec.task.symbols()
    nin = len(spec.task.inputs)
    total = nin + 1
    kernels, scripts = {}, []  # config → its kernel's name; their Hidet Script modules' sources
    for bound, c in ranges:
        if c not in kernels:
            kernels[c] = kernel_name(spec, c)
            scripts.append(generate(build_script_module(spec, c, bound).ir_module()))
    lines = [merge_libraries(scripts)]
    if fallback:
        lines += _generic_lines(spec)
    workspaces = {}  # split-k config → (floats, tiles) of its largest range (ranges may share a config)
    for bound, c in ranges:
        m = spec.m if bound is None else bound
        if workspace_floats(spec, c, m):
            floats, count = workspaces.get(c, (0, 0))
            workspaces[c] = (max(floats, workspace_floats(spec, c, m)), max(count, tiles(spec, c, m)))
    for c, (floats, count) in workspaces.items():
        lines += [f'__device__ float hidet_mm_workspace_{c.name()}[{floats}];',
                  f'__device__ int hidet_mm_counters_{c.name()}[{count}];  // zero; reset by the last block of a tile',
                  '']
    # alignment the template's vector accesses need
    checks = []
    for op in (spec.a, spec.b):
        if op.vector_ok:
            checks.append(f'hidet::is_aligned(buffers[{op.direct[0]}], 16)')
        elif op.gather is not None:
            checks.append(f'hidet::is_aligned(buffers[{op.gather.pos}], 16)')
    if vector_store(spec):
        values = GemmValues(spec)
        for pos, nbytes in sorted(values.vector_reads(values.epilogue_plan(vector_width(spec))).items()):
            checks.append(f'hidet::is_aligned(buffers[{pos}], {nbytes})')
        checks.append(f'hidet::is_aligned(buffers[{nin}], {vector_width(spec) * spec.out_dtype.nbytes})')
    cond = ' && '.join(dict.fromkeys(checks)) or 'true'
    lines += [f'HIDET_KERNEL_EXPORT int32_t {entry}(void* const* buffers, int32_t num_buffers, const int64_t* dims, '
              'int32_t num_dims, void* stream) {',
              f'  if (num_buffers != {total})',
              f'    return hidet::fail("{spec.task.name}: expected {total} buffers ({nin} inputs, 1 output), got %d", '
              '(int)num_buffers);']
    if symbols:
        lines += [f'  if (num_dims != {len(symbols)} || dims == nullptr)',
                  f'    return hidet::fail("{spec.task.name}: expected {len(symbols)} dimension values '
                  f'({", ".join(symbols)}), got %d", (int)num_dims);']
        lines += symbol_bindings(spec.task.name, symbols)
        lines += [f'  const int64_t m = {CodeGen("cuda").expr(spec.m) if not isinstance(spec.m, int) else spec.m};',
                  '  (void)m;']
    lines += [f'  if ({cond}) {{', '    void* workspace = nullptr;', '    void* counters = nullptr;']
    for bound, c in ranges:
        body = []
        if workspace_floats(spec, c, spec.m if bound is None else bound):
            suffix = c.name()
            body += [f'if (cudaGetSymbolAddress(&workspace, hidet_mm_workspace_{suffix}) != cudaSuccess ||',
                     f'    cudaGetSymbolAddress(&counters, hidet_mm_counters_{suffix}) != cudaSuccess)',
                     f'  return hidet::fail("{spec.task.name}: cannot find the split-k workspace");']
        args = ', '.join([f'buffers[{j}]' for j in range(total)] + ['workspace', 'counters'])
        body += [f'void* args[{total + 2}] = {{{args}}};',
                 f'return {kernels[c]}(args, {total + 2}, dims, {len(symbols)}, stream);']
        if bound is None:
            lines += ['    {'] + ['      ' + b for b in body] + ['    }']
        else:
            lines += [f'    if (m <= {bound}) {{'] + ['      ' + b for b in body] + ['    }']
    lines += ['  }']
    if fallback:
        lines += ['  return generic_launch(buffers, dims, stream);']
    else:
        lines += [f'  return hidet::fail("{spec.task.name}: buffers are not aligned for the matmul template");']
    lines += ['}', ''] + declare_kernel(entry, spec.task.signature())
    return '\n'.join(lines)


def candidates_source(spec: GemmSpec, configs) -> str:
    """One library of tuning candidates (no fallback): config i's kernel behind the entry ``launch_<i>``."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    from hidet.backend.codegen import merge_libraries

    return merge_libraries([template_source(spec, c, False, f'launch_{i}') for i, c in enumerate(configs)])
