"""``attr``: function attributes set by assignments at the top of a Hidet Script function::

    attr.func_kind = 'cuda_kernel'          # 'cuda_kernel', 'cuda_device', 'cpu_kernel', 'cpu_internal'
    attr.func_name = 'my_matmul'            # the exported / C name (default: the Python name)
    attr.cuda_grid_dim = (m + 31) // 32, (n + 31) // 32   # int, expression of scalar params, or 1-3 of them
    attr.cuda_block_dim = 32, 32
    attr.cuda_dynamic_smem_bytes = 4 * 1024
    attr.cuda_cluster_dim = 1, 4            # sm_90 thread-block clusters (ints; the grid a multiple of them)
    attr.cuda_max_registers = 112           # registers a thread at most (__maxnreg__: so many blocks fit an SM;
                                            # nvcc spills what does not fit)

``attr.cuda.grid_dim`` / ``attr.cuda.block_dim`` / ``attr.cuda.dynamic_smem_bytes`` are the same names.
The assignments are read by the transpiler (hidet/lang/transpiler.py); at run time of Python the object
does nothing.
"""
from __future__ import annotations

NAMES = ('func_kind', 'func_name', 'cuda_grid_dim', 'cuda_block_dim', 'cuda_dynamic_smem_bytes', 'cuda_cluster_dim',
         'cuda_max_registers')


class AttrNamespace:
    def __init__(self, prefix: str = ''):
        object.__setattr__(self, 'prefix', prefix)

    def __getattr__(self, name: str):
        if name.startswith('__'):
            raise AttributeError(name)
        if self.prefix == '' and name == 'cuda':
            return AttrNamespace('cuda_')
        raise AttributeError(f"attr has no namespace {name!r}; set one of: {', '.join(NAMES)}")

    def __setattr__(self, name, value):
        raise TypeError('attr.* is set inside Hidet Script functions (decorated with @hidet.script)')

    def key(self, name: str) -> str:
        """The attribute named ``name`` in this namespace; raises for unknown ones."""
        full = self.prefix + name
        if full not in NAMES:
            raise AttributeError(f"unknown function attribute 'attr.{full}'; expected one of: {', '.join(NAMES)}")
        return full


attr = AttrNamespace()
