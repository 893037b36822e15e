"""The depthwise 2-D convolution family (template.py)."""
from hidet.kernels.depthwise.template import (DepthwiseConfig, DepthwiseSpec, DepthwiseTemplate, NotDepthwise,
                                              explain, find_depthwise_template)

__all__ = ['DepthwiseConfig', 'DepthwiseSpec', 'DepthwiseTemplate', 'NotDepthwise', 'explain',
           'find_depthwise_template']
