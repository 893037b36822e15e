"""The shape of the code base (docs/design.md): imports flow one way between layers, the C++ runtime
knows nothing of Python or torch, and no source file grows past 800 lines."""
from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'python', 'hidet')

# A module may import, at module level, modules of lower layers and of its own package. Imports inside
# functions may reach up (the runtime hands out hidet Tensors): they run after every layer is loaded.
LAYERS = {
    'hidet._C': 0, 'hidet.option': 0, 'hidet.version': 0, 'hidet.utils': 0,
    'hidet.ir': 1,
    'hidet.backend': 2, 'hidet.lang': 2, 'hidet.runtime': 2,
    'hidet.cuda': 3, 'hidet.kernels': 3,  # (the kernel templates: Hidet Script over the IR and the backend)
    'hidet.drivers': 4,
    'hidet.graph': 5, 'hidet.ops': 5,  # (hidet.ops: the package's name for hidet.graph.ops)
    'hidet': 6,  # the package's API (its __init__), which the frontends use as any user does
    'hidet.frontend': 7,
    'hidet.onnx': 8, 'hidet.torch': 8,  # the frontends' public faces
    'hidet.cli': 9,
    'hidet.__main__': 10,
}


def _layer(module: str):
    """(the longest LAYERS prefix of ``module``, its rank), or None outside hidet."""
    parts = module.split('.')
    for n in range(len(parts), 0, -1):
        prefix = '.'.join(parts[:n])
        if prefix in LAYERS:
            return prefix, LAYERS[prefix]
    return None


def _targets(node, module: str, is_package: bool):
    """The modules an import statement reads: ``from hidet import option`` (or ``from . import x``) reads
    hidet.option, not the package."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = module if is_package else module.rsplit('.', 1)[0]
        base = package.split('.')[:len(package.split('.')) - node.level + 1]
        target = '.'.join(base + ([node.module] if node.module else []))
    else:
        target = node.module
    if target == 'hidet' or node.module is None:
        return [f'{target}.{a.name}' for a in node.names]
    return [target]


def _module_level_imports(path: str, module: str, is_package: bool):
    for node in ast.parse(open(path).read(), path).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from _targets(node, module, is_package)


def _unexplained_function_imports(path: str, module: str, is_package: bool):
    """(line, target) of each import inside a function that reads a lower layer's module (which a module-level
    import could read) without a comment saying why: on its own first line, or on the line above the run of
    import statements it belongs to."""
    text = open(path).read()
    lines = text.split('\n')
    rank = _layer(module)[1]
    tree = ast.parse(text, path)
    # every statement list inside a function, once (a nested function's lists are inside its parent's too)
    blocks = {id(b): b for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
              for b in ast.walk(fn)}
    for block in blocks.values():
        for field in ('body', 'orelse', 'finalbody'):
            stmts = getattr(block, field, None)
            if not isinstance(stmts, list):
                continue
            for i, node in enumerate(stmts):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if i == 0 or not isinstance(stmts[i - 1], (ast.Import, ast.ImportFrom)):  # a run of imports starts
                    explained = lines[node.lineno - 2].strip().startswith('#')
                for target in _targets(node, module, is_package):
                    found = _layer(target)
                    if found and found[1] < rank and not explained and '#' not in lines[node.lineno - 1]:
                        yield node.lineno, target


def _modules():
    for root, _, files in os.walk(PACKAGE):
        for f in sorted(files):
            if f.endswith('.py'):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, '.')
                is_package = f == '__init__.py'
                yield path, rel[:-len('.__init__')] if is_package else rel, is_package


def test_imports_flow_one_way():
    wrong = []
    for path, module, is_package in _modules():
        src_layer, src_rank = _layer(module)
        for target in _module_level_imports(path, module, is_package):
            found = _layer(target)
            if found is None or found[0] == src_layer or target.startswith(module + '.'):
                continue
            if found[1] >= src_rank:
                wrong.append(f'{module} imports {target} ({src_layer} is layer {src_rank}, {found[0]} {found[1]})')
    assert not wrong, 'imports against the layering (tests/test_structure.py LAYERS):\n' + '\n'.join(wrong)


def test_function_level_imports_of_lower_layers_say_why():
    """An import inside a function that reads a lower layer could be a module-level one: where it stays in the
    function (import time: hidet's import does not load the drivers or Hidet Script; a circle at import), a
    comment says why."""
    wrong = [f'{os.path.relpath(path, ROOT)}:{line} imports {target}'
             for path, module, is_package in _modules()
             for line, target in _unexplained_function_imports(path, module, is_package)]
    assert not wrong, 'move these to module level, or say in a comment why they stay:\n' + '\n'.join(wrong)


def test_layer_check_sees_an_upward_import(tmp_path):
    path = tmp_path / 'mod.py'
    path.write_text('import os\nfrom hidet.graph.tensor import Tensor\nfrom . import sibling\n'
                    'def f():\n    import hidet.torch\n')
    imports = list(_module_level_imports(str(path), 'hidet.ir.mod', False))
    assert imports == ['os', 'hidet.graph.tensor', 'hidet.ir.sibling']  # (not the import inside f)
    assert _layer('hidet.graph.tensor') == ('hidet.graph', 5) and _layer('hidet.ir.expr') == ('hidet.ir', 1)
    assert _layer('hidet.graph.build') == ('hidet.graph', 5) and _layer('numpy') is None
    assert _layer('hidet.torch.dynamo_config') == ('hidet.torch', 8)
    assert _layer('hidet.kernels.matmul.mma')[1] < _layer('hidet.drivers.build_task')[1] < _layer('hidet.graph.ops')[1]


def test_cpp_runtime_knows_nothing_of_python_or_torch():
    include = re.compile(r'#\s*include\s*[<"](Python\.h|pybind11/|torch/|ATen/|c10/)')
    wrong = []
    for folder in ('cpp/runtime', 'cpp/include'):
        for root, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                path = os.path.join(root, f)
                for i, line in enumerate(open(path, errors='replace'), 1):
                    if include.search(line):
                        wrong.append(f'{os.path.relpath(path, ROOT)}:{i}: {line.strip()}')
    assert not wrong, '\n'.join(wrong)


@pytest.mark.parametrize('folder', ['python', 'cpp', 'tests', 'scripts', 'examples'])
def test_no_source_file_past_800_lines(folder):
    long = []
    for root, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(('.py', '.cpp', '.hpp', '.h', '.c', '.cu', '.sh')):
                path = os.path.join(root, f)
                n = sum(1 for _ in open(path, errors='replace'))
                if n > 800:
                    long.append(f'{os.path.relpath(path, ROOT)}: {n} lines')
    assert not long, 'split these files (docs/design.md: past ~800 lines, split):\n' + '\n'.join(long)
