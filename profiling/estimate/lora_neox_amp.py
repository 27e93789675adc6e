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
  adapters there; every other adapter weight's 16-bit copy is kept (A's and B's);
- QLoRA (bitsandbytes' 4-bit layers): no frozen weight has a 16-bit copy, and each 4-bit layer
  hands back fp32 (``qlora_per_layer``).

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
    d: Dims, cfg: TrainingConfig, adapters: list[tuple[str, int, int]], frozen: bool = True
) -> list[Term]:
    """The 16-bit weight copies the first block does not keep: its frozen layers reading what
    needs no gradient (``frozen``: fp32 ones, under ``amp-*``), and the A copies of the
    adapters on them."""
    reading = first_block_reads(d, cfg)
    q, k, h, f = int(d.extra["neox"]["q_dim"]), d.k, d.h, d.f
    base, parts = 0, []
    if frozen:
        base, parts = h * (q + 2 * k), ["h·(q + 2k)"]
        if "up" in reading:
            base += h * f
            parts.append("h·f")
        if "down" in reading:
            base += f * h
            parts.append("f·h")
    a_copies = sum(w * a for n, w, a in adapters if n in reading)
    names = [n for n, _, _ in adapters if n in reading]
    if not frozen:
        return [Term(f"first block: the A copies of {', '.join(names)} not kept (no gradient "
                     "reaches them)", -a_copies * 2, f"−{a_copies}·2 B",
                     f"−{a_copies}·2")] if names else []  # fmt: skip
    what = "q, k, v" + (", up" if "up" in reading else "") + (", down" if "down" in reading else "")
    a_what = f" and the A copies of {', '.join(names)}" if names else ""
    return [Term(f"first block: {what} weight copies{a_what} not kept (no gradient reaches them)",
                 -(base + a_copies) * 2, f"−({' + '.join(parts)} + {a_copies})·2 B",
                 f"−({base} + {a_copies})·2")]  # fmt: skip


def adapters(d: Dims, cfg: TrainingConfig) -> list[tuple[str, int, int]]:
    """(name, input width, A output width) of each adapter of a block (here, not in
    ``lora_neox``, which imports this module)."""
    x = d.extra["neox"]
    r, q = int(cfg.lora_rank or 0), int(x["q_dim"])
    roles = [t for t in cfg.lora_targets if t not in ("lm_head", "gate")]
    slices = [t for t in roles if t in ("q", "k", "v")]
    width = {"q": d.h, "k": d.h, "v": d.h, "o": q, "up": d.h, "down": d.f}
    if x["fused_qkv"] and slices:  # LitGPT's A has n·r rows; peft's whole layer's (DoRA) r
        rest = [(t, width[t], r) for t in roles if t not in slices]
        return [("qkv", d.h, (1 if cfg.dora else len(slices)) * r), *rest]
    return [(t, width[t], r) for t in roles]


def first_block_a_copies(d: Dims, cfg: TrainingConfig) -> int:
    """autocast's 16-bit copies of the first block's A weights whose input needs no gradient:
    its cache holds them through the forward (``torch.autocast``'s weight cache lives until the
    autocast region exits) but nothing saves them."""
    reading = first_block_reads(d, cfg)
    return sum(w * a for n, w, a in adapters(d, cfg) if n in reading) * 2


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


# ------------------------------------------------ bitsandbytes' 4-bit layers under autocast


def bnb_amp(cfg: TrainingConfig) -> bool:
    """bitsandbytes' 4-bit layers under ``amp-*`` (peft's prepare_model_for_kbit_training keeps
    the rest of the model fp32)."""
    return bool(cfg.qlora and not cfg.torchao_nf4 and cfg.autocast)


def qlora_per_layer(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """What a block keeps beyond 16-bit LoRA's autocast terms when its Linears are bitsandbytes'
    (``Linear4bit.forward`` casts its input to the compute dtype and the product back to the
    input's, fp32: bitsandbytes/nn/modules.py @ 005a63c): GELU's input is fp32, and a fused
    q/k/v output fp32, so SDPA keeps autocast's 16-bit copy of v, not the view that kept the
    fused output whole (transformers' GPT-NeoX and LitGPT's fused blocks). The frozen 4-bit
    weights have no autocast copies (``activations.autocast_weight_copies`` counts none)."""
    if not bnb_amp(cfg):
        return []
    T, tok, f = d.s * d.b, f"{d.s}·{d.b}", d.f
    terms = [Term("QLoRA under autocast: GELU's input in fp32 (bitsandbytes returns its input's "
                  "dtype)", T * f * 2, "s·b·f·2 B", f"{tok}·{f}·2")]  # fmt: skip
    if _fused_v_view(d, cfg):
        q, k = int(d.extra["neox"]["q_dim"]), d.k
        terms.append(Term("QLoRA under autocast: SDPA's 16-bit copy of v, not the fp32 fused "
                          "q/k/v output", -T * (q + k) * 2, "−s·b·(q + k)·2 B",
                          f"−{tok}·({q} + {k})·2"))  # fmt: skip
    return terms


def _fused_v_view(d: Dims, cfg: TrainingConfig) -> bool:
    """Whether full training's autocast attention keeps the fused q/k/v output whole through
    v's view (``neox._attention``'s fused branch)."""
    own = d.extra.get("hf_module") in ("falcon", "bloom")  # their attention copies q, k, v
    return bool(d.extra["neox"]["fused_qkv"]) and not own and cfg.attention != "eager"


def qlora_first_block(d: Dims, cfg: TrainingConfig) -> list[Term]:
    """The first block's GELU keeps nothing where nothing before it trains (attention and MLP in
    parallel, up not adapted): not its fp32 input either (``qlora_per_layer``)."""
    residual = str(d.extra["neox"]["residual"])
    if not bnb_amp(cfg) or residual == "sequential" or "up" in cfg.lora_targets:
        return []
    T, tok, f = d.s * d.b, f"{d.s}·{d.b}", d.f
    return [Term("first block: nor GELU's fp32 input (4-bit layers under autocast)",
                 -T * f * 2, "−s·b·f·2 B", f"−{tok}·{f}·2")]  # fmt: skip


# ------------------------------------------------ peft's fp32 adapters under autocast, bf16 base


def _norm_counts(d: Dims) -> tuple[int, int]:
    """(LayerNorms per block, of them the inputs full training keeps: parallel norms share one)."""
    residual = str(d.extra["neox"]["residual"])
    n = 1 if residual == "parallel_one_norm" else 2
    return n, 2 if residual == "sequential" else 1


def peft_norms(d: Dims, e: Bytes) -> Term:
    """A bf16 model under autocast (peft's fp32 adapters): LayerNorm runs in fp32 (autocast's
    fp32 list), so each keeps an fp32 copy of its 16-bit input (parallel norms one each, where
    full training counts one shared) and fp32 copies of its weight and bias."""
    n, inputs = _norm_counts(d)
    T, h = d.s * d.b, d.h
    value = T * h * (n * 4 - inputs * e.r) + n * 2 * h * 4
    return Term(f"LayerNorms under autocast: fp32 copies of their input ({n}) and weights",
                value, f"s·b·h·({n}·4 − {inputs}·{e.r}) + {n}·2h·4 B",
                f"{d.s}·{d.b}·{h}·({n}·4 − {inputs}·{e.r}) + {n}·2·{h}·4")  # fmt: skip


def peft_first_norms(d: Dims, e: Bytes) -> Term:
    """The first block's LayerNorms that read the frozen embedding keep nothing: under autocast
    also not their fp32 copies (``peft_norms``) beyond what ``lora_neox._first_block`` takes."""
    residual = str(d.extra["neox"]["residual"])
    n1 = 2 if residual == "parallel" else 1
    T, h = d.s * d.b, d.h
    value = T * h * (n1 * 4 - e.r) + n1 * 2 * h * 4
    return Term(f"first block: its {n1} LayerNorm(s)' fp32 copies not kept either", -value,
                f"−(s·b·h·({n1}·4 − {e.r}) + {n1}·2h·4) B",
                f"−({d.s}·{d.b}·{h}·({n1}·4 − {e.r}) + {n1}·2·{h}·4)")  # fmt: skip


def peft_final_norm(d: Dims, e: Bytes) -> Term:
    """The final LayerNorm's fp32 copies of its input and weights under autocast."""
    T, h = d.s * d.b, d.h
    return Term("final LayerNorm under autocast: fp32 copies of its input and weights",
                T * h * (4 - e.r) + 2 * h * 4, f"s·b·h·(4 − {e.r}) + 2h·4 B",
                f"{d.s}·{d.b}·{h}·(4 − {e.r}) + 2·{h}·4")  # fmt: skip


def autocast_bytes(e: Bytes, cfg: TrainingConfig) -> Bytes:
    """The element sizes ops see: peft's fp32 adapters on a bf16 model run under autocast, so
    autocast's fp32 ops (Phi's ``pow`` in gelu_new) upcast as under ``amp-*``."""
    from dataclasses import replace

    from profiling._config_lora import peft_autocast

    return replace(e, amp=True) if peft_autocast(cfg) else e


def peft_gelu_new(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """Phi's gelu_new under autocast over a bf16 model: fp32 from ``pow`` on (``hf_ops``), what
    it keeps beyond the 16-bit eager ops full training counts."""
    if d.extra.get("hf_module") != "phi":
        return []
    from profiling.estimate.hf_ops import _gelu_new

    extra = int(_gelu_new(d, autocast_bytes(e, cfg), cfg).bytes - _gelu_new(d, e, cfg).bytes)
    if not extra:
        return []
    return [Term("Phi's gelu_new under autocast (fp32 from pow on)", extra,
                 "its fp32 tensors' extra bytes", f"{extra}")]  # fmt: skip


__all__ = [
    "adapter_copies",
    "autocast_bytes",
    "bnb_amp",
    "first_block_copies",
    "first_block_reads",
    "frozen_lost",
    "peft_final_norm",
    "peft_first_norms",
    "peft_gelu_new",
    "peft_norms",
    "qlora_first_block",
    "qlora_per_layer",
]
