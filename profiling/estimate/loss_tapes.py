"""Each stack's loss as a tape (``profiling.estimate.loss_tape``): its tensors in the order its
source makes and frees them, forward and backward — the same code ``profiling.models.losses``
runs in the trace, read line by line. The tape starts with the final norm's output alive
(``hidden``); the LM head's forward and backward are part of it. No torch here.
"""

from __future__ import annotations

from profiling.estimate import loss_tape as lt
from profiling.estimate.head_tape import chunk_heads as _chunk_heads
from profiling.estimate.head_tape import gathered as _gathered
from profiling.estimate.head_tape import head as _head
from profiling.estimate.head_tape import head_backward as _head_backward
from profiling.estimate.loss_tape import Ctx, Dim, Tape, sized
from profiling.models.loss_sizes import LITGPT_CHUNK, liger_chunking, split, tensor_split


def forward_tape(kind: str, x: Ctx, tape: Tape) -> None:
    _FORWARD[kind](x, tape)


def backward_tape(kind: str, x: Ctx, tape: Tape) -> None:
    _BACKWARD[kind](x, tape)


# ---------------------------------------------------------------- transformers before 4.49


def _fwd_transformers(x: Ctx, tape: Tape, upcast_in_model: bool) -> None:
    _head(x, tape, "head", x.tokens, False)
    if x.c != 4:
        tape.new("up", sized("their fp32 copy", [*x.tokens, ("V", x.V)], 4))
        if upcast_in_model:  # 4.45: the 16-bit logits go as soon as upcast
            tape.free("head.logits")
    if x.b > 1:  # one row's [..., :-1, :] is contiguous already: no copy
        V = ("V", x.V)
        tape.new("shift", sized("the shifted logits' contiguous copy", [*x.shifted, V], 4))
        tape.new("labels", sized("the shifted labels (int64)", x.shifted, 8))
    tape.new("ls", sized("the fp32 log-probabilities", [*x.shifted, ("V", x.V)], 4))
    if tape.has("shift"):
        tape.free("shift")
    if tape.has("up"):
        tape.free("up")
    if tape.has("head.logits"):
        tape.free("head.logits")
    if x.amp:
        tape.free("hidden")  # the model's fp32 hidden_states, held to its end


def _bwd_transformers(x: Ctx, tape: Tape) -> None:
    V = ("V", x.V)
    tape.new("nllg", sized("nll_loss's gradient", [*x.shifted, V], 4))
    if tape.has("labels"):
        tape.free("labels")
    tape.new("lsg", sized("log-softmax's gradient", [*x.shifted, V], 4))
    tape.free("ls", "nllg")
    _unshift_backward(x, tape, "lsg", "upg", "the logits' gradient")


def _unshift_backward(x: Ctx, tape: Tape, shifted: str, name: str, label: str) -> None:
    """The shift's backward (zeros, then the shifted rows' gradient written in: full length,
    fp32), the cast's back to the logits' dtype where they were upcast, then the head's."""
    tape.new("sliceg", sized("the shift's gradient, full length", [*x.tokens, ("V", x.V)], 4))
    tape.free(shifted)
    grad = "sliceg"
    if x.c != 4:
        tape.new(name, sized(label, [*x.tokens, ("V", x.V)], x.c))
        tape.free("sliceg")
        grad = name
    _head_backward(x, tape, "head", x.tokens, grad, ("hidden",))


# ---------------------------------------------------------------- LitGPT


def _litgpt_chunks(x: Ctx) -> list[int]:
    return split(x.s, LITGPT_CHUNK)


def _fwd_litgpt(x: Ctx, tape: Tape) -> None:
    sizes = _litgpt_chunks(x)
    for i, t in enumerate(sizes):
        _head(x, tape, f"c{i}", [("b", x.b), ("t", t)], x.b > 1)
    if (x.amp or x.b > 1) and not x.head_nf4:
        tape.free("hidden")  # GPT.forward returns the chunks (the trace keeps it for a 4-bit head)
    V = ("V", x.V)
    # Lightning Fabric returns the model's output cast to fp32 (models.losses._litgpt): a new
    # list made beside the 16-bit chunks, which then go (nothing saved them)
    for i, t in enumerate(sizes):
        if x.c == 4:  # .to(float32) of an fp32 chunk is the chunk itself
            tape.keep_as(f"c{i}.logits", f"f{i}", "logits")
        else:
            tape.new(f"f{i}", sized("a chunk's fp32 copy (Fabric's output)",
                                    [("b", x.b), ("t", t), V], 4))  # fmt: skip
    for i in range(len(sizes)):
        if tape.has(f"c{i}.logits"):
            tape.free(f"c{i}.logits")
    # ``logits = model(...)`` rebinds: the previous micro-batch's chunks (and what their graph
    # held) go only now (losses.held_over).
    tape.free(*(key for key in list(tape.alive) if key.startswith("held")))
    short = [*sizes[:-1], sizes[-1] - 1]  # the last chunk shortened by one token
    if x.b > 1:  # reshape of the shortened (strided) last chunk copies it
        tape.new("lastcopy", sized("the shortened last chunk's copy", [("b", x.b),
                                   ("t", short[-1]), V], 4))  # fmt: skip
        for i, t in enumerate(short):
            tape.new(f"lab{i}", sized("a chunk's labels (int64)", [("b", x.b), ("t", t)], 8))
    for i, t in enumerate(short):  # fp32 logits: autocast's cross-entropy copies nothing
        rows = [("b", x.b), ("t", t)]
        tape.new(f"ls{i}", sized("a chunk's log-probabilities", [*rows, V], 4))
        tape.new(f"loss{i}", sized("a chunk's token losses", rows, 4))
    tape.new("cat", sized("the token losses", x.shifted, 4))
    tape.free(*(f"loss{i}" for i in range(len(short))))
    tape.free("cat")
    for i in range(len(sizes)):  # fit()'s ``logits`` holds them through backward and the step
        tape.keep_as(f"f{i}", f"loop{i}", "logits, held by the script's loop")
    if tape.has("lastcopy"):
        tape.free("lastcopy")


def _bwd_litgpt(x: Ctx, tape: Tape) -> None:
    sizes = _litgpt_chunks(x)
    short = [*sizes[:-1], sizes[-1] - 1]
    V = ("V", x.V)
    grads = {}
    # The engine runs the newest node first: every chunk's cross-entropy, then the last chunk's
    # slice, then Fabric's casts (last chunk first), then the heads
    for i in reversed(range(len(short))):
        rows = [("b", x.b), ("t", short[i])]
        tape.new(f"nllg{i}", sized("a chunk's nll_loss gradient", [*rows, V], 4))
        if tape.has(f"lab{i}"):
            tape.free(f"lab{i}")
        tape.new(f"lsg{i}", sized("a chunk's log-softmax gradient", [*rows, V], 4))
        tape.free(f"ls{i}", f"nllg{i}")
        grads[i] = f"lsg{i}"
    last = len(sizes) - 1
    full = [("b", x.b), ("t", sizes[last])]
    tape.new("slg", sized("the last chunk's gradient, full length", [*full, V], 4))
    tape.free(grads[last])
    grads[last] = "slg"
    if x.c != 4:  # the cast's backward: each chunk's gradient in the logits' dtype
        for i in reversed(range(len(sizes))):
            rows = [("b", x.b), ("t", sizes[i])]
            tape.new(f"g{i}", sized("a chunk's logits gradient", [*rows, V], x.c))
            tape.free(grads[i])
            grads[i] = f"g{i}"
    for i in reversed(range(len(sizes))):
        rows = [("b", x.b), ("t", sizes[i])]
        _head_backward(x, tape, f"c{i}", rows, grads[i], ("hidden",) if i == 0 else (), i == 0)
    suffix = ".gin32" if x.amp else ".gin"
    _gathered(x, tape, [f"c{i}{suffix}" for i in range(len(sizes))], x.tokens)


# ---------------------------------------------------------------- LitGPT's full.py


def _fwd_litgpt_full(x: Ctx, tape: Tape) -> None:
    """litgpt/finetune/full.py: ``logits = model(input_ids)`` (the whole head), cast to fp32 by
    Fabric, then ``chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])``: the rows
    reshaped (a copy when b > 1: the slice is strided) and split into chunks of 128 rows."""
    V = ("V", x.V)
    _head(x, tape, "head", x.tokens, False)
    if x.amp and not x.head_nf4:
        tape.free("hidden")  # the head keeps its 16-bit copy; GPT.forward's x goes
    if x.c == 4:  # .to(float32) of fp32 logits is the logits themselves
        tape.keep_as("head.logits", "f", "logits")
    else:  # Fabric's copy, made while the 16-bit logits are alive; those then go
        tape.new("f", sized("the logits' fp32 copy (Fabric's output)", [*x.tokens, V], 4))
        tape.free("head.logits")
    tape.free(*(key for key in list(tape.alive) if key.startswith("held")))
    if x.b > 1:  # one row's [..., :-1, :] reshapes as a view
        tape.new("shift", sized("the shifted logits' copy (reshape)", [*x.shifted, V], 4))
        tape.new("labels", sized("the shifted labels (int64)", x.shifted, 8))
    rows = split(x.b * (x.s - 1), LITGPT_CHUNK)
    for i, t in enumerate(rows):
        tape.new(f"ls{i}", sized("a chunk's log-probabilities", [("t", t), V], 4))
        tape.new(f"loss{i}", sized("a chunk's token losses", [("t", t)], 4))
    # the same bytes, said once for all the chunks (backward frees them chunk by chunk)
    tape.free(*(f"ls{i}" for i in range(len(rows))), *(f"loss{i}" for i in range(len(rows))))
    tape.new("ls", sized("the chunks' log-probabilities", [*x.shifted, V], 4))
    tape.new("losses", sized("the chunks' token losses", x.shifted, 4))
    tape.new("cat", sized("the token losses", x.shifted, 4))
    tape.free("losses", "cat")
    if tape.has("shift"):
        tape.free("shift")
    tape.keep_as("f", "loop", "logits, held by the script's loop")


def _bwd_litgpt_full(x: Ctx, tape: Tape) -> None:
    """The chunks' cross-entropy (last first), split's backward (their gradients concatenated),
    the slice's (a full-length gradient), Fabric's cast's, then the head's."""
    V = ("V", x.V)
    rows = split(x.b * (x.s - 1), LITGPT_CHUNK)
    tape.free("ls")  # chunk by chunk again (the same bytes)
    for i, t in enumerate(rows):
        tape.new(f"ls{i}", sized("a chunk's log-probabilities", [("t", t), V], 4))
    for i in reversed(range(len(rows))):  # the engine runs the newest node first
        tape.new(f"nllg{i}", sized("a chunk's nll_loss gradient", [("t", rows[i]), V], 4))
        if i == 0 and tape.has("labels"):  # the last nll_loss holding a view of them
            tape.free("labels")
        tape.new(f"lsg{i}", sized("a chunk's log-softmax gradient", [("t", rows[i]), V], 4))
        tape.free(f"ls{i}", f"nllg{i}")
    tape.new("rowsg", sized("the rows' gradient (split's backward: cat)", [*x.shifted, V], 4))
    tape.free(*(f"lsg{i}" for i in range(len(rows))))
    _unshift_backward(x, tape, "rowsg", "g", "the logits' gradient (the cast's backward)")


# ---------------------------------------------------------------- torchtune


def _fwd_chunked(x: Ctx, tape: Tape) -> None:
    _chunk_heads(x, tape, tensor_split(x.s, x.chunks))
    chunked_ce(x, tape)


def chunked_ce(x: Ctx, tape: Tape) -> None:
    """CEWithChunkedOutputLoss on the chunks' logits: each chunk's fp32 copy and log-softmax,
    then the logits freed (the caller's ``del``)."""
    sizes = tensor_split(x.s, x.chunks)
    V = ("V", x.V)
    for i, t in enumerate(sizes):
        rows = [("b", x.b), ("t", t)]
        if x.c != 4:
            tape.new(f"up{i}", sized("a chunk's fp32 copy", [*rows, V], 4))
        tape.new(f"ls{i}", sized("a chunk's fp32 log-probabilities", [*rows, V], 4))
        if x.c != 4:
            tape.free(f"up{i}")
    tape.free(*(f"c{i}.logits" for i in range(len(sizes))))


def _bwd_chunked(x: Ctx, tape: Tape) -> None:
    chunk_heads_backward(x, tape, chunked_ce_backward(x, tape))


def chunked_ce_backward(x: Ctx, tape: Tape) -> dict[int, str]:
    """The chunks' cross-entropy backward, last chunk first: each chunk's logits gradient
    (its key by chunk), waiting for its head's backward."""
    sizes = tensor_split(x.s, x.chunks)
    V = ("V", x.V)
    grads = {}
    for i in reversed(range(len(sizes))):
        rows = [("b", x.b), ("t", sizes[i])]
        tape.new(f"nllg{i}", sized("a chunk's nll_loss gradient", [*rows, V], 4))
        if tape.has(f"lab{i}"):
            tape.free(f"lab{i}")
        tape.new(f"lsg{i}", sized("a chunk's log-softmax gradient", [*rows, V], 4))
        tape.free(f"ls{i}", f"nllg{i}")
        grads[i] = f"lsg{i}"
        if x.c != 4:
            tape.new(f"g{i}", sized("a chunk's logits gradient", [*rows, V], x.c))
            tape.free(f"lsg{i}")
            grads[i] = f"g{i}"
    return grads


def chunk_heads_backward(x: Ctx, tape: Tape, grads: dict[int, str]) -> None:
    """Each chunk's LM head backward from its logits' gradient, last chunk first, then the
    split's: the hidden states' gradient."""
    sizes = tensor_split(x.s, x.chunks)
    for i in reversed(range(len(sizes))):
        rows = [("b", x.b), ("t", sizes[i])]
        _head_backward(x, tape, f"c{i}", rows, grads[i], ("hidden",) if i == 0 else (), i == 0)
    suffix = ".gin32" if x.amp else ".gin"
    _gathered(x, tape, [f"c{i}{suffix}" for i in range(len(sizes))], x.tokens)


def _fwd_linear(x: Ctx, tape: Tape) -> None:
    n = x.s * x.b
    lt.linear_rows(x, tape)
    V = ("V", x.V)
    prev = None
    tape.new("total", lt.scalar("the running total (fp32)"))
    for i, t in enumerate(tensor_split(n, x.chunks)):
        key = f"c{i}"
        _head(x, tape, key, [("t", t)], False)
        if prev is not None:
            tape.free(f"{prev}.logits")  # rebinding ``logits`` frees the previous chunk's
        if x.c != 4:
            tape.new(f"up{i}", sized("a chunk's fp32 copy", [("t", t), V], 4))
        tape.new(f"ls{i}", sized("a chunk's fp32 log-probabilities", [("t", t), V], 4))
        lt.chunk_nll(tape, i, f"up{i}" if x.c != 4 else None)
        prev = key
    lt.summed(tape)
    if prev is not None:
        tape.free(f"{prev}.logits")
    if x.amp:  # the fp32 copy was only cast from: the 16-bit chunks are what the head keeps
        tape.free("rows")
    else:
        tape.keep_as("rows", "rows", "the LM head's input: the labelled tokens' hidden states")
    tape.free("hidden")  # the model's output, held by the recipe until the loss is computed


def _bwd_linear(x: Ctx, tape: Tape) -> None:
    n = x.s * x.b
    sizes = tensor_split(n, x.chunks)
    V = ("V", x.V)
    keys = []
    lt.loss_gradients(tape)
    for i in reversed(range(len(sizes))):
        rows: list[Dim] = [("t", sizes[i])]
        tape.new(f"nllg{i}", sized("a chunk's nll_loss gradient", [*rows, V], 4))
        tape.free(f"tw{i}", *(("gtotal",) if i == 0 else ()))  # nll_loss's backward has run
        tape.new(f"lsg{i}", sized("a chunk's log-softmax gradient", [*rows, V], 4))
        tape.free(f"ls{i}", f"nllg{i}")
        grad = f"lsg{i}"
        if x.c != 4:
            tape.new(f"g{i}", sized("a chunk's logits gradient", [*rows, V], x.c))
            tape.free(grad)
            grad = f"g{i}"
        first = i == 0
        _head_backward(x, tape, f"c{i}", rows, grad, ("rows", "targets") if first else (), first)
        keys.append(f"c{i}" + (".gin32" if x.amp else ".gin"))
    flat = [("s", x.s), ("b", x.b)]
    _gathered(x, tape, keys, flat)
    tape.new("gidx", sized("index_select's gradient (zeros, rows added)", [*flat, ("h", x.h)],
                           4 if x.amp else x.c))  # fmt: skip
    tape.free("gin.all", "idx")


# ---------------------------------------------------------------- Liger and Cut Cross-Entropy


def _fwd_liger(x: Ctx, tape: Tape) -> None:
    n = x.s * x.b
    flat: list[Dim] = [("s", x.s), ("b", x.b)]
    V, h = ("V", x.V), ("h", x.h)
    tape.new("pad", sized("the labels padded by one (int64)", [("(s + 1)", x.s + 1), ("b", x.b)],
                          8))  # fmt: skip
    if x.b > 1:
        tape.new("labels", sized("the shifted labels (int64)", flat, 8))
    tape.new("gin", sized("the hidden states' gradient (made in forward)", [*flat, h], x.r))
    if x.trained:
        tape.new("gw", sized("the LM head's gradient (made in forward)", [V, h], x.w))
    tape.new("loss1d", sized("the token losses (fp32)", flat, 4))
    tape.new("mask", sized("the labels' mask", flat, 1))
    tape.free("mask")
    size, count = liger_chunking(n, x.h, x.V)
    mm = 2 if x.amp else x.c  # the matmuls' dtype (autocast: 16-bit)
    prev = None
    for i in range(count):
        t = min(size, n - i * size)
        rows = [("C", t)]
        if x.amp:
            tape.new(f"wt{i}", sized("autocast's copy of the weight's transpose", [V, h], 2))
            if x.r != 2:
                tape.new(f"rin{i}", sized("the chunk's 16-bit copy", [*rows, h], 2))
        tape.new(f"l{i}", sized("a chunk's logits (the softmax gradient over them)", [*rows, V],
                                mm))  # fmt: skip
        if x.amp:
            tape.free(f"wt{i}")
            if tape.has(f"rin{i}"):
                tape.free(f"rin{i}")
        if prev is not None:
            tape.free(prev)  # ``grad_logits_chunk = logits_chunk`` lets the previous go
        _liger_input_grad(x, tape, i, rows, mm)
        if x.trained:
            _liger_weight_grad(x, tape, i, rows, mm)
        prev = f"l{i}"
    if prev is not None:
        tape.free(prev)
    tape.free("loss1d", "pad")
    if tape.has("labels"):
        tape.free("labels")
    if tape.has("wcache"):
        tape.free("wcache")  # autocast's cache ends with the forward; the loss saved none
    tape.free("hidden")


def _liger_input_grad(x: Ctx, tape: Tape, i: int, rows: list[Dim], mm: int) -> None:
    """``grad_input[start:end] = grad_logits_chunk @ weight``: under autocast the weight's
    16-bit copy — cached once where it trains; a frozen one (LoRA) is not in autocast's cache
    (aten/src/ATen/autocast_mode.cpp, ``cached_cast``: only leaves that require grad), so each
    chunk's matmul casts its own, freed as it returns."""
    V, h = ("V", x.V), ("h", x.h)
    if x.amp and x.trained and not tape.has("wcache"):
        tape.new("wcache", sized("autocast's cached 16-bit weight", [V, h], 2))
    elif x.amp and not x.trained:
        tape.new(f"wc{i}", sized("autocast's 16-bit copy of the frozen weight", [V, h], 2))
    tape.new(f"gi{i}", sized("the chunk's input gradient", [*rows, h], mm))
    if tape.has(f"wc{i}"):
        tape.free(f"wc{i}")
    tape.free(f"gi{i}")


def _liger_weight_grad(x: Ctx, tape: Tape, i: int, rows: list[Dim], mm: int) -> None:
    V, h = ("V", x.V), ("h", x.h)
    if x.cuda and x.w == 4 and mm != 4:  # sm80+: addmm into the fp32 gradient in place
        if x.r != mm:
            tape.new(f"r16{i}", sized("the chunk's 16-bit copy for addmm", [*rows, h], mm))
            tape.free(f"r16{i}")
        return
    tape.new(f"mm{i}", sized("the chunk's weight-gradient product", [V, h], mm))
    if mm != 4:
        tape.new(f"f{i}", sized("its fp32 copy (.float())", [V, h], 4))
        tape.free(f"f{i}")
    tape.free(f"mm{i}")


def _bwd_liger(x: Ctx, tape: Tape) -> None:
    # Both gradients were made in forward: backward hands them on (the weight's as .grad).
    if x.trained:
        tape.keep_as("gw", "head.grad", "the LM head's gradient")
    tape.keep_as("gin", "gin.all", "gradient of the hidden states")


def _fwd_cce(x: Ctx, tape: Tape) -> None:
    n1 = (x.s - 1) * x.b
    V, h = ("V", x.V), ("h", x.h)
    tape.new("pairs", sized("the valid (row, token) pairs (int64)", [*x.shifted, ("2", 2)], 8))
    tape.new("pairs32", sized("as int32", [*x.shifted, ("2", 2)], 4))
    tape.free("pairs")
    tape.new("valids", sized("the valid rows (int64)", x.shifted, 8))
    tape.free("pairs32")
    if x.amp:
        tape.new("e16", sized("the hidden states' 16-bit copy", [*x.tokens, h], 2))
        if x.w != 2:
            tape.new("c16", sized("the LM head weight's 16-bit copy", [V, h], 2))
    tape.new("lse", sized("the fp32 log-sum-exp per token", x.shifted, 4))
    tape.new("locks", sized("locks", [("⌈(s − 1)·b/128⌉", -(-n1 // 128))], 4))
    tape.new("avg", sized("the average logit per vocabulary entry (fp32)", [V], 4))
    tape.free("locks")
    tape.new("negdot", sized("the target logits (fp32)", x.shifted, 4))
    tape.free("negdot")
    if x.amp:
        tape.free("hidden")  # only the 16-bit copy is saved


def _bwd_cce(x: Ctx, tape: Tape) -> None:
    n1 = (x.s - 1) * x.b
    V, h = ("V", x.V), ("h", x.h)
    tape.new("sortv", sized("the sorted average logits", [V], 4))
    tape.new("sorti", sized("their order (int64)", [V], 8))
    tape.free("sortv")
    tape.new("order", sized("their order (int32)", [V], 4))
    tape.free("sorti")
    e = 2 if x.amp else x.r
    tape.new("de", sized("the hidden states' gradient", [*x.tokens, h], e))
    blocks = -(-x.h // 64)
    tape.new("delocks", sized("locks", [("⌈(s − 1)·b/128⌉", -(-n1 // 128)), ("⌈h/64⌉", blocks)],
                                4))  # fmt: skip
    if x.trained:
        tape.new("dc", sized("the LM head's gradient", [V, h], 2 if x.amp else x.w))
        tape.new("dclocks", sized("locks", [("⌈V/128⌉", -(-x.V // 128)), ("⌈h/64⌉", blocks)], 4))
        tape.free("dclocks")
    tape.free("order", "delocks")
    if x.amp and x.r == 4:
        tape.new("de32", sized("the hidden states' gradient (fp32)", [*x.tokens, h], 4))
        tape.free("de")
    if x.trained and x.amp and x.w == 4:
        tape.new("dc32", sized("the LM head's gradient (fp32)", [V, h], 4))
        tape.free("dc")
        tape.keep_as("dc32", "head.grad", "the LM head's gradient")
    elif x.trained:
        tape.keep_as("dc", "head.grad", "the LM head's gradient")
    for key in ("hidden", "e16", "c16", "lse", "valids", "avg"):
        if tape.has(key):
            tape.free(key)


_FORWARD = {
    "transformers-4.46": lambda x, tape: _fwd_transformers(x, tape, False),
    "transformers-4.45": lambda x, tape: _fwd_transformers(x, tape, True),
    "litgpt": _fwd_litgpt,
    "litgpt-full": _fwd_litgpt_full,
    "chunked": _fwd_chunked,
    "linear-chunked": _fwd_linear,
    "liger": _fwd_liger,
    "cce": _fwd_cce,
}
_BACKWARD = {
    "transformers-4.46": _bwd_transformers,
    "transformers-4.45": _bwd_transformers,
    "litgpt": _bwd_litgpt,
    "litgpt-full": _bwd_litgpt_full,
    "chunked": _bwd_chunked,
    "linear-chunked": _bwd_linear,
    "liger": _bwd_liger,
    "cce": _bwd_cce,
}

__all__ = [
    "backward_tape",
    "chunk_heads_backward",
    "chunked_ce",
    "chunked_ce_backward",
    "forward_tape",
]
