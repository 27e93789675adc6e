"""A compiled block going back without checkpointing (``--compile``): what is alive while its
backward graph runs, from the partitioner's own graphs.

``torch.compile`` runs a block's backward as one graph AOTAutograd's partitioner made
(``min_cut_rematerialization_partition`` in torch/_functorch/partitioners.py, after Inductor's
joint-graph passes in torch/_inductor/compile_fx.py ``partition_fn``): it takes the tensors the
forward graph saved and the gradient reaching the block, recomputes the cheap pointwise chains
it did not save (RMSNorm's normalization, SwiGLU's SiLU, GELU's polynomial) and returns each
weight's gradient and the input's. The eager count of a block's backward (the last MLP's three
f-wide gradients, ``estimate.llama_end``) is not what that graph holds: its recomputed values
and its weights' gradients, all alive when it returns, are. So the moment is read from the
graph, walked op by op as the trace runs it (``profiling.trace.graph_walk``: each value freed
after its last use, the saved tensors and the gradient reaching the block held by the caller).

While block ``i`` (0-based, of ``L``) goes back, the step holds: the end of forward, less what
the loss, the final norm and the LM head kept (freed by their backward: the log-probabilities,
the shifted labels, the norm's saved tensors and output, autocast's copy of the head's weight;
RoPE's tables or GPT-2's positions stay, every block's inputs), less the ``L − 1 − i`` blocks
above's saved tensors (their backward has run); plus the gradients made so far — the head's and
the final norm's, and each block above's weights' (the graph's own outputs: a frozen weight has
none); plus the gradient reaching the block and its backward graph at its highest. The moment
is linear in ``i`` beyond the first block: the last or the second is the highest of them, and
the first, whose partition may differ (under LoRA its input needs no gradient), is counted on
its own. No torch here (the graphs are ``profiling.trace.compiled_estimate``'s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.estimate.selective import blocks_keep_saved
from profiling.estimate.step_scalars import LOSS, LOSS_SCALARS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a compiled block"
_ARCHS = ("llama", "neox", "gpt2")
# losses whose tensors are all lines of the logits, freed (or become the head's .grad: Liger's
# gradients made in forward) by the time a block goes back — but the logits LitGPT's loop holds
# past backward (``HELD``)
LOSSES = (
    "cross-entropy",
    "transformers-4.46",
    "transformers-4.45",
    "chunked",
    "linear-chunked",
    "liger",
    "cce",
    "litgpt",
    "litgpt-full",
)
HELD = "held by the script's loop"  # loss_tapes: LitGPT's logits, alive to the next step
# the head's lines the loss's and head's backward free (the final norm's apart: its tables stay)
_HEAD_LINES = ("Logits:", "Activations: autocast's 16-bit LM-head weight copy")


def applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    """Compiled blocks without checkpointing (or Megatron's selective), a loss of ``LOSSES``,
    one GPU's step with its gradients kept until the optimizer steps: where the
    moment is counted."""
    if d is None or d.V is None or d.arch not in _ARCHS or not cfg.compile:
        return False
    # selective (Megatron's: eager attention's s² tensors) leaves the partition as it is
    if not blocks_keep_saved(cfg) or cfg.loss not in LOSSES or cfg.tp != 1 or cfg.sharded:
        return False
    return not (cfg.activation_offload or cfg.dora)


def tables(d: Dims, e: Bytes) -> int:
    """What the final norm's line counts of the model's own tables, every block's inputs and so
    alive through the blocks' backward: RoPE's cos/sin (OLMo 2's in fp32), GPT-NeoX's over its
    rotating dims, GPT-2's position indices (int64: the position embedding's backward needs
    them) — as ``activations.final_norm`` and ``hf_ops.once_per_model`` count them."""
    if d.arch == "gpt2":
        return 8 * d.s
    if d.arch == "neox":
        return 2 * d.s * int(d.extra["neox"]["rotary"]) * e.rope
    rope = 4 if d.extra.get("hf_module") == "olmo2" else e.rope
    return 2 * d.s * d.hd * rope


def released(d: Dims, e: Bytes, cfg: TrainingConfig, lines: Sequence[Any]) -> float:
    """What the loss, the final norm and the LM head kept, freed before the last block goes
    back: the lines of the logits, autocast's head weight copy, a frozen head's, the final
    norm's less the model's tables (``tables``), an adapted head's adapter's tensors."""
    from profiling.estimate.lora_bytes import head_adapter

    total = float(head_adapter(d, e, cfg))
    for ln in lines:
        if HELD in ln.name:  # LitGPT's loop holds its logits past backward
            continue
        if ln.name.startswith(_HEAD_LINES) or "frozen LM head" in ln.name:
            total += ln.bytes
        elif "final RMSNorm" in ln.name or "final LayerNorm" in ln.name:
            total += ln.bytes - tables(d, e)
    return total


def loss_scalars(lines: Sequence[Any]) -> int:
    """The loss's two fp32 scalars the loop holds through backward where the estimate's lines
    do not count them (the chunked and older transformers' losses: their tapes end at the
    logits; the trace holds 8 B more there)."""
    return 0 if any(ln.name == LOSS for ln in lines) else LOSS_SCALARS


def head_grads(d: Dims, cfg: TrainingConfig) -> int:
    """The gradients the LM head's and the final norm's backward make before the blocks': the
    head's weight (tied or not: the shared weight's) and the norm's weight (and bias: GPT-2's and
    GPT-NeoX's LayerNorm) in the gradients' dtype; under LoRA an adapted head's A and B."""
    from profiling.estimate.lora_bytes import adapter_bytes

    h, V = d.h, int(d.V or 0)
    if cfg.lora_rank is not None:
        r = int(cfg.lora_rank)
        return r * (h + V) * adapter_bytes(cfg) * ("lm_head" in cfg.lora_targets)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    norm = 2 * h if d.arch in ("neox", "gpt2") else h
    return (V * h + norm) * p


def waiting(d: Dims, cfg: TrainingConfig, each: int) -> tuple[int, int]:
    """(the head's and final norm's gradients, each block above's weights' gradients) alive
    while a block goes back. Kept (``--grads-kept``): in the end of forward already. Stepped in
    backward (``--optimizer-in-bwd``): each parameter's post-accumulate-grad hook stepped it and
    dropped its gradient as its AccumulateGrad ran — but a tied head's weight only once the
    embedding's gradient reached it too: the engine runs a node when all its inputs have
    arrived, summing them in its InputBuffer (torch/csrc/autograd/engine.cpp
    ``evaluate_function``, the dependencies count), so the head's V·h gradient waits there —
    kept gradients alike: it is accumulated into the kept one only then (BLOOM V 512 mixed
    --grads-kept compiled: −65,536 B at the last block without it)."""
    if not cfg.grads_kept and not cfg.optimizer_in_bwd:
        return head_grads(d, cfg), each
    from profiling.estimate.shape import shape_of

    tied = shape_of(cfg).get("tied") and cfg.lora_rank is None
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    return (int(d.V or 0) * d.h * p if tied else 0), 0


def by_block(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> dict[int, tuple[float, str]]:
    """The backward of the last, the second and the first compiled block (0-based index: bytes
    and calculation); empty where it does not apply."""
    if not applies(d, cfg):
        return {}
    assert d is not None
    from profiling.trace.compiled_estimate import block_grads, block_recomputed, block_saved

    e = Bytes.of(cfg.precision)
    gone = released(d, e, cfg, lines) - loss_scalars(lines)
    (own, saved), walks, grads = block_saved(cfg), block_recomputed(cfg), block_grads(cfg)
    made, each = waiting(d, cfg, grads[1])
    out: dict[int, tuple[float, str]] = {}
    for i in sorted({d.L - 1, min(1, d.L - 1), 0}, reverse=True):
        walk, above = walks[0] if i == 0 else walks[1], d.L - 1 - i
        value = fwd - gone - above * saved.bytes + made + above * each
        value += walk.tangents + walk.backward
        out[i] = (value, (
            f"block {i + 1} of {d.L}: end of forward {fmt_bytes(fwd)} − the loss's, the final "
            f"norm's and the head's kept tensors {fmt_bytes(gone)}"
            + (f" − the {above} blocks above's saved tensors {fmt_bytes(above * saved.bytes)}"
               if above else "")
            + (f" + the head's and final norm's gradients {fmt_bytes(made)}" if made else "")
            + (f" + the {above} blocks above's weights' gradients {fmt_bytes(above * each)}"
               if above and each else "")
            + f" + the gradient reaching it {fmt_bytes(walk.tangents)} + its backward graph at "
            f"its highest, walked op by op on the partitioner's graph (the weights' gradients "
            f"it returns among them) {fmt_bytes(walk.backward)} = {fmt_bytes(value)}"
        ))  # fmt: skip
        if cfg.optimizer_in_bwd:
            mine = (own, grads[0]) if i == 0 else (saved, grads[1])
            rest = fwd - gone - above * saved.bytes - mine[0].bytes
            hooks = stepped(d, cfg, lines, rest, walk.tangents, mine[1])
            out[i] = max(out[i], (hooks[0], f"block {i + 1} of {d.L}: {hooks[1]}"))
    return out


def stepped(
    d: Dims, cfg: TrainingConfig, lines: Sequence[Any], rest: float, grad_in: int, grads: int
) -> tuple[float, str]:
    """Under ``--optimizer-in-bwd``, the block's hooks stepping its parameters once its graph
    has returned: the graph hands all its weights' gradients back at once (one autograd node),
    so the first parameter stepped is stepped beside them all. The engine frees the block's
    saved tensors and the gradient that reached it when the node returns
    (torch/csrc/autograd/engine.cpp ``evaluate_function``: ``release_variables``); then each
    AccumulateGrad runs its post-accumulate-grad hook, which steps the parameter (its step's
    scratch) and drops its gradient. ``rest``: what the step holds without the block's saved
    tensors; the gradient leaving the block at most the one reaching it (``grad_in``); the
    scratch the largest block matrix's (h·f of the for-loop's largest tensor's)."""
    temps = sum(ln.bytes for ln in lines if ln.name.startswith("Optimizer step temporaries"))
    largest = max(d.h * d.f, int(d.V or 0) * d.h)
    scratch = temps * min(1.0, d.h * d.f / largest) if cfg.lora_rank is None else temps
    value = rest + grads + grad_in + scratch
    return value, (
        f"its graph returned, the saved tensors freed: the step less them {fmt_bytes(rest)} + "
        f"the block's weights' gradients, all returned at once {fmt_bytes(grads)} + the "
        f"gradient leaving it (at most the one reaching it) {fmt_bytes(grad_in)} + the first "
        f"parameter's step's scratch, stepped by its hook {fmt_bytes(scratch)} = "
        f"{fmt_bytes(value)}"
    )


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The highest of ``by_block``'s moments (one moment); none where it does not apply."""
    found = by_block(d, cfg, fwd, lines)
    if not found:
        return []
    value, calc = max(found.values(), key=lambda vc: vc[0])
    return [(NAME, value, calc)]


__all__ = [
    "HELD",
    "LOSSES",
    "NAME",
    "applies",
    "by_block",
    "head_grads",
    "loss_scalars",
    "moments",
    "released",
    "stepped",
    "tables",
    "waiting",
]
