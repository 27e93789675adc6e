"""CUDA's autocast lists, applied above autograd while a `--target cuda` trace runs autocast.

The trace runs on fake *cpu* tensors under *CPU* autocast (``profiling.trace.build``), and the two
devices' autocast policies differ. Both run matmuls, linear layers and SDPA in 16 bits, but CUDA
also runs a list of ops in fp32 that the CPU runs in the input's dtype. The lists are torch's own,
in the header shipped with every wheel (``torch/include/ATen/autocast_mode.h``, torch 2.11-2.13):

- ``AT_FORALL_FP32`` (policy ``fp32``: each 16-bit floating tensor argument is cast to fp32, the
  op runs in fp32): ``acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh
  tan``, ``pow`` (``Tensor_Scalar``, ``Tensor_Tensor``, ``Scalar``: ``x ** 3``, ``x ** y``,
  ``3 ** x``), ``softplus``, ``layer_norm native_layer_norm rms_norm group_norm``,
  ``frobenius_norm nuclear_norm``, ``cosine_similarity``, the losses (``nll_loss``, ``mse_loss``,
  ``kl_div``, …, ``binary_cross_entropy_with_logits``), ``dist pdist cdist renorm logsumexp``
  and ``upsample_*``.
- ``AT_FORALL_FP32_SET_OPT_DTYPE`` (policy ``fp32_set_opt_dtype``: when the first argument is
  an eligible floating tensor and no dtype is given, the op runs with ``dtype=float32``):
  ``prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum``; and
  ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``: ``norm`` gets ``dtype=float32`` appended.

The CPU's lists (``KERNEL_CPU`` in ``aten/src/ATen/autocast_mode.cpp``) are not in the header;
run under CPU autocast in torch 2.13, a bf16 ``exp``, ``pow``, ``softmax``, ``log_softmax``,
``sum``, ``cumsum``, ``layer_norm``, ``rms_norm``, ``rsqrt``, ``log``, ``softplus``,
``logsumexp``, ``norm`` and ``cosine_similarity`` stay bf16; ``prod``, ``mse_loss``,
``nll_loss`` and ``cross_entropy`` come out fp32 (the CPU casts those, as CUDA does).

Autocast on CUDA casts before autograd sees the op (``cached_cast``: the cast is an op of its own,
and the fp32 op saves its fp32 input), then runs the op with autocast excluded. :func:`run` does
the same one level up, in the ``TorchFunctionMode``: it casts the 16-bit arguments of an
``AT_FORALL_FP32`` op (or passes ``dtype=torch.float32`` to a ``SET_OPT_DTYPE`` op whose first
argument is 16-bit and which was given no dtype), then runs it with CPU autocast off. So a bf16
``torch.pow(x, 3.0)`` keeps an fp32 copy of ``x`` (4 B per element, not 2) and returns fp32.

In-place ops (``exp_``, ``x **= 3``) and calls with ``out=`` are not autocast on either device
and are left alone, as are fp32 and integer inputs. Only ops called from the model's own code
are seen: one called inside another Python function (``F.normalize``'s ``norm``) runs as the
CPU runs it. The ops autocast sends to fp32 on the CPU only (``cross_entropy``, ``prod``, pooling,
padding, FFTs, linear algebra) are not undone: for the losses the result is the same (CUDA's
``cross_entropy`` decomposes into the fp32 ``log_softmax`` and ``nll_loss``). Not modelled: for
an fp16 input CUDA's ``softmax``/``log_softmax`` with ``dtype=float32`` reads the 16-bit input
directly (``half_to_float``), where the CPU makes a transient fp32 copy of it first.

Only the trace uses this, under fake tensors. Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

import torch
import torch.nn.functional as F

HALF = (torch.float16, torch.bfloat16)
_T = TypeVar("_T")

# AT_FORALL_FP32, as Python spells them (layer_norm and rms_norm have rules of their own in
# target.py, which apply this policy themselves)
# fmt: off
_FP32_OPS = [
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "native_layer_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "hinge_embedding_loss", "kl_div", "l1_loss",
    "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa", "upsample_trilinear3d",
    "upsample_bicubic2d", "_upsample_bicubic2d_aa",
]
# fmt: on
# AT_FORALL_FP32_SET_OPT_DTYPE, and norm (AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE: the same
# effect, dtype=float32 appended); torch.linalg.norm is made of vector_norm and matrix_norm
_SET_OPT_DTYPE_OPS = ["prod", "softmax", "log_softmax", "cumprod", "cumsum", "sum", "norm"]
_LINALG_SET_OPT_DTYPE = ["vector_norm", "matrix_norm", "norm"]
_C_NN: object = torch._C._nn  # pyright: ignore[reportAttributeAccessIssue]  # not in the stubs
_NAMESPACES: tuple[object, ...] = (torch, torch.Tensor, F, torch.special, _C_NN)


def _callables(names: list[str], spaces: tuple[object, ...]) -> set[Callable[..., object]]:
    found = set()
    for space in spaces:
        for name in names:
            fn = getattr(space, name, None)
            if callable(fn) and not isinstance(fn, ModuleType | type):
                found.add(fn)
    return found


FP32: frozenset[Callable[..., object]] = frozenset(
    _callables(_FP32_OPS, _NAMESPACES)
    | {torch.Tensor.__pow__, torch.Tensor.__rpow__}  # x ** 3 and 3 ** x
)
SET_OPT_DTYPE: frozenset[Callable[..., object]] = frozenset(
    _callables(_SET_OPT_DTYPE_OPS, _NAMESPACES) | _callables(_LINALG_SET_OPT_DTYPE, (torch.linalg,))
)
# Python's way to the upsample_* kernels; "area" runs adaptive_avg_pool instead (not on the list)
_INTERPOLATE = frozenset({F.interpolate, F.upsample})


def _is_half(arg: object) -> bool:
    return isinstance(arg, torch.Tensor) and arg.dtype in HALF


def to_fp32(arg: _T) -> _T:
    """``cached_cast(kFloat, arg)``: a 16-bit floating tensor (or a list of them) in fp32."""
    if _is_half(arg):
        return arg.float()  # type: ignore[return-value]  # a tensor stays a tensor
    if isinstance(arg, list | tuple) and any(_is_half(a) for a in arg):
        # The same container type of the same items: pyright cannot see that it is still _T.
        return type(arg)(to_fp32(a) for a in arg)  # type: ignore[return-value]  # as above
    return arg


def _interpolate_mode(args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    return kwargs.get("mode", args[3] if len(args) > 3 else "nearest")


def policy(func: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    """Which of CUDA's autocast policies applies to this call: "fp32", "fp32_set_opt_dtype" or
    "" (none: the op runs as CPU autocast runs it)."""
    if "out" in kwargs:  # out= variants are not autocast
        return ""
    if func in FP32 or (func in _INTERPOLATE and _interpolate_mode(args, kwargs) != "area"):
        return "fp32" if any(_is_half(a) for a in (*args, *kwargs.values())) else ""
    if func in SET_OPT_DTYPE:
        given = kwargs.get("dtype") is not None or any(isinstance(a, torch.dtype) for a in args)
        return "fp32_set_opt_dtype" if args and _is_half(args[0]) and not given else ""
    return ""


def run(
    func: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object], how: str
) -> object:
    """Run ``func`` as CUDA's autocast runs it under policy ``how`` (see :func:`policy`): the
    arguments cast above autograd, the op itself with autocast off."""
    if how == "fp32":
        args = tuple(to_fp32(a) for a in args)
        kwargs = {k: to_fp32(v) for k, v in kwargs.items()}
    else:
        kwargs = {**kwargs, "dtype": torch.float32}
    with torch.autocast("cpu", enabled=False):
        return func(*args, **kwargs)


__all__ = ["FP32", "SET_OPT_DTYPE", "policy", "run", "to_fp32"]
