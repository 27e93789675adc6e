"""DoRA on the LM head (``--lora-targets`` with lm_head, ``--dora``): peft's ``DoraLinearLayer``
on the head Linear (in h, out V), once per model, as ``profiling.estimate.dora`` counts it on a
block's layer with o = V, and the three moments the head's DoRA makes its own.

Read in peft 0.21.2 ``tuners/lora/dora.py`` (``DoraLinearLayer.forward``) and ``variants.py``
(``DoraLinearVariant.forward``), traced op by op on a tiny Llama (T = s·b tokens, a the adapters'
element size, c the compute dtype's):

- kept for backward: the head's base output (the logits before the update, T·V, its dtype) and
  B's output (T·V), both for the magnitude's gradient, and three V-wide vectors (the norm,
  ``mns``, ``mns − 1``); V magnitude values trained;
- forward, at ``(mns − 1)·base + mns·B(A(x))·scale``: the three T·V products (in a: the fp32
  magnitude promotes a 16-bit base output) beside the norm's leftovers, which live until the
  head's forward returns: the identity and A's output on it (16-bit under autocast), B·A (a) and,
  where the base weight's dtype is not a, its cast;
- forward, the norm rebuilt: ``W + scale·B·A`` and ``scale·B·A`` (V·h·a each) on those leftovers;
- backward, before the loss's gradient reaches the head: the logits' gradient in a (an fp32 copy
  where the logits are 16-bit, and its 16-bit cast for the base branch), three T·V products
  (the gradients through ``mns ·`` and ``· scale``, and ``grad · B(x)`` for the magnitude's) and
  a V-wide sum.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims, Term, dims_of
from profiling.estimate.hf_ops import _shifted_labels
from profiling.estimate.lora_bytes import adapter_bytes
from profiling.estimate.step_inputs import token_inputs

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def adapted(d: Dims, cfg: TrainingConfig) -> bool:
    """Whether DoRA adapts the LM head here."""
    return bool(cfg.dora and "lm_head" in cfg.lora_targets and d.V)


def kept(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The head's DoRA tensors kept for backward, once per model."""
    if not adapted(d, cfg):
        return []
    V, sb, tok = int(d.V or 0), d.s * d.b, f"{d.s}·{d.b}"
    a = adapter_bytes(cfg)
    lora = 2 if e.amp else a
    base = 2 if e.amp else e.c
    terms = [
        Term("DoRA on the LM head: its base and B outputs kept for the magnitude",
             sb * V * (base + lora), f"s·b·V·({base} + {lora}) B", f"{tok}·{V}·({base} + {lora})"),
        Term("DoRA on the LM head: the norm, mns and mns − 1", 3 * V * a, f"3·V·{a} B",
             f"3·{V}·{a}"),
    ]  # fmt: skip
    if e.amp and cfg.checkpointing != "full":
        terms.append(Term("DoRA on the LM head: its magnitude has no autocast copy", -V * 2,
                          "−V·2 B", f"−{V}·2"))  # fmt: skip
    return terms


def _leftovers(e: Bytes, cfg: TrainingConfig, h: int, V: int) -> tuple[int, str]:
    """What the head's norm rebuild leaves alive until its forward returns, and its formula."""
    a, r = adapter_bytes(cfg), int(cfg.lora_rank or 0)
    weight = 2 if cfg.precision in ("bf16", "mixed") else 4
    cast = V * h * a if weight != a else 0
    if e.amp:  # the identity's 16-bit cast, A's 16-bit output on it and, traced, two more
        # h·r 16-bit tensors of A's (r 8 and 16: h·r·4 B beside the cached copies counted)
        said = f"(h² + 3·h·r)·2 + V·h·{a}"
        return (h * h + 3 * h * r) * 2 + V * h * a + cast, said
    said = f"(h² + h·r)·{a} + V·h·{a}" + (f" + the weight's cast V·h·{a}" if cast else "")
    return (h * h + h * r) * a + V * h * a + cast, said


def moments(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    earlier: list[tuple[str, float, str]],
) -> list[tuple[str, float, str]]:
    """The head's DoRA forward (at its output's products, and a bound at its norm rebuild) and
    the loss backward's first steps through it (from ``earlier``'s "loss backward")."""
    d = dims_of(shape, cfg.seq_or_default(), cfg.batch)
    if d is None or not adapted(d, cfg):
        return []
    e, a = Bytes.of(cfg.precision), adapter_bytes(cfg)
    T, V, h, c = d.s * d.b, int(d.V or 0), d.h, e.c
    fwd = sum(parts[k] for k in ("sharded weights", "optimizer", "kept", "activations"))
    # the head's kept tensors in, its final logits not; the step's token ids and labels in, the
    # loss's shifted labels not yet; the final norm's output, held by the model's forward
    # through the head's, where the head keeps a copy of it instead (mixed: fp32, autocast: 16
    # bits)
    held = token_inputs(d, cfg)
    norm = T * h * (4 if e.amp else c) if e.amp or a != c else 0
    shifted = _shifted_labels(d).bytes if d.extra.get("hf_module") else 0  # transformers' loss
    base = fwd - parts["log-probs"] + (held.bytes if held else 0) - shifted + norm
    left, said = _leftovers(e, cfg, h, V)
    start = f"end of forward {fwd:,.0f} B − the loss's kept tensors {parts['log-probs']:,.0f} B"
    out = [
        ("forward, the LM head's DoRA output", base + left + 3 * T * V * a,
         f"{start} + the norm's leftovers {said} {left:,} B + (mns − 1)·base, mns·B(x) and "
         f"its · scale 3·s·b·V·{a} B {3 * T * V * a:,} B"),
        # an upper bound: the head's B output, A output and vectors are made after the norm
        ("forward, the LM head's DoRA weight norm", base + left + 2 * V * h * a,
         f"{start} + the norm's leftovers {said} {left:,} B + scale·B·A and W + scale·B·A "
         f"2·V·h·{a} B {2 * V * h * a:,} B"),
    ]  # fmt: skip
    loss = next((b for n, b, _ in earlier if n == "loss backward"), None)
    if loss is not None:
        # the log-softmax's two fp32 gradients and its output freed, the logits' gradient in c
        back = -3 * T * V * 4 + T * V * c + (T * V * a if a != c else 0) + 3 * T * V * a + V * a
        out.append(("loss backward, through the LM head's DoRA", loss + back,
                    f"loss backward {loss:,.0f} B − 3·s·b·V·4 + s·b·V·{c}"
                    + (f" + its fp32 copy s·b·V·{a}" if a != c else "")
                    + f" + 3·s·b·V·{a} + V·{a} B"))  # fmt: skip
    return out


__all__ = ["adapted", "kept", "moments"]
