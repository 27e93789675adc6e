"""The optimizer's state tensor by tensor, where one rate per parameter is not the truth:
bitsandbytes' 8-bit states (a block constant per 256 values, fp32 below 4,096 values) and its
paged states (CUDA managed memory from 10⁵ values on, outside PyTorch's allocator). The byte
rules are ``profiling.estimate.bnb``'s; the trainable tensors come from the model's shape
(``param_numels``) or the adapters LoRA adds.

No torch here.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from profiling.estimate.bnb import (
    MIN_8BIT_SIZE,
    OPT_BLOCK,
    PAGED_MIN_NUMEL,
    QMAPS_BYTES,
    paged,
    state_bytes_8bit,
)
from profiling.estimate.ledger import Ledger, Line, Sharding, add_state
from profiling.estimate.torchao_optim import torchao_states
from profiling.records import Step
from profiling.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def lora_layers(cfg: TrainingConfig, shape: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(role, input width, output width) of each adapted Linear layer of one block."""
    h = int(shape["hidden"])
    q = int(shape.get("q_dim") or shape.get("t5", {}).get("q_dim") or h)
    kv = int(shape.get("kv_dim") or h)
    f = int(
        shape.get("ffn")
        or (4 * h if shape.get("arch") == "gpt2" else -(-(8 * h // 3) // 256) * 256)
    )
    widths = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "gate": (h, f),
              "up": (h, f), "down": (f, h)}  # fmt: skip
    neox = shape.get("neox")
    # LitGPT's fused q/k/v (a Llama-family model's too: litgpt_qkv) carries one adapter over
    # the slices enabled (LoRAQKVLinear: A of n·r rows, B of their widths' rows); GPT-NeoX's
    # kind has no gate
    roles = [t for t in cfg.lora_targets if t not in ("lm_head", "gate" if neox else "")]
    slices = [t for t in roles if t in ("q", "k", "v")]
    if not ((neox or {}).get("fused_qkv") or shape.get("litgpt_qkv")) or not slices:
        return [(t, *widths[t]) for t in roles]
    # (under DoRA peft adapts a fused query_key_value whole: A of r rows; estimate.dora_neox)
    n = 1 if cfg.dora and neox else len(slices)
    fused = ("qkv", n * h, sum(widths[t][1] for t in slices))
    return [fused, *((t, *widths[t]) for t in roles if t not in slices)]


def decoder_layers(cfg: TrainingConfig, shape: dict[str, Any]) -> tuple[int, list[Any]]:
    """An encoder-decoder's (T5's) decoder blocks and the layers each adapts: the encoder's
    block's roles and its cross-attention's (q, k, v, o again); (0, []) for any other model."""
    if shape.get("arch") != "t5":
        return 0, []
    layers = lora_layers(cfg, shape)
    cross = [x for x in layers if x[0] in ("q", "k", "v", "o")]
    return int(shape["t5"]["decoder_layers"]), layers + cross


def with_decoder(
    cfg: TrainingConfig, shape: dict[str, Any], adapters: tuple[int, str, str]
) -> tuple[int, str, str]:
    """The adapters' (count, formula, numbers) with T5's decoder blocks added."""
    dec, layers = decoder_layers(cfg, shape)
    if not dec:
        return adapters
    count, formula, numbers = adapters
    per, r = sum(i + o for _, i, o in layers), int(cfg.lora_rank or 0)
    return (count + dec * r * per,
            formula + " + L_dec·r·Σ(in + out) (the decoder's blocks, cross-attention's too)",
            numbers + f" + {dec}·{r}·{per}")  # fmt: skip


def lora_blocks(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """Adapted Linear layers in the blocks: L per role, T5's decoder's beside."""
    dec, layers = decoder_layers(cfg, shape)
    return len(lora_layers(cfg, shape)) * int(shape.get("layers") or 0) + dec * len(layers)


def largest_adapter(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The largest adapter tensor: r times the widest side of an adapted layer."""
    sides = [max(i, o) for _, i, o in lora_layers(cfg, shape)]
    if "lm_head" in cfg.lora_targets and shape.get("vocab"):
        sides.append(max(int(shape["hidden"]), int(shape["vocab"])))
    return int(cfg.lora_rank or 0) * max(sides, default=0)


def trainable_numels(
    cfg: TrainingConfig, shape: dict[str, Any], factored: bool = False
) -> list[tuple[int, int]] | None:
    """(values, how many) of each trainable parameter tensor — or, ``factored``, of its
    Adafactor second moment (rows + columns) —: the adapters' A (r × in) and B (out × r) under
    LoRA, else the model's own tensors; None when the shape does not say."""
    if cfg.lora_rank is None:
        numels = shape.get("factored_numels" if factored else "param_numels")
        return [(int(n), int(c)) for n, c in numels] if numels else None
    r, L = int(cfg.lora_rank), int(shape.get("layers") or 0)
    sides = [(i, o) for _, i, o in lora_layers(cfg, shape)]
    counts: Counter[int] = Counter()
    for i, o in sides:
        counts[r + i if factored else r * i] += L
        counts[o + r if factored else r * o] += L
    if "lm_head" in cfg.lora_targets and shape.get("vocab"):
        h, V = int(shape["hidden"]), int(shape["vocab"])
        counts[r + h if factored else r * h] += 1
        counts[V + r if factored else r * V] += 1
    blocks, dec = decoder_layers(cfg, shape)  # T5's decoder blocks
    for _, i, o in dec:
        counts[r + i if factored else r * i] += blocks
        counts[o + r if factored else r * o] += blocks
    for _, _, o in lora_layers(cfg, shape) if cfg.dora else []:  # DoRA's magnitude vectors
        counts[o] += L  # (Adafactor keeps a vector's second moment whole)
    if cfg.dora and "lm_head" in cfg.lora_targets and shape.get("vocab"):
        counts[int(shape["vocab"])] += 1  # the head's magnitude
    return sorted(counts.items(), reverse=True)


def tensorwise_states(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding, names: tuple[str, ...]
) -> bool:
    """The optimizers whose state is counted tensor by tensor (bitsandbytes' 8-bit Adam,
    transformers' Adafactor); False when another optimizer, or the tensors are not known."""
    return eight_bit_states(ledger, cfg, shape, sh, names) or adafactor_states(
        ledger, cfg, shape, sh
    )


def adafactor_states(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding
) -> bool:
    """transformers' Adafactor (β1 None, the Trainer's ``optim="adafactor"``): for a tensor of
    two dimensions or more a row and a column mean of the squared gradient, for a vector the
    whole second moment — fp32 whatever the parameter's dtype (it steps on ``grad.float()``) —
    and each tensor's RMS, a 0-d fp32 tensor; the step counter is a Python int."""
    values = trainable_numels(cfg, shape, factored=True) if cfg.optimizer == "adafactor" else None
    if values is None:
        return False
    total = sum(v * c for v, c in values)
    tensors = sum(c for _, c in values)
    div, sym, num = sh.of(1)
    for name, count, formula, numbers in (
        ("factored second moment (rows + columns; vectors whole)", total,
         "Σ (rows + columns, or n for a vector) · 4 B", f"{fmt_count(total)} · 4"),
        ("RMS per tensor (0-d fp32)", tensors, "parameter tensors · 4 B", f"{tensors} · 4"),
    ):  # fmt: skip
        ledger.add(
            Line(
                name=f"Optimizer: {name}",
                bytes=4 * count / div,
                unsharded=4 * count,
                formula=formula + sym,
                substituted=numbers + num,
                group="model states",
                category="optimizer",
            )
        )
    return True


def offload(ledger: Ledger, cfg: TrainingConfig) -> None:
    """ZeRO-Offload: optimizer state and master weights live in CPU memory, not on the GPU."""
    if not cfg.offload_optimizer:
        return
    moved = [ln for ln in ledger.lines if ln.category == "optimizer"]
    cpu = sum(ln.bytes for ln in moved)
    for ln in moved:
        ln.name += " (CPU)"
        ln.bytes = 0
        ln.substituted += " → CPU memory"
    terms = " + ".join(ln.substituted.removesuffix(" → CPU memory") for ln in moved)
    ledger.steps.append(
        Step(name="Optimizer state offloaded (per GPU rank)", formula="Σ the optimizer's lines",
             substituted=terms, value=cpu, unit="B")
    )  # fmt: skip
    ledger.note(
        f"optimizer state offloaded: {cpu / 1e9:.2f} GB per GPU rank moved to CPU memory "
        "(ZeRO-Offload); the optimizer step runs on the CPU, so it is slower"
    )


def eight_bit_states(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], sh: Sharding, names: tuple[str, ...]
) -> bool:
    """bitsandbytes' 8-bit states, tensor by tensor, and its two quantile maps; False (nothing
    added) for another optimizer, or when the trainable tensors are not known."""
    numels = trainable_numels(cfg, shape) if cfg.optimizer == "adam8bit" else None
    if cfg.optimizer == "adam8bit" and cfg.torchao_optim:
        torchao_states(ledger, cfg, shape, numels, sh, names)
        return True
    if numels is None:
        return False
    big = [(n, c) for n, c in numels if n >= MIN_8BIT_SIZE]
    small = sum(n * c for n, c in numels if n < MIN_8BIT_SIZE)
    values = sum(n * c for n, c in big)
    blocks = sum(-(-n // OPT_BLOCK) * c for n, c in big)
    each = sum(state_bytes_8bit(n) * c for n, c in numels)
    formula = f"Σ n + 4·Σ⌈n/{OPT_BLOCK}⌉ over tensors of n ≥ {MIN_8BIT_SIZE} values"
    numbers = f"{fmt_count(values)} + 4·{blocks:,}"
    if small:
        formula += " + 4·Σ n below (fp32)"
        numbers += f" + 4·{small:,}"
    for name in names:
        add_state(ledger, name, each, sh, formula, numbers)
    if not big:  # the maps are made with the first 8-bit state
        return True
    # Each optimizer keeps its own two maps: one optimizer, or one per parameter in backward.
    owners = sum(c for _, c in big) if cfg.optimizer_in_bwd else 1
    ledger.add(
        Line(
            name="Optimizer: 8-bit quantile maps (dynamic, udynamic)"
            + (", one pair per parameter's optimizer" if owners > 1 else ""),
            bytes=QMAPS_BYTES * owners,
            unsharded=QMAPS_BYTES * owners,
            formula="2 · 256 · 4 B" + (" · 8-bit tensors" if owners > 1 else ""),
            substituted="2 · 256 · 4" + (f" · {owners}" if owners > 1 else ""),
            group="model states",
            category="optimizer",
        )
    )
    return True


def paged_states(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """A paged optimizer: the states of tensors of 10⁵ values or more leave the allocated count
    for a line of their own (managed memory: nvidia-smi's while resident, paged out under
    pressure); their fp32 block constants and the smaller tensors' states stay allocated."""
    if not cfg.paged_optimizer:
        return
    numels = trainable_numels(cfg, shape)
    states = [ln for ln in ledger.lines if ln.category == "optimizer" and "maps" not in ln.name]
    states = [ln for ln in states if "master" not in ln.name and "step" not in ln.name]
    if numels is None or not states:
        ledger.note("paged optimizer: the trainable tensors are not known, nothing counted paged")
        return
    per = 1 if cfg.optimizer == "adam8bit" else 4  # uint8, or the 32-bit optimizer's fp32
    big = sum(n * c for n, c in numels if paged(n))
    tensors = sum(c for n, c in numels if paged(n))
    share = big * per * len(states) / sum(ln.unsharded for ln in states)
    moved = sum(ln.bytes * share for ln in states)  # per GPU: the lines' own sharding kept
    if moved:
        for ln in states:
            ln.bytes -= ln.bytes * share
            ln.formula += " − its paged part"
            ln.substituted += f" − {fmt_count(big)} · {per} paged"
        ledger.add(
            Line(
                name="Paged optimizer state (CUDA managed memory)",
                bytes=moved,
                unsharded=big * per * len(states),
                formula=f"{len(states)} states · Σ n · {per} B over tensors of n ≥ 10⁵ values",
                substituted=f"{len(states)} · {fmt_count(big)} · {per} ({tensors} tensors)",
                group="model states",
                category="paged",
            )
        )
    if not moved:
        ledger.note(
            f"paged optimizer: no trainable tensor reaches {PAGED_MIN_NUMEL:,} values, so "
            "bitsandbytes pages none of its states: every one is an ordinary allocation"
        )
        return
    ledger.note(
        f"paged optimizer: {fmt_bytes(moved, 'GB')} of state ({tensors} tensors of ≥ "
        f"{PAGED_MIN_NUMEL:,} values) in CUDA managed memory, outside PyTorch's allocator: not "
        "in the allocated peak (nor max_memory_reserved), on nvidia-smi while resident, moved "
        "to host memory page by page when the GPU needs the room (slower steps, no "
        "out-of-memory); smaller tensors' states are ordinary allocations"
    )


__all__ = [
    "adafactor_states",
    "decoder_layers",
    "eight_bit_states",
    "largest_adapter",
    "lora_blocks",
    "lora_layers",
    "offload",
    "paged_states",
    "tensorwise_states",
    "trainable_numels",
    "with_decoder",
]
