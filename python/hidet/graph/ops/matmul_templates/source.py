"""The kernel library of a matmul task built by a template: the Hidet Script kernel, and a ``launch`` entry
point with the task's buffers (kernel ABI) that passes the split-k workspace and, when the buffers are not
aligned for the template's vector accesses, runs the auto-scheduler's kernels instead."""
from __future__ import annotations

from typing import List

from .mma import MmaConfig, kernel_name, tiles, vector_store, workspace_floats
from .spec import GemmSpec


def _generic_lines(spec: GemmSpec) -> List[str]:
    """The auto-scheduler's kernels of the task and ``generic_launch`` running them."""
    from hidet.backend.codegen import CodeGen, _guarded_launch
    from hidet.ir.schedulers import schedule_task

    module = schedule_task(spec.task, 'cuda')
    gen = CodeGen('cuda')
    lines = ['// the auto-scheduler\'s kernels: run when the buffers are not aligned for the template']
    for f in module.functions:
        if f.fallback is not None:
            lines += gen.function(f.fallback, module.num_inputs)
        lines += gen.function(f, module.num_inputs)
    lines += ['static int32_t generic_launch(void* const* buffers, void* stream) {']
    for i, f in enumerate(module.functions):
        lines += _guarded_launch(gen, f, module, i)
    lines += ['  return 0;', '}', '']
    return lines


def template_source(spec: GemmSpec, cfg: MmaConfig, fallback: bool = True) -> str:
    """CUDA source of the library; ``fallback=False`` (tuning candidates) leaves the auto-scheduler's kernels
    out, and misaligned buffers are then an error."""
    from hidet.backend.codegen import generate

    from .mma import build_script_module

    script = generate(build_script_module(spec, cfg).ir_module())
    name = kernel_name(spec, cfg)
    nin = len(spec.task.inputs)
    total = nin + 1
    lines = [script, '']
    if fallback:
        lines += _generic_lines(spec)
    split = cfg.split_k > 1
    if split:
        lines += [f'__device__ float hidet_mm_workspace[{workspace_floats(spec, cfg)}];',
                  f'__device__ int hidet_mm_counters[{tiles(spec, cfg)}];  // zero; reset by the last block of a tile',
                  '']
    # alignment the template's vector accesses need
    checks = []
    for op in (spec.a, spec.b):
        if op.vector_ok:
            checks.append(f'hidet::is_aligned(buffers[{op.direct[0]}], 16)')
        elif op.gather is not None:
            checks.append(f'hidet::is_aligned(buffers[{op.gather.pos}], 16)')
    if vector_store(spec):
        checks.append(f'hidet::is_aligned(buffers[{nin}], 8)')
    cond = ' && '.join(dict.fromkeys(checks)) or 'true'
    lines += ['HIDET_KERNEL_EXPORT int32_t launch(void* const* buffers, int32_t num_buffers, const int64_t* dims, '
              'int32_t num_dims, void* stream) {',
              f'  if (num_buffers != {total})',
              f'    return hidet::fail("{spec.task.name}: expected {total} buffers ({nin} inputs, 1 output), got " + '
              'std::to_string(num_buffers));',
              f'  if ({cond}) {{',
              '    void* workspace = nullptr;',
              '    void* counters = nullptr;']
    if split:
        lines += ['    if (cudaGetSymbolAddress(&workspace, hidet_mm_workspace) != cudaSuccess ||',
                  '        cudaGetSymbolAddress(&counters, hidet_mm_counters) != cudaSuccess)',
                  f'      return hidet::fail("{spec.task.name}: cannot find the split-k workspace");']
    args = ', '.join([f'buffers[{i}]' for i in range(total)] + ['workspace', 'counters'])
    lines += [f'    void* args[{total + 2}] = {{{args}}};',
              f'    return {name}(args, {total + 2}, dims, 0, stream);',
              '  }']
    if fallback:
        lines += ['  return generic_launch(buffers, stream);']
    else:
        lines += [f'  return hidet::fail("{spec.task.name}: buffers are not aligned for the matmul template");']
    lines += ['}', '']
    return '\n'.join(lines)
