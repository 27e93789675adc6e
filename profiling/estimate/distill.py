"""torchtune's knowledge distillation step (``--kd-teacher``) in the closed form: the frozen
teacher's weights and buffers, its forward under no_grad beside the student's chunked logits
(a block: a bound; its final hidden state and chunked logits: exact), and
``ForwardKLWithChunkedOutputLoss`` before the chunked cross-entropy as a loss tape, forward and
backward.

The same code ``profiling.models.kd_loss`` and ``profiling.trace.distill`` run (torchtune at
bd2a0fc): recipes/knowledge_distillation_single_device.py ``_loss_step`` (the student's chunks,
the teacher's under no_grad, the KL loss, the cross-entropy, both logits ``del``-ed) and
torchtune/modules/loss/kd_losses.py (``ForwardKLLoss``: ``F.softmax(teacher, dtype=fp32)`` —
kept by the product's backward —, ``torch.isinf(student)`` — kept by ``masked_fill`` —,
``F.log_softmax(student, dtype=fp32)`` — its output kept —, the product ``masked_fill``-ed, a
local to the chunk's end, summed per row, times the int mask — kept by that product). In
backward the engine runs the cross-entropy's nodes first (made last: higher sequence numbers),
then each chunk's KL nodes, last chunk first; their gradient joins the cross-entropy's in the
chunk head's input buffer before any head goes back. Symbols: s·b tokens, t a chunk's tokens,
V vocabulary, h the student's hidden size, h_t the teacher's. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.head_tape import chunk_heads
from profiling.estimate.loss_tape import Ctx, Tape, sized
from profiling.estimate.loss_tapes import chunk_heads_backward, chunked_ce, chunked_ce_backward
from profiling.models.loss_sizes import tensor_split

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Dims, Term

BOUND = "the teacher's forward, a block (bound)"


def teacher_config(cfg: TrainingConfig) -> TrainingConfig:
    """The teacher as a model of its own (no adapters, no checkpointing: no_grad)."""
    update = {
        "model": cfg.kd_teacher,
        "kd_teacher": None,
        "lora_rank": None,
        "qlora": False,
        "lora_targets": [],
        "tied_head": None,
        "checkpointing": "none",
        "dropout": 0.0,
    }
    return cfg.model_copy(update=update)  # fmt: skip


def teacher_shape(cfg: TrainingConfig) -> dict[str, Any]:
    from profiling.estimate.shape import shape_of

    return shape_of(teacher_config(cfg))


def teacher_dims(cfg: TrainingConfig) -> Dims:
    """The teacher's dimensions on the step's tokens; its vocabulary the student's."""
    from profiling.errors import ProfilingError
    from profiling.estimate.activations import dims_of

    d = dims_of(teacher_shape(cfg), cfg.seq_or_default(), cfg.batch)
    if d is None or d.arch in ("encoder", "t5"):
        raise ProfilingError("the estimate cannot model --kd-teacher with a teacher that is not "
                             "a decoder of known dimensions")  # fmt: skip
    return d


def _kl_forward(x: Ctx, tape: Tape, sizes: list[int]) -> None:
    """``ForwardKLWithChunkedOutputLoss.forward``: the labels' int mask and chunks, then each
    chunk's ``ForwardKLLoss`` (its locals alive to its return)."""
    V, tokens = ("V", x.V), x.tokens
    # its 0-dim tensors (a chunk's sums, negation and running total, the mask's sums, the
    # loop's weighted mix), which no Term follows: a stated bound, 8 B × (n + 4), held to the
    # end of backward (the trace: 28 + 4·n B forward, 20 + 4·n B backward, n = 4, 8)
    tape.new("kd.scalars", sized("the KL loss's 0-dim tensors (bound)",
                                 [("(n + 4)", len(sizes) + 4)], 8))  # fmt: skip
    tape.new("kd.maskb", sized("labels != ignore (bool)", tokens, 1))
    tape.new("kd.mask", sized("the labels' int mask", tokens, 4))
    tape.free("kd.maskb")
    if x.b > 1:  # labels.tensor_split(n, dim=1): strided, reshape copies each
        for i, t in enumerate(sizes):
            tape.new(f"kd.lab{i}", sized("a chunk's labels (int64)", [("b", x.b), ("t", t)], 8))
    for i, t in enumerate(sizes):
        rows = [("b", x.b), ("t", t)]
        if x.c != 4:
            tape.new("kd.tc", sized("the teacher chunk's fp32 copy", [*rows, V], 4))
        tape.new(f"kd.tp{i}", sized("the teacher's fp32 probabilities", [*rows, V], 4))
        if x.c != 4:
            tape.free("kd.tc")
        tape.new(f"kd.inf{i}", sized("isinf of the student's logits (bool)", [*rows, V], 1))
        if x.c != 4:
            tape.new("kd.sc", sized("the student chunk's fp32 copy", [*rows, V], 4))
        tape.new(f"kd.lp{i}", sized("the student's fp32 log-probabilities", [*rows, V], 4))
        if x.c != 4:
            tape.free("kd.sc")
        tape.new("kd.pr", sized("their product", [*rows, V], 4))
        tape.new("kd.mf", sized("the product masked_fill-ed", [*rows, V], 4))
        tape.free("kd.pr")
        tape.new("kd.x", sized("its sum per token", rows, 4))
        tape.new("kd.cb", sized("the chunk's labels != ignore (bool)", rows, 1))
        tape.new(f"kd.cm{i}", sized("the chunk's int mask", rows, 4))
        tape.free("kd.cb")
        tape.new("kd.xm", sized("the sums · the mask", rows, 4))
        tape.free("kd.xm", "kd.mf", "kd.x")
    tape.free("kd.mask", *(f"kd.lab{i}" for i in range(len(sizes)) if x.b > 1))


def _kl_backward(x: Ctx, tape: Tape, sizes: list[int], grads: dict[int, str]) -> None:
    """Each chunk's KL nodes, last chunk first: the int mask's product, masked_fill's,
    the product's (· the teacher's probabilities), log-softmax's and the upcast's backward,
    the result added in place to the cross-entropy's gradient waiting in the head's buffer."""
    V = ("V", x.V)
    for i in reversed(range(len(sizes))):
        rows = [("b", x.b), ("t", sizes[i])]
        tape.new("kd.gx", sized("the sums' gradient", rows, 4))
        tape.free(f"kd.cm{i}")
        tape.new("kd.gmf", sized("masked_fill's gradient", [*rows, V], 4))
        tape.free("kd.gx", f"kd.inf{i}")
        tape.new("kd.gpr", sized("the product's gradient", [*rows, V], 4))
        tape.free("kd.gmf", f"kd.tp{i}")
        tape.new("kd.gls", sized("log-softmax's gradient", [*rows, V], 4))
        tape.free("kd.gpr", f"kd.lp{i}")
        last = "kd.gls"
        if x.c != 4:
            tape.new("kd.g", sized("the upcast's gradient", [*rows, V], x.c))
            tape.free("kd.gls")
            last = "kd.g"
        assert tape.has(grads[i])
        tape.free(last)


def _teacher_head(x: Ctx, tape: Tape, sizes: list[int], h_t: int) -> None:
    """The teacher's final hidden state and its chunked logits (``chunked_output``, no
    upcast), under no_grad; the hidden state freed as the teacher returns."""
    tape.new("t.n", sized("the teacher's final norm output", [*x.tokens, ("h_t", h_t)], x.r))
    for i, t in enumerate(sizes):
        tape.new(f"t{i}", sized("a teacher chunk's logits", [("b", x.b), ("t", t), ("V", x.V)],
                                x.c))  # fmt: skip
    tape.free("t.n")


def _labels_after(x: Ctx, tape: Tape, sizes: list[int]) -> list[Term]:
    """The cross-entropy's label copies (``chunk_heads`` makes them with the heads) are made
    after the KL loss in the recipe: taken off until then."""
    if x.b == 1:
        return []
    terms = [tape.alive[f"lab{i}"] for i in range(len(sizes))]
    tape.free(*(f"lab{i}" for i in range(len(sizes))))
    return terms


def forward_tape(x: Ctx, tape: Tape, h_t: int) -> None:
    """The student's chunks, the teacher's (its blocks: ``block_moment``), the KL loss, the
    cross-entropy, then both logits freed."""
    sizes = tensor_split(x.s, x.chunks)
    chunk_heads(x, tape, sizes)
    labels = _labels_after(x, tape, sizes)
    _teacher_head(x, tape, sizes, h_t)
    _kl_forward(x, tape, sizes)
    for i, term in enumerate(labels):
        tape.new(f"lab{i}", term)
    chunked_ce(x, tape)
    tape.free(*(f"t{i}" for i in range(len(sizes))))


def backward_tape(x: Ctx, tape: Tape) -> None:
    sizes = tensor_split(x.s, x.chunks)
    grads = chunked_ce_backward(x, tape)
    _kl_backward(x, tape, sizes, grads)
    chunk_heads_backward(x, tape, grads)
    tape.free("kd.scalars")


def block_moment(
    x: Ctx, d_t: Dims, layer: float, fwd: float, kept: float
) -> list[tuple[str, float, str]]:
    """The teacher's forward through a block, under no_grad, beside the student's activations
    and chunked logits (the loss's tensors not yet made). A bound, as DPO's reference's
    (``estimate.preference.block_moment``): what a teacher block keeps under full training
    (``layer``) holds each tensor its no_grad forward has alive at once but the block's input
    and output and an fp32 norm temporary, added."""
    from profiling.units import fmt_bytes as f

    io = d_t.s * d_t.b * d_t.h * (2 * x.r + 4)
    stretch = Tape({"hidden": sized("the final norm's output", [*x.tokens, ("h", x.h)], x.r)})
    sizes = tensor_split(x.s, x.chunks)
    chunk_heads(x, stretch, sizes)
    _labels_after(x, stretch, sizes)
    base = fwd - kept + stretch.total()
    value = base + layer + io
    calc = (
        f"end of forward less the loss's kept tensors, with the student's chunked logits "
        f"{f(base)} + a teacher block's saved tensors under full training {f(layer)} + its "
        f"input, output and an fp32 temporary s·b·h_t·(2·{x.r} + 4) B {f(io)} = {f(value)}"
    )
    return [(BOUND, value, calc)]  # fmt: skip


__all__ = [
    "BOUND",
    "backward_tape",
    "block_moment",
    "forward_tape",
    "teacher_config",
    "teacher_dims",
]
