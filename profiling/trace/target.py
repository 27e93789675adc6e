"""What the target device keeps: the ops whose saved tensors differ on CUDA, as CUDA runs them.

The trace runs on fake *cpu* tensors: a fake cuda device needs a torch built with CUDA (on a
CPU-only build autograd aborts the process in C++ with "PyTorch is not linked with support for
cuda devices" as soon as a cuda tensor needs a gradient). Most ops save the same tensors on
both devices — matmuls, GELU, SiLU, softmax, cross-entropy — but a few dispatch to other
kernels on CUDA, and those keep other tensors for backward. :class:`CudaKernels` (a
``TorchFunctionMode``, active while a ``--target cuda`` trace runs its steps) sends each of
them to the kernel CUDA would run, or to an autograd function that saves what that kernel
saves. Each rule cites the ATen source it follows (torch 2.11-2.13):

- ``rms_norm`` — ``aten/src/ATen/native/layer_norm.cpp``: on CUDA ``rms_norm`` calls the fused
  ``_fused_rms_norm``, whose derivative (``tools/autograd/derivatives.yaml``:
  ``_fused_rms_norm_backward(grad, input, normalized_shape, result1, weight, …)``) keeps the
  input as it came (bf16: 2 B/element) and ``rstd`` (``result1``: one fp32 value per row). On
  the CPU the composite upcasts: an fp32 copy of the input, the fp32 normalized values and
  rstd (8 B/element + 4 B/row for a bf16 input). Measured on an H200 (issue 23): llama-1b bf16,
  batch 4, seq 2048 peaked 4.46 GB below the CPU trace, 6 B × 2 norms × 2048 × 8192 × 22.
  ``rms_norm_symint`` (pytorch/pytorch at commit 3de78ed — the one version of the file the
  code index holds; which release it is was not established, the 2.11 tag itself was not found)
  falls back to ``rms_norm_composite`` when the weight's dtype differs from the input's ("Can not
  dispatch to fused implementation"); torch 2.13 here warns "Mismatch dtype between input and
  weight" and does the same. Then CUDA keeps what the CPU keeps. Under autocast ``rms_norm`` is
  on CUDA's fp32 list (``AT_FORALL_FP32``): input and weight are cast to fp32 first, so the
  fused kernel keeps the fp32 input (4 B/element: a 16-bit q/k projection's output, or a norm
  after a sublayer) and fp32 rstd; an fp32 residual stream is kept as it is.
- ``layer_norm`` — ``aten/src/ATen/native/cuda/layer_norm_kernel.cu``: CUDA's
  ``native_layer_norm`` makes ``mean`` and ``rstd`` in the accumulation type (fp32 for 16-bit
  inputs); the CPU kernel makes them in the input's dtype. Autocast runs ``layer_norm`` in fp32
  on CUDA (``AT_FORALL_FP32`` in ``ATen/autocast_mode.h``).
- ``dropout`` — ``aten/src/ATen/native/Dropout.cpp``: ``is_fused_kernel_acceptable`` sends a
  CUDA input with 0 < p < 1 to ``native_dropout``, which keeps a bool mask (1 B/element,
  derivatives.yaml: ``native_dropout_backward(grad, result1, scale)``); the CPU multiplies by a
  noise tensor in the input's dtype and keeps that (2 or 4 B/element).
- ``scaled_dot_product_attention`` — ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``
  (``select_sdp_backend``), for sm80-sm90 GPUs (A100, H100, H200): flash attention for 16-bit
  q/k/v with equal head dims ≤ 256, no attention mask and a square causal mask (grouped-query
  heads included) — it keeps q, k, v, the output, an fp32 logsumexp (b·h·s) and its RNG state,
  nothing s²-sized (cuDNN attention, which newer torch prefers on sm90 with cuDNN > 9.15, keeps
  the same tensors); memory-efficient attention otherwise when the head dim is a multiple of 8
  (16-bit) or 4 (fp32) — the same, but its logsumexp is padded to a multiple of 32 queries;
  else the math path, which on CUDA upcasts 16-bit q, k, v to fp32 first
  (``_scaled_dot_product_attention_math`` without ``allow_fp16_bf16_reduction_math_sdp``).
  Autocast casts SDPA's inputs to 16 bits on CUDA (``AT_FORALL_LOWER_PRECISION_FP``).
- autocast — ``ATen/autocast_mode.h``: CUDA's autocast runs more ops in fp32 than the CPU's
  (``pow``, ``exp``, ``log``, ``rsqrt``, losses…; ``softmax``, ``sum``, ``cumsum`` with
  ``dtype=float32``): under autocast every other op follows CUDA's lists, cast above autograd
  so the fp32 copies are the ones saved (``profiling/trace/cuda_autocast.py``). HF GPT-2's
  ``gelu_new`` then keeps 16 B per f-wide element where the CPU keeps 10.

Only the trace uses this, under fake tensors; gradients are then shapes only (values are not
computed: nothing reads them). Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from profiling.trace import cuda_autocast

Target = str  # "cuda" | "cpu"
TARGETS = ("cuda", "cpu")
_HALF = cuda_autocast.HALF


def _autocast_dtype() -> torch.dtype | None:
    """The autocast dtype the trace runs under (it stands in for CUDA's autocast), or None."""
    if torch.is_autocast_enabled("cpu"):
        return torch.get_autocast_dtype("cpu")
    return None


def _no_autocast() -> torch.autocast:
    return torch.autocast("cpu", enabled=False)


# ----------------------------------------------------------------------------- norms


class _FusedRMSNorm(torch.autograd.Function):
    """CUDA's ``_fused_rms_norm``: keeps the input as it came and fp32 rstd per row."""

    @staticmethod
    def forward(
        ctx: Any,  # torch's FunctionCtx, given attributes of our own (``shape``)
        x: torch.Tensor,
        shape: tuple[int, ...],
        w: torch.Tensor | None,
        eps: float | None,
    ) -> torch.Tensor:
        rstd = torch.empty_like(_row_view(x, len(shape)), dtype=torch.float32)
        out = torch.empty_like(x) if w is None else torch.empty_like(x, dtype=_out_dtype(x, w))
        ctx.save_for_backward(x, rstd, w)
        ctx.shape = shape
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, rstd, w = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], w is not None and ctx.needs_input_grad[2]]
        gx, gw = torch.ops.aten._fused_rms_norm_backward(grad, x, list(ctx.shape), rstd, w, mask)
        return gx, None, gw, None


def _row_view(x: torch.Tensor, normalized: int) -> torch.Tensor:
    """A view of one element per row of ``x`` (its first ``normalized``-trailing-dims' first
    element): what a per-row statistic is shaped like, and under sequence parallelism sharded
    as ``x`` is (``new_empty`` of a DTensor made every row of the sequence on each rank: 4×
    the fp32 rstd a rank of TP 4 holds, as DTensor's strategy for CUDA's fused norm shards it)."""
    for d in range(x.dim() - normalized, x.dim()):
        x = x.narrow(d, 0, 1)
    return x


def _out_dtype(x: torch.Tensor, w: torch.Tensor) -> torch.dtype:
    return torch.promote_types(x.dtype, w.dtype)


class _LayerNormFp32Stats(torch.autograd.Function):
    """CUDA's ``native_layer_norm``: mean and rstd in fp32 whatever the input's dtype."""

    @staticmethod
    def forward(
        ctx: Any,  # torch's FunctionCtx, given attributes of our own (``shape``)
        x: torch.Tensor,
        shape: tuple[int, ...],
        w: torch.Tensor | None,
        b: torch.Tensor | None,
        eps: float,
    ) -> torch.Tensor:
        rows = tuple(x.shape[: x.dim() - len(shape)]) + (1,) * len(shape)
        mean = x.new_empty(rows, dtype=torch.float32)
        rstd = x.new_empty(rows, dtype=torch.float32)
        ctx.save_for_backward(x, mean, rstd, w, b)
        ctx.shape = shape
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, mean, rstd, w, b = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3]]
        gx, gw, gb = torch.ops.aten.native_layer_norm_backward(
            grad, x, list(ctx.shape), mean, rstd, w, b, mask
        )
        return gx, None, gw, gb, None


def _shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(d) for d in normalized_shape)


def _rms_norm(
    x: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    if _autocast_dtype() is not None:  # CUDA's autocast: rms_norm in fp32 (AT_FORALL_FP32)
        x, weight = cuda_autocast.to_fp32(x), cuda_autocast.to_fp32(weight)
    if weight is not None and weight.dtype != x.dtype:  # CUDA falls back to the composite too
        with _no_autocast():
            return F.rms_norm(x, _shape(normalized_shape), weight, eps)
    with _no_autocast():
        return _FusedRMSNorm.apply(x, _shape(normalized_shape), weight, eps)


def _layer_norm(
    x: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *_: object,
) -> torch.Tensor:
    if _autocast_dtype() is not None:  # CUDA's autocast: layer_norm in fp32 (AT_FORALL_FP32)
        to_fp32 = cuda_autocast.to_fp32
        x, weight, bias = to_fp32(x), to_fp32(weight), to_fp32(bias)
    with _no_autocast():
        return _LayerNormFp32Stats.apply(x, _shape(normalized_shape), weight, bias, eps)


# ----------------------------------------------------------------------------- dropout


def _dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False):
    if not training or not 0 < p < 1 or x.numel() == 0:
        return F.dropout(x, p, training, inplace)
    return torch.native_dropout(x, p, True)[0]


# ----------------------------------------------------------------------------- attention


def sdpa_backend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: object = None,  # only whether there is one matters
    is_causal: bool = False,
    dtype: torch.dtype | None = None,
) -> str:
    """The kernel CUDA's SDPA picks on sm80-sm90: "flash", "efficient" or "math".

    ``q``, ``k``, ``v`` need only ``shape`` (and ``dtype`` unless given): the choice is made
    from shapes and dtypes, as ``select_sdp_backend`` makes it (see the module docstring).
    """
    dtype = dtype if dtype is not None else q.dtype
    hd_q, hd_k, hd_v = q.shape[-1], k.shape[-1], v.shape[-1]
    same_head_dim = hd_q == hd_k == hd_v
    square = q.shape[-2] == k.shape[-2]
    if (
        dtype in _HALF
        and attn_mask is None
        and same_head_dim
        and hd_q <= 256
        and (square or not is_causal)
    ):
        return "flash"
    alignment = 8 if dtype in _HALF else 4
    if hd_q == hd_k and hd_q % alignment == 0 and hd_v % alignment == 0:
        return "efficient"
    return "math"


def _sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    low = _autocast_dtype()
    if low is not None:  # CUDA's autocast: SDPA in 16 bits, a float mask too (T5's bias)
        q, k, v = (t.to(low) if t.dtype == torch.float32 else t for t in (q, k, v))
        if attn_mask is not None and attn_mask.dtype == torch.float32:
            attn_mask = attn_mask.to(low)
    backend = sdpa_backend(q, k, v, attn_mask, is_causal)
    aten = torch.ops.aten
    with _no_autocast():
        if backend == "flash":
            return aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale
            )[0]
        if enable_gqa and k.shape[-3] != q.shape[-3]:  # grouped-query heads: expanded first
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
            v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
        if backend == "efficient":
            grad = any(t.requires_grad for t in (q, k, v))
            return aten._scaled_dot_product_efficient_attention(
                q, k, v, attn_mask, grad, dropout_p, is_causal, scale=scale
            )[0]
        dtype = q.dtype
        if dtype in _HALF:  # CUDA's math path computes 16-bit attention in fp32
            q, k, v = q.float(), k.float(), v.float()
        out = aten._scaled_dot_product_attention_math(
            q, k, v, attn_mask, dropout_p, is_causal, None, scale=scale
        )[0]
        return out.to(dtype)


# ----------------------------------------------------------------------------- the mode

_RULES: dict[Callable[..., object], Callable[..., torch.Tensor]] = {
    F.rms_norm: _rms_norm,
    torch.rms_norm: _rms_norm,
    F.layer_norm: _layer_norm,
    torch.layer_norm: _layer_norm,
    F.dropout: _dropout,
    F.scaled_dot_product_attention: _sdpa,
}


class CudaKernels(TorchFunctionMode):
    """While active, the ops above save what their CUDA kernels save (fake tensors only)."""

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        rule = _RULES.get(func)
        if rule is not None:
            return rule(*args, **kwargs)
        if _autocast_dtype() is not None:  # CUDA's autocast lists, not the CPU's
            how = cuda_autocast.policy(func, args, kwargs)
            if how:
                return cuda_autocast.run(func, args, kwargs, how)
        return func(*args, **kwargs)


def kernels(target: str) -> contextlib.AbstractContextManager[object]:
    """The context a trace's steps run in for ``target``: CUDA's kernels, or nothing (cpu)."""
    return CudaKernels() if target == "cuda" else contextlib.nullcontext()


def describe_rules(target: str) -> str:
    if target == "cpu":
        return "target cpu: every op saves what the CPU kernels save"
    return (
        "target cuda: RMSNorm keeps its input and fp32 rstd (fused kernel), LayerNorm fp32 "
        "mean/rstd, dropout 1-byte masks, SDPA as CUDA picks it (flash / memory-efficient / "
        "math); under autocast CUDA's autocast lists (pow, exp, log, rsqrt, norms, losses … in "
        "fp32; softmax, log_softmax, sum, cumsum, prod with dtype=float32) — as an H100/H200 "
        "keeps them"
    )


__all__ = ["TARGETS", "CudaKernels", "describe_rules", "kernels", "sdpa_backend"]
