"""What every kernel template provides. Templates are hand-written kernels (Hidet Script) that replace the
auto-scheduler for the tasks they recognize; ``hidet.kernels.find`` picks one for a task from its table.

A template object (what a finder returns for one task) provides:

- ``name``: the template's name and version (part of the tuning cache key);
- ``title``: the task and shapes, for progress bars;
- ``space(level)``: candidate configs of search level 0, 1 or 2 (level 0: one default), the default first;
- ``source(config, fallback=True)``: the CUDA / C++ source of the task's kernel library (the ``launch``
  entry of the kernel ABI); ``fallback=False`` for tuning candidates, which may then leave out the slow
  path for misaligned buffers;
- ``candidates_source(configs)`` (optional): one library holding several tuning candidates, config i behind
  the entry ``launch_<i>`` (a CUDA library's fixed compile cost, its headers and host code, then paid once);
- ``config_to_json(config)`` / ``config_from_json(obj)``: how a chosen config is stored;
- ``points(task, target)`` / ``source_of(configs)``: the (task, target, template) whose configs the tuner
  chooses, and the source from those configs. A template is its own single point by default; a template of
  a task with symbolic dimensions may serve it by ranges of sizes instead, each range tuned as a static task
  at a size of its own, and the library's ``launch`` entry picking the range at run time (a dispatch chosen
  at build time, persisted with the kernels).
"""
from __future__ import annotations

from typing import Any, List, Optional

from hidet.ir.task import Task

DEFAULT_SMS = 132  # an H100 SXM; the GPU's own count when one is visible
WGMMA_ARCH = 90  # wgmma is sm_90's (sm_100 has tcgen05 instead)


def arch_number(arch: str) -> int:
    """90 of 'sm_90' (and of 'sm_90a')."""
    digits = ''.join(ch for ch in arch[len('sm_'):] if ch.isdigit())
    return int(digits) if digits else 0


def sm_count() -> int:
    """The multiprocessors of the current GPU (the templates' defaults fill waves of them), else DEFAULT_SMS."""
    try:
        import torch  # (optional: a machine without torch or a GPU plans for the reference GPU)

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    except Exception:  # noqa: BLE001 - no torch, no GPU: the reference GPU
        pass
    return DEFAULT_SMS


class Template:
    """What templates share: a subclass sets ``name``, ``config_class`` (a dataclass with ``as_dict()``) and
    ``title``, and defines ``space``, ``source`` and ``check``; the default config and the JSON round trip
    of configs come from here."""

    name = 'template'
    config_class: type = object

    def space(self, level: int) -> List[Any]:
        raise NotImplementedError

    def source(self, config, fallback: bool = True) -> str:
        raise NotImplementedError

    def candidates_source(self, configs: List[Any]) -> Optional[str]:
        """One library of tuning candidates (entries ``launch_<i>``), or None: each compiles alone."""
        return None

    def check(self, config) -> str:
        """Why ``config`` cannot run the task ('' when it can)."""
        raise NotImplementedError

    def default(self):
        return self.space(0)[0]

    def points(self, task: Task, target: str) -> List[tuple]:
        return [(task, target, self)]

    def source_of(self, configs: List[Any]) -> str:
        return self.source(configs[0])

    @staticmethod
    def config_to_json(config) -> dict:
        return config.as_dict()

    def config_from_json(self, obj: dict) -> Optional[Any]:
        """The stored config, or None when it is no longer one this template takes for the task."""
        try:
            cfg = self.config_class(**obj)
        except TypeError:
            return None
        return None if self.check(cfg) else cfg
