"""Schedulers: Task → IRModule. The auto-scheduler handles any injective or reduction task."""
from .auto import schedule_task
