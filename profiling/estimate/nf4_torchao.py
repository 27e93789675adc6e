"""torchao's NF4 (``NF4Tensor``), as torchtune's QLoRA runs it (``--torchao-nf4``): its bytes.
The one place for them: the estimate's lines and the trace's stand-in
(``profiling.trace.nf4_torchao``) both take their sizes from here.

Read in torchao 0.18 (``torchao/quantization/quantize_/workflows/nf4/nf4_tensor.py``; torchtune's
``FrozenNF4Linear`` and ``LoRALinear(quantize_base=True)`` call its ``to_nf4(weight)`` with the
defaults, block 64 and scaler block 256). **A weight of n values in dtype w bytes** keeps
(``NF4Tensor.from_tensor``, ``double_quantize_scalers``):

- ``quantized_data``: two 4-bit codes a byte, n/2 B (uint8);
- ``quantized_scalers``: each 64-value block's absmax less their mean, quantized to int8: n/64 B;
- ``quantization_factor``: one per 256 scalers, in the weight's dtype (``256 / (2 · absmax)`` of
  a bf16 absmax stays bf16): w · n/16384 B;
- ``scaler_mean``: a 0-d tensor in the weight's dtype, w B; ``nf4``: the 16-value code, made per
  weight in its dtype, 16 · w B.

torchao asserts n divisible by 64 and the scalers by 256: n a multiple of 16,384.

**Dequantization** (``get_original_weight``, run by ``weight.to(input.dtype)`` in
``LinearNF4``'s forward and again in its backward, which saves the NF4 weight only — never the
input): the high and low codes each as int64 (``(data >> 4).to(torch.long)``: 4n B each, the
uint8 shift freed), each looked up in the code (n/2 values of w B each), the scalers
dequantized (n/64 values, the int8 ÷ factor freed once the mean is added), each half scaled by
the scalers expanded to its length (a copy, freed after the product), then the two halves
stacked into the weight (n · w B). Its locals live until it returns, so at the stack
8n + 3·n·w + n·w/64 B are alive at once (14n + n/32 in bf16: seven bf16 weights); the weight
(n·w B) stays through the matmul. In the same dtype ``.to`` makes no further copy.

No torch here.
"""

from __future__ import annotations

from typing import Any

BLOCK = 64
SCALER_BLOCK = 256
CODE_VALUES = 16
MULTIPLE = BLOCK * SCALER_BLOCK


def nf4_bytes(numel: int, w: int) -> int:
    """Bytes torchao's ``NF4Tensor`` keeps for one weight of ``numel`` values in ``w``-byte
    dtype."""
    return numel // 2 + numel // BLOCK + w * (numel // MULTIPLE) + w + CODE_VALUES * w


def nf4_formula(w: int) -> str:
    """One weight's bytes as ``nf4_bytes`` counts them, in words."""
    return (
        f"n/2 packed + n/64 int8 scalers + {w}·n/16384 factors + {w} (mean) + "
        f"{CODE_VALUES * w} (the NF4 code)"
    )


def dequant_peak(numel: int, w: int) -> int:
    """``get_original_weight``'s highest moment: its locals at the final stack (module doc)."""
    return 8 * numel + 3 * numel * w + numel * w // BLOCK


def dequant_formula(w: int) -> str:
    return f"8n (two int64 code halves) + 3·n·{w} (looked up, scaled, stacked) + n·{w}/64"


def problem(numels: list[int]) -> str | None:
    """Why torchao cannot quantize these weights (None: it can)."""
    bad = sorted({n for n in numels if n % MULTIPLE})
    if not bad:
        return None
    return (
        f"--torchao-nf4 on weights of {', '.join(f'{n:,}' for n in bad[:3])} values: torchao's "
        f"NF4Tensor needs a multiple of {MULTIPLE:,} (blocks of 64, scalers in blocks of 256)"
    )


def moments(
    cfg: Any, shape: dict[str, Any], parts: dict[str, float], recompute: float
) -> list[tuple[str, float, str]]:
    """The block's largest NF4 weight dequantized (``get_original_weight`` at its highest): in
    the last block's forward, or with full checkpointing in a recomputed block's backward. Either
    way the loss's kept tensors and the final norm's are not alive (not yet made, or freed), the
    rest of the end of forward is; in forward the MLP's gate and up outputs and the block's
    residual are in flight beside them, in backward the recomputed block's activations and the
    gradient reaching the block with its residual's copy."""
    linears, h, f = shape.get("block_linear_numels"), shape.get("hidden"), shape.get("ffn")
    if not (cfg.qlora and cfg.torchao_nf4 and linears and h and f):
        return []
    tokens, c = cfg.seq_or_default() * cfg.batch, 2
    n = max(int(x) for x in linears)
    peak = dequant_peak(n, c)
    fwd = sum(parts[k] for k in ("sharded weights", "optimizer", "kept", "activations"))
    norm = tokens * (h * c + 4)  # the final RMSNorm's saved input and fp32 rstd
    base = fwd - parts["log-probs"] - norm
    said = (
        f"end of forward {fwd:,.0f} B − the loss's kept tensors {parts['log-probs']:,.0f} B − "
        f"the final norm's s·b·(h·{c} + 4) {norm:,} B"
    )
    if cfg.checkpointing == "full":
        name = "backward, a recomputed block's largest NF4 weight dequantized"
        extra = recompute + 2 * tokens * h * c
        words = (
            f"a recomputed block's activations {recompute:,.0f} B + the gradient reaching it "
            f"and its residual's 2·s·b·h·{c}"
        )
    else:
        name = "forward, the last block's largest NF4 weight dequantized"
        extra = tokens * (2 * f + h) * c
        words = f"the gate and up outputs and the residual s·b·(2f + h)·{c}"
    value = base + extra + peak
    calc = (
        f"{said} + {words} + get_original_weight at its highest, n = {n:,}: "
        f"{dequant_formula(c)} = {peak:,} B"
    )
    return [(name, value, calc)]


__all__ = [
    "BLOCK",
    "MULTIPLE",
    "SCALER_BLOCK",
    "dequant_formula",
    "dequant_peak",
    "moments",
    "nf4_bytes",
    "nf4_formula",
    "problem",
]
