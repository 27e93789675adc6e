"""LoRA and QLoRA in closed form: the NF4 base's exact bytes and what a frozen base changes in
the activations, matching the trace of peft's adapters (``profiling.trace.lora``).

A frozen weight needs no gradient, so autograd keeps less (read from the trace's saved tensors,
op by op, on the Llama family's blocks with s·b tokens, hidden h, query width q, MLP width f,
rank r):

- each adapter keeps its A output (s·b·r) for B's gradient, and its input in the adapters'
  compute dtype: a copy of its own where peft casts the input to the fp32 adapters (``mixed``)
  or where autocast casts it (``amp-*``: o's input too, since peft first casts it to fp32);
- the frozen MLP keeps no matmul inputs (the norm's output for gate and up, the product for
  down); the norms keep no normalized output (it serves only the norm weight's gradient, on the
  CPU's unfused norm and in transformers' eager RMSNorm);
- once per model: the first block's first norm keeps nothing (the frozen embedding's output
  needs no gradient), nor, under autocast, the first block's q, k, v weight copies and their A
  copies; the final norm's output is not kept for the frozen LM head; autocast keeps 16-bit
  copies of the adapters' weights.

QLoRA's base: bitsandbytes keeps each quantized Linear weight of n values as n/2 packed bytes,
a uint8 absmax per 64 values, an fp32 absmax per 256 blocks, a 16-value fp32 code and an fp32
offset (double quantization), plus one 256-value fp32 map for the model.

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate.activations import Bytes, Dims, Term

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NF4_BLOCK = 64
NESTED_BLOCK = 256
SHARED_MAP_BYTES = NESTED_BLOCK * 4


def nf4_bytes(numel: int) -> int:
    """Bytes bitsandbytes keeps for one NF4 weight of ``numel`` values (double quantized)."""
    blocks = -(-numel // NF4_BLOCK)
    return (numel + 1) // 2 + blocks + 4 * -(-blocks // NESTED_BLOCK) + 16 * 4 + 4


def nf4_base_bytes(layer_numels: list[int], layers: int) -> int:
    """The quantized Linear layers of every block, and the shared map."""
    return layers * sum(nf4_bytes(n) for n in layer_numels) + SHARED_MAP_BYTES


def adapter_bytes(cfg: TrainingConfig) -> int:
    """The adapters' element size: fp32 (PeftModel's cast), bf16 under pure bf16."""
    return 2 if cfg.precision == "bf16" else 4


def _compute(cfg: TrainingConfig, e: Bytes) -> int:
    """The dtype the adapters' matmuls run in: autocast's 16 bits, else their own."""
    return 2 if e.amp else adapter_bytes(cfg)


def _unfused_norms(d: Dims, cfg: TrainingConfig) -> bool:
    """Whether the norms are ops that keep their normalized output for the weight's gradient:
    the CPU's, and transformers' RMSNorm (eager ops in fp32) on either target."""
    return getattr(cfg, "target", "cuda") == "cpu" or bool(d.extra.get("hf_module"))


def _normalized_bytes(d: Dims, e: Bytes) -> int:
    """The normalized output the norm weight's gradient needs: fp32 in our blocks' CPU norm,
    cast back to the model's dtype in transformers' RMSNorm."""
    return e.r if d.extra.get("hf_module") else 4


def per_layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> list[Term]:
    """What LoRA changes in one block's saved activations (added to full training's)."""
    sb, tok, h, f, r = d.s * d.b, f"{d.s}·{d.b}", d.h, d.f, int(cfg.lora_rank or 0)
    q = d.a * d.hd
    ac = _compute(cfg, e)
    cast = adapter_bytes(cfg) != e.c and not e.amp  # peft casts the input to the adapters'
    terms = [Term("LoRA A outputs (q, k, v, o)", sb * 4 * r * ac, f"s·b·4r·{ac} B",
                  f"{tok}·4·{r}·{ac}")]  # fmt: skip
    if e.amp:
        terms.append(Term("LoRA o input (autocast's copy of peft's fp32 cast)", sb * q * 2,
                          "s·b·q·2 B", f"{tok}·{q}·2"))  # fmt: skip
    elif cast:
        # Each adapter's fp32 copy of its input; the norm's 16-bit output is no longer kept.
        terms.append(Term(
            "LoRA inputs (peft's fp32 casts for q, k, v, o; not the 16-bit norm output)",
            sb * ((3 * h + q) * ac - h * e.c),
            f"s·b·((3h + q)·{ac} − h·{e.c}) B",
            f"{tok}·((3·{h} + {q})·{ac} − {h}·{e.c})",
        ))  # fmt: skip
    inputs = 2 * h * 2 if e.amp else h * e.c
    terms.append(Term(
        "frozen MLP: no matmul inputs kept (gate, up" + (" copies" if e.amp else "") + "; down)",
        -sb * (inputs + f * e.c),
        f"−s·b·({'2h·2' if e.amp else f'h·{e.c}'} + f·{e.c}) B",
        f"−{tok}·({f'2·{h}·2' if e.amp else f'{h}·{e.c}'} + {f}·{e.c})",
    ))  # fmt: skip
    if _unfused_norms(d, cfg):
        n = _normalized_bytes(d, e)
        terms.append(Term("frozen norms: no normalized outputs kept", -sb * 2 * h * n,
                          f"−s·b·2h·{n} B", f"−{tok}·2·{h}·{n}"))  # fmt: skip
        if d.extra.get("qk_norm"):  # q and k norms (Qwen3, OLMo 2): frozen too
            n = e.c if d.extra.get("hf_module") else 4  # in the projections' dtype
            terms.append(Term("frozen q/k norms: no normalized outputs kept",
                              -sb * (q + d.k) * n, f"−s·b·(q + k)·{n} B",
                              f"−{tok}·({q} + {d.k})·{n}"))  # fmt: skip
    return terms


def once_per_model(d: Dims, e: Bytes, cfg: TrainingConfig, adapters: int) -> list[Term]:
    """What LoRA changes once per model: the first block's inputs, the frozen LM head's input,
    autocast's copies of the adapters. With full checkpointing the blocks keep only their
    inputs, so only the LM head's changes."""
    sb, tok, h, r = d.s * d.b, f"{d.s}·{d.b}", d.h, int(cfg.lora_rank or 0)
    q = d.a * d.hd
    cpu = _unfused_norms(d, cfg)
    norm = sb * (h * 4 + 4) if cpu else sb * (h * e.r + 4)
    first = Term(
        "first block's first norm keeps nothing (the frozen embedding needs no gradient)",
        -norm,
        f"−s·b·(h·{4 if cpu else e.r} + 4) B",
        f"−{tok}·({h}·{4 if cpu else e.r} + 4)",
    )
    head_in = 2 if e.amp else e.c
    n = _normalized_bytes(d, e) if cpu else 0
    head = Term(
        "frozen LM head: final norm's output not kept" + (", nor its normalized" if cpu else ""),
        -sb * h * (head_in + n),
        f"−s·b·h·({head_in}" + (f" + {n}" if cpu else "") + ") B",
        f"−{tok}·{h}·({head_in}" + (f" + {n}" if cpu else "") + ")",
    )
    if cfg.checkpointing == "full":
        return [head]
    terms = [first, head]
    if e.amp:
        w = h * q + 2 * h * d.k + 3 * r * h
        terms.append(Term(
            "first block's q, k, v weight copies and their A copies not kept",
            -w * 2,
            "−(h·q + 2h·k + 3r·h)·2 B",
            f"−({h}·{q} + 2·{h}·{d.k} + 3·{r}·{h})·2",
        ))  # fmt: skip
    if e.amp:
        terms.append(Term("autocast's 16-bit copies of the adapters", adapters * 2,
                          "adapters · 2 B", f"{adapters} · 2"))  # fmt: skip
    return terms


__all__ = [
    "SHARED_MAP_BYTES",
    "adapter_bytes",
    "nf4_base_bytes",
    "nf4_bytes",
    "once_per_model",
    "per_layer",
]
