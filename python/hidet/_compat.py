"""The original Hidet's module paths, for the code and documents written against it.

The frontends moved from ``hidet.graph.frontend`` (inside the graph layer) to ``hidet.frontend`` (a layer of their
own, above the package's API). ``import hidet.graph.frontend.torch.registry`` and the like still work: an import
hook gives each old name the module of the new one (the same object, so registering, patching and ``del
Registry.registered_functions[...]`` reach the real registry). Nothing is imported until such a name is."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIASES = {'hidet.graph.frontend': 'hidet.frontend'}  # old package -> its new name


class ModuleAliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``old[.sub]`` of ALIASES as the module ``new[.sub]``."""

    def __init__(self):
        self._own_specs = {}

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if self._new_name(fullname) else None

    def create_module(self, spec):
        module = importlib.import_module(self._new_name(spec.name))
        self._own_specs[module.__name__] = module.__spec__  # (the import system sets the alias's next)
        return module

    def exec_module(self, module):
        module.__spec__ = self._own_specs.pop(module.__name__)  # it ran under its own name: it keeps its spec

    @staticmethod
    def _new_name(fullname: str):
        for old, new in ALIASES.items():
            if fullname == old or fullname.startswith(old + '.'):
                return new + fullname[len(old):]
        return None


def install() -> None:
    """Put the hook on ``sys.meta_path`` once per interpreter (``import hidet`` does), first: behind the path
    finder, ``hidet.graph.frontend.torch.registry`` would be found as a file of the aliased package's ``__path__``
    and run a second time as a module of its own (a second, empty registry)."""
    if not any(isinstance(f, ModuleAliases) for f in sys.meta_path):
        sys.meta_path.insert(0, ModuleAliases())
