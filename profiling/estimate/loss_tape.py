"""A loss's tensors in the order its source makes and frees them: the peak of a stretch of the
step, with the tensors alive then.

A loss that works a chunk at a time (LitGPT's, torchtune's, Liger's) has its peak at one
particular moment — the last chunk's log-softmax with every chunk's logits still held, or the
first chunk's gradient with every other chunk's log-probabilities — which no single product of
sizes says. ``profiling.estimate.losses`` writes each loss as a :class:`Tape` of allocations
and frees, in its source's order (and the autograd engine's, in backward); running the tape
gives the peak and names what makes it. Plain arithmetic, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from profiling.estimate.activations import Term

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

Dim = tuple[str, int]  # a size as written (s, (s − 1), V …) and its value


@dataclass
class Ctx:
    """The sizes a loss's tensors are made of."""

    s: int
    b: int
    V: int
    h: int
    r: int  # the final norm's output (the residual dtype)
    c: int  # the logits and the LM head's input (the compute dtype)
    amp: bool
    cuda: bool
    trained: bool  # the LM head's weight gets a gradient
    w: int  # the LM head's weight as the matmul reads it
    softcap: float | None
    chunks: int  # torchtune's num_output_chunks
    head_rank: int = 0  # LoRA's rank on the LM head (LitGPT's lora_head), 0: not adapted
    head_nf4: bool = False  # the head a 4-bit weight, dequantized to fp16 then cast (Fabric's)
    head_keeps: bool = False  # ... whose input old bitsandbytes keeps as a ctx attribute
    absmax: int = 0  # the fp32 absmax its dequantization writes first (double quantization)
    compiled: bool = False  # torchtune's compile_loss: the chunked loss's function compiled
    # LitGPT's adapted head, chunk by chunk: A's output (the adapters' dtype) and the dropout's
    # mask (bytes an element; 0: none), made by each chunk's head (so not yet at an earlier
    # chunk's peak), counted here rather than with the blocks' adapters (estimate.lora._head)
    head_a: int = 0
    head_mask: int = 0

    @property
    def tokens(self) -> list[Dim]:
        return [("s", self.s), ("b", self.b)]

    @property
    def shifted(self) -> list[Dim]:
        return [("(s − 1)", self.s - 1), ("b", self.b)]


def sized(name: str, dims: list[Dim], nbytes: int) -> Term:
    """A tensor of ``dims`` elements of ``nbytes`` each, its formula and numbers."""
    n = nbytes
    for _, value in dims:
        n *= value
    formula = "·".join(symbol for symbol, _ in dims) + f"·{nbytes} B"
    numbers = "·".join(str(value) for _, value in dims) + f"·{nbytes}"
    return Term(name, n, formula, numbers)


@dataclass
class Tape:
    """Tensors made and freed in order; the largest sum of those alive, and which they were."""

    alive: dict[str, Term] = field(default_factory=dict)
    peak: float = 0.0
    at_peak: list[Term] = field(default_factory=list)
    largest: float = 0.0  # the largest tensor made (the caching allocator's largest request)

    def __post_init__(self) -> None:
        self.peak = self.total()
        self.at_peak = list(self.alive.values())

    def total(self) -> float:
        return sum(t.bytes for t in self.alive.values())

    def new(self, key: str, term: Term) -> None:
        assert key not in self.alive, f"{key} made twice"
        self.alive[key] = term
        self.largest = max(self.largest, term.bytes)
        now = self.total()
        if now > self.peak:
            self.peak, self.at_peak = now, list(self.alive.values())

    def free(self, *keys: str) -> None:
        for key in keys:
            del self.alive[key]

    def has(self, key: str) -> bool:
        return key in self.alive

    def keep_as(self, old: str, new: str, name: str) -> None:
        """The same storage under another role (a gradient taken as the parameter's .grad)."""
        term = self.alive.pop(old)
        self.alive[new] = Term(name, term.bytes, term.formula, term.substituted)


def linear_rows(x: Ctx, tape: Tape) -> None:
    """LinearCrossEntropyLoss.forward before its chunks: the labelled tokens counted, then
    their hidden states and labels index_select-ed."""
    flat: list[Dim] = [("s", x.s), ("b", x.b)]
    tape.new("mask", sized("the labels' mask", flat, 1))
    tape.free("mask")
    tape.new("valid", sized("the labelled tokens' indices (int64)", flat, 8))
    tape.free("valid")  # only their count is used
    tape.new("mask", sized("the labels' mask", flat, 1))
    tape.free("mask")
    tape.new("idx", sized("the labelled tokens' indices (int64)", flat, 8))
    rows = sized("the labelled tokens' hidden states", [*flat, ("h", x.h)], x.r)
    tape.new("rows", rows)
    tape.new("targets", sized("their labels (int64)", flat, 8))


def chunk_scalars(cfg: TrainingConfig) -> int:
    """torchtune's chunked loss at its forward's peak, the last chunk's ``nll_loss``: every
    chunk's ``total_weight`` (fp32, saved for backward), that chunk's output before the loop's
    in-place ``total +=``, the running total, and ``total_elements`` (an int64 sum): 4·n + 16 B
    for n chunks, which the trace's loss forward held above the estimate's (48 B at 8 chunks)."""
    if cfg.loss != "chunked":
        return 0
    return 4 * (cfg.loss_chunks or 8) + 4 + 4 + 8


def scalar(name: str) -> Term:
    """A 0-dim fp32 tensor: a loss, its gradient, nll_loss's total weight."""
    return Term(name, 4, "4 B", "4")


def chunk_nll(tape: Tape, i: int, copy: str | None) -> None:
    """torchtune's LinearCrossEntropyLoss, a chunk's ``nll_loss``: its output and its total
    weight (saved for backward) made while the chunk's fp32 ``copy`` is alive (it goes as
    ``cross_entropy`` returns), then the output added into the running total in place."""
    tape.new(f"out{i}", scalar("a chunk's loss (fp32)"))
    tape.new(f"tw{i}", scalar("a chunk's nll_loss total weight (fp32)"))
    tape.free(*([copy] if copy else []), f"out{i}")


def summed(tape: Tape) -> None:
    """The running total divided by the count of labelled tokens: the loss, the total freed."""
    tape.new("loss", scalar("the loss (fp32)"))
    tape.free("total")


def loss_gradients(tape: Tape) -> None:
    """Backward's first tensors: the loss's gradient (held to the end) and the division's, the
    running total's, which every chunk's nll_loss backward reads through the in-place adds."""
    tape.new("gloss", scalar("the loss's gradient (fp32)"))
    tape.new("gtotal", scalar("the running total's gradient (fp32)"))


def listed(terms: list[Term]) -> tuple[str, str]:
    """Names with formulas, and the numbers, of tensors alive together."""
    formula = " + ".join(f"{t.name} {t.formula}" for t in terms) or "nothing"
    numbers = " + ".join(t.substituted for t in terms) or "0"
    return formula, numbers


__all__ = [
    "Ctx",
    "Dim",
    "Tape",
    "chunk_nll",
    "chunk_scalars",
    "linear_rows",
    "listed",
    "loss_gradients",
    "scalar",
    "sized",
    "summed",
]
