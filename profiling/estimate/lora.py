"""LoRA and QLoRA in closed form: the NF4 base's exact bytes and what a frozen base changes in
the activations, matching the trace of peft's adapters (``profiling.trace.lora``).

A frozen weight needs no gradient, so autograd keeps less (read from the trace's saved tensors,
op by op, on the Llama family's blocks with s·b tokens, hidden h, query width q, MLP width f,
rank r):

- each adapter (on q, k, v, o, gate, up, down, as ``lora_targets`` names them) keeps its A
  output (s·b·r) for B's gradient, and its input: the very tensor its base layer was given,
  or a copy of its own where peft casts the input to the fp32 adapters (``mixed``), where
  autocast casts it for lora_A (``amp-*``), or where lora_dropout makes a new tensor (and keeps
  its mask: a bool on CUDA, the adapters' dtype on the CPU);
- frozen base layers keep no matmul inputs: a shared input (the attention norm's output for q,
  k, v, the MLP norm's for gate and up, the product for down) stays only while an adapter keeps
  that very tensor; frozen experts keep neither their routed tokens nor their products; the
  norms keep no normalized output (it serves only the norm weight's gradient, on the CPU's
  unfused norm and in transformers' eager RMSNorm: in the model's dtype in Llama's, fp32 in
  OLMo 2's and Gemma's, all four of Gemma 2's);
- once per model: the first block's first norm keeps nothing (the frozen embedding's output
  needs no gradient; not even Gemma's fp32 ``1 + weight``), nor its q, k, v adapters' dropout
  masks, nor, under autocast, the first block's q, k, v weight copies and their A copies; the
  final norm's output is not kept for a frozen LM head (an adapted one keeps what a block's
  adapter keeps; Lightning's 4-bit one under ``--bnb-keeps-inputs`` keeps it as its input);
  autocast keeps 16-bit copies of the adapters' weights.

QLoRA (``--qlora``) runs bitsandbytes' ``MatMul4Bit``, which since 0.43.2 (July 2024, "fix
QLoRA mem bug: delete useless buffered activation") keeps only the packed weight; 0.43.1 and
earlier also kept the layer's input whenever it needed a gradient (``--bnb-keeps-inputs``): then
every frozen layer keeps its input as in full training.

QLoRA's base: the bytes bitsandbytes keeps for each 4-bit weight, with and without double
quantization, are ``profiling.estimate.bnb``'s.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling._config_lora import peft_autocast
from profiling.estimate import dora, litgpt_qkv
from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.hf_ops import eager, fp32_norm, fp32_weight
from profiling.estimate.hf_ops import normalized_bytes as _normalized_bytes
from profiling.estimate.hf_ops import unfused_norms as _unfused_norms
from profiling.estimate.lora_bytes import (
    adapter_bytes,
    adapter_compute,
    head_input_not_kept,
    mask_bytes,
    own_copies,
)
from profiling.models.loss_sizes import LITGPT_CHUNK

if TYPE_CHECKING:
    from profiling.config import TrainingConfig


def _block_norms(d: Dims) -> int:
    """RMSNorms per block: Gemma 2's four (before and after each sublayer), else two."""
    return 4 if d.extra.get("norms") == "sandwich" else 2


_ATTENTION_INPUTS = ("q", "k", "v")


def block_targets(cfg: TrainingConfig) -> list[str]:
    """The adapted Linear layers of a block (the LM head is the model's, once)."""
    return [t for t in cfg.lora_targets if t != "lm_head"]


def _widths(d: Dims) -> dict[str, int]:
    """Each adaptable layer's input width: h for q, k, v, gate, up; q for o; f for down."""
    q = d.a * d.hd
    return {"q": d.h, "k": d.h, "v": d.h, "o": q, "gate": d.h, "up": d.h, "down": d.f}


def check_targets(d: Dims, cfg: TrainingConfig) -> str | None:
    """Why the estimate cannot model these LoRA targets on this model (None: it can)."""
    if peft_autocast(cfg) and d.arch in ("encoder", "t5"):  # Llama's, GPT-NeoX's (lora_neox)
        return (
            f"peft's fp32 adapters under the Trainer's autocast on a bf16 {d.arch} model: "
            "modelled on the Llama family and GPT-NeoX's kind only (leave out --precision bf16 "
            "for an upper bound, the base counted in fp32)"
        )
    if d.arch == "encoder" and not cfg.dora:  # BERT, RoBERTa, ViT (estimate.lora_encoder)
        from profiling.estimate import lora_encoder

        return lora_encoder.check(d, cfg)
    if d.arch == "neox":
        from profiling.estimate.lora_neox import check

        return check(d, cfg) or dora.check(d, cfg)
    if d.arch == "t5":  # T5, mT5 (estimate.lora_t5; with full checkpointing estimate.t5_ckpt)
        from profiling.estimate import lora_t5

        return lora_t5.check(d, cfg)
    if problem := dora.check(d, cfg):
        return problem
    targets = block_targets(cfg)
    if d.extra.get("experts") and set(targets) & {"gate", "up", "down"}:
        return (
            "LoRA on gate, up or down of a mixture of experts: its experts are not Linear "
            "layers here (adapt q, k, v, o)"
        )
    if targets and not set(targets) & set(_ATTENTION_INPUTS):
        return (
            "LoRA without q, k or v: the first block's attention then keeps nothing, which the "
            "estimate does not model; adapt at least one of q, k, v"
        )
    return None


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What LoRA changes in one block's saved activations (added to full training's); under
    DeepSpeed ZeRO-3 the frozen linears keep their inputs (``profiling.estimate.zero3_linear``)."""
    from profiling.estimate.zero3_linear import kept

    return kept(_per_layer(d, e, cfg), cfg)


def _per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    if d.arch in ("neox", "encoder", "t5"):
        from profiling.estimate import lora_encoder, lora_neox, lora_t5

        kind = {"neox": lora_neox, "t5": lora_t5}.get(d.arch, lora_encoder)
        return kind.per_layer(d, e, cfg) + (dora.per_layer(d, e, cfg) if cfg.dora else [])
    sb, tok, r = d.s * d.b, f"{d.s}·{d.b}", int(cfg.lora_rank or 0)
    targets, width = block_targets(cfg), _widths(d)
    ac = adapter_compute(cfg, e)
    n = len(targets)
    terms = [Term(f"LoRA A outputs ({', '.join(targets)})", sb * n * r * ac,
                  f"s·b·{n}r·{ac} B", f"{tok}·{n}·{r}·{ac}")]  # fmt: skip
    own = own_copies(cfg, e)
    if own:
        dt = 2 if e.amp else ac  # autocast's 16-bit copy, or the fp32 cast / dropped copy
        total = sum(width[t] for t in targets)
        why = (
            "autocast's copies"
            if e.amp or peft_autocast(cfg)
            else "peft's fp32 casts"
            if ac != e.c
            else "lora_dropout's outputs"
        )
        terms.append(Term(f"LoRA inputs (each adapter's own: {why})", sb * total * dt,
                          f"s·b·Σ inputs·{dt} B", f"{tok}·{total}·{dt}"))  # fmt: skip
    if cfg.lora_dropout:
        m = mask_bytes(cfg)
        total = sum(width[t] for t in targets)
        terms.append(Term("LoRA dropout masks", sb * total * m, f"s·b·Σ inputs·{m} B",
                          f"{tok}·{total}·{m}"))  # fmt: skip
    fused = litgpt_qkv.applies(d, cfg, eager)
    if not (cfg.qlora and cfg.bnb_keeps_inputs):
        terms += _frozen_inputs(d, e, targets, own, 1 if fused else 3)
    if fused:  # one adapter on LitGPT's fused q/k/v
        terms += litgpt_qkv.lora_per_layer(d, e, cfg, d.a * d.hd)
    if cfg.dora:  # DoRA's magnitude terms (estimate.dora)
        terms += dora.per_layer(d, e, cfg)
    terms += _fp32_mlp(d, e, cfg)
    if _unfused_norms(d, cfg):
        h, q = d.h, d.a * d.hd
        nb, k = _normalized_bytes(d, e), _block_norms(d)
        terms.append(Term("frozen norms: no normalized outputs kept", -sb * k * h * nb,
                          f"−s·b·{k}h·{nb} B", f"−{tok}·{k}·{h}·{nb}"))  # fmt: skip
        if d.extra.get("qk_norm"):  # q and k norms (Qwen3, OLMo 2): frozen too
            nb = e.c if d.extra.get("hf_module") else 4  # in the projections' dtype
            terms.append(Term("frozen q/k norms: no normalized outputs kept",
                              -sb * (q + d.k) * nb, f"−s·b·(q + k)·{nb} B",
                              f"−{tok}·({q} + {d.k})·{nb}"))  # fmt: skip
    return terms


def _bnb_under_autocast(cfg: TrainingConfig) -> bool:
    """bitsandbytes' 4-bit layers under autocast (peft's prepare_model_for_kbit_training has cast
    the rest of the model to fp32): ``Linear4bit.forward`` casts its input to the compute dtype
    and its output back to the input's, fp32, so the MLP between them runs in fp32."""
    return bool(cfg.qlora and not cfg.torchao_nf4 and cfg.autocast)


def _fp32_mlp(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """The gate's and up's fp32 outputs and the SiLU's, which the SwiGLU keeps for backward: 4
    bytes each where full training's autocast keeps 2 (read in the trace's saved tensors)."""
    if not _bnb_under_autocast(cfg) or d.extra.get("experts"):
        return []
    sb, f = d.s * d.b, d.f
    return [Term("QLoRA under autocast: gate, up and SiLU outputs in fp32 (bitsandbytes returns "
                 "its input's dtype)", sb * 3 * f * 2, "s·b·3f·2 B",
                 f"{d.s}·{d.b}·3·{f}·2")]  # fmt: skip


def _frozen_inputs(d: Dims, e: Bytes, targets: list[str], own: bool, qkv: int) -> list[Term]:
    """The matmul inputs full training keeps that frozen base layers do not: a shared input
    stays only while an adapter keeps that very tensor (no cast, no dropout). ``qkv``: the
    attention's input projections (3; LitGPT's fused q/k/v 1, one autocast copy of its input
    in full training's count: hf_ops' matmul inputs)."""
    sb, tok, h, f = d.s * d.b, f"{d.s}·{d.b}", d.h, d.f
    if d.extra.get("experts"):
        terms = _frozen_experts(d, e)
        if own and not e.amp:  # the adapters keep copies: the attention norm's output goes
            terms.append(Term("frozen layers: inputs not kept (attention norm output)",
                              -sb * h * e.c, f"−s·b·h·{e.c} B", f"−{tok}·{h}·{e.c}"))  # fmt: skip
        return terms
    if e.amp:  # every base layer's autocast copy of its input, and the 16-bit product
        n, names = qkv + 2, "q, k, v" if qkv == 3 else "q/k/v"
        return [Term(f"frozen layers: no autocast input copies ({names}, gate, up) nor product",
                     -sb * (n * h * 2 + f * e.c), f"−s·b·({n}h·2 + f·{e.c}) B",
                     f"−{tok}·({n}·{h}·2 + {f}·{e.c})")]  # fmt: skip
    lost: list[tuple[str, int]] = []
    shared = not own
    if not (shared and set(targets) & set(_ATTENTION_INPUTS)):
        lost.append(("attention norm output", h))
    if not (shared and set(targets) & {"gate", "up"}):
        lost.append(("MLP norm output", h))
    if not (shared and "down" in targets):
        lost.append(("gate·up product", f))
    if not lost:
        return []
    total = sum(w for _, w in lost)
    return [Term(f"frozen layers: inputs not kept ({', '.join(n for n, _ in lost)})",
                 -sb * total * e.c, f"−s·b·{total}·{e.c} B",
                 f"−{tok}·{total}·{e.c}")]  # fmt: skip


def _frozen_experts(d: Dims, e: Bytes) -> list[Term]:
    """Frozen experts keep neither their routed tokens nor the product down's matmul takes, and
    the router its input (under autocast: its 16-bit copy)."""
    from profiling.estimate.variants import routed_slots

    tok, h = f"{d.s}·{d.b}", d.h
    fe, P = int(d.extra["expert_ffn"]), routed_slots(d)
    routed = 2 if e.amp else 1
    router = 2 if e.amp else e.c
    value = d.s * d.b * h * router + P * (routed * h + fe) * e.c
    return [Term("frozen experts: no routed tokens, products or router input kept", -value,
                 f"−(s·b·h·{router} + P·({routed}h + f_e)·{e.c}) B",
                 f"−({tok}·{h}·{router} + {P}·({routed}·{h} + {fe})·{e.c})")]  # fmt: skip


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: int) -> list[Term]:
    """What LoRA changes once per model: the first block's inputs, the LM head's input (frozen,
    or adapted), autocast's copies of the adapters. With full checkpointing the blocks keep
    only their inputs, so only the LM head's changes. Under DeepSpeed ZeRO-3 a frozen head
    keeps its input (``profiling.estimate.zero3_linear``)."""
    from profiling.estimate.zero3_linear import kept

    return kept(_once_per_model(d, e, cfg, adapters), cfg)


def _once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: int) -> list[Term]:
    if d.arch == "encoder":  # estimate.lora_encoder, from full training's embeddings
        from profiling.estimate import encoder

        return encoder.lora_once(d, e, cfg)
    if d.arch in ("neox", "t5"):
        from profiling.estimate import lora_neox, lora_t5

        if d.arch == "t5":
            return lora_t5.once_per_model(d, e, cfg)
        return lora_neox.once_per_model(d, e, cfg, adapters) + dora.once_per_model(d, e, cfg)
    sb, tok, h, r = d.s * d.b, f"{d.s}·{d.b}", d.h, int(cfg.lora_rank or 0)
    cpu = _unfused_norms(d, cfg)
    own = own_copies(cfg, e)
    terms = _head(d, e, cfg, own)
    if cfg.checkpointing == "full" and not cfg.compile and "lm_head" in cfg.lora_targets:
        terms += _head_adapter_copies(d, e, cfg)
    if cfg.checkpointing == "full" or cfg.compile:
        # full checkpointing: the blocks keep only their inputs; compiled: the partitioner's
        # count of the first block (estimate.compiled.once) already holds what its frozen
        # input changes, and each block casts its own adapters
        return terms
    terms += dora.once_per_model(d, e, cfg)
    norm = sb * (h * 4 + 4) if cpu else sb * (h * e.r + 4)
    terms.insert(0, Term(
        "first block's first norm keeps nothing (the frozen embedding needs no gradient)",
        -norm,
        f"−s·b·(h·{4 if cpu else e.r} + 4) B",
        f"−{tok}·({h}·{4 if cpu else e.r} + 4)",
    ))  # fmt: skip
    if fp32_weight(d, e):  # no gradient wants its fp32 weight (Gemma's 1 + weight, LitGPT's)
        what = "LitGPT's weight" if d.extra.get("litgpt_norm") else "Gemma's 1 + weight"
        terms.insert(1, Term(f"first block's first norm: {what} not kept", -h * 4,
                             "−h·4 B", f"−{h}·4"))  # fmt: skip
    first = [t for t in block_targets(cfg) if t in _ATTENTION_INPUTS]
    if cfg.qlora and cfg.bnb_keeps_inputs and own and not e.amp:
        # No gradient reaches the first block's q, k, v input, so its 4-bit layers keep
        # nothing, and the adapters keep copies of their own.
        terms.append(Term("first block's attention norm output not kept (4-bit q, k, v)",
                          -sb * h * e.c, f"−s·b·h·{e.c} B", f"−{tok}·{h}·{e.c}"))  # fmt: skip
    terms += _first_qk_norms(d, e, cfg, first)
    if cfg.lora_dropout and first:  # no gradient reaches their input: dropout keeps no mask
        m = mask_bytes(cfg)
        terms.append(Term(f"first block's {', '.join(first)} dropout masks not kept",
                          -sb * len(first) * h * m, f"−s·b·{len(first)}h·{m} B",
                          f"−{tok}·{len(first)}·{h}·{m}"))  # fmt: skip
    if litgpt_qkv.applies(d, cfg, eager):
        terms += litgpt_qkv.lora_first_block(d, cfg)
    if e.amp:
        terms.append(_first_qkv_copies(d, cfg, first))
        terms.append(Term("autocast's 16-bit copies of the adapters", adapters * 2,
                          "adapters · 2 B", f"{adapters} · 2"))  # fmt: skip
    elif peft_autocast(cfg):  # bf16 base weights: autocast copies only peft's fp32 adapters
        w = len(first) * r * h
        terms.append(Term(
            f"autocast's 16-bit copies of peft's fp32 adapters, but the first block's A "
            f"({len(first)})",
            (adapters - w) * 2,
            f"(adapters − {len(first)}·r·h) · 2 B",
            f"({adapters} − {len(first)}·{r}·{h}) · 2",
        ))  # fmt: skip
    return terms


def _head_adapter_copies(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """Under full checkpointing the blocks' autocast copies die with their regions, but the LM
    head runs outside them: autocast's 16-bit copies of its adapter's A and B stay kept."""
    if not (e.amp or peft_autocast(cfg)) or d.V is None:
        return []
    r, h, V = int(cfg.lora_rank or 0), d.h, d.V
    return [Term("autocast's 16-bit copies of the LM head's adapter (outside the checkpointed "
                 "blocks)", (r * h + V * r) * 2, "(r·h + V·r)·2 B",
                 f"({r}·{h} + {V}·{r})·2")]  # fmt: skip


def _first_qkv_copies(d: Dims, cfg: TrainingConfig, first: list[str]) -> Term:
    """Under autocast no gradient reaches the first block's q, k, v input, so neither the
    16-bit weight copies autocast made for their matmuls nor their A's copies are kept. A 4-bit
    layer dequantizes in 16 bits itself (no autocast copy to drop): only the A copies."""
    h, q, r, n = d.h, d.a * d.hd, int(cfg.lora_rank or 0), len(first)
    if cfg.qlora:
        return Term(f"first block's q, k, v A copies ({n}) not kept", -n * r * h * 2,
                    f"−{n}·r·h·2 B", f"−{n}·{r}·{h}·2")  # fmt: skip
    return Term(
        f"first block's q, k, v weight copies and their A copies ({n}) not kept",
        -(h * q + 2 * h * d.k + n * r * h) * 2,
        f"−(h·q + 2h·k + {n}·r·h)·2 B",
        f"−({h}·{q} + 2·{h}·{d.k} + {n}·{r}·{h})·2",
    )


def _first_qk_norms(d: Dims, e: Bytes, cfg: TrainingConfig, first: list[str]) -> list[Term]:
    """In the first block no gradient reaches the output of an unadapted q or k projection, so
    its q/k norm (Qwen3, OLMo 2) keeps nothing there."""
    qk = d.extra.get("qk_norm")
    if not qk:
        return []

    kv_heads = int(d.extra.get("kv_heads") or d.a)
    hf, cpu = d.extra.get("hf_module"), getattr(cfg, "target", "cuda") == "cpu"
    terms = []
    for role, width, heads in (("q", d.a * d.hd, d.a), ("k", d.k, kv_heads)):
        if role in first:
            continue
        rows = heads if qk == "head" else 1
        if hf:  # eager ops: the fp32 input (and, fp32 norms, the normalized); LoRA's term
            per = (8 if fp32_norm(d) else 4 + e.c) - e.c  # took the normalized already
        elif cpu:  # fp32 input and normalized, less the normalized LoRA's term took
            per = 4
        else:  # fused: its input (fp32 under autocast, which casts rms_norm's input)
            per = 4 if e.amp else e.c
        value = d.s * d.b * (width * per + 4 * rows)
        terms.append(Term(f"first block's {role} norm keeps nothing ({role} not adapted)",
                          -value, f"−s·b·({role}·{per} + 4·{rows}) B",
                          f"−{d.s}·{d.b}·({width}·{per} + 4·{rows})"))  # fmt: skip
    return terms


def _head(d: Dims, e: Bytes, cfg: TrainingConfig, own: bool) -> list[Term]:
    """The LM head: frozen, it keeps no input; adapted, its adapter keeps what a block's do."""
    sb, tok, h, r = d.s * d.b, f"{d.s}·{d.b}", d.h, int(cfg.lora_rank or 0)
    cpu = _unfused_norms(d, cfg)
    adapted = "lm_head" in cfg.lora_targets
    # Lightning's 4-bit LM head (--fabric-bnb, untied) of bitsandbytes <= 0.43.1 keeps its
    # input, the final norm's output, as every 4-bit layer does (MatMul4Bit's ctx.tensors);
    # the loss's tape keeps it past the head (estimate.loss_tapes, _fwd_litgpt)
    nf4_keeps = cfg.fabric_bnb and cfg.bnb_keeps_inputs and not d.extra.get("tied")
    head_in = head_input_not_kept(d, e, cfg)
    n = _normalized_bytes(d, e) if cpu else 0
    terms = []
    if head_in or n:
        terms.append(Term(
            "frozen LM head: final norm's output not kept"
            + (", nor its normalized" if cpu else ""),
            -sb * h * (head_in + n),
            f"−s·b·h·({head_in}" + (f" + {n}" if cpu else "") + ") B",
            f"−{tok}·{h}·({head_in}" + (f" + {n}" if cpu else "") + ")",
        ))  # fmt: skip
    if adapted and nf4_keeps and not own and d.b > 1 and d.s > LITGPT_CHUNK:
        # Both keep an input then: the 4-bit head the final norm's output, and A (no dropout,
        # no cast) the copy matmul makes of each strided chunk to fold it (A needs a gradient)
        terms.append(Term("LM head's adapter: A's copies of the strided chunks", sb * h * e.c,
                          f"s·b·h·{e.c} B", f"{tok}·{h}·{e.c}"))  # fmt: skip
    if adapted:
        ac = adapter_compute(cfg, e)
        per_h = (2 if e.amp else ac) if own else 0
        m = mask_bytes(cfg) if cfg.lora_dropout else 0
        if cfg.loss == "litgpt":  # A's output and the mask: the loss tape's (losses.head_chunks)
            ac, m = 0, 0
        if not (ac or per_h or m):
            return terms
        terms.append(Term(
            "LM head's adapter (A output" + (", its own input" if own else "")
            + (", dropout mask" if m else "") + ")",
            sb * (r * ac + h * (per_h + m)),
            f"s·b·(r·{ac} + h·({per_h} + {m})) B",
            f"{tok}·({r}·{ac} + {h}·({per_h} + {m}))",
        ))  # fmt: skip
    return terms


def nf4_moments(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    recompute: float,
    earlier: list[tuple[str, float, str]],
) -> list[tuple[str, float, str]]:
    """QLoRA's dequantization moments: torchao's NF4 (``nf4_torchao``); bitsandbytes' under
    autocast with full checkpointing, a recomputed block's fp32 MLP backward; DoRA's weight
    norm rebuilt and an adapted head's moments after the step's ``earlier`` (``dora.moments``)."""
    from profiling.estimate.nf4_torchao import moments
    from profiling.estimate.recomputed import modelled

    # compiled and recomputed: the dequantization is in the graphs walked (estimate.recomputed)
    walked = cfg.compile and cfg.checkpointing == "full" and modelled(cfg, shape)
    return (
        ([] if walked else moments(cfg, shape, parts, recompute))
        + _fp32_mlp_backward(cfg, shape, parts, recompute)
        + dora.moments(cfg, shape, parts, earlier)
    )


def _fp32_mlp_backward(
    cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float], recompute: float
) -> list[tuple[str, float, str]]:
    """Under autocast bitsandbytes' layers hand fp32 back, so in a recomputed block's backward
    the gradients of the gate's, up's and SiLU's outputs are fp32 too (s·b·3f·2 B more than
    16-bit ones) beside the dequantized weight of the layer computing (h·f·2). An upper bound:
    1.00–1.10 × the trace's peak on small Llama configs (tests/profiling/trace/
    test_lora_trace.py), tightest where the MLP is wide."""
    h, f = shape.get("hidden"), shape.get("ffn")
    if not (_bnb_under_autocast(cfg) and cfg.checkpointing == "full" and h and f and recompute):
        return []
    if shape.get("expert_linear_numels"):
        return []
    tokens, tp = cfg.seq_or_default() * cfg.batch, max(1, cfg.tp)
    fwd = sum(parts[k] for k in ("sharded weights", "optimizer", "kept", "activations"))
    extra = (tokens * 3 * f * 2 + h * f * 2) / tp
    from profiling.units import fmt_bytes as fb

    calc = (
        f"end of forward {fb(fwd)} + a recomputed block's activations {fb(recompute)} + its "
        f"MLP's fp32 gradients and a dequantized weight (s·b·3f + h·f)·2 {fb(extra)}"
    )
    return [("backward, a recomputed block's MLP in fp32", fwd + recompute + extra, calc)]


__all__ = [
    "adapter_bytes",
    "block_targets",
    "check_targets",
    "nf4_moments",
    "once_per_model",
    "per_layer",
]
