"""The tensor-program IR. For now: scalar data types."""
from . import dtypes
from .dtypes import DataType, data_type
