"""The LM head as a loss's tape runs it (``profiling.estimate.loss_tapes``), forward and
backward: its kept input, its logits (soft-capped), an adapted head's LoRA branch (LitGPT's and
peft's ``LoRALinear``), a 4-bit head as Lightning's BitsandbytesPrecision leaves it to
bitsandbytes, and its gradients. No torch here.
"""

from __future__ import annotations

from profiling.estimate.loss_tape import Ctx, Dim, Tape, sized

# The first (or only) head's call: under autocast its 16-bit weight copy is the step's line
# ("autocast's weight copies"); a frozen head's later calls each make their own (``head``)
FIRST_HEADS = ("head", "c0")


def head(x: Ctx, tape: Tape, key: str, rows: list[Dim], strided: bool) -> None:
    """The LM head on these rows of the hidden states: the input it keeps (a 16-bit copy under
    autocast, a copy of a strided chunk, else the hidden states themselves), its logits (soft-
    capped: the tanh output kept)."""
    h, V = ("h", x.h), ("V", x.V)
    if x.head_nf4:  # MatMul4Bit: linear(A, dequantize_4bit(B).to(A.dtype).t())
        # in the Function's forward, under no grad: matmul folds a strided chunk only for a
        # weight that needs a gradient, so bmm reads the chunk where it is (no copy; traced)
        _dequantized(x, tape, key)
    elif x.amp:
        tape.new(f"{key}.in", sized("the LM head's 16-bit copy of its input", [*rows, h], 2))
        # A frozen head's weight is not in autocast's cache (aten/src/ATen/autocast_mode.cpp,
        # ``cached_cast``: only leaves that require grad), so each chunk's linear casts its own
        # copy, which mm saves for the input's gradient (derivatives.yaml, mm: ``mat2`` for
        # ``self``'s) until that chunk's head goes back: torchtune's chunked heads under LoRA
        # held n copies, the step's line one (0.77-0.83 of the trace before)
        if not x.trained and key not in FIRST_HEADS:
            tape.new(f"{key}.wc", sized("the frozen head's own 16-bit weight copy", [V, h], 2))
    elif strided:
        tape.new(f"{key}.in", sized("the LM head's copy of its strided input", [*rows, h], x.c))
    tape.new(f"{key}.logits", sized("logits", [*rows, V], x.c))
    if x.head_nf4:
        tape.free(f"{key}.w")
    if x.head_rank:
        _adapter(x, tape, key, rows)
    if x.softcap:
        tape.new(f"{key}.div", sized("logits / cap", [*rows, V], x.c))
        tape.new(f"{key}.tanh", sized("the soft cap's tanh output", [*rows, V], x.c))
        tape.free(f"{key}.div")
        tape.new(f"{key}.capped", sized("capped logits", [*rows, V], x.c))
        tape.free(f"{key}.logits")
        tape.keep_as(f"{key}.capped", f"{key}.logits", "capped logits")


def _dequantized(x: Ctx, tape: Tape, key: str) -> None:
    """A 4-bit head's weight as Lightning's BitsandbytesPrecision leaves it to bitsandbytes:
    quantized from fp16, so ``dequantize_4bit`` writes fp16 (after a double-quantized absmax
    in fp32) and ``.to(A.dtype)`` copies it; the copy lives through the matmul."""
    VH = [("V", x.V), ("h", x.h)]
    if x.absmax:
        tape.new(f"{key}.absmax", sized("the head's absmax, dequantized", [("V·h/64", 1)],
                                        x.absmax))  # fmt: skip
    tape.new(f"{key}.w16", sized("the head's weight dequantized (fp16)", VH, 2))
    if x.absmax:
        tape.free(f"{key}.absmax")
    tape.new(f"{key}.w", sized("its copy in the compute dtype", VH, x.c))
    tape.free(f"{key}.w16")


def _adapter(x: Ctx, tape: Tape, key: str, rows: list[Dim]) -> None:
    """An adapted head's LoRA branch after the frozen head's logits (peft's and LitGPT's
    LoRALinear: ``pretrained + (dropout(x) @ A.T @ B.T) * scaling``): B's output and its scaled
    copy are whole rows of logits, summed into a third; what A keeps (its output, the dropout's)
    is the adapter's term of the activations (``lora._head``)."""
    V = ("V", x.V)
    if x.head_mask:
        tape.new(f"{key}.mask", sized("the head adapter's dropout mask", [*rows, ("h", x.h)],
                                      x.head_mask))  # fmt: skip
    if x.head_a:
        tape.new(f"{key}.aout", sized("the head adapter's A output",
                                      [*rows, ("r", x.head_rank)], x.head_a))  # fmt: skip
    tape.new(f"{key}.bout", sized("the head adapter's B output", [*rows, V], x.c))
    tape.new(f"{key}.scaled", sized("the head adapter's output · scaling", [*rows, V], x.c))
    tape.free(f"{key}.bout")
    tape.new(f"{key}.sum", sized("logits + the adapter's", [*rows, V], x.c))
    tape.free(f"{key}.logits", f"{key}.scaled")
    tape.keep_as(f"{key}.sum", f"{key}.logits", "logits")


def _adapter_backward(x: Ctx, tape: Tape, key: str, rows: list[Dim]) -> None:
    """The adapted head's LoRA branch goes back first (made last in forward): the gradient ·
    scaling (a chunk of logits), B's weight gradient and A's (accumulated into their .grad
    over the chunks), the gradient reaching A's input and, through the dropout, the head's."""
    V, r = ("V", x.V), ("r", x.head_rank)
    tape.new(f"{key}.gs", sized("the logits' gradient · scaling", [*rows, V], x.c))
    tape.new(f"{key}.ga", sized("gradient of A's output", [*rows, r], x.c))
    _adapter_grad(x, tape, key, "lB", [V, r])
    tape.free(f"{key}.gs")


def _adapter_input(x: Ctx, tape: Tape, key: str, rows: list[Dim]) -> None:
    """A's backward, after the frozen head's (as the trace's engine runs them): the gradient
    reaching the adapter's input and A's weight gradient."""
    h, r = ("h", x.h), ("r", x.head_rank)
    tape.new(f"{key}.gax", sized("gradient of the adapter's input", [*rows, h], x.c))
    _adapter_grad(x, tape, key, "lA", [r, h])
    tape.free(f"{key}.ga")


def _adapter_grad(x: Ctx, tape: Tape, key: str, name: str, dims: list[Dim]) -> None:
    """An adapter weight's gradient: the first chunk's kept as .grad, later ones added to it."""
    grad = sized(f"the head adapter's {name[1]} gradient", dims, x.c)
    if not tape.has(f"head.{name}"):
        tape.new(f"head.{name}", grad)
    else:
        tape.new(f"{key}.{name}", grad)
        tape.free(f"{key}.{name}")


def head_backward(
    x: Ctx,
    tape: Tape,
    key: str,
    rows: list[Dim],
    grad: str,
    releases: tuple[str, ...] = (),
    last: bool = True,
) -> None:
    """The soft cap's and the LM head's backward from the logits' gradient ``grad``: the hidden
    rows' gradient, then the weight's (taken as .grad the first time, added to it after; under
    autocast summed for the cached 16-bit weight copy, whose cast runs once, after the last head:
    ``last``), then what the head saved (its own input copy, ``releases``)."""
    h, V = ("h", x.h), ("V", x.V)
    if x.softcap:  # capped = tanh(z / cap) · cap
        tape.new(f"{key}.g1", sized("gradient of the tanh output", [*rows, V], x.c))
        tape.free(grad)
        tape.new(f"{key}.g2", sized("gradient of logits / cap", [*rows, V], x.c))
        tape.free(f"{key}.g1", f"{key}.tanh")
        tape.new(f"{key}.g3", sized("gradient of the logits", [*rows, V], x.c))
        tape.free(f"{key}.g2")
        grad = f"{key}.g3"
    # mm's backward: the weight's gradient, then the input's; then what it saved is released
    if x.trained:
        tape.new(f"{key}.gw", sized("the LM head's weight gradient", [V, h], x.c))
    if x.head_rank:
        _adapter_backward(x, tape, key, rows)
    if x.head_nf4:  # MatMul4Bit.backward: grad @ dequantize_4bit(B).to(grad.dtype)
        _dequantized(x, tape, f"{key}.b")
    tape.new(f"{key}.gin", sized("gradient of the LM head's input", [*rows, h], x.c))
    if x.head_nf4:
        tape.free(f"{key}.b.w")
    if x.head_rank:  # the two branches' input gradients summed
        _adapter_input(x, tape, key, rows)
        tape.new(f"{key}.gsum", sized("the head's input gradients summed", [*rows, h], x.c))
        tape.free(f"{key}.gin", f"{key}.gax")
        tape.keep_as(f"{key}.gsum", f"{key}.gin", "gradient of the LM head's input")
    tape.free(grad)
    if x.head_keeps:  # its input a ctx attribute: held by the graph, never released
        releases = tuple(k for k in releases if k != "hidden")
    for saved in (f"{key}.in", f"{key}.wc", *releases):
        if tape.has(saved):
            tape.free(saved)
    if x.trained:  # into the weight's gradient buffer: the first kept, later ones added to it
        sum_key = "head.gw16" if x.amp else "head.grad"
        if tape.has(sum_key):  # out of place (the buffer holds a transposed view)
            tape.new(f"{key}.sum", sized("the LM head's gradients summed", [V, h], x.c))
            tape.free(sum_key, f"{key}.gw")
            tape.keep_as(f"{key}.sum", sum_key, "the LM head's gradient")
        else:
            tape.keep_as(f"{key}.gw", sum_key, "the LM head's gradient")
    if last:
        head_cast(x, tape)
    if x.amp:  # the input's cast backward: its gradient in fp32
        tape.new(f"{key}.gin32", sized("fp32 gradient of the LM head's input", [*rows, h], 4))
        tape.free(f"{key}.gin")


def head_cast(x: Ctx, tape: Tape) -> None:
    """Autocast's weight copy's backward, once all heads ran: the fp32 gradient of the weight."""
    if x.amp and x.trained:
        tape.new("head.grad", sized("the LM head's gradient", [("V", x.V), ("h", x.h)], 4))
        tape.free("head.gw16")


def gathered(x: Ctx, tape: Tape, keys: list[str], rows: list[Dim]) -> None:
    """The split's backward: the chunks' input gradients concatenated into one."""
    dtype = 4 if x.amp else x.c
    tape.new("gin.all", sized("gradient of the hidden states", [*rows, ("h", x.h)], dtype))
    tape.free(*keys)


__all__ = ["gathered", "head", "head_backward", "head_cast"]


def chunk_heads(x: Ctx, tape: Tape, sizes: list[int]) -> None:
    """torchtune's chunked output: the head on each chunk of the sequence, the hidden state
    freed once the decoder returns the chunks, and each chunk's labels copied (a strided
    ``tensor_split`` of a batch > 1 is copied by ``reshape``)."""
    for i, t in enumerate(sizes):
        head(x, tape, f"c{i}", [("b", x.b), ("t", t)], x.b > 1)
    if x.amp or x.b > 1:
        tape.free("hidden")  # TransformerDecoder.forward returns the chunks
    if x.b > 1:  # labels.tensor_split(n, dim=1): strided, reshape copies each
        for i, t in enumerate(sizes):
            tape.new(f"lab{i}", sized("a chunk's labels (int64)", [("b", x.b), ("t", t)], 8))
