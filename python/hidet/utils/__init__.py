"""Small user-facing utilities."""
from .benchmark import benchmark_func
