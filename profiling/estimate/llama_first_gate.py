"""Llama's kind of decoder (transformers' module), trained whole: the first block's MLP gate
going back, the last of the MLP's linears to do so, can hold the step's peak. By then every
later block has gone back (its saved tensors freed) and every gradient but the first block's
attention's, its norms', the gate's and the embedding's is made; the optimizer's state of the
last step is alive. transformers' ``LlamaMLP.forward`` runs ``down_proj(act_fn(gate_proj(x)) *
up_proj(x))`` (models/llama/modeling_llama.py): autograd's engine runs the node made last
first, so up's linear goes back before SiLU's and the gate's.

Two instants of the gate's backward, whichever is higher:

- **Under autocast, its weight's gradient cast.** Autocast casts the fp32 weight to 16 bits
  for the matmul (torch aten/src/ATen/autocast_mode.h, ``cached_cast``), so the matmul's
  weight gradient is 16-bit and the cast's backward (``_to_copy``'s, derivatives.yaml:
  ``grad.to(self.options())``) makes its fp32 copy beside it, h·f·(2 + 4), before
  ``AccumulateGrad`` takes the fp32 one as ``.grad``. Beside them: the gradient along the
  residual and the MLP norm output's gradient, up's and the gate's input gradients summed
  (s·b·h each in the residual's dtype: fp32 under autocast).
- **Inside the gate's matmul going back** (``mm``'s backward, every precision): its output's
  gradient s·b·f, its weight's gradient (16-bit under autocast, else ``.grad`` itself) and its
  input's gradient s·b·h beside its saved input (and under autocast its saved 16-bit weight
  copy) and up's input gradient waiting to be summed.

What the first block still keeps: its attention's and its two norms' saved tensors, one
block's terms as ``memory`` counts them (``block_terms.per_layer``) less its MLP's (the SwiGLU's
and the norm output's copies the gate and up saved, freed as each went back), autocast's
16-bit copies of its attention's weights (their matmuls saved them), RoPE's tables, its
attention's scalars and the loss's. Read off the trace: the Llama toy (h 256, f 1024, V 256,
untied, 16 × 2 tokens) amp-fp16 SGD under Liger's loss 0.993 of it before (−170,784 B), now
equal; h 128, V 128, tied, amp-bf16 8-bit Adam −53,152 B (0.990) before, now equal.

Not here: LoRA (no weight gradient), checkpointing, our own blocks (CUDA's fused norms,
``llama_first_norm``'s scope), a Llama variant's other keys, sharding, tensor parallelism,
optimizer steps in backward, torch.compile. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.step_scalars import LOSS, LOSS_SCALARS, sdpa_rng
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the first block's MLP gate"
_MODULES = ("llama", "mistral")  # transformers' modules of Llama's ops (``llama_end``'s)


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.selective import blocks_keep_saved

    if d is None or d.V is None or d.arch != "llama" or set(d.extra) - {"hf_module"}:
        return False
    if d.extra.get("hf_module") not in _MODULES or cfg.lora_rank is not None:
        return False
    if cfg.tp != 1 or cfg.sharded or cfg.optimizer_in_bwd or cfg.activation_offload:
        return False
    return blocks_keep_saved(cfg) and not cfg.compile and not cfg.dpo and not cfg.kd_teacher


def moments(
    d: Dims | None, cfg: TrainingConfig, held: float, tied: bool, lines: Sequence[Any],
    loss_run: bool,
) -> list[tuple[str, float, str]]:  # fmt: skip
    """The moment, or none where it does not apply. ``held``: the weights, gradients,
    optimizer state and the step's inputs, as the optimizer step counts them; ``tied``: the
    head's gradient waits for the embedding's in autograd's input buffer (the same bytes);
    ``loss_run``: another stack's loss, whose two scalars the loop holds alike."""
    if not _applies(d, cfg):
        return []
    assert d is not None
    from profiling.estimate.block_terms import per_layer

    e = Bytes.of(cfg.precision)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    T, h, f, k, q = d.s * d.b, d.h, d.f, d.k, d.a * d.hd
    attn = 2 * h * q + 2 * h * k  # q, o, k, v: the first block's attention's weights
    embedding = 0 if tied else int(d.V or 0) * h
    not_made = (embedding + attn + 2 * h + h * f) * p  # the gate's own counted where made
    terms = per_layer(d, e, cfg)
    mlp = sum(t.bytes for t in terms if t.name.startswith("MLP ("))
    share = T * h * e.c * (2 if e.amp else 1)  # the gate's and up's input (copies)
    kept = sum(t.bytes for t in terms) - mlp - share
    copies = attn * 2 if e.amp else 0  # autocast's 16-bit copies its attention's matmuls saved
    rope = 2 * d.s * d.hd * e.rope
    scalars = sdpa_rng(d, cfg) + (
        sum(ln.bytes for ln in lines if ln.name == LOSS) or (LOSS_SCALARS if loss_run else 0)
    )
    base = held - not_made + kept + copies + rope + scalars
    # inside the matmul's backward: its output's, weight's and input's gradients, its saved
    # input (and weight copy), up's input gradient (cast to fp32 under autocast) and the
    # residual's gradient
    wgrad = h * f * (2 if e.amp else p)
    at_mm = T * f * e.c + wgrad + 2 * T * h * e.c + 2 * T * h * e.r + h * f * 2 * e.amp
    # autocast: the weight's gradient cast to fp32 beside its 16-bit one; the residual's and
    # the summed norm output's gradients
    at_cast = h * f * (2 + 4) + 2 * T * h * e.r if e.amp else 0
    # before the gate, right after down's backward: the SwiGLU's product going back (mul's two
    # gradients beside down's input gradient, the residual's alive); the first block keeps its
    # MLP's saved tensors but the product (down's input, freed as down's backward returned)
    # and the norm output's copies, and under autocast the gate's and up's 16-bit weight
    # copies; up's gradient is not made yet
    at_mul = (
        mlp - T * f * e.c + share - h * f * p + 3 * T * f * e.c + T * h * e.r
        + h * f * 2 * 2 * e.amp
    )  # fmt: skip
    which, extra = max(
        (("its weight's gradient cast", at_cast), ("its matmul going back", at_mm),
         ("the SwiGLU's product going back", at_mul)),
        key=lambda w: w[1],
    )  # fmt: skip
    value = base + extra
    calc = (
        f"weights, gradients, optimizer and inputs {fmt_bytes(held)} − the gradients not made "
        f"yet (the first block's attention's, its norms', the gate's"
        + ("" if tied else ", the embedding's")
        + f") {fmt_bytes(not_made)} + the first block's saved tensors less its MLP's "
        f"{fmt_bytes(kept)}"
        + (f" + autocast's 16-bit copies of its attention's weights {fmt_bytes(copies)}"
           if copies else "")
        + f" + RoPE's tables and the scalars {fmt_bytes(rope + scalars)}, at {which}: "
        + (
            f"its 16-bit and fp32 weight gradients h·f·(2 + 4) and the residual's and the "
            f"norm output's gradients s·b·2h·{e.r}"
            if which == "its weight's gradient cast"
            else f"its MLP's saved tensors but the product, and the norm output's copies, "
            f"less up's gradient not made yet h·f·{p}, down's input gradient and mul's two "
            f"s·b·3f·{e.c}, the residual's gradient s·b·h·{e.r}"
            + (" and the gate's and up's saved 16-bit weight copies h·f·2·2" if e.amp else "")
            if which == "the SwiGLU's product going back"
            else f"its output's gradient s·b·f·{e.c}, its weight's h·f·{wgrad // (h * f)}, its "
            f"saved input and its input's gradient s·b·2h·{e.c}, up's input's and the "
            f"residual's gradients s·b·2h·{e.r}"
            + (" and its saved 16-bit weight copy h·f·2" if e.amp else "")
        )
        + f" {fmt_bytes(extra)}"
    )  # fmt: skip
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
