"""``--checkpointing selective`` with eager attention: the last block's attention core,
recomputed in backward, going back — the step's peak where the s² tensors outweigh the loss's.

Selective recomputation (``estimate.selective``) drops every block's probabilities from what
it keeps, but the core's backward makes them again and holds them beside its own gradients.
Without this moment the estimate's peak was the loss's backward: transformers' Llama (h 128,
f 352, V 512, 2 layers, 4 heads, 2 key/value heads) 512 × 2 tokens bf16 read 0.60 of the trace
(23.0 MB against 38.1 MB). Read from the trace's live storages at its peak (transformers 5.x
``eager_attention_forward`` run through ``profiling.trace.selective``'s checkpoint), at the last
block's ``_softmax_backward_data``:

- the end of forward less what the loss, the final norm and the head kept (``llama_end.
  released``), less what the last block kept after its core's inputs — its MLP's tensors, its
  second norm's and its output (under autocast gate's and up's 16-bit copies of it) and the
  core's output (the output projection's input) — all freed by then, as under autocast are the
  16-bit weight copies the head's, the MLP's and o_proj's matmuls saved;
- the gradients made by then: the head's and the final norm's, the last block's MLP's, second
  norm's and output projection's;
- the gradient reaching the block (s·b·h in the residual's dtype);
- the recomputation's own saved tensors: the scores' matmul's operands as bmm takes them — the
  keys ``repeat_kv`` copied (grouped heads), and where the batch is over 1 the query and the
  ungrouped keys copied contiguous (RoPE's outputs keep the projections' (b, s, heads, hd)
  strides, which fold into bmm's batch only at b = 1) — the fp32 probabilities
  (``softmax(dtype=torch.float32)``, a·s²·b·4; their 16-bit copy, the matmul's, freed once its
  backward made the values' gradient, s·b·q, still alive);
- softmax's backward: the probabilities' gradient in fp32 (cast from 16 bits, the 16-bit one
  freed) and the scores' gradient, fp32 — ATen's ``softmax(input, dim, dtype)`` converts a
  bfloat16 input to fp32 first (its half-to-float path is fp16's alone), so its backward's
  output is the fp32 input's: 2·a·s²·b·4 more.

The first block's core goes back later with more gradients made but the last block's kept
tensors freed: the higher only where a block's weights' gradients outweigh what it keeps
(short sequences, wide blocks; counted, not traced). Equal to the trace on bf16, fp32, mixed
and amp-bf16, batch 1 and 2, grouped heads or not (tests/profiling/estimate/
test_selective_eager.py). Applies to transformers' Llama, Mistral and Qwen2 modules without
biases, windows or q/k norms, trained whole (no LoRA), eager attention without dropout, one
GPU, no compile, no fp16 (its softmax's half-to-float path keeps other dtypes); elsewhere, and
on our own blocks (their softmax in the compute dtype), the moment is not counted.
transformers' GPT-2 (``_gpt2_moment``) is counted alike, its softmax in the compute dtype:
0.956 of the trace before at bf16 512 × 2, now equal (bf16, mixed; fp32 at 256 tokens, where
the loss leads). Under SDPA
the fused core recomputes no s² tensor. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiling.estimate.activations import Bytes, Dims
from profiling.units import fmt_bytes

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

NAME = "backward, a recomputed attention core"
_MODULES = ("llama", "mistral", "qwen2")
# the per-layer terms of a plain transformers Llama block under selective (hf_ops), by prefix
_NORMS, _INPUTS, _CORE, _MLP = "norms (", "matmul inputs (", "attention, core recomputed", "MLP ("


def _applies(d: Dims | None, cfg: TrainingConfig) -> bool:
    from profiling.estimate.ranks import one_gpu_step

    if d is None or d.V is None or d.arch != "llama" or d.extra.get("hf_module") not in _MODULES:
        return False
    if set(d.extra) != {"hf_module"}:  # Qwen2's biases, windows, q/k norms: not read here
        return False
    return (
        cfg.checkpointing == "selective"
        and cfg.attention == "eager"
        and cfg.precision in ("bf16", "fp32", "mixed", "amp-bf16")
        and not cfg.dropout
        and cfg.lora_rank is None
        and not cfg.qlora
        and not cfg.compile
        and not cfg.activation_offload
        and not cfg.optimizer_in_bwd
        and not cfg.fp32_grads
        and not cfg.deepspeed
        and one_gpu_step(cfg)
        and cfg.tp == 1
        and not cfg.sharded
    )


def _layer(d: Dims, e: Bytes, cfg: TrainingConfig) -> dict[str, float] | None:
    """The block's kept tensors by kind (norms, matmul inputs, core, MLP), as the estimate
    counts them; None where the block keeps anything else (not read here)."""
    from profiling.estimate import block_terms

    kinds = (_NORMS, _INPUTS, _CORE, _MLP)  # the inputs' term: its bytes are read below
    found: dict[str, float] = {}
    for term in block_terms.per_layer(d, e, cfg):
        kind = next((k for k in kinds if term.name.startswith(k)), None)
        if kind is None or kind in found:
            return None
        found[kind] = term.bytes
    return found if len(found) == len(kinds) else None


def moments(
    d: Dims | None, cfg: TrainingConfig, fwd: float, lines: Sequence[Any]
) -> list[tuple[str, float, str]]:
    """The last block's recomputed eager core at its softmax's backward (name, bytes,
    calculation); none where not modelled."""
    from profiling.estimate.llama_end import released

    if _gpt2(d, cfg):
        assert d is not None
        return _gpt2_moment(d, cfg, fwd)
    if not _applies(d, cfg):
        return []
    assert d is not None
    e = Bytes.of(cfg.precision)
    layer = _layer(d, e, cfg)
    if layer is None:
        return []
    T, h, f, V, q, c = d.s * d.b, d.h, d.f, int(d.V or 0), d.a * d.hd, e.c
    p = 4 if cfg.precision in ("fp32", "amp-bf16") else 2  # the gradients (mixed: 16-bit)
    gone = released(d, e, cfg, lines)
    # the second norm's half of the two norms' terms and its output as gate and up take it
    # (under autocast one 16-bit copy each), the core's output (o_proj's input)
    freed = layer[_MLP] + layer[_NORMS] / 2 + T * h * c * (2 if e.amp else 1) + T * q * c
    if e.amp:  # the 16-bit weight copies the head's, the MLP's and o_proj's matmuls saved
        freed += (V * h + 3 * h * f + h * q) * 2
    made = (V * h + h + 3 * h * f + h + h * q) * p
    reach = T * h * e.r
    s2 = d.a * d.s * d.s * d.b
    # the scores' matmul saves its operands as bmm takes them: RoPE's outputs keep the
    # projections' (b, s, heads, hd) strides, which fold into bmm's batch only at b = 1
    copies = (d.b > 1) + (d.k != q or d.b > 1)  # the query's; the keys' (repeat_kv's: a copy)
    if e.amp:  # autocast's 16-bit casts of RoPE's fp32 outputs: copies at any batch
        copies = 2
    repeated = copies * T * q * c
    core = repeated + s2 * 4 + T * q * c + 2 * s2 * 4
    value = fwd - gone - freed + made + reach + core
    # the first block's core, later: the blocks above freed whole, their gradients made — the
    # higher where a block's weights outweigh what it keeps (short sequences, wide blocks)
    block = (2 * h * q + 2 * h * d.k + 3 * h * f + 2 * h) * p - sum(layer.values())
    first = (d.L - 1) * block
    at = f"block {d.L} of {d.L}" if first <= 0 else f"block 1 of {d.L}"
    calc = (
        f"{at}: end of forward − the loss's, the final norm's and the head's kept tensors "
        f"{fmt_bytes(gone)} − the last block's MLP's, second norm's and core output's "
        + ("(and autocast's 16-bit copies of its MLP's, o_proj's and the head's weights) "
           if e.amp else "")
        + f"{fmt_bytes(freed)} + the gradients made by then (the head's, the final norm's, the "
        f"block's MLP's, second norm's and output projection's) (V·h + 3·h·f + h·q + 2h)·{p} "
        f"{fmt_bytes(made)} + the gradient reaching the block s·b·h·{e.r} {fmt_bytes(reach)} + "
        f"the recomputed core: "
        + (f"the scores' matmul's copies of the query and keys s·b·{copies}q·{c}, "
           if repeated else "")
        + f"the fp32 probabilities a·s²·b·4, the values' gradient s·b·q·{c} and softmax's "
        f"backward's two fp32 s² tensors 2·a·s²·b·4 {fmt_bytes(core)}"
        + (f" + the blocks above: their gradients less what they kept {fmt_bytes(first)}"
           if first > 0 else "")
        + f" = {fmt_bytes(value + max(first, 0))}"
    )  # fmt: skip
    return [(NAME, value + max(first, 0), calc)]


def _gpt2(d: Dims | None, cfg: TrainingConfig) -> bool:
    """transformers' GPT-2 module, trained whole, 16-bit or fp32 without autocast."""
    if d is None or d.V is None or d.arch != "gpt2" or d.extra != {"hf_module": "gpt2"}:
        return False
    plain = _applies(
        Dims(arch="llama", L=d.L, h=d.h, a=d.a, k=d.k, f=d.f, V=d.V, s=d.s, b=d.b, hd=d.hd,
             extra={"hf_module": "llama"}),
        cfg,
    )  # fmt: skip
    return plain and cfg.precision != "amp-bf16" and not cfg.autocast_adapters


def _gpt2_moment(d: Dims, cfg: TrainingConfig, fwd: float) -> list[tuple[str, float, str]]:
    """transformers' GPT-2 (``modeling_gpt2.eager_attention_forward``: softmax in the compute
    dtype, no fp32 copy): at the last block's softmax backward, its probabilities, their
    gradient and softmax's output, a·s²·b·c each, the scores' matmul's copies of the query and
    keys (c_attn's split: contiguous only at b = 1) and the values' gradient; the block's MLP,
    second LayerNorm and c_proj's input freed, every gradient above made (the tied head's
    waits for the embedding's: counted as made)."""
    from profiling.estimate.neox_moments import released

    e = Bytes.of(cfg.precision)
    layer = _layer(d, e, cfg)
    if layer is None:
        return []
    T, h, f, V, c = d.s * d.b, d.h, d.f, int(d.V or 0), e.c
    p = 4 if cfg.precision == "fp32" else 2
    gone, what = released(d, e, cfg)
    freed = layer[_MLP] + (layer[_NORMS] + layer[_INPUTS]) / 2 + T * h * c
    made = (V * h + 2 * h + 2 * h * f + h + f + 2 * h + h * h + h) * p
    reach = T * h * e.r
    copies = 2 if d.b > 1 else 0
    core = copies * T * h * c + 3 * d.a * d.s * d.s * d.b * c + T * h * c
    value = fwd - gone - freed + made + reach + core
    calc = (
        f"block {d.L} of {d.L}: end of forward − {what} {fmt_bytes(gone)} − the last block's "
        f"MLP's, second LayerNorm's and c_proj's input {fmt_bytes(freed)} + the gradients made "
        f"by then (V·h + 2·h·f + h² + 6h + f)·{p} {fmt_bytes(made)} + the gradient reaching the "
        f"block s·b·h·{e.r} {fmt_bytes(reach)} + the recomputed core: "
        + (f"the scores' matmul's copies of the query and keys s·b·2h·{c}, " if copies else "")
        + f"the probabilities, their gradient and softmax's backward 3·a·s²·b·{c} and the "
        f"values' gradient s·b·h·{c} {fmt_bytes(core)} = {fmt_bytes(value)}"
    )
    return [(NAME, value, calc)]


__all__ = ["NAME", "moments"]
