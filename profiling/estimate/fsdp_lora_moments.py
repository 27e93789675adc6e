"""LoRA under FSDP2: the moments of forward's copy-outs and of backward's start, beside the
one at the loss (``fsdp_lora``, whose docstring reads FSDP2's order). No torch here.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.fsdp_lora import group_params, lora_fsdp2
from profiling.estimate.fsdp_lora_top import BACK, LAST, TOP_BACK, top_block
from profiling.estimate.ledger import Line
from profiling.estimate.states import gathered_bytes
from profiling.units import fmt_bytes

FIRST = "forward, the first block's copy-out (the root's all-gather output held)"
LOSS_GRAD = 4  # backward's first tensor: the fp32 loss's gradient, ones
_FIRST_BLOCK = "Activations: first block"  # lora.once_per_model's first block's terms
_EVERY_LAYER = ("Activations: the step's scalars", "every layer")


def lora_forward(
    cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float], lines: list[Line]
) -> list[tuple[str, float, str]]:
    """Forward's two copy-outs and backward's start (name, bytes, calculation). FSDP2's
    ``wait_for_unshard`` (torch 2.13 ``_fully_shard/_fsdp_param_group.py``) frees the previous
    group's all-gather output, kept in ``comm_ctx.all_gather_state`` for implicit prefetching,
    only when it returns — its local ``prev_all_gather_state`` still holds it through this
    group's
    ``foreach_all_gather_copy_out`` (``_fsdp_collectives.py``). So block 0's copy-out holds the
    root twice (its all-gather output, its parameters) and block 0 twice: (2·root + 2·block)·g;
    block i's (i ≥ 1) the root, block i − 1's all-gather output and block i's twice:
    (root + 3·block)·g, beside blocks 0..i − 1's saved tensors, which grow with i (the last
    block's the higher). With them: the sharded weights and optimizer states, the embedding's
    output (``LlamaModel.forward``'s local ``inputs_embeds``, held until it returns), the
    position ids (s·8), the RoPE tables, the step's inputs; at block i ≥ 1, block i − 1's output
    (block i's input, counted in block i's terms). Under full checkpointing a block keeps its
    input alone (block 0's: the embedding's output). At backward's start the root, resharded
    after forward, is gathered again (``pre_backward``'s ``unshard``): its all-gather output
    and its parameters, 2·root·g, beside everything the end of forward holds — the peak where
    the root outweighs a block and its activations (one block, V 8,192, 16 tokens: 0.936)."""
    from profiling.estimate import activations as acts
    from profiling.estimate import block_terms, step_inputs
    from profiling.estimate import lora as lora_acts
    from profiling.estimate.fsdp_no_reshard import kept_moments, lora_kept

    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    kept = lora_kept(cfg)
    if not (lora_fsdp2(cfg) or kept) or d is None or not shape.get("root_params"):
        return []
    if not shape.get("block_params") or d.arch not in ("llama", "neox") or cfg.compile:
        return []
    e, g, t, f = acts.Bytes.of(cfg.precision), gathered_bytes(cfg), cfg.tp, fmt_bytes
    root, block = group_params(cfg, shape)
    T, L = d.s * d.b, d.L
    fixed = parts["sharded weights"] + parts["optimizer"] + parts["kept"]
    held = step_inputs.token_inputs(d, cfg)
    fixed += held.bytes if held else 0.0
    embeds, pos, rope = T * d.h * e.r / t, d.s * 8, 2 * d.s * d.hd * e.rope
    if d.arch == "neox":
        pos, rope = _neox_around(d, e, cfg)
    around = embeds + pos + rope
    words = (
        f"sharded weights, optimizer and the step's inputs {f(fixed)} + the embedding's output "
        f"s·b·h·{e.r}, the position ids s·8 and the RoPE tables {f(around)}"
    )
    start = (2 * root + 2 * block) * g / t
    out = [(FIRST, fixed + start + around, f"{words} + (2·root + 2·block)·{g} B {f(start)}")]
    again = 2 * root * g / t
    out.append((
        BACK,
        fixed + parts["activations"] + again + LOSS_GRAD,
        f"sharded weights, optimizer and the step's inputs {f(fixed)} + the activations at the "
        f"end of forward {f(parts['activations'])} + the root gathered again, its all-gather "
        f"output beside its parameters 2·root·{g} B {f(again)} + the loss's gradient "
        f"{LOSS_GRAD} B",
    ))  # fmt: skip
    if L < 2:
        return kept_moments(cfg, (root, block, L), out) if kept else out
    ckpt = cfg.checkpointing == "full"
    if ckpt:  # the blocks' inputs: block 0's is the embedding's output, counted above
        saved = (L - 1) * T * d.h * e.r / t
        what = f"blocks 1..{L - 1}'s inputs s·b·h·{e.r} (one not saved yet)"
    else:
        layer = block_terms.per_layer(d, e, cfg) + lora_acts.per_layer(d, e, cfg)
        first = sum(ln.bytes for ln in lines if ln.name.startswith(_FIRST_BLOCK))
        scalars = sum(
            ln.bytes for ln in lines if ln.name.startswith(_EVERY_LAYER[0]) and _EVERY_LAYER[1]
            in ln.name
        )  # fmt: skip
        saved = (L - 1) * (sum(x.bytes for x in layer) + scalars / L) / t + first
        saved += T * d.h * e.r / t  # block L − 2's output
        what = f"blocks 0..{L - 2}'s saved tensors and block {L - 2}'s output"
        if e.amp:  # autocast's copies, which the end of forward counts once per model
            copies = (
                _autocast_copies(d, block - int(shape["block_params"]))
                if d.arch == "llama"
                else 2 * block  # every weight and bias of the group (its norms: a bound)
            )
            saved += (L - 1) * copies / t + _first_a_copies(d, cfg) / t
            what += (
                " with autocast's 16-bit copies of their weights and adapters, and the first "
                "block's A copies, not yet freed"
            )
    if ckpt and d.arch == "llama":  # SwiGLU's and RMSNorm's terms (GPT-NeoX's kind: not yet)
        out.append(_top_back(cfg, d, e, fixed + _scalars(lines), root, block))
    elif d.arch == "llama":
        out += top_block(cfg, d, fixed + parts["activations"], lines, (root, block))
    last = (root + 3 * block) * g / t
    out.append((
        LAST,
        fixed + last + around + saved,
        f"{words} + (root + 3·block)·{g} B {f(last)} + {what} {f(saved)}",
    ))  # fmt: skip
    return kept_moments(cfg, (root, block, L), out) if kept else out


def _neox_around(d: Any, e: Any, cfg: TrainingConfig) -> tuple[int, float]:
    """GPT-NeoX's kind beside its blocks (as ``fsdp_block_gather.block_gather`` counts it):
    the position ids (s·8; BLOOM's ALiBi takes none), the rotated dims' cos/sin tables, and
    what the kind keeps to the end (Falcon's causal mask, BLOOM's embeddings' LayerNorm:
    ``neox.once_per_model``)."""
    from profiling.estimate import neox

    pos = 0 if d.extra.get("hf_module") == "bloom" else d.s * 8
    rope = 2 * d.s * int(d.extra["neox"]["rotary"]) * e.rope
    return pos, rope + sum(term.bytes for term in neox.once_per_model(d, e, cfg))


def _top_back(
    cfg: TrainingConfig, d: Any, e: Any, fixed: float, root: int, block: int
) -> tuple[str, float, str]:
    """Fully checkpointed, the top block going back first: FSDP2's ``pre_backward`` gathered it
    again (``wait_for_unshard``: its all-gather output beside the parameters it fills, 2·block·g;
    the root's all-gather output freed as it returned, its parameters root·g kept through
    backward) and torch's non-reentrant checkpoint (``utils/checkpoint.py``) reruns its forward:
    its saved tensors again (``fsdp_block_gather._block_saved``) beside every block's
    checkpointed input (L·s·b·h·r: block 0's the embedding's output), the gradient reaching it
    (the final norm's input gradient, s·b·h·r), the position ids and RoPE's tables; then its
    SwiGLU goes back — the frozen MLP makes no weight gradient (down's frozen matmul saved no
    input, so no gated product is freed), and its three f-wide gradients are alive at once
    (down's input gradient, then ``mul``'s two): 3·s·b·f·c more (``fsdp_block_gather._mlp_back``'s
    count, without down's weight gradient). The step's scalars (the loss) are held too.
    llama-wide (h 256, f 1024, V 256) mixed LoRA q,v FSDP 2 seq 256 peaked there in the trace
    (layers.1.mlp.down_proj going back) 2,358,304 B above the estimate's forward copy-out. A
    bound: nothing of the recomputed block is taken as freed before its MLP goes back."""
    from profiling.estimate import block_terms
    from profiling.estimate import lora as lora_acts
    from profiling.estimate.fsdp_block_gather import _block_saved

    g, t, f = gathered_bytes(cfg), cfg.tp, fmt_bytes
    T = d.s * d.b
    terms = block_terms.per_layer(d, e, cfg) + lora_acts.per_layer(d, e, cfg)
    layer = _block_saved(d, e, cfg, terms) / t
    gathered = (root + 2 * block) * g / t
    held = ((d.L + 1) * T * d.h * e.r + d.s * 8 + 2 * d.s * d.hd * e.rope) / t
    mlp = 3 * T * d.f * e.c / t
    total = fixed + gathered + held + layer + mlp
    calc = (
        f"sharded weights, optimizer and the step's inputs {f(fixed)} + the root's parameters "
        f"and the top block's all-gather output beside its parameters (root + 2·block)·{g} B "
        f"{f(gathered)} + {d.L} blocks' checkpointed inputs and the gradient reaching the top "
        f"block ({d.L} + 1)·s·b·h·{e.r}, the position ids and RoPE's tables {f(held)} + its "
        f"recomputed tensors {f(layer)} + its SwiGLU's three gradients s·b·3f·{e.c} {f(mlp)}"
    )
    return TOP_BACK, total, calc


def _scalars(lines: list[Line]) -> float:
    """The step's scalars held to its end (the loss, nll_loss's total weight), not a layer's."""
    return sum(
        ln.bytes for ln in lines if ln.name.startswith(_EVERY_LAYER[0]) and _EVERY_LAYER[1]
        not in ln.name
    )  # fmt: skip


def _autocast_copies(d: Any, adapters: int) -> int:
    """One block's autocast 16-bit copies its matmuls save for backward: every Linear weight
    (q, k, v, o, gate, up, down; frozen, so autocast casts each per call, and the matmul keeps
    the copy for its input's gradient) and its adapters' A and B (autocast's cache)."""
    q = d.a * d.hd
    return 2 * (2 * d.h * q + 2 * d.h * d.k + 3 * d.h * d.f + adapters)


def _first_a_copies(d: Any, cfg: TrainingConfig) -> int:
    """The first block's attention adapters' 16-bit A copies: no gradient reaches their input,
    so nothing saves them (``lora.once_per_model`` leaves them out of the end of forward), but
    autocast's cache still holds them while the next block gathers (the trace: freed before
    the loss)."""
    n = sum(1 for x in cfg.lora_targets if x in ("q", "k", "v"))
    return n * int(cfg.lora_rank or 0) * d.h * 2


__all__ = ["BACK", "FIRST", "LAST", "TOP_BACK", "lora_forward"]
