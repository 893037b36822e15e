"""How the target intrinsics of Hidet Script (``PrimCall`` nodes, hidet/ir/lowlevel.py) are spelled in C:
a table of templates. ``{0}``, ``{1}``, … are the rendered arguments, ``{T}`` the storage type of the
call's scalar (its pointee for pointer results), other names the call's compile-time ``attrs``.
The CUDA helpers live in cpp/include/hidet/kernel/lang.h."""
from __future__ import annotations

from typing import Dict

# name -> (targets, C template)
PRIMITIVES: Dict[str, tuple] = {
    'cuda_syncthreads': (('cuda',), '__syncthreads()'),
    'cuda_named_barrier_sync': (('cuda',), 'hidet::lang::named_barrier_sync<{barrier}, {threads}>()'),
    'cuda_syncthreads_count': (('cuda',), '__syncthreads_count({0})'),
    'cuda_syncthreads_and': (('cuda',), '__syncthreads_and({0})'),
    'cuda_syncthreads_or': (('cuda',), '__syncthreads_or({0})'),
    'cuda_syncwarp': (('cuda',), '__syncwarp((unsigned)({0}))'),
    'cuda_threadfence': (('cuda',), '__threadfence()'),
    'cuda_threadfence_block': (('cuda',), '__threadfence_block()'),
    'cuda_shfl_sync': (('cuda',), 'hidet::lang::shfl_sync((unsigned)({0}), {1}, (int)({2}), (int)({3}))'),
    'cuda_shfl_up_sync': (('cuda',), 'hidet::lang::shfl_up_sync((unsigned)({0}), {1}, (int)({2}), (int)({3}))'),
    'cuda_shfl_down_sync': (('cuda',), 'hidet::lang::shfl_down_sync((unsigned)({0}), {1}, (int)({2}), (int)({3}))'),
    'cuda_shfl_xor_sync': (('cuda',), 'hidet::lang::shfl_xor_sync((unsigned)({0}), {1}, (int)({2}), (int)({3}))'),
    'cuda_ballot_sync': (('cuda',), '((int32_t)__ballot_sync((unsigned)({0}), {1}))'),
    'cuda_activemask': (('cuda',), '((int32_t)__activemask())'),
    'cuda_atomic_add': (('cuda',), 'hidet::lang::atomic_add({0}, {1})'),
    'cuda_atomic_sub': (('cuda',), 'hidet::lang::atomic_sub({0}, {1})'),
    'cuda_atomic_max': (('cuda',), 'hidet::lang::atomic_max({0}, {1})'),
    'cuda_atomic_min': (('cuda',), 'hidet::lang::atomic_min({0}, {1})'),
    'cuda_atomic_exchange': (('cuda',), 'hidet::lang::atomic_exchange({0}, {1})'),
    'cuda_atomic_cas': (('cuda',), 'hidet::lang::atomic_cas({0}, {1}, {2})'),
    'cuda_dynamic_smem': (('cuda',), '(({T}*)(hidet::lang::dynamic_smem() + ({0})))'),
    'cuda_cp_async': (('cuda',), 'hidet::lang::cp_async<{cp_size}>({0}, {1}, (int)({2}))'),
    'cuda_cp_async_commit_group': (('cuda',), 'hidet::lang::cp_async_commit_group()'),
    'cuda_cp_async_wait_group': (('cuda',), 'hidet::lang::cp_async_wait_group<{n}>()'),
    'cuda_cp_async_wait_all': (('cuda',), 'hidet::lang::cp_async_wait_all()'),
    'cuda_ldmatrix': (('cuda',), 'hidet::lang::ldmatrix<{num}, {trans}>({0}, {1})'),
    'cuda_mma_m16n8k16_f16_f32': (('cuda',), 'hidet::lang::mma_m16n8k16_f16_f32({0}, {1}, {2})'),
    'cuda_mma_m16n8k16_bf16_f32': (('cuda',), 'hidet::lang::mma_m16n8k16_bf16_f32({0}, {1}, {2})'),
    'cuda_mma_m16n8k8_tf32_f32': (('cuda',), 'hidet::lang::mma_m16n8k8_tf32_f32({0}, {1}, {2})'),
    'cuda_dynamic_smem_aligned': (('cuda',), '(({T}*)(hidet::lang::dynamic_smem_aligned<{align}>() + ({0})))'),
    'cuda_wgmma_m64k16': (('cuda',), 'hidet::lang::wgmma_m64k16<{n}, {trans_a}, {trans_b}, {a_lbo}, {b_lbo}>({0}, {1}, {2}, (int)({3}))'),
    'cuda_wgmma_rs_m64k16': (('cuda',), 'hidet::lang::wgmma_m64k16_rs<{n}, {trans_b}, {b_lbo}>({0}, {1}, {2}, (int)({3}))'),
    'cuda_wgmma_fence': (('cuda',), 'hidet::lang::wgmma_fence()'),
    'cuda_wgmma_commit_group': (('cuda',), 'hidet::lang::wgmma_commit_group()'),
    'cuda_wgmma_wait_group': (('cuda',), 'hidet::lang::wgmma_wait_group<{n}>()'),
    'cuda_fence_proxy_async': (('cuda',), 'hidet::lang::fence_proxy_async()'),
    'cuda_cluster_rank': (('cuda',), '(int)hidet::lang::cluster_rank()'),
    'cuda_cluster_sync': (('cuda',), 'hidet::lang::cluster_sync()'),
    'cuda_cluster_load_f32x4': (('cuda',), 'hidet::lang::cluster_load_f32x4({0}, {1}, (uint32_t)({2}))'),
    'cuda_store_pair': (('cuda',), 'hidet::lang::store_pair({0}, (float)({1}), (float)({2}))'),
    'cuda_load_pair': (('cuda',), 'hidet::lang::load_pair({0}, {1})'),
    'cuda_mbarrier_init': (('cuda',), 'hidet::lang::mbarrier_init((uint64_t*)({0}), (int)({1}))'),
    'cuda_fence_mbarrier_init': (('cuda',), 'hidet::lang::fence_mbarrier_init()'),
    'cuda_mbarrier_arrive': (('cuda',), 'hidet::lang::mbarrier_arrive((uint64_t*)({0}))'),
    'cuda_mbarrier_arrive_expect_tx': (('cuda',), 'hidet::lang::mbarrier_arrive_expect_tx((uint64_t*)({0}), (int)({1}))'),
    'cuda_mbarrier_wait': (('cuda',), 'hidet::lang::mbarrier_wait((uint64_t*)({0}), (int)({1}))'),
    'cuda_tma_load_2d': (('cuda',), 'hidet::lang::tma_load({0}, &{1}, (uint64_t*)({2}), {3}, {4})'),
    'cuda_tma_load_3d': (('cuda',), 'hidet::lang::tma_load({0}, &{1}, (uint64_t*)({2}), {3}, {4}, {5})'),
    'cuda_tma_load_im2col_4d': (('cuda',), 'hidet::lang::tma_load_im2col({0}, &{1}, (uint64_t*)({2}), {3}, {4}, {5}, '
                                '{6}, (uint16_t)({7}), (uint16_t)({8}))'),
    'reinterpret_pointer': (('cuda', 'cpu'), '(({T}*)({0}))'),
}
for _builtin in ('threadIdx', 'blockIdx', 'blockDim', 'gridDim'):
    for _axis in 'xyz':
        PRIMITIVES[f'cuda_{_builtin}_{_axis}'] = (('cuda',), f'((int32_t){_builtin}.{_axis})')


def render(name: str, target: str, args, attrs: dict, storage_type: str) -> str:
    if name not in PRIMITIVES:
        raise ValueError(f'codegen: unknown intrinsic {name!r}')
    targets, template = PRIMITIVES[name]
    if target not in targets:
        raise ValueError(f'codegen: the intrinsic {name!r} is not available on {target}')
    return template.format(*args, T=storage_type, **attrs)
