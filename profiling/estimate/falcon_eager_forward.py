"""transformers' Falcon fully checkpointed with eager attention: the last block's softmax going
forward can be the step's peak.

transformers 5.24 ``modeling_falcon.py``: ``FalconModel.forward`` runs ``outputs = block(...)``
and reads ``hidden_states = outputs[0]``, so the tuple a block returns —
``FalconDecoderLayer.forward``'s ``(output, attn_weights)``, and in the eager path without ALiBi
``FalconAttention.forward`` returns its softmax's probabilities as ``attn_weights`` — stays
alive until the next block's call returns. Without checkpointing the probabilities are saved
for backward anyway; under full checkpointing nothing else keeps them, yet the block before's
are alive while the last block's attention runs. There, ``attention_scores = query_layer @
key_layer.transpose(-1, -2)``, ``/=`` in place, ``F.softmax(attention_scores + attention_mask,
dtype=hidden_states.dtype)``: three s² tensors at once (the scores, their sum with the mask —
in the wider of the two dtypes — and the probabilities, in the hidden states' dtype), beside the
layer's locals: the norms' outputs (the new decoder architecture computes both first), the fused
q/k/v output and the rotated query, the rotated key and the value (``_split_heads``'s copies:
the new decoder architecture broadcasts key and value to every head first).

Counted from the end of forward, less what is made after the blocks (the loss's
log-probabilities, labels and scalars, the final LayerNorm's tensors, an adapted head's
adapter's). Falcon-40B kind (V 512, h 64, 4 heads, 2 key/value heads) fp32 seq 128 × 2, SGD:
the estimate's highest moment read 0.985 of the trace (−58,600 B; the trace's peak in forward).
Not here: ALiBi (its path saves and drops otherwise), 4-bit bases, autocast (the rotary tables'
fp32 promote the rotated heads), sharding, tensor parallelism. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.step_scalars import LOSS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "forward, the last block's eager attention"


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``fwd``: the end of forward."""
    from profiling.estimate.hf_ops import eager
    from profiling.estimate.lora_bytes import head_adapter
    from profiling.estimate.neox_moments import released

    if d is None or d.V is None or d.extra.get("hf_module") != "falcon":
        return []
    x = d.extra["neox"]
    if cfg.checkpointing != "full" or not eager(d, cfg) or x.get("alibi"):
        return []
    e = Bytes.of(cfg.precision)
    if e.amp or cfg.qlora or cfg.compile or cfg.sharded or cfg.tp != 1:
        return []
    T, h, q, k, c, r = d.s * d.b, d.h, int(x["q_dim"]), d.k, e.c, e.r
    gone, what = released(d, e, cfg)
    gone += head_adapter(d, e, cfg) + sum(ln.bytes for ln in lines if ln.name == LOSS)
    norms = 2 if x["residual"] == "parallel" else 1
    kw = q if x["residual"] == "parallel" else k  # key and value broadcast to every head
    s2 = d.a * d.s * d.s * d.b
    probs = s2 * r  # softmax(dtype=hidden_states.dtype)
    held = s2 * r if d.L > 1 else 0  # the block before's, held by the model's loop
    local = norms * T * h * c + T * (q + 2 * k) * c + T * (q + 2 * kw) * c
    at = s2 * c + s2 * max(c, r) + probs
    value = fwd - gone + held + local + at
    calc = (
        f"end of forward {fmt_bytes(fwd)} − {what}, the loss's scalars {fmt_bytes(gone)}"
        + (f" + the block before's probabilities a·s²·b·{r} {fmt_bytes(held)}" if held else "")
        + f" + the layer's {norms} norm output(s), fused q/k/v output, rotated query and key "
        f"and value s·b·({norms}h + (q + 2k) + (q + 2·{'q' if kw == q else 'k'}))·{c} "
        f"{fmt_bytes(local)} + the scores, their sum with the mask and the probabilities "
        f"a·s²·b·({c} + {max(c, r)} + {r}) {fmt_bytes(at)} = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
