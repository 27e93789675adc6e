"""A decoder's step inputs, as the trace holds them: the token ids and the labels (int64, one
per token each, held the whole step: the trace files them under "inputs"), and, for
transformers' rotary decoders under full or selective checkpointing, their int64 position ids
(s·8 B: each checkpoint keeps them as an input, one storage for all, filed under "activations").
An encoder's and T5's inputs are ``encoder.step_inputs``'. No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.estimate import distill_states, step_scalars
from profiling.estimate.activations import Dims, Term
from profiling.estimate.ledger import Ledger, Line
from profiling.units import fmt_bytes

# transformers' modules checked against the trace: their decoder layers take position_ids,
# which full checkpointing keeps (one (1, s) int64 storage, every block the same)
_POSITION_IDS_OF = frozenset({"llama", "mistral", "qwen2", "gpt_neox", "phi", "falcon"})

POSITION_IDS = "Activations: transformers' position ids"  # the line's name (estimate.recomputed)


def _decoder(d: Dims | None) -> bool:
    return d is not None and d.arch not in ("encoder", "t5")


def _ids(d: Dims | None) -> Term | None:
    if not _decoder(d):
        return None
    assert d is not None
    return Term("the token ids and labels", 2 * d.s * d.b * 8, "2·s·b·8 B",
                f"2·{d.s}·{d.b}·8")  # fmt: skip


def token_inputs(d: Dims | None, cfg: TrainingConfig) -> Term | None:
    """The token ids and the labels, 2·s·b·8 B, and transformers' rotary buffers
    (``step_scalars``), for the moments: the whole step holds them; None but for a decoder."""
    copies = 2 if cfg.dpo and cfg.lora_rank is None else 1  # full DPO's reference's too
    term = step_scalars.with_buffers(_ids(d), d, copies)
    if term is None or not (bufs := distill_states.teacher_buffers(cfg)):
        return term
    return Term(f"{term.name} and the KD teacher's", term.bytes + bufs,
                f"{term.formula} + 2·⌈r_t/2⌉·4 B", f"{term.substituted} + {bufs}")  # fmt: skip


def add_lines(ledger: Ledger, d: Dims | None, cfg: TrainingConfig) -> None:
    """The components: the token ids and labels (category inputs) and transformers' position
    ids kept under full checkpointing (category activations); the step's scalars and rotary
    buffers (``step_scalars``)."""
    term = _ids(d)
    if term is None or d is None:
        return
    step_scalars.add_lines(ledger, d, cfg)
    ledger.add(Line("Inputs: the token ids and labels (int64)", term.bytes, term.bytes,
                    term.formula, term.substituted, "inputs", "inputs"))  # fmt: skip
    if value := kept_position_ids(d, cfg):
        ledger.add(Line(f"{POSITION_IDS}, kept by every checkpointed block (int64, one storage)",
                        value, value, "s·8 B", f"{d.s}·8",
                        "activations", "activations"))  # fmt: skip


def kept_position_ids(d: Dims, cfg: TrainingConfig) -> int:
    """transformers' position ids every fully checkpointed block keeps (s·8 B), else 0. Under
    ``selective`` each layer's checkpointed attention function keeps them too: the attention
    module hands its ``**kwargs`` (``position_ids`` among them) to it (transformers 5.24
    ``LlamaAttention.forward``), and checkpoint keeps every tensor argument."""
    ckpt = cfg.checkpointing == "full" or (cfg.checkpointing == "selective" and not cfg.compile)
    if ckpt and d.extra.get("hf_module") in _POSITION_IDS_OF:
        return d.s * 8
    return 0


def shifted_labels(d: Dims | None, lines: list[Line]) -> tuple[float, str, float, str]:
    """transformers' ``ForCausalLMLoss`` (huggingface/transformers src/transformers/loss/
    loss_utils.py @ d0fed636, as 5.24.0 installs it): ``labels = pad(labels, (0, 1))`` then
    ``labels[..., 1:].contiguous()``, which nll_loss keeps. At the loss forward the padded
    labels ((s + 1)·b·8 B; b > 1, where the slice is a copy) are still the function's local
    beside the copy; at the loss backward's highest (log-softmax's backward) nll_loss's backward
    has run and released what it kept. Returns (added at the loss forward, its calculation,
    released at the loss backward, its calculation); zeros where transformers' loss is not the
    one the activations hold."""
    from profiling.estimate.hf_ops import SHIFTED

    gone = sum(ln.bytes for ln in lines if ln.name.endswith(SHIFTED))
    if not gone or d is None:
        return 0.0, "", 0.0, ""
    padded = (d.s + 1) * d.b * 8 if d.b > 1 else 0
    pad = f" + the labels padded by one (int64) (s + 1)·b·8 B {fmt_bytes(padded)}"
    gone_calc = f" − the shifted labels, released by nll_loss's backward {fmt_bytes(gone)}"
    return padded, pad if padded else "", gone, gone_calc
