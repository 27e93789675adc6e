"""A classifier encoder's (BERT's, RoBERTa's) embeddings going back, the step's last backward op:
every parameter's gradient is made by then, and the gradient of the embeddings' sum is alive
beside the last one made.

transformers 5.24 ``modeling_bert.py``, ``BertEmbeddings.forward``: ``embeddings =
inputs_embeds + token_type_embeddings``, ``embeddings += position_embeddings``, then
``LayerNorm`` and ``dropout``. Going back, the LayerNorm's input gradient (s·b·h in the
residual's dtype) is what the three ``embedding_backward`` ops read; it is freed after the
word embedding's dense V·h gradient, the last of them, is made (read in order from the trace's
live storages: position, token type, then the words' gradient, then the sum's gradient freed).
The loop still holds the loss, and autograd the loss's gradient (backward's ones): 2 scalars in
the log-probabilities' dtype.

Where the optimizer's step makes no state or temporaries (SGD) and the tokens are few, this is
the step's peak: bert-wide (h 256, V 256) with SGD read the optimizer step, 32 × 1 fp32
−32,776 B (s·b·h·4 + 2·4), bf16 −16,388 B, 16 × 1 half that, before; now equal.

Full training (LoRA freezes the embeddings: no gradient reaches them), a classifier's head (a
masked LM ties its decoder to the word embedding, whose gradient is summed at the end),
without kept gradients (the new word gradient added in place to the kept one: not counted
here), optimizer steps in backward, sharding or tensor parallelism. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.ranks import one_gpu_step
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, the embeddings"


def moments(d: Dims | None, cfg: TrainingConfig, held: float) -> list[tuple[str, float, str]]:
    """The moment, or none where it does not apply. ``held``: the weights, gradients, optimizer
    state and the step's inputs, as the optimizer step counts them."""
    if d is None or d.arch != "encoder" or d.extra["encoder"]["pixels"]:
        return []
    if d.extra["encoder"]["head"] == "mlm" or cfg.lora_rank is not None or cfg.grads_kept:
        return []
    if cfg.tp != 1 or cfg.sharded or cfg.optimizer_in_bwd or not one_gpu_step(cfg):
        return []
    e = Bytes.of(cfg.precision)
    p = 4 if e.amp else e.c  # the loss's dtype (encoder._logp_bytes)
    reach = d.s * d.b * d.h * e.r
    value = held + reach + 2 * p
    calc = (
        f"weights, gradients, optimizer and inputs {fmt_bytes(held)} + the embeddings' sum's "
        f"gradient s·b·h·{e.r} {fmt_bytes(reach)} + the loss and its gradient 2·{p} B "
        f"= {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
