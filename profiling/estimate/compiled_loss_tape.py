"""torchtune's chunked losses under ``compile: True`` as a tape (``profiling.estimate.loss_tape``):
``compute_cross_entropy`` compiled per chunk (``training.compile_loss``), its buffers as
``profiling.trace.compiled_loss`` runs them — what Inductor's partitioner saves and what its
fused kernels write, no fused intermediate. No torch here.

Per chunk of t rows, Inductor's partitioner (with Inductor's decompositions) saves the chunk's
16-bit logits (the compiled function's input, or the head's matmul inside it) and two fp32
values per row, the max and the log-sum-exp; eager keeps the fp32 log-probabilities instead.
Forward writes the max, the sum of exponentials and its log (the sum freed by then); backward
writes the sum of the incoming gradient per row and the logits' gradient in their own dtype,
reading the saved logits again, then releases what it saved.
"""

from __future__ import annotations

from profiling.estimate.head_tape import chunk_heads, gathered, head, head_backward
from profiling.estimate.loss_tape import Ctx, Dim, Tape, linear_rows, sized
from profiling.models.loss_sizes import tensor_split


def _stats(x: Ctx, tape: Tape, i: int, rows: list[Dim]) -> None:
    """The compiled forward's reductions: the row max and log-sum-exp saved, the sum freed."""
    tape.new(f"amax{i}", sized("a chunk's row max (fp32, saved)", rows, 4))
    tape.new(f"sum{i}", sized("a chunk's sum of exponentials (fp32)", rows, 4))
    tape.new(f"lse{i}", sized("a chunk's log-sum-exp (fp32, saved)", rows, 4))
    tape.free(f"sum{i}")


def _grad(x: Ctx, tape: Tape, i: int, rows: list[Dim]) -> str:
    """The compiled backward's buffers: the incoming gradient's row sum while the fused kernel
    writes the logits' gradient (in the logits' dtype)."""
    tape.new(f"gsum{i}", sized("a chunk's gradient row sum (fp32)", rows, 4))
    tape.new(f"g{i}", sized("a chunk's logits gradient", [*rows, ("V", x.V)], x.c))
    tape.free(f"gsum{i}")
    return f"g{i}"


def _fwd_chunked(x: Ctx, tape: Tape) -> None:
    sizes = tensor_split(x.s, x.chunks)
    chunk_heads(x, tape, sizes)
    for i, t in enumerate(sizes):
        _stats(x, tape, i, [("b", x.b), ("t", t)])
    for i in range(len(sizes)):  # saved by the compiled function: its input
        tape.keep_as(f"c{i}.logits", f"c{i}.logits", "a chunk's logits (saved by compile)")


def _bwd_chunked(x: Ctx, tape: Tape) -> None:
    sizes = tensor_split(x.s, x.chunks)
    grads = {}
    for i in reversed(range(len(sizes))):
        grads[i] = _grad(x, tape, i, [("b", x.b), ("t", sizes[i])])
        tape.free(f"c{i}.logits", f"amax{i}", f"lse{i}")
        if tape.has(f"lab{i}"):
            tape.free(f"lab{i}")
    for i in reversed(range(len(sizes))):
        rows = [("b", x.b), ("t", sizes[i])]
        head_backward(x, tape, f"c{i}", rows, grads[i], ("hidden",) if i == 0 else (), i == 0)
    suffix = ".gin32" if x.amp else ".gin"
    gathered(x, tape, [f"c{i}{suffix}" for i in range(len(sizes))], x.tokens)


def _fwd_linear(x: Ctx, tape: Tape) -> None:
    linear_rows(x, tape)
    for i, t in enumerate(tensor_split(x.s * x.b, x.chunks)):
        head(x, tape, f"c{i}", [("t", t)], False)  # inside the compiled function: its matmul
        _stats(x, tape, i, [("t", t)])
    tape.keep_as("rows", "rows", "the LM head's input: the labelled tokens' hidden states")
    tape.free("hidden")  # the model's output, held by the recipe until the loss is computed


def _bwd_linear(x: Ctx, tape: Tape) -> None:
    sizes = tensor_split(x.s * x.b, x.chunks)
    keys = []
    for i in reversed(range(len(sizes))):
        rows: list[Dim] = [("t", sizes[i])]
        grad = _grad(x, tape, i, rows)
        first = i == 0
        saved = (f"c{i}.logits", f"amax{i}", f"lse{i}")
        releases = (*saved, "rows", "targets") if first else saved
        head_backward(x, tape, f"c{i}", rows, grad, releases, first)
        keys.append(f"c{i}.gin")
    flat = [("s", x.s), ("b", x.b)]
    gathered(x, tape, keys, flat)
    tape.new("gidx", sized("index_select's gradient (zeros, rows added)", [*flat, ("h", x.h)],
                           x.c))  # fmt: skip
    tape.free("gin.all", "idx")


FORWARD = {"chunked": _fwd_chunked, "linear-chunked": _fwd_linear}
BACKWARD = {"chunked": _bwd_chunked, "linear-chunked": _bwd_linear}

__all__ = ["BACKWARD", "FORWARD"]
