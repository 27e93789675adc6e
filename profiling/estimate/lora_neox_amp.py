"""Autocast (``amp-*``) under LoRA on GPT-NeoX's kind of decoder (arch ``neox``: GPT-NeoX/Pythia/
StableLM-alpha, Phi-1/2, Falcon, BLOOM), what ``profiling.estimate.lora_neox`` adds to full
training's autocast terms (``profiling.estimate.neox``, ``profiling.estimate.bloom``). Read in
the trace's saved tensors (peft's layers on transformers' modules), op by op:

- a frozen layer keeps no 16-bit copy of its input (autograd saves the input only for the
  weight's gradient): every copy full training counts per matmul goes, and with it the bf16
  tensors only a frozen matmul read (the attention output's copy, GELU's output);
- each adapter keeps a 16-bit copy of its own: peft casts the input to the fp32 adapter
  (``_cast_input_dtype``: a new fp32 tensor where the input is 16-bit), dropout makes another,
  and autocast casts that to 16 bits for lora_A — the very tensor no frozen layer shares;
- a frozen weight's 16-bit copy is kept only where its input needs a gradient (the matmul saves
  it for the input's gradient; autocast's cache holds only weights that need one): in the first
  block the layers that read the frozen embedding's norm keep none (q, k, v; where attention and
  MLP run in parallel, up, and down too where up is not adapted), nor the A copies of the
  adapters there; every other adapter weight's 16-bit copy is kept (A's and B's).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

_QKV = frozenset({"qkv", "q", "k", "v"})


def matmul_copies(d: Dims) -> int:
    """The 16-bit copies of the LayerNorm outputs full training's matmuls keep per token, in
    units of h (``neox._matmul_inputs`` under autocast; BLOOM's two, one per norm)."""
    x = d.extra["neox"]
    if d.extra.get("hf_module") == "bloom":
        return 2
    return (1 if x["fused_qkv"] else 3) + 1


def first_block_reads(d: Dims, cfg: TrainingConfig) -> set[str]:
    """The first block's layers whose input needs no gradient (they read the frozen embedding's
    norm, or, in a parallel block without up adapted, GELU's output of it)."""
    residual = str(d.extra["neox"]["residual"])
    reading = set(_QKV)
    if residual != "sequential":
        reading.add("up")
        if "up" not in cfg.lora_targets:
            reading.add("down")
    return reading


def first_block_copies(
    d: Dims, cfg: TrainingConfig, adapters: list[tuple[str, int, int]]
) -> list[Term]:
    """The 16-bit weight copies the first block does not keep: its frozen layers reading what
    needs no gradient, and the A copies of the adapters on them."""
    reading = first_block_reads(d, cfg)
    q, k, h, f = int(d.extra["neox"]["q_dim"]), d.k, d.h, d.f
    base = h * (q + 2 * k)
    parts = ["h·(q + 2k)"]
    if "up" in reading:
        base += h * f
        parts.append("h·f")
    if "down" in reading:
        base += f * h
        parts.append("f·h")
    a_copies = sum(w * a for n, w, a in adapters if n in reading)
    names = [n for n, _, _ in adapters if n in reading]
    what = "q, k, v" + (", up" if "up" in reading else "") + (", down" if "down" in reading else "")
    a_what = f" and the A copies of {', '.join(names)}" if names else ""
    return [Term(f"first block: {what} weight copies{a_what} not kept (no gradient reaches them)",
                 -(base + a_copies) * 2, f"−({' + '.join(parts)} + {a_copies})·2 B",
                 f"−({base} + {a_copies})·2")]  # fmt: skip


def adapter_copies(adapters: int) -> Term:
    """autocast's 16-bit copy of every adapter weight (A's and B's), kept for backward."""
    return Term("autocast's 16-bit copies of the adapters", adapters * 2, "adapters · 2 B",
                f"{adapters} · 2")  # fmt: skip


def frozen_lost(d: Dims, e: Bytes) -> list[tuple[str, int]]:
    """Full training's autocast copies and 16-bit tensors only a frozen matmul read: (name,
    width per token, in bytes of e.c)."""
    x = d.extra["neox"]
    module = d.extra.get("hf_module")
    lost = [("the LayerNorm outputs' 16-bit copies", matmul_copies(d) * d.h)]
    copy = module in ("gpt_neox", "phi") or bool(x.get("litgpt")) or module == "bloom"
    if copy:  # o's input (16-bit already, no copy of its own) as full training counts it
        lost.append(("the attention output's copy", int(x["q_dim"])))
    lost.append(("GELU's output", d.f))
    return lost


__all__ = ["adapter_copies", "first_block_copies", "first_block_reads", "frozen_lost"]
