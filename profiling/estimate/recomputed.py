"""A compiled block recomputed in backward (``--compile --checkpointing full``), exactly: what
is alive when its backward runs, and what its graphs hold then.

torchtune (``compile: True`` with activation checkpointing) and the trace wrap each compiled
block in a non-reentrant checkpoint. In backward, once the loss's backward has run and the
final norm's, neither the loss's saved tensors (a compiled chunked loss's 16-bit logits, an
eager one's fp32 log-probabilities) nor the final norm's are alive: a block's backward holds
the model's states, the checkpoints of the blocks below it and its own (the block inputs,
or torchtune's offloaded ones brought back), RoPE's cos/sin tables (every block's inputs), the
gradients of the blocks above it, and its own graphs run again: the gradient reaching it,
its forward graph recomputing what the partition saves, then its backward graph beside those
saved tensors (``profiling.trace.graph_walk``: the graphs walked op by op, each value freed
after its last use, as the trace runs them). The highest of these is at the last block (all
checkpoints, no block's gradients yet), the second (one block's checkpoint fewer, the
partition of the blocks after the first) or the first (its input needs no gradient under
LoRA: its partition differs). Modelled here for LoRA on Llama's kind of block on one GPU;
elsewhere the estimate's earlier bound stands (the end of forward and one block's kept
tensors). No torch here (the walk is ``profiling.trace.compiled_estimate``'s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, dims_of
from profiling.estimate.ranks import one_gpu_step
from profiling.estimate.step_inputs import POSITION_IDS
from profiling.estimate.step_scalars import LOSS
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a block recomputed"
# transformers' Llama as LitGPT's modules run it (``--loss litgpt``: its RMSNorm, fused q/k/v)
LITGPT_LLAMA = frozenset({"hf_module", "litgpt_norm", "litgpt_qkv"})


def llama_lora_recomputed(inp: TrainingConfig, shape: dict[str, Any], compiled: bool) -> bool:
    """Fully checkpointed LoRA (no adapted head) on Llama's kind of block, one GPU, the trained
    adapters' gradients made in backward, compiled or eager as asked: where a recomputed block's
    moment is modelled (here compiled; ``estimate.recomputed_eager`` eager)."""
    d = dims_of(shape, inp.seq_or_default(), inp.batch)
    return (
        inp.compile == compiled
        and inp.checkpointing == "full"
        and inp.lora_rank is not None
        and "lm_head" not in (inp.lora_targets or [])
        and d is not None
        and d.arch == "llama"
        and d.extra.get("hf_module", "llama") == "llama"
        and set(d.extra) <= ({"hf_module"} if compiled else LITGPT_LLAMA)
        and one_gpu_step(inp)
        and inp.tp == 1
        and not inp.sharded
        and not inp.optimizer_in_bwd
    )


def modelled(inp: TrainingConfig, shape: dict[str, Any]) -> bool:
    """Whether the exact moment applies: the compiled block under LoRA
    (``llama_lora_recomputed``), or under full training or LoRA (no adapted head but on
    GPT-NeoX's kind) on Llama's, GPT-NeoX's or GPT-2's kind of block on one GPU (the head's and
    the blocks' weights' gradients as the graphs return them)."""
    if llama_lora_recomputed(inp, shape, compiled=True):
        return True
    from profiling.estimate.compiled_backward import LOSSES

    d = dims_of(shape, inp.seq_or_default(), inp.batch)
    return (
        inp.compile
        and inp.checkpointing == "full"
        and d is not None
        # an adapted head: its adapter's gradients made and kept tensors freed before the
        # blocks go back (compiled_backward.head_grads, released) — checked on GPT-NeoX's kind
        # (Llama amp-bf16 q,v,lm_head read 0.9966 of the trace: its earlier bound stands)
        and (inp.lora_rank is None or "lm_head" not in (inp.lora_targets or []) or d.arch == "neox")
        and d.V is not None
        and d.arch in ("llama", "neox", "gpt2")
        and inp.loss in LOSSES
        and one_gpu_step(inp)
        and inp.tp == 1
        and not inp.sharded
    )


def total(lines: Sequence[Any], category: str) -> float:
    """The bytes of the estimate's lines of one category."""
    return sum(ln.bytes for ln in lines if ln.category == category)


def end_of_forward(lines: Sequence[Any], inputs: float) -> float:
    """The step at the end of forward: weights, optimizer state, activations and ``inputs``."""
    return sum(total(lines, c) for c in ("parameters", "optimizer", "activations")) + inputs


def checkpoints(lines: Sequence[Any]) -> float:
    """What the checkpointed blocks' inputs hold, all blocks together."""
    return sum(ln.bytes for ln in lines if ln.name.startswith("Activations: block inputs"))


def recomputed_moment(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], inputs: float, fwd: float,
    recompute: float,
) -> tuple[str, float, str]:  # fmt: skip
    """The moment (name, bytes, calculation): exact where ``modelled``, else the earlier bound —
    the end of forward (``fwd``) and one block's kept tensors (``recompute``). ``inputs``: what
    the step holds of its inputs throughout."""
    found = by_block(lines, inp, shape, inputs)
    if not found:
        return (
            NAME,
            fwd + recompute,
            f"end of forward + one layer's activations {fmt_bytes(recompute)}",
        )
    value, calc = max(found.values(), key=lambda vc: vc[0])
    return NAME, value, calc


def by_block(
    lines: Sequence[Any], inp: TrainingConfig, shape: dict[str, Any], inputs: float
) -> dict[int, tuple[float, str]]:
    """The backward of the last, the second and the first block (0-based index: bytes and
    calculation); empty where not modelled."""
    if not modelled(inp, shape):
        return {}
    from profiling.estimate.compiled_backward import HELD, loss_scalars, tables
    from profiling.trace.compiled_estimate import block_recomputed

    d = dims_of(shape, inp.seq_or_default(), inp.batch)
    assert d is not None  # modelled() checked it
    e = Bytes.of(inp.precision)

    ckpt = checkpoints(lines)
    offloaded = any("brought back" in ln.name for ln in lines)
    each = 0.0 if offloaded else ckpt / d.L  # offloaded: two inputs on the GPU whichever block
    rope = tables(d, e)  # RoPE's cos/sin (GPT-2: its positions), every block's inputs
    if d.arch == "neox":  # what the kind keeps to the end: Falcon's causal mask (every block's
        # SDPA input), BLOOM's embeddings' LayerNorm (estimate.neox.once_per_model)
        from profiling.estimate import neox

        rope += sum(int(t.bytes) for t in neox.once_per_model(d, e, inp))
    grads = total(lines, "gradients")  # kept: all alive from the start, counted in ``held``
    kept = " and gradients kept" if inp.grads_kept else ""
    held = (
        total(lines, "parameters")
        + total(lines, "optimizer")
        + inputs
        + (grads if inp.grads_kept else 0)
    )
    held += sum(ln.bytes for ln in lines if ln.name.startswith(POSITION_IDS))  # every block's
    held += sum(ln.bytes for ln in lines if ln.name == LOSS)  # the loop holds the loss
    held += loss_scalars(lines)  # (where the loss's tape does not count its scalars)
    held += sum(ln.bytes for ln in lines if HELD in ln.name)  # LitGPT's loop: its logits
    first, rest = block_recomputed(inp)
    # the head's and the final norm's gradients (full training), then each block's weights' as
    # its backward graph returns them (not the whole model's over L: the embeddings' are made
    # last); none kept or stepped in backward (compiled_backward.waiting)
    from profiling.estimate.compiled_backward import waiting
    from profiling.trace.compiled_estimate import block_grads

    made, g = waiting(d, inp, block_grads(inp)[1])
    out: dict[int, tuple[float, str]] = {}
    for i in sorted({d.L - 1, min(1, d.L - 1), 0}, reverse=True):
        walk = first if i == 0 else rest
        alive = ckpt - (d.L - 1 - i) * each
        above = (d.L - 1 - i) * g + made
        value = held + alive + rope + above + walk.held
        out[i] = (
            value,
            f"block {i + 1} of {d.L}: weights and optimizer{kept} {fmt_bytes(held)} + "
            f"checkpoints {fmt_bytes(alive)} + the model's tables (RoPE's cos/sin, GPT-2's "
            f"positions, Falcon's causal mask) {fmt_bytes(rope)}"
            + (f" + the head's and final norm's gradients {fmt_bytes(made)}" if made else "")
            + (
                f" + the {d.L - 1 - i} blocks' gradients above {fmt_bytes(above - made)}"
                if above - made
                else ""
            )
            + f" + the gradient reaching it {fmt_bytes(walk.tangents)} + the larger of its "
            f"forward graph recomputing ({fmt_bytes(walk.forward)}) and its saved tensors "
            f"{fmt_bytes(walk.saved)} + its backward graph ({fmt_bytes(walk.backward)}), walked "
            "op by op on the partitioner's graphs; the loss's and the final norm's saved "
            f"tensors freed by then = {fmt_bytes(value)}",
        )
    return out


__all__ = ["LITGPT_LLAMA", "NAME", "by_block", "modelled", "recomputed_moment"]
