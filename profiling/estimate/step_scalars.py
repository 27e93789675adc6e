"""The few bytes a decoder's step holds beside its tensors, which the trace counts and the
estimate had left out (a Llama with V 128, h 128: our blocks 40-56 B, transformers' 168-184 B
below the trace at the peak):

- **SDPA's random seed and offset**, saved for backward by every layer's attention on CUDA:
  the flash kernel (16-bit) makes a (2,) uint64 seed and a () uint64 offset, 24 B; the
  memory-efficient one (fp32) two () int64, 16 B (pytorch/pytorch v2.13.0
  ``torch/_meta_registrations.py`` ``meta__scaled_dot_product_flash_attention`` and
  ``meta__scaled_dot_product_efficient_attention``, what fake tensors run); the CPU's kernel
  keeps none.
- **transformers' Falcon's key/value split** with fewer key/value heads: two (1,) int64 index
  tensors a layer, 16 B, saved by the indexing (``falcon_index``).
- **The loss's two fp32 scalars**: ``nll_loss``'s output and its ``total_weight`` (saved for
  backward), 8 B, from the loss forward on.
- **transformers' rotary buffers**: the rotary module's ``inv_freq`` and ``original_inv_freq``
  (huggingface/transformers v5.24.0 ``models/llama/modeling_llama.py``
  ``LlamaRotaryEmbedding.__init__``, the same in every rotary model: both ``nn.Buffer``, fp32,
  one entry per two rotated dims), held the whole step: 2·⌈r/2⌉·4 B for r rotated head dims.

Without checkpointing every layer keeps the first two to its backward (``selective``
checkpoints the attention core that saves the seed: none kept); under full checkpointing only the
block being recomputed holds them, beside its other recomputed tensors (``recomputed_scalars``:
16-24 B below the trace at a recomputed block's moment before); compiled blocks' are in the
partitioner's count.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Dims, Term
from profiling.estimate.ledger import Ledger, Line

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

LOSS_SCALARS = 8  # nll_loss's output and total_weight, fp32
PREFIX = "Activations: the step's scalars: "  # every activations line's name here begins so
LOSS = f"{PREFIX}the loss and nll_loss's total weight (fp32)"


def _kept_every_layer(cfg: TrainingConfig) -> bool:
    """Whether every layer keeps its attention's scalars from forward to its backward: without
    checkpointing. Under ``selective`` the attention core is checkpointed (its inputs kept): the
    seed, made and saved inside it, is not kept (``profiling.trace.selective``). Under
    full checkpointing only the block recomputed holds them (``recomputed_scalars``); compiled,
    the partitioner's count holds them (``estimate.compiled``)."""
    return cfg.checkpointing == "none" and not cfg.compile


def sdpa_seed_each(d: Dims, cfg: TrainingConfig) -> int:
    """One attention call's SDPA seed and offset, as ``plans.ring_form.sdpa_seed`` has the
    kernel CUDA picks: 24 B flash (16-bit, head dim <= 256), 16 B memory-efficient (fp32, or
    with a mask: transformers' Falcon passes its own), none from the math kernel, BLOOM's and a
    soft-capped attention (eager), nor on the CPU."""
    if getattr(cfg, "target", "cuda") != "cuda" or cfg.attention != "sdpa":
        return 0
    if d.extra.get("neox", {}).get("alibi") or d.extra.get("attn_softcap"):
        return 0
    from profiling.plans.ring_form import SDPA_SEED, fused, sdpa_seed

    c = 4 if cfg.precision == "fp32" else 2
    if d.extra.get("hf_module") == "falcon":  # its mask: never flash
        return SDPA_SEED if fused(d.hd, c) else 0
    return sdpa_seed(d.hd, c)


def sdpa_rng(d: Dims, cfg: TrainingConfig) -> int:
    """One layer's SDPA seed and offset where every layer keeps them (``_kept_every_layer``)."""
    return sdpa_seed_each(d, cfg) if _kept_every_layer(cfg) else 0


def _falcon_index_each(d: Dims) -> int:
    """transformers' Falcon with fewer key/value heads than query heads splits its fused q/k/v
    with list indices (``FalconAttention._split_heads``: ``qkv[..., [-2], :]`` and ``[-1]``),
    whose two (1,) int64 index tensors the indexing saves, 16 B a call."""
    return 16 if d.extra.get("hf_module") == "falcon" and d.k < d.h else 0


def falcon_index(d: Dims, cfg: TrainingConfig) -> int:
    """Falcon's index tensors where every layer keeps them (``_kept_every_layer``)."""
    return _falcon_index_each(d) if _kept_every_layer(cfg) else 0


def recomputed_scalars(d: Dims, cfg: TrainingConfig) -> int:
    """Under full checkpointing (eager), what the block recomputed in backward saves again
    beside its tensors: its SDPA seed and offset and Falcon's index tensors — one block's, the
    others' discarded with their checkpoints (torch ``utils/checkpoint.py``: the non-reentrant
    checkpoint keeps only the block's inputs and reruns its forward in the backward). Compiled,
    the walked graphs hold them (``estimate.recomputed.by_block``)."""
    if cfg.checkpointing != "full" or cfg.compile:
        return 0
    return sdpa_seed_each(d, cfg) + _falcon_index_each(d)


def rotary_dims(d: Dims) -> int:
    """The head dims transformers' rotary module rotates: the Llama kind's whole head (not
    DeepSeek's MLA), the GPT-NeoX kind's rotary part (none for ALiBi); 0 for our own blocks,
    which keep no such buffers."""
    module = d.extra.get("hf_module")
    if not module or d.extra.get("mla"):
        return 0
    if "neox" in d.extra:
        return int(d.extra["neox"].get("rotary") or 0)
    return d.hd if d.arch == "llama" else 0


def rotary_buffers(d: Dims) -> int:
    """transformers' ``inv_freq`` and ``original_inv_freq``, fp32: 2·⌈r/2⌉·4 B."""
    return 2 * -(-rotary_dims(d) // 2) * 4


def with_buffers(term: Term | None, d: Dims | None, copies: int = 1) -> Term | None:
    """A decoder's step inputs (the token ids and labels) with the rotary buffers beside them:
    both held the whole step, in every moment (``copies``: full DPO's reference has its own)."""
    if term is None or d is None or not (bufs := rotary_buffers(d)):
        return term
    times, nums = (f"{copies}·", f"{copies}·") if copies > 1 else ("", "")
    return Term(
        f"{term.name} and transformers' rotary buffers",
        term.bytes + copies * bufs,
        f"{term.formula} + {times}2·⌈r/2⌉·4 B",
        f"{term.substituted} + {nums}{bufs}",
    )


def add_lines(ledger: Ledger, d: Dims, cfg: TrainingConfig) -> None:
    """A decoder's components: SDPA's seeds and offsets, Falcon's index tensors and the loss's
    scalars (activations), the rotary buffers (buffers)."""
    from profiling.estimate.losses import REFERENCE

    if each := sdpa_rng(d, cfg):
        kernel = "memory-efficient" if each == 16 else "flash"
        ledger.add(Line(f"{PREFIX}SDPA's random seed and offset ({kernel}), every layer",
                        d.L * each, d.L * each, f"L·{each} B", f"{d.L}·{each}",
                        "activations", "activations"))  # fmt: skip
    if each := falcon_index(d, cfg):
        ledger.add(Line(f"{PREFIX}Falcon's key/value index tensors (int64), every layer",
                        d.L * each, d.L * each, "L·2·8 B", f"{d.L}·2·8",
                        "activations", "activations"))  # fmt: skip
    if cfg.loss == REFERENCE and not cfg.dpo:  # DPO's loss: estimate.preference's tape
        ledger.add(Line(LOSS, LOSS_SCALARS, LOSS_SCALARS, "2·4 B", "2·4",
                        "activations", "activations"))  # fmt: skip
    if bufs := rotary_buffers(d):
        r = rotary_dims(d)
        ledger.add(Line("Buffers: transformers' rotary inv_freq and original_inv_freq (fp32)",
                        bufs, bufs, "2·⌈r/2⌉·4 B", f"2·⌈{r}/2⌉·4",
                        "inputs", "buffers"))  # fmt: skip
        if cfg.dpo and cfg.lora_rank is None:  # full DPO's frozen copy has its own
            ledger.add(Line("Buffers: the DPO reference model's rotary buffers (fp32)",
                            bufs, bufs, "2·⌈r/2⌉·4 B", f"2·⌈{r}/2⌉·4",
                            "inputs", "buffers"))  # fmt: skip


__all__ = [
    "LOSS",
    "LOSS_SCALARS",
    "PREFIX",
    "add_lines",
    "recomputed_scalars",
    "rotary_buffers",
    "sdpa_rng",
    "with_buffers",
]
