"""FSDP2 without resharding after forward (``--fsdp --zero 2``: torch's
``fully_shard(reshard_after_forward=False)``, torchtune's ``fsdp_reshard_after_forward: False``,
torchtitan's ``"never"``). No torch here.

FSDP2 shards the parameters whatever the policy: each rank keeps its 1/N shard of every weight
(``FSDPParam._sharded_param_data``). Without resharding a group's all-gather output — its
unsharded parameters — is kept from the group's forward to its backward
(``FSDPParamGroup.post_forward`` calls ``reshard``, which returns in forward when
``_reshard_after_forward`` is False; torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
torch 2.13), so from
the last block's forward through the loss every block and the root are gathered at once beside
the shards: Ψ·g bytes more (g, a gathered parameter's bytes: 16-bit under ``mixed`` and bf16).
The estimate counted the weights whole instead (ZeRO-2's replicated weights): 2Ψ where bf16
holds Ψ·2/N + 2Ψ (0.936-0.947 of the trace on a small model, 2 GPUs). The gathered line is
overhead: the moments that hold the shards only (the optimizer step; ZeRO-3's end of backward,
each block resharded after its backward, ``estimate.fsdp``) leave it out; backward's first
block holds every block (``fsdp._added``).
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line, Sharding
from profiling.estimate.states import gathered_bytes
from profiling.units import fmt_bytes, fmt_count


def kept_gathered(cfg: TrainingConfig) -> bool:
    """Whether the step is FSDP2's full training without resharding after forward (LoRA under
    FSDP, FSDP1's flat parameters and DeepSpeed's engine are modelled elsewhere)."""
    return (
        cfg.fsdp
        and cfg.zero == 2
        and cfg.gpus > 1
        and cfg.lora_rank is None
        and not cfg.fsdp_flat
        and not cfg.deepspeed
    )


def lora_kept(cfg: TrainingConfig) -> bool:
    """Whether the step is LoRA on FSDP2 without resharding after forward, as the trace runs it
    (``fsdp_lora_scope.lora_fsdp2_traced``: peft's layers under ``fully_shard``): the frozen
    base and the adapters sharded alike, each group's all-gather output kept to its backward."""
    from profiling.estimate.fsdp_lora_scope import lora_fsdp2_traced

    return lora_fsdp2_traced(cfg) and cfg.zero == 2


def weight_sharding(cfg: TrainingConfig, sh: Sharding) -> Sharding:
    """The sharding the weights' line is made with: FSDP2 shards them at ZeRO-2 too."""
    return Sharding(n=sh.n, t=sh.t, z=3) if kept_gathered(cfg) or lora_kept(cfg) else sh


FORWARD_MOMENTS = ("end of forward", "loss forward")
COPY_OUT = "forward, the last block's copy-out (every group gathered, two all-gather outputs)"


def last_gather_held(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    act: float,
    moments: list[tuple[str, float, str]],
) -> list[tuple[str, float, str]]:
    """The forward's ``moments`` with the last block's all-gather output (block·g) beside every
    gathered group: in forward ``FSDPParamGroup.wait_for_unshard`` keeps each group's all-gather
    result in ``comm_ctx.all_gather_state`` until the next group's copy-out (deferred free), and
    the last block's is freed only by the root's ``FSDPState._post_forward`` (torch 2.13
    ``_fsdp_param_group.py``, ``_fsdp_state.py``) — after the loss, which runs inside the root's
    forward (transformers' model given its labels; our trace runs torchtune's chunked losses
    there too). ZeRO-3's gathered line counts it ("the root and one block, at the loss"); here
    the line of every group gathered does not, so the loss's forward read one block's
    all-gather output below the trace (PyTorch's loss −1,180,672 B: its backward led; chunked
    −1,180,720 B and linear-chunked −66,600 B, bf16, 2 GPUs, 256 tokens, which led)."""
    block = shape.get("block_params")
    lora = lora_kept(cfg)
    if not (kept_gathered(cfg) or lora) or not block or (lora and not shape.get("root_params")):
        return moments
    g = gathered_bytes(cfg)
    if lora:  # the block's group: its frozen weights and its adapters (fsdp_lora.group_params)
        from profiling.estimate.fsdp_lora import group_params

        block = group_params(cfg, shape)[1]
    extra = int(block) * g / cfg.tp
    words = f" + the last block's all-gather output, held to the root's post-forward block·{g} B"
    out = [
        (name, value + extra + (n := _norm_output(cfg, shape, name)), calc + words + _said(n))
        if name in FORWARD_MOMENTS
        else (name, value, calc)
        for name, value, calc in moments
    ]
    return out + _last_copy_out(cfg, shape, out, (extra, act))


def _said(norm: float) -> str:
    return f" + the final norm's output, held by the model's forward {fmt_bytes(norm)}" * bool(norm)


def _norm_output(cfg: TrainingConfig, shape: dict[str, Any], moment: str) -> float:
    """LoRA with the LM head frozen: at the loss's forward the final norm's output, which the
    head's matmul did not save (its weight needs no gradient), is still held by the model's
    forward the loss runs in (transformers' ``ForCausalLMLoss``) — s·b·h in the activations'
    dtype; under autocast ``llama_loss_held`` counts it (fp32). Beside the last block's
    all-gather output it is the peak: bf16 2 GPUs 64 tokens read −32,768 B before."""
    from profiling.estimate.activations import Bytes

    if moment != "loss forward" or not lora_kept(cfg) or "lm_head" in cfg.lora_targets:
        return 0.0
    e = Bytes.of(cfg.precision)
    if e.amp:
        return 0.0
    return cfg.seq_or_default() * cfg.batch * int(shape["hidden"]) * e.r / cfg.tp


def _last_copy_out(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    moments: list[tuple[str, float, str]],
    sizes: tuple[float, float],
) -> list[tuple[str, float, str]]:
    """The last block's copy-out in forward (transformers' Llama, no recomputed block): every
    group gathered, the last block's all-gather output beside the one before it (held in
    ``all_gather_state`` until this copy-out ends), the saved tensors of the blocks below, the
    hidden state entering it, RoPE's cos/sin and the position ids. On few tokens it leads: a
    tiny Llama (4 blocks, 16 tokens, 4 GPUs) read 0.9987 of the trace in bf16 and fp32."""
    from profiling.estimate import activations as acts
    from profiling.estimate.block_terms import per_layer
    from profiling.estimate.selective import blocks_keep_saved

    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    end = next((m for m in moments if m[0] == "end of forward"), None)
    if d is None or d.arch != "llama" or not d.extra.get("hf_module") or end is None:
        return []
    if cfg.compile or not blocks_keep_saved(cfg) or cfg.lora_rank is not None:
        return []
    block, act = sizes
    e, t, L, f = acts.Bytes.of(cfg.precision), cfg.tp, int(shape["layers"]), fmt_bytes
    below = (L - 1) * sum(term.bytes for term in per_layer(d, e, cfg))
    hidden = d.s * d.b * d.h * e.r / t + 2 * d.s * d.hd * e.rope + d.s * 8
    # under autocast the blocks below also keep their matmul weights' 16-bit casts for backward
    # (autocast's cache; activations.autocast_weight_copies counts them in the step's
    # activations, which this moment leaves out): amp-fp16, 4 GPUs, 16 tokens read 0.933
    casts = (L - 1) * _block_matmuls(shape) * 2 / t if e.amp else 0.0
    # LlamaModel.forward keeps its inputs_embeds local to the end (modeling_llama.py, 5.24):
    # where the residual stream is 16-bit, the first norm saved an fp32 copy
    # (LlamaRMSNorm's hidden_states.to(torch.float32)), not the embedding's output itself
    embeds = d.s * d.b * d.h * e.r / t if e.r < 4 else 0.0
    hidden += embeds
    value = end[1] + block - act + below + hidden + casts
    calc = (
        f"end of forward {f(end[1])} + the block before's all-gather output {f(block)} − the "
        f"step's activations {f(act)} + the {L - 1} blocks below's saved tensors {f(below)} + "
        f"the hidden state entering it, RoPE's cos/sin"
        + (", the model's 16-bit inputs_embeds" if embeds else "")
        + f" and the position ids {f(hidden)}"
    ) + (f" + their matmul weights' autocast copies {f(casts)}" if casts else "")
    return [(COPY_OUT, value, calc)]


def _block_matmuls(shape: dict[str, Any]) -> float:
    """One block's matmul weights: every matmul weight but the LM head's, over the blocks."""
    head = int(shape.get("head_params") or 0)
    return (int(shape.get("matmul_weights") or 0) - head) / int(shape["layers"])


def kept_moments(
    cfg: TrainingConfig, groups: tuple[int, int, int], moments: list[tuple[str, float, str]]
) -> list[tuple[str, float, str]]:
    """LoRA's FSDP2 moments (``fsdp_lora_moments.lora_forward``, made for ZeRO-3) without
    resharding after forward: every group resharded there is still gathered here, and backward
    gathers nothing again. From ``groups`` (the root's and one block's parameters as gathered,
    the blocks L), in blocks·g more than ZeRO-3's: the last block's copy-out (L − 1: blocks
    0..L − 2 kept), forward through the top block's MLP (L − 1), backward through it (L − 2: no
    prefetch of the block below, every block kept), the recomputed top block (L − 2), the final
    norm going back (L·block − root: the blocks kept, the root not gathered twice). Backward's
    start and the prefetch are ZeRO-3's regathers, dropped: the loss backward holds as much."""
    from profiling.estimate import llama_end
    from profiling.estimate.fsdp_lora_top import BACK, LAST, PREFETCH, TOP_BACK

    root, block, L = groups
    g, t = gathered_bytes(cfg), cfg.tp
    more = {
        LAST: (L - 1) * block,
        f"{llama_end.FORWARD} (FSDP2)": (L - 1) * block,
        f"{llama_end.MLP} (FSDP2)": (L - 2) * block,
        TOP_BACK: (L - 2) * block,
        f"{llama_end.NORM} (FSDP2)": L * block - root,
    }
    out = []
    for name, value, calc in moments:
        if name in (BACK, PREFETCH):
            continue
        n = more.get(name, 0)
        words = f" + kept from forward, not resharded: {n:,}·{g} B" if n else ""
        out.append((name, value + n * g / t, calc + words))
    return out


def no_reshard(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], t: int) -> None:
    """Every block's and the root's unsharded parameters, kept from forward to backward."""
    lora = lora_kept(cfg)
    if not (kept_gathered(cfg) or lora):
        return
    psi, g = int(shape["params"]), gathered_bytes(cfg)
    if lora:  # the adapters beside the frozen weights, QLoRA's packed (fsdp_lora.group_params)
        from profiling.estimate.fsdp_lora import group_params

        root, block = group_params(cfg, shape)
        psi = root + int(shape["layers"]) * block
    tp = " / t" if t > 1 else ""
    ledger.add(
        Line(
            name="FSDP2 gathered parameters kept from forward to backward (no reshard: every "
            "block and the root)",
            bytes=psi * g / t,
            unsharded=0,
            formula=("(Ψ + adapters)" if lora else "Ψ") + f" · {g} B{tp}",
            substituted=f"{fmt_count(psi)} · {g}" + (f" / {t}" if t > 1 else ""),
            group="overhead",
            category="parameters",
        )
    )


__all__ = [
    "COPY_OUT",
    "kept_gathered",
    "kept_moments",
    "last_gather_held",
    "lora_kept",
    "no_reshard",
    "weight_sharding",
]
