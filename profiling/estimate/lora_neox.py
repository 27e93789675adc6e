"""What LoRA changes in the saved activations of GPT-NeoX's kind of decoder (arch ``neox``:
GPT-NeoX/Pythia/StableLM-alpha, Phi-1/2, Falcon), matching the trace of its adapters
(``profiling.trace.lora_neox``: peft's on separate layers, LitGPT's on a fused q/k/v), added to
full training's terms (``profiling.estimate.neox``). T = s·b tokens, r the rank.

- each adapter keeps its A output (T·r; a fused q/k/v's, T·n·r for its n slices) and its input:
  the very tensor its base layer reads, or a copy of its own where the input is cast to the
  fp32 adapters (``mixed``), autocast casts it, or lora_dropout makes a new one (with its mask);
  a fused q/k/v has one input, one dropout;
- frozen layers keep no inputs: the LayerNorm outputs (one per norm), the MLP's GELU output
  (down's input) and, in transformers' GPT-NeoX and Phi, the attention output's copy (the
  output projection's input; BLOOM's too, on every target) are kept only while an adapter
  keeps that very tensor; under
  autocast none of the layers' 16-bit copies of their inputs is;
- the first block reads the frozen embedding, which needs no gradient: its LayerNorms that read
  it keep nothing (GPT-NeoX's two, Phi's and Falcon-7B's one), nor the adapters' dropouts there
  their masks; where the MLP reads that norm too (attention and MLP in parallel) and up is not
  adapted, nothing upstream of GELU needs a gradient, so GELU keeps nothing there;
- the LM head frozen keeps no input (adapted: what a block's adapter keeps); BLOOM's LayerNorm
  on the frozen embedding keeps nothing.

Autocast (``amp-*``): each adapter keeps a 16-bit copy of its own, frozen layers none, and the
16-bit weight copies kept are those ``profiling.estimate.lora_neox_amp`` counts (with QLoRA:
the adapters' alone, bitsandbytes' fp32 outputs); under full checkpointing the blocks' copies
die with their regions, the LM head's adapter's stay (``lora._head_adapter_copies``) and the
recomputed block's backward is ``estimate.recomputed_neox``'s bound; QLoRA or selective
checkpointing under autocast is refused in one sentence. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling._config_lora import peft_autocast
from profiling.estimate import lora_neox_amp
from profiling.estimate.activations import Bytes, Dims, Term, _cuda
from profiling.estimate.lora_bytes import adapter_bytes, adapter_compute, mask_bytes, own_copies

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def check(d: Dims, cfg: TrainingConfig) -> str | None:
    """Why the estimate cannot model this LoRA on this model (None: it can)."""
    from profiling.estimate.hf_ops import eager

    amp = cfg.precision.startswith("amp-")
    ckpt = cfg.checkpointing
    # selective under SDPA recomputes nothing: the step without checkpointing (estimate.selective)
    plain = ckpt == "none" or (ckpt == "selective" and not eager(d, cfg))
    if amp and not plain and (ckpt != "full" or cfg.qlora):
        return (
            "LoRA on GPT-NeoX's kind of model under autocast with selective checkpointing of "
            "eager attention, or QLoRA with checkpointing, is not modelled (the recomputed "
            "blocks' 16-bit copies); use --precision bf16, or trace it"
        )
    cuda = getattr(cfg, "target", "cuda") == "cuda"
    if peft_autocast(cfg) and (cfg.qlora or not cuda or not plain):
        return (
            "peft's fp32 adapters under the Trainer's autocast on GPT-NeoX's kind of model with "
            "--qlora, --checkpointing (but selective under SDPA) or --target cpu is not "
            "modelled; leave out --autocast-adapters for 16-bit adapters, or trace it"
        )
    roles = set(cfg.lora_targets) - {"lm_head"}
    if not roles & {"q", "k", "v"}:
        return (
            "LoRA without q, k or v on GPT-NeoX's kind of model: the first block's attention then "
            "keeps nothing, which the estimate does not model; adapt at least one of q, k, v"
        )
    return None


def _own(cfg: TrainingConfig, e: Bytes) -> bool:
    return own_copies(cfg, e)


def _kept_by(cfg: TrainingConfig, e: Bytes, names: set[str], adapters: list[str]) -> bool:
    """Whether an adapter keeps the very tensor these frozen layers read."""
    return not _own(cfg, e) and bool(names & set(adapters))


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What LoRA changes in one block's saved activations."""
    T, tok = d.s * d.b, f"{d.s}·{d.b}"
    adapters = lora_neox_amp.adapters(d, cfg)
    ac, cc = adapter_bytes(cfg), adapter_compute(cfg, e)
    names = [n for n, _, _ in adapters]
    a_out = sum(w for _, _, w in adapters)
    terms = [Term(f"LoRA A outputs ({', '.join(names)})", T * a_out * cc, f"s·b·Σ A·{cc} B",
                  f"{tok}·{a_out}·{cc}")]  # fmt: skip
    inputs = sum(w for _, w, _ in adapters)
    if _own(cfg, e):
        # autocast's 16-bit copy for lora_A (estimate.lora_neox_amp)
        dt = 2 if e.amp or peft_autocast(cfg) else ac
        why = (
            "autocast's copies"
            if e.amp or peft_autocast(cfg)
            else "the fp32 casts"
            if ac != e.c
            else "lora_dropout's outputs"
        )
        terms.append(Term(f"LoRA inputs (each adapter's own: {why})", T * inputs * dt,
                          f"s·b·Σ inputs·{dt} B", f"{tok}·{inputs}·{dt}"))  # fmt: skip
    if cfg.lora_dropout:
        m = mask_bytes(cfg)
        terms.append(Term("LoRA dropout masks", T * inputs * m, f"s·b·Σ inputs·{m} B",
                          f"{tok}·{inputs}·{m}"))  # fmt: skip
    terms += _zero_pad(d, cfg, cc)
    if not (cfg.qlora and cfg.bnb_keeps_inputs):
        terms += _frozen_inputs(d, e, cfg, names)
    if peft_autocast(cfg):
        terms.append(lora_neox_amp.peft_norms(d, e))
        terms += lora_neox_amp.peft_gelu_new(d, e, cfg)
    return terms + lora_neox_amp.qlora_per_layer(d, cfg)


def _zero_pad(d: Dims, cfg: TrainingConfig, ac: int) -> list[Term]:
    """LitGPT's zero_pad of a fused q/k/v update with a slice disabled: ``index_copy`` keeps
    its source (the B output reshaped, a copy: autograd saves it for ``expand_as``) and the
    int64 index of the enabled columns."""
    x = d.extra["neox"]
    slices = [t for t in ("q", "k", "v") if t in cfg.lora_targets]
    if not x["fused_qkv"] or len(slices) in (0, 3):
        return []
    q = int(x["q_dim"])
    w = sum(q if t == "q" else d.k for t in slices)
    T, tok = d.s * d.b, f"{d.s}·{d.b}"
    return [Term(f"LitGPT's zero_pad ({', '.join(slices)} of q/k/v: the update's copy, the index)",
                 T * w * ac + w * 8, f"s·b·{w}·{ac} + {w}·8 B",
                 f"{tok}·{w}·{ac} + {w}·8")]  # fmt: skip


def attention_norm_kept(d: Dims, e: Bytes, cfg: TrainingConfig) -> bool:
    """Whether an adapter on q/k/v keeps the attention norm's output itself (its own input, no
    copy), as ``_frozen_inputs`` reads it."""
    names = [n for n, _, _ in lora_neox_amp.adapters(d, cfg)]
    return _kept_by(cfg, e, {"qkv", "q", "k", "v"}, names)


def _frozen_inputs(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: list[str]) -> list[Term]:
    """Full training's matmul inputs that frozen layers no longer keep."""
    x = d.extra["neox"]
    if e.amp:  # every adapter keeps a copy of its own: nothing is shared
        return _not_kept("frozen layers: inputs not kept", lora_neox_amp.frozen_lost(d, e), d, e)
    one_norm = x["residual"] == "parallel_one_norm"
    qkv = {"qkv", "q", "k", "v"}
    lost: list[tuple[str, int]] = []
    if one_norm:
        if not _kept_by(cfg, e, qkv | {"up"}, adapters):
            lost.append(("the LayerNorm output", d.h))
    else:
        if not _kept_by(cfg, e, qkv, adapters):
            lost.append(("the attention LayerNorm output", d.h))
        if not _kept_by(cfg, e, {"up"}, adapters):
            lost.append(("the MLP LayerNorm output", d.h))
    # CUDA's fp32 SDPA writes its output token-major (profiling.estimate.neox); eager attention
    # copies it in every dtype (transformers' ``eager_attention_forward``: ``.contiguous()``)
    fp32_sdpa = _cuda(cfg) and e.c == 4 and cfg.attention != "eager"
    copy = d.extra.get("hf_module") in ("gpt_neox", "phi") and not fp32_sdpa
    copy = copy or (bool(x.get("litgpt")) and not (_cuda(cfg) and e.c == 4))  # LitGPT's Phi
    copy = copy or d.extra.get("hf_module") == "bloom"  # its _merge_heads copy, every target
    if copy and not _kept_by(cfg, e, {"o"}, adapters):  # as profiling.estimate.neox counts it
        lost.append(("the attention output's copy", int(x["q_dim"])))
    # under selective the checkpointed SDPA call keeps no output: CUDA's fp32 one, uncopied,
    # is kept for the output projection alone (``selective.selective_neox``)
    own_out = fp32_sdpa and cfg.checkpointing == "selective"
    own_out = own_out and d.extra.get("hf_module") in ("gpt_neox", "phi")
    if own_out and not _kept_by(cfg, e, {"o"}, adapters):
        lost.append(("the attention output", int(x["q_dim"])))
    if not _kept_by(cfg, e, {"down"}, adapters):
        lost.append(("GELU's output", d.f))
    return _not_kept("frozen layers: inputs not kept", lost, d, e)


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: int = 0) -> list[Term]:
    """The first block's reads of the frozen embedding, the LM head, and under autocast the
    adapters' 16-bit copies (``adapters``: their parameters)."""
    T, tok, h, r = d.s * d.b, f"{d.s}·{d.b}", d.h, int(cfg.lora_rank or 0)
    own, ac, cc = _own(cfg, e), adapter_bytes(cfg), adapter_compute(cfg, e)
    # the adapter's own input: autocast's 16-bit copy, or its dtype's
    oc = 2 if e.amp or peft_autocast(cfg) else ac
    terms: list[Term] = []
    head = "lm_head" in cfg.lora_targets
    # Lightning's 4-bit LM head (--fabric-bnb, untied) of bitsandbytes <= 0.43.1 keeps it
    nf4_keeps = cfg.fabric_bnb and cfg.bnb_keeps_inputs and not d.extra.get("tied")
    # Liger's and CCE's kernels: their tape keeps what they keep of it (as lora._head)
    if (not head or own) and not nf4_keeps and cfg.loss not in ("liger", "cce"):
        terms.append(Term("frozen LM head: final norm's output not kept", -T * h * e.c,
                          f"−s·b·h·{e.c} B", f"−{tok}·{h}·{e.c}"))  # fmt: skip
    if head and cfg.loss == "litgpt":  # A's output and the mask: the loss tape's, chunk by
        if own:  # chunk (losses.head_chunks); the adapter's own input copy stays here
            terms.append(Term("LM head's adapter (its own input)", T * h * oc,
                              f"s·b·h·{oc} B", f"{tok}·{h}·{oc}"))  # fmt: skip
    elif head:
        m = mask_bytes(cfg) if cfg.lora_dropout else 0
        per_h = (oc if own else 0) + m
        terms.append(Term("LM head's adapter (A output, its own input, dropout mask)",
                          T * (r * cc + h * per_h), f"s·b·(r·{cc} + h·{per_h}) B",
                          f"{tok}·({r}·{cc} + {h}·{per_h})"))  # fmt: skip
    if d.extra.get("hf_module") == "bloom":  # word_embeddings_layernorm reads the frozen table
        stats = 8 if _cuda(cfg) else 2 * e.r
        terms.append(Term("BLOOM's embeddings' LayerNorm keeps nothing (a frozen input)",
                          -T * (h * e.r + stats), f"−s·b·(h·{e.r} + {stats}) B",
                          f"−{tok}·({h}·{e.r} + {stats})"))  # fmt: skip
    if peft_autocast(cfg):
        terms.append(lora_neox_amp.peft_final_norm(d, e))
    if cfg.checkpointing == "full":
        if head and e.amp and d.V:  # the head runs outside the checkpointed blocks: autocast's
            # copies of its adapter's A and B stay (as lora._head_adapter_copies counts them;
            # not imported: lora imports this module)
            V = int(d.V)
            terms.append(Term("autocast's 16-bit copies of the LM head's adapter (outside the "
                              "checkpointed blocks)", (r * h + V * r) * 2, "(r·h + V·r)·2 B",
                              f"({r}·{h} + {V}·{r})·2"))  # fmt: skip
        return terms
    if cfg.compile:  # the partitioner's count of the first block (estimate.compiled.once)
        return terms  # holds what its frozen input changes; each block casts its own adapters
    if e.amp or peft_autocast(cfg):
        # 4-bit frozen layers have no 16-bit copies to lose: only their adapters' A copies
        frozen = e.amp and not lora_neox_amp.bnb_amp(cfg)
        terms += lora_neox_amp.first_block_copies(
            d, cfg, lora_neox_amp.adapters(d, cfg), frozen=frozen
        )
        terms += lora_neox_amp.qlora_first_block(d, cfg)
        terms.append(lora_neox_amp.adapter_copies(adapters))
    if peft_autocast(cfg):
        terms.append(lora_neox_amp.peft_first_norms(d, e))
    return _first_block(d, e, cfg) + terms


def _first_block(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The first block's LayerNorms that read the embedding keep nothing, nor the dropouts of
    the adapters reading them their masks, nor GELU its input when nothing upstream trains."""
    x = d.extra["neox"]
    T, tok, h = d.s * d.b, f"{d.s}·{d.b}", d.h
    residual = str(x["residual"])
    norms = 1 if residual == "sequential" else (1 if residual == "parallel_one_norm" else 2)
    stats = 8 if _cuda(cfg) else 2 * e.r
    terms = [Term(f"first block: {norms} LayerNorm(s) reading the embedding keep nothing",
                  -T * (h * e.r + norms * stats), f"−s·b·(h·{e.r} + {norms}·{stats}) B",
                  f"−{tok}·({h}·{e.r} + {norms}·{stats})")]  # fmt: skip
    adapters = lora_neox_amp.adapters(d, cfg)
    reading = {"qkv", "q", "k", "v"} | ({"up"} if residual != "sequential" else set())
    if residual != "sequential" and "up" not in cfg.lora_targets:
        reading.add("down")  # GELU's output needs no gradient either
    first = [(n, w) for n, w, _ in adapters if n in reading]
    if cfg.lora_dropout and first:
        m = mask_bytes(cfg)
        width = sum(w for _, w in first)
        terms.append(Term(f"first block: the dropout masks of {', '.join(n for n, _ in first)}"
                          " not kept", -T * width * m, f"−s·b·{width}·{m} B",
                          f"−{tok}·{width}·{m}"))  # fmt: skip
    if cfg.qlora and cfg.bnb_keeps_inputs:
        terms += _first_block_4bit(d, e, cfg, [n for n, _, _ in adapters])
    if residual != "sequential" and "up" not in cfg.lora_targets:
        # all the MLP keeps but GELU's output (down's input: per_layer's rule)
        mlp = _mlp_bytes(d, e, cfg) - T * d.f * e.c
        terms.append(Term("first block: the MLP's GELU keeps nothing (nothing before it trains)",
                          -mlp, "−(the MLP's kept bytes − s·b·f·c)", f"−{mlp}"))  # fmt: skip
    return terms


def _first_block_4bit(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: list[str]) -> list[Term]:
    """bitsandbytes <= 0.43.1 keeps a 4-bit layer's input only when it needs a gradient: in the
    first block not the LayerNorm outputs that read the embedding, nor GELU's output where
    nothing before it trains (unless an adapter keeps that very tensor)."""
    residual = str(d.extra["neox"]["residual"])
    qkv = {"qkv", "q", "k", "v"}
    # under autocast each 4-bit layer keeps its own 16-bit cast of the norm's output
    # (Linear4bit.forward's x.to(compute_dtype)): q, k, v three where not fused
    n_qkv = 3 if e.amp and not d.extra["neox"]["fused_qkv"] else 1
    lost: list[tuple[str, int]] = []
    if residual == "parallel_one_norm":
        if not _kept_by(cfg, e, qkv | {"up"}, adapters):
            lost.append(("the LayerNorm output" + (" (a copy per layer)" if e.amp else ""),
                         d.h * ((n_qkv + 1) if e.amp else 1)))  # fmt: skip
    else:
        if not _kept_by(cfg, e, qkv, adapters):
            lost.append(("the attention LayerNorm output", d.h * n_qkv))
        if residual == "parallel" and not _kept_by(cfg, e, {"up"}, adapters):
            lost.append(("the MLP LayerNorm output", d.h))
    parallel_frozen_up = residual != "sequential" and "up" not in cfg.lora_targets
    if parallel_frozen_up and not _kept_by(cfg, e, {"down"}, adapters):
        lost.append(("GELU's output", d.f))
    return _not_kept("first block: its 4-bit layers keep no input", lost, d, e)


def held_4bit_inputs(d: Dims, cfg: TrainingConfig, c: int, head_keeps: bool) -> Term:
    """LitGPT's loop holds the previous micro-batch's graph, and through it every 4-bit layer's
    input that needed a gradient (bitsandbytes <= 0.43.1; ``losses.held_over``): per block the
    LayerNorm outputs (one per norm), the attention output (the output projection's input) and
    GELU's output; not the first block's reads of the embedding (nor its GELU's output where
    up is not adapted in a parallel block); the final norm's output for a 4-bit LM head."""
    residual = str(d.extra["neox"]["residual"])
    q = int(d.extra["neox"]["q_dim"])
    norms = 1 if residual == "parallel_one_norm" else 2
    first = d.h * (2 if residual == "parallel" else 1)
    if residual != "sequential" and "up" not in cfg.lora_targets:
        first += d.f
    head = d.h if head_keeps else 0
    value = d.s * d.b * c * (d.L * (norms * d.h + q + d.f) - first + head)
    return Term(
        "the previous micro-batch's 4-bit layers' inputs (bitsandbytes <= 0.43.1, held by its "
        "graph)",
        value,
        f"s·b·{c}·(L·({norms}h + q + f) − {first} + {head}) B",
        f"{d.s}·{d.b}·{c}·({d.L}·({norms}·{d.h} + {q} + {d.f}) − {first} + {head})",
    )


def _mlp_bytes(d: Dims, e: Bytes, cfg: TrainingConfig) -> int:
    """What full training's MLP keeps per block (``profiling.estimate.neox``)."""
    if d.extra.get("hf_module") == "phi":
        from profiling.estimate.hf_ops import _gelu_new

        return int(_gelu_new(d, lora_neox_amp.autocast_bytes(e, cfg), cfg).bytes)
    return d.s * d.b * 2 * d.f * e.c


def _not_kept(what: str, lost: list[tuple[str, int]], d: Dims, e: Bytes) -> list[Term]:
    """One negative term for the inputs ``lost`` (name, width per token) no layer keeps."""
    if not lost:
        return []
    total = sum(w for _, w in lost)
    return [Term(f"{what} ({', '.join(n for n, _ in lost)})",
                 -d.s * d.b * total * e.c, f"−s·b·{total}·{e.c} B",
                 f"−{d.s}·{d.b}·{total}·{e.c}")]  # fmt: skip


__all__ = ["check", "held_4bit_inputs", "once_per_model", "per_layer"]
