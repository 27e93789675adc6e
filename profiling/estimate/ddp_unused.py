"""DDP with ``find_unused_parameters=True`` (``--ddp-find-unused``: the Hugging Face Trainer's
DDP of a transformers model without gradient checkpointing, ``profiling._config_ddp``): what it
holds beside the buckets (``profiling.estimate.ddp``). No torch here.

torch 2.13 ``torch/nn/parallel/distributed.py`` and ``c10d/reducer.cpp``:

- the Reducer's constructor runs ``initialize_local_used_map`` only with find_unused
  (Note [Skip allreducing local_used_map_dev]): ``local_used_map_`` on the host and
  ``local_used_map_dev_ = at::empty({n}, kInt)`` on the parameters' device, one int32 per
  bucketed (trainable) parameter tensor, alive as long as the module — a line of the buckets'
  category, in every moment;
- ``_post_forward`` runs the wrapped module's outputs through ``_DDPSink``, whose forward
  clones each tensor (``_ddp_sink_clone``) while the originals are still the module's output:
  for a transformers model given its labels, the loss and the logits (s·b·V·c) twice, for a
  moment at forward's end. Without a static graph this is every step (the buckets are never
  rebuilt either: [1 MiB, 25 MiB] from the wrap, the same bytes as the rebuilt ones).
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate import activations as acts
from profiling.estimate.ddp import CATEGORY, is_ddp
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.states import lora_tensors
from profiling.units import fmt_bytes

NAME = "DDP's map of the parameters used (find_unused_parameters: int32 per trainable tensor)"
SINK = "end of forward, DDP's sink (each output cloned: find_unused_parameters)"


def finds_unused(cfg: TrainingConfig) -> bool:
    return is_ddp(cfg) and cfg.ddp_find_unused


def add_used_map(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """The device's used map: 4 B per trainable parameter tensor (LoRA: the adapters')."""
    if not finds_unused(cfg):
        return
    tensors = lora_tensors(cfg, shape) if cfg.lora_rank is not None else shape["param_tensors"]
    value = 4 * int(tensors)
    ledger.add(
        Line(
            name=NAME,
            bytes=value,
            unsharded=value,
            formula="trainable tensors · 4 B",
            substituted=f"{tensors} · 4 = {fmt_bytes(value)}",
            group="model states",
            category=CATEGORY,
        )
    )


def _outputs(d: acts.Dims, cfg: TrainingConfig, lines: list[Line]) -> tuple[float, str] | None:
    """The tensors beside the loss a transformers model returns when it computed its loss, in
    the compute dtype c: a decoder's logits (its shifted labels among the ``lines``:
    ``hf_ops.SHIFTED``), T5's logits and its encoder's last hidden state (Seq2SeqLMOutput's
    ``encoder_last_hidden_state``), an encoder's masked-LM or class logits; None for any
    other module (a loss around the model, or a model of our own)."""
    from profiling.estimate.hf_ops import SHIFTED

    c, t = acts.Bytes.of(cfg.precision).c, cfg.tp
    if d.arch == "t5" and cfg.is_hf and d.V is not None:  # d: the decoder's t tokens (t5)
        logits, hidden = d.s * d.b * d.V * c / t, int(d.extra["t5"]["source_seq"]) * d.b * d.h * c
        return (
            2 * logits + hidden,
            f"the logits twice 2·t·b·V·{c} B and the encoder's output s·b·h·{c} B",
        )
    if d.arch == "encoder" and cfg.is_hf:
        enc = d.extra["encoder"]
        if enc["head"] == "mlm" and d.V is not None:
            return 2 * d.s * d.b * d.V * c / t, f"the logits twice 2·s·b·V·{c} B"
        return 2 * d.b * int(enc["labels"]) * c, f"the class logits twice 2·b·labels·{c} B"
    if d.V is not None and any(ln.name.endswith(SHIFTED) for ln in lines):
        return 2 * d.s * d.b * d.V * c / t, f"the logits and DDP's clone of them 2·s·b·V·{c} B"
    return None


def sink_moments(
    d: acts.Dims | None, cfg: TrainingConfig, fwd: float, lines: list[Line]
) -> list[tuple[str, float, str]]:
    """The moment ``_DDPSink`` clones the wrapped module's outputs: a transformers model that
    computed its loss returns it and its other outputs (``_outputs``), each cloned beside
    itself (the step keeps only the loss: ``fwd`` holds none of them); any other module the
    loss alone (4 B, cloned)."""
    if not finds_unused(cfg):
        return []
    out = _outputs(d, cfg, lines) if d is not None else None
    if out is None:
        return [(SINK, fwd + 4, "end of forward + DDP's clone of the loss 4 B")]
    value, said = out
    calc = f"end of forward + {said} {fmt_bytes(value)} + the loss's clone 4 B"
    return [(SINK, fwd + value + 4, calc)]


__all__ = ["NAME", "SINK", "add_used_map", "finds_unused", "sink_moments"]
