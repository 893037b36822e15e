"""The fused attention family (template.py)."""
from hidet.kernels.attention.template import AttentionConfig, AttentionTemplate, find_attention_template

__all__ = ['AttentionConfig', 'AttentionTemplate', 'find_attention_template']
