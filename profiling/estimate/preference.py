"""torchtune's DPO step (``--dpo``) in the closed form: the policy's log-probabilities as a loss
tape (``loss_tape``), the reference forward under no_grad beside the policy's kept tensors, the
frozen copy's weights (full DPO) and the reference's fp32 logits the LoRA recipes hold.

The same recipes ``profiling.trace.preference`` runs (torchtune at bd2a0fc): lora_dpo_*.py and
full_dpo_distributed.py's ``concatenated_forward`` and train loop, ``rlhf.get_batch_log_probs``
(``labels[:, 1:].clone()``, the loss mask, ``labels[labels == -100] = 0``, ``logits /
temperature``, ``log_softmax``, ``gather``, ``(· mask).sum(-1)``), ``DPOLoss``. Symbols: s·b
tokens (b the rows: chosen and rejected), V vocabulary, h hidden size. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.head_tape import head as _head
from profiling.estimate.head_tape import head_backward as _head_backward
from profiling.estimate.loss_tape import Ctx, Dim, Tape, sized

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Dims
    from profiling.estimate.ledger import Ledger

# the loop's per-row sums (policy_chosen_rejected_outputs), its two logit means and the rewards
OUTPUTS = "the policy's per-row log-probability sums and rewards, and the two logit means"
HELD = "the reference's fp32 logits (lora_dpo_*.py's loop holds them to the next step)"


def outputs(x: Ctx) -> list[Dim]:
    """The sums (b), the rewards (b/2 each) and the two means."""
    return [("(2b + 2)", 2 * x.b + 2)]


def _rows(x: Ctx, parts: int) -> list[Dim]:
    return [("b", x.b)] if parts == 1 else [("b/2", x.b // 2)]


def _log_probs(x: Ctx, tape: Tape, tag: str, rows: list[Dim], grad: bool) -> None:
    """``get_batch_log_probs`` of ``rows``: what it keeps for backward under grad (the
    log-probabilities, the labels' copy as gather's index, the mask) and its per-row sums."""
    sh, V = [("(s − 1)", x.s - 1), *rows], ("V", x.V)
    tape.new(f"{tag}.labels", sized("the shifted labels' copy (int64)", sh, 8))
    tape.new(f"{tag}.mask", sized("the loss mask (bool)", sh, 1))
    tape.new(f"{tag}.eq", sized("labels == -100 (bool)", sh, 1))
    tape.free(f"{tag}.eq")
    tape.new(f"{tag}.div", sized("logits / temperature (fp32)", [*sh, V], 4))
    tape.new(f"{tag}.ls", sized("the fp32 log-probabilities", [*sh, V], 4))
    tape.free(f"{tag}.div")
    tape.new(f"{tag}.g", sized("the labels' log-probabilities", sh, 4))
    if not grad:
        tape.free(f"{tag}.ls")
    tape.new(f"{tag}.mul", sized("· the mask", sh, 4))
    tape.new(f"{tag}.sum", sized("their sum per row", rows, 4))
    tape.free(f"{tag}.mul", f"{tag}.g")
    if not grad:
        tape.free(f"{tag}.labels", f"{tag}.mask")


def _upcast(x: Ctx, tape: Tape, key: str) -> str:
    """unembed's ``self.output(h).float()``: the 16-bit logits freed as soon as upcast."""
    if x.c == 4:
        return f"{key}.logits"
    tape.new(f"{key}.up", sized("the logits' fp32 copy", [*x.tokens, ("V", x.V)], 4))
    tape.free(f"{key}.logits")
    return f"{key}.up"


def forward_tape(x: Ctx, tape: Tape, parts: int) -> None:
    """The policy's log-probabilities, the loop's two logit means, then the reference's head
    under no_grad (its last block's output and final norm's beside the head) and its log-probs."""
    _head(x, tape, "head", x.tokens, False)
    logits = _upcast(x, tape, "head")
    for i in range(parts):
        _log_probs(x, tape, f"p{i}", _rows(x, parts), True)
    tape.new("means", sized("the loop's chosen and rejected logit means", [("2", 2)], 4))
    tape.free(logits)
    for key in ("held0", "held1"):  # the loop's outputs of the step before, rebound
        if tape.has(key):
            tape.free(key)
    hs = [*x.tokens, ("h", x.h)]
    tape.new("r.x", sized("the reference's last block output", hs, x.r))
    tape.new("r.n", sized("the reference's final norm output", hs, x.r))
    tape.new("r.logits", sized("the reference's logits", [*x.tokens, ("V", x.V)], x.c))
    tape.free("r.n", "r.x")
    ref = _upcast(x, tape, "r")
    for i in range(parts):
        _log_probs(x, tape, f"r{i}", _rows(x, parts), False)
    if parts == 1:  # lora_dpo_*.py: never deleted
        tape.keep_as(ref, "loop.ref", HELD)
    else:
        tape.free(ref)
    for i in range(parts):
        tape.free(f"r{i}.sum")
    # DPOLoss: logsigmoid saves its input and (CPU's log_sigmoid_forward) a buffer, twice; the
    # rewards and the mean (the loss) are held by the loop
    half = [("b/2", x.b // 2)]
    tape.new("dpo.saved", sized("DPOLoss's logsigmoid inputs and buffers", [("4", 4), *half], 4))
    tape.new("loop.out", sized(OUTPUTS, outputs(x), 4))
    for i in range(parts):
        tape.free(f"p{i}.sum")
    tape.free("means")
    tape.new("loss", sized("the loss", [("1", 1)], 4))


def backward_tape(x: Ctx, tape: Tape, parts: int) -> None:
    """The per-row sums back to the logits (mul, gather, log_softmax, the division, the shift's
    full-length zeros), the upcast's backward, then the LM head's."""
    V = ("V", x.V)
    tape.new("loss.grad", sized("the loss's gradient (backward's ones)", [("1", 1)], 4))
    tape.free("dpo.saved")
    full = None
    for i in reversed(range(parts)):
        rows = _rows(x, parts)
        sh = [("(s − 1)", x.s - 1), *rows]
        tape.new(f"p{i}.gm", sized("the mul's gradient", sh, 4))
        tape.free(f"p{i}.mask")
        tape.new(f"p{i}.gg", sized("gather's gradient (zeros, scattered)", [*sh, V], 4))
        tape.new(f"p{i}.lsg", sized("log-softmax's gradient", [*sh, V], 4))
        # (gather's index and incoming gradient outlive its node until log-softmax's ran:
        # traced, (s − 1)·b·12 B below before)
        tape.free(f"p{i}.gg", f"p{i}.ls", f"p{i}.gm", f"p{i}.labels")
        tape.new(f"p{i}.dg", sized("the division's gradient", [*sh, V], 4))
        tape.free(f"p{i}.lsg")
        tape.new(f"p{i}.sg", sized("the shift's gradient, full length", [*rows, ("s", x.s), V], 4))
        tape.free(f"p{i}.dg")
        if parts > 1:  # the half's slice of the rows goes back into zeros of every row
            tape.new(f"p{i}.fg", sized("the half's gradient in every row", [*x.tokens, V], 4))
            tape.free(f"p{i}.sg")
        if full is None:
            full = f"p{i}.fg" if parts > 1 else f"p{i}.sg"
        else:  # the engine's input buffer adds the two out of place (traced)
            tape.new("fg", sized("the two halves' gradients summed", [*x.tokens, V], 4))
            tape.free(full, f"p{i}.fg")
            full = "fg"
    assert full is not None
    grad = full
    if x.c != 4:
        tape.new("upg", sized("the logits' gradient", [*x.tokens, V], x.c))
        tape.free(full)
        grad = "upg"
    _head_backward(x, tape, "head", x.tokens, grad, ("hidden",))


def reference_weights(ledger: Ledger, inp: TrainingConfig, shape: dict[str, Any]) -> None:
    """full_dpo_distributed.py's ``_setup_reference_model``: a frozen copy of the model in the
    training dtype, beside the policy all step."""
    if not inp.dpo or inp.lora_rank is not None:
        return
    from profiling.estimate.ledger import Line

    psi = int(shape["params"])
    w = 4 if inp.precision == "fp32" else 2
    ledger.add(
        Line(
            name="Reference model: weights (frozen copy)",
            bytes=psi * w,
            unsharded=psi * w,
            formula=f"Ψ · {w} B",
            substituted=f"{psi} · {w}",
            group="model states",
            category="parameters",
        )
    )


def block_moment(
    d: Dims | None, inp: TrainingConfig, fwd: float, looped: float, layer: float
) -> list[tuple[str, float, str]]:
    """The reference's forward through a block, under no_grad, beside what the policy keeps
    (its loss's tensors; neither reference's logits then). A bound, not the walk: what a block
    keeps for backward under full training (every op's saved input, whatever LoRA freezes)
    holds each tensor a no_grad forward has alive at once but the block's input and output and
    an fp32 norm temporary, added (and QLoRA's largest dequantized weight). It leads only where
    the blocks outweigh the head (h 256, f 1024, V 256: 0.981 of the trace without it).
    ``layer``: what one block keeps under full training (``step_moments`` sums it)."""
    if not inp.dpo or d is None:
        return []
    from profiling.estimate.activations import Bytes
    from profiling.units import fmt_bytes

    e = Bytes.of(inp.precision)
    io = d.s * d.b * d.h * (2 * e.r + 4)
    weight = d.f * d.h * e.c if inp.qlora else 0
    base = fwd - looped
    value = base + layer + io + weight
    f = fmt_bytes
    calc = (
        f"end of forward less what the loop holds past backward {f(base)} + a block's saved "
        f"tensors under full training {f(layer)} + its input, output and an fp32 temporary "
        f"s·b·h·(2·{e.r} + 4) B {f(io)}"
        + (f" + a dequantized weight f·h·{e.c} B {f(weight)}" if weight else "")
        + f" = {f(value)}"
    )
    from profiling.estimate.preference_bloom import moment as bloom_mlp

    return [("the reference's forward, a block (bound)", value, calc), *bloom_mlp(d, inp, base)]


__all__ = [
    "HELD",
    "OUTPUTS",
    "backward_tape",
    "block_moment",
    "forward_tape",
    "outputs",
    "reference_weights",
]
