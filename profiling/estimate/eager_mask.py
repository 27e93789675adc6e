"""transformers' 4-D causal mask under eager attention, kept by full checkpointing.

transformers 5.24 ``masking_utils.eager_mask`` (what ``create_causal_mask`` returns for
``attn_implementation="eager"``) never skips the causal mask: it builds ``sdpa_mask``'s boolean
one (expanded over the batch) and turns it into a float one with ``torch.where(mask, 0,
finfo(dtype).min)`` — a new b × 1 × s × s tensor in ``inputs_embeds``' dtype (the residual
stream's). GPT-2's ``GPT2Model.forward`` passes it to every block; eager attention only adds it
to the scores (``add`` saves nothing), so without checkpointing it dies as forward returns.
Under full checkpointing every block's checkpoint holds it as an input
(``torch.utils.checkpoint``'s non-reentrant frame keeps the block's arguments for its
recomputation) until the first block's backward: one tensor, alive from forward to the end of
backward like the checkpoints. The estimate missed it: GPT-2 fp32 fully checkpointed eager
−32,768 B at 64 × 2 tokens (b·s²·4), bf16 −16,384 B. transformers' Llama does the same:
``LlamaModel.forward`` builds ``create_causal_mask`` once and hands it to every decoder layer
(``modeling_llama.py``), whose ``eager_attention_forward`` only adds its slice to the scores; under
full checkpointing the layers' checkpoints keep it (also under ``--loss litgpt``, whose modules run
inside transformers' layers): llama-base fp32 −32,768 B (0.988), llama-untied-l4 QLoRA bf16 32 × 1
−2,048 B (b·s²·2) -> equal.

GPT-NeoX's, Phi's and Falcon's models build theirs alike (``GPTNeoXModel.forward``,
``PhiModel.forward``, ``FalconModel.forward``: ``create_causal_mask``) and hand it to every
checkpointed layer: GPT-NeoX LoRA all-linear amp-bf16 eager, fully checkpointed, V 128 h 128,
64 × 2 tokens read −21,248 B (0.995; the mask is 32,768 B) and now reads its non-eager bound,
+11,520 B. Falcon's boolean mask (``neox.once_per_model``) is then freed at once: not counted
under eager. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MODULES = ("gpt2", "llama", "gpt_neox", "phi", "falcon")  # transformers' modules counted here
HELD_IN_FORWARD = ("gpt_neox", "phi", "llama")  # whose model's forward holds its mask as a local


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The mask the checkpointed blocks keep (none without full checkpointing, eager attention
    or one of ``MODULES``)."""
    from profiling.estimate.hf_ops import eager

    # selective: each layer's checkpointed core keeps it as an input (profiling.trace.selective)
    ckpt = cfg.checkpointing == "full" or (cfg.checkpointing == "selective" and not cfg.compile)
    if not ckpt or d.extra.get("hf_module") not in MODULES:
        return []
    if not eager(d, cfg):
        return []
    return [
        Term(
            "eager attention's 4-D causal mask (every checkpointed block's input)",
            d.b * d.s * d.s * e.r,
            f"b·s²·{e.r} B",
            f"{d.b}·{d.s}²·{e.r}",
        )
    ]


def held_in_forward(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """The mask alive while the forward runs its blocks where no checkpoint keeps it (not
    ``--checkpointing full``): ``GPTNeoXModel.forward``/``PhiModel.forward`` hold
    ``causal_mask`` as a local until they return, so a moment inside the last block (its MLP
    going forward) has it beside the block's tensors: b·s²·r. GPT-NeoX LoRA q,v amp-bf16 eager,
    V 128 h 128, 128 × 2 read 0.977 of the trace without it (−131,064 B). ``LlamaModel.forward``
    alike (transformers 5.24 modeling_llama.py: ``causal_mask = create_causal_mask(...)``, a
    local until it returns): Llama LoRA and DoRA q,v,down amp-bf16 eager, V 128 h 128, 256 × 2
    read −131,072 B (0.993-0.994; the mask 524,288 B less the attention's copies the estimate
    counts above the trace's), all-linear −262,144 B."""
    from profiling.estimate.hf_ops import eager

    if cfg.checkpointing == "full" or d.extra.get("hf_module") not in HELD_IN_FORWARD:
        return 0
    return d.b * d.s * d.s * e.r if eager(d, cfg) else 0


__all__ = ["MODULES", "held_in_forward", "once_per_model"]
