"""Hidet Script errors point at the user's source: file, line and the construct."""
import os
import re

import pytest
import torch

import hidet
from hidet.lang import HidetScriptError, attr, f32, i32
from hidet.lang.cuda import threadIdx

HERE = os.path.abspath(__file__)


def line_of(marker: str) -> int:
    """The line of this file holding ``# <marker>``."""
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if re.search(rf'# {re.escape(marker)}(\s|$)', line):
                return i
    raise AssertionError(marker)


def expect_error(marker: str, pattern: str):
    """A context expecting a HidetScriptError at the line marked ``# marker`` matching ``pattern``."""
    return pytest.raises(HidetScriptError, match=rf'^{re.escape(HERE)}:{line_of(marker)}: .*{pattern}')


def test_with_statement():
    with expect_error('E-with', "'with' statements are not supported in Hidet Script"):
        @hidet.script
        def kernel(x: f32[4]):
            x[0] = 1.0
            with open('f'):  # E-with
                pass


def test_unsupported_constructs():
    with expect_error('E-lambda', 'lambda expressions are not supported'):
        @hidet.script
        def k1(x: f32[4]):
            y = lambda v: v  # E-lambda  # noqa: E731

    with expect_error('E-try', "'try' statements are not supported"):
        @hidet.script
        def k2(x: f32[4]):
            try:  # E-try
                x[0] = 1.0
            finally:
                pass

    with expect_error('E-comp', 'list comprehensions are not supported'):
        @hidet.script
        def k3(x: f32[4]):
            v = [i for i in range(3)]  # E-comp

    with expect_error('E-else', "'else' clauses of loops are not supported"):
        @hidet.script
        def k4(x: f32[4]):
            for i in range(4):  # E-else
                x[i] = 0.0
            else:
                x[0] = 1.0

    with expect_error('E-print', 'print is not supported'):
        @hidet.script
        def k5(x: f32[4]):
            print(x[0])  # E-print

    with expect_error('E-slice', 'slices are not supported'):
        @hidet.script
        def k6(x: f32[4, 4]):
            x[0, 1:3] = 1.0  # E-slice


def test_undefined_names():
    with expect_error('E-undef', "name 'missing' is not defined"):
        @hidet.script
        def k1(x: f32[4]):
            x[0] = missing  # E-undef  # noqa: F821

    with expect_error('E-block', "name 'y' is not defined .*local to the block"):
        @hidet.script
        def k2(x: f32[4], n: i32):
            if n > 0:
                y = 1.0
            else:
                y = 2.0
            x[0] = y  # E-block


def test_type_errors():
    with expect_error('E-ndim', "'x' has 2 dimensions, indexed with 1"):
        @hidet.script
        def k1(x: f32[4, 4]):
            x[0] = 1.0  # E-ndim

    with expect_error('E-float-index', 'indices must be integers'):
        @hidet.script
        def k2(x: f32[4]):
            x[1.5] = 1.0  # E-float-index

    with expect_error('E-tensor-scalar', "cannot assign a tensor .* to the float32 variable 's'"):
        @hidet.script
        def k3(x: f32[4]):
            s = 0.0
            s = x  # E-tensor-scalar

    with expect_error('E-tensor-add', r"unsupported operand for '\*': a tensor"):
        @hidet.script
        def k4(x: f32[4], y: f32[4]):
            x[0] = x * y  # E-tensor-add

    with expect_error('E-annotation', "parameter 'n' needs a type annotation"):
        @hidet.script
        def k5(x: f32[4], n):  # E-annotation
            x[0] = 1.0

    with expect_error('E-call-args', "'helper' is missing the argument"):
        @hidet.script
        def helper(a: f32, b: f32) -> f32:
            return a + b

        @hidet.script
        def k6(x: f32[4]):
            x[0] = helper(1.0)  # E-call-args

    with expect_error('E-call-type', "argument 'p' of 'takes_ptr' must point to float32"):
        @hidet.script
        def takes_ptr(p: ~f32):
            p[0] = 1.0

        @hidet.script
        def k7(x: i32[4]):
            takes_ptr(~x[0])  # E-call-type


def test_function_level_errors():
    with expect_error('E-kernel-return', "the kernel 'k1' cannot return a value"):
        @hidet.script
        def k1(x: f32[4]) -> f32:  # E-kernel-return
            attr.func_kind = 'cpu_kernel'
            return x[0]

    with expect_error('E-no-block', "the CUDA kernel 'k2' needs attr.cuda_block_dim"):
        @hidet.script
        def k2(x: f32[4]):  # E-no-block
            attr.cuda_grid_dim = 1
            x[threadIdx.x] = 1.0

    with expect_error('E-grid-var', "attr.cuda_grid_dim may only use the function's scalar parameters"):
        @hidet.script
        def k3(x: f32[4], n: i32):
            m = n * 2
            attr.cuda_grid_dim = m  # E-grid-var
            attr.cuda_block_dim = 32

    with expect_error('E-kind', 'attr.func_kind must be one of'):
        @hidet.script
        def k4(x: f32[4]):
            attr.func_kind = 'gpu'  # E-kind

    with expect_error('E-attr', "unknown function attribute 'attr.cuda_grid'"):
        @hidet.script
        def k5(x: f32[4]):
            attr.cuda_grid = 1  # E-attr

    with expect_error('E-max-registers', r'attr.cuda_max_registers takes an int from 24 to 255 \(registers a '
                                         r'thread\), got 300'):
        @hidet.script
        def k8(x: f32[4]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 32
            attr.cuda_max_registers = 300  # E-max-registers

    with expect_error('E-break', "'break' in a loop over a Python sequence"):
        @hidet.script
        def k6(x: f32[4]):
            for v in [1, 2]:
                break  # E-break

    with expect_error('E-cpu-cuda', "the CPU function 'k7' uses CUDA intrinsics"):
        @hidet.script
        def k7(x: f32[4]):  # E-cpu-cuda
            attr.func_kind = 'cpu_kernel'
            x[0] = threadIdx.x


def test_compile_time_errors_of_python_code():
    def helper(v):
        raise ValueError(f'bad size {v}')

    with expect_error('E-helper', 'ValueError: bad size 3'):
        @hidet.script
        def k1(x: f32[4]):
            x[0] = helper(3)  # E-helper


def test_macro_errors():
    @hidet.lang.macro
    def returns(x):
        return x + 1

    @hidet.lang.macro
    def two(a, b):
        a[0] = b

    with pytest.raises(HidetScriptError, match='no return'):
        @hidet.script
        def f1(out: f32[1]):
            attr.func_kind = 'cpu_kernel'
            returns(out)
    with pytest.raises(HidetScriptError, match=r"the macro 'two' takes the arguments \(a, b\)"):
        @hidet.script
        def f2(out: f32[1]):
            attr.func_kind = 'cpu_kernel'
            two(out)


def test_module_errors():
    with hidet.script_module() as module:
        @hidet.script
        def on_gpu(x: f32[4]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 4
            x[threadIdx.x] = 1.0

        @hidet.script
        def on_cpu(x: f32[4]):
            attr.func_kind = 'cpu_kernel'
            x[0] = 1.0
    with pytest.raises(ValueError, match='mixes CUDA and CPU functions'):
        module.ir_module()
    with pytest.raises(ValueError, match='has no functions'):
        hidet.script_module().ir_module()


def test_kernel_failure_reports_the_library_error():
    with hidet.script_module() as module:
        @hidet.script
        def k(x: f32[4]):
            attr.func_kind = 'cpu_kernel'
            x[0] = 1.0
    built = module.build()
    with pytest.raises(hidet.HidetRuntimeError, match='expected 1 tensor/pointer and 0 scalar arguments'):
        built.kernels['k']._compiled(torch.zeros(4), torch.zeros(4))
