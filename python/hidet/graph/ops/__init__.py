"""hidet.ops: the operator library, imperative on concrete tensors (each op compiles its kernel on
first use; kernels are cached on disk and in the process)."""
from .arithmetic import (
    abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
    cast_ as cast, ceil, clamp, copysign, cos, cosh, divide, equal, erf, erfc, exp, exp2, expm1, floor, floor_divide,
    fmod, gelu, greater, greater_equal, hardswish, hypot, isfinite, isinf, isnan, leaky_relu, less, less_equal, log,
    log1p, log2, log10, logaddexp, logical_and, logical_not_ as logical_not, logical_or, maximum_ as maximum,
    minimum_ as minimum, multiply, neg, not_equal, pow, relu, remainder, round, rsqrt, sigmoid, silu, sin, sinh, sqrt,
    subtract, tan, tanh, trunc, trunc_divide, where,
)
from .matmul import matmul
from .einsum import einsum
from .sort import argsort, kthvalue, median, sort, topk
from .scatter import index_add, index_copy, index_fill, scatter_elements, scatter_nd
from .attention import attention
from .reduce import (
    all, any, argmax, argmin, count_nonzero, cumprod, cumsum, logsumexp, max, mean, min, nanmean, nansum, prod, std,
    sum, var,
)
from .nn import (
    batch_norm, group_norm, layer_norm, local_response_norm, log_softmax, rms_norm, scaled_dot_product_attention,
    softmax,
)
from .conv import conv1d, conv2d, conv2d_channels_last, conv_transpose2d, depthwise_conv2d_channels_last
from .pool import (adaptive_avg_pool2d, adaptive_max_pool2d, adaptive_max_pool_indices, avg_pool2d, max_pool2d,
                   max_pool_indices)
from .resize import resize2d
from .reshape import flatten, reshape, squeeze, unsqueeze
from .indexing import embedding, gather, gather_nd, index_select, take
from .assign import index_assign, index_put
from .transform import (
    broadcast, cat, concat, flip, pad, permute, repeat, split, stack, strided_slice, tile, transpose, tril, triu,
)
from .interpolate import resize
from .grid_sample import affine_grid, grid_sample
from .creation import arange, full
