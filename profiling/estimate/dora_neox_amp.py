"""DoRA (peft's ``use_dora``) on bitsandbytes' 4-bit base under autocast (QLoRA, ``amp-*``) in
GPT-NeoX's kind's last block: what an adapted up or down holds at once, going forward and going
back, beyond what ``neox_qlora_amp`` counts for LoRA there, and GPT-NeoX's fused
query_key_value going forward where it is the only adapted layer (``at_qkv``).

Read in peft 0.21.2's tuners/lora/variants.py (``DoraLinearVariant.forward``: without
lora_dropout the base's output is reused, ``result = result + lora_magnitude_vector(x, ...)``)
and tuners/lora/dora.py (``DoraLinearLayer.forward``). A 4-bit layer hands back its input's
dtype (``Linear4bit.forward``'s ``out.to(inp_dtype)``), and the MLP's inputs are fp32 under
autocast (the norm's output, GELU's of up's fp32 output), so for a layer of in i, out o:

- ``get_lora_weight``: ``lora_B(lora_A(eye(i)))`` — autocast's 16-bit cast of the identity
  (i·i·2) and A's output (i·r·2), alive with the graph until the forward returns — ``.T.to(
  x.dtype)``: B·A in fp32 (o·i·4); ``dequantize_module_weight(...).to(x.dtype)``: the weight in
  fp32 (o·i·4), both locals until the forward returns;
- ``get_weight_norm``: ``scaling · lora_weight`` and ``weight + ...`` (o·i·4 each) while the
  norm is taken — before the adapter's own kept tensors are made;
- ``base_result − bias`` (a new fp32 tensor where the layer has a bias: the base output waits
  beside it for ``result + ...``), then ``(mns − 1) · base_result``, ``mns · lora_result`` and
  its ``· scaling``: three fp32 s·b·o tensors at once (mns is fp32; B's 16-bit output promotes).

Going back through an adapted up, GELU's input gradient g (fp32 s·b·f) reaches
``mns · lora_result · scaling`` first (the later-made branch): ``g · scaling``, then
MulBackward0's two full-size products (the magnitude's, before ``sum_to`` reduces it to f·4,
and B's output's), GELU's saved input (up's fp32 output) freed by then — three fp32 f-wide
tensors beyond g (torch's derivatives.yaml ``mul``: both gradients made before the engine's
``validate_outputs`` reduces and casts them).

Read off the trace's live storages (h 128, f 512, V 128, seq 256 × 2): equal to the trace's
peak but for its scalars (8 B; 32 B at the fused q/k/v, SDPA's seeds) on GPT-NeoX all six and
q,k,v, Falcon-7B q,k,v,up and Phi q,v,down (tests/profiling/trace/test_dora_neox_amp.py). Few
tokens beside the weights (the wide toy, 16 tokens) ``dora.moments``' norm-rebuild bound leads
(1.01-1.06 of the trace). No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiling.estimate import dora_neox
from profiling.estimate.activations import _lse
from profiling.estimate.lora_neox_amp import bnb_amp

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.estimate.activations import Bytes, Dims


def applies(d: Dims, cfg: TrainingConfig) -> bool:
    """DoRA on bitsandbytes' 4-bit layers under autocast, without lora_dropout (with it peft
    reruns the base layer on the dropped input: not counted here)."""
    return bool(cfg.dora and bnb_amp(cfg) and not cfg.lora_dropout)


def _widths(d: Dims, role: str) -> tuple[int, int]:
    return dora_neox.in_widths(d)[role], dora_neox.out_widths(d)[role]


def kept(d: Dims, cfg: TrainingConfig, role: str) -> int:
    """What the end of forward counts for one adapted layer (``lora_neox_amp``, ``dora``): A's
    16-bit input copy and output, A's and B's 16-bit weight copies, the fp32 base output and B's
    16-bit output kept for the magnitude, and the norm, mns and mns − 1 (fp32)."""
    i, o = _widths(d, role)
    T, r = d.s * d.b, int(cfg.lora_rank or 0)
    return T * i * 2 + T * r * 2 + r * (i + o) * 2 + T * o * (4 + 2) + 3 * o * 4


def forward(d: Dims, cfg: TrainingConfig, role: str) -> int:
    """One adapted layer's forward at its highest, beyond what the end of forward holds: the
    three fp32 products, or (few tokens beside its weight) the norm's sum, its own kept tensors
    not made yet; both beside the identity's graph, B·A and the weight in fp32, and where the
    layer has a bias the base output waiting for the sum."""
    i, o = _widths(d, role)
    T, r = d.s * d.b, int(cfg.lora_rank or 0)
    bias = T * o * 4 if d.extra["neox"].get("bias") else 0
    held = bias + i * i * 2 + i * r * 2 + 2 * o * i * 4
    products = 3 * T * o * 4
    # at the norm's sum A's, B's and the magnitude's kept tensors are not made (their weight
    # copies are: A and B ran on the identity first)
    norm = 2 * o * i * 4 - (kept(d, cfg, role) - r * (i + o) * 2)
    return held + max(products, norm)


def _gelu_kept(d: Dims) -> int:
    """How many fp32 f-wide tensors GELU saves: its input (up's fp32 output); Phi's
    ``gelu_new`` also ``tanh``'s output, ``1 + tanh`` and ``0.5·x`` (``phi_amp``: fp32 here, x
    being fp32)."""
    return 4 if d.extra.get("hf_module") == "phi" else 1


def at_mlp(d: Dims, cfg: TrainingConfig) -> tuple[int, str] | None:
    """The MLP's highest DoRA moment going forward beyond the end of forward (None: no adapted
    up or down): at down, beside GELU's fp32 output (its input, which no 4-bit layer saves); at
    up, less what is made later (what GELU saves, up's fp32 output first, and an adapted down's
    kept tensors)."""
    T, f = d.s * d.b, d.f
    t = cfg.lora_targets
    best: tuple[int, str] | None = None
    if "down" in t:
        value = T * f * 4 + forward(d, cfg, "down")
        words = "GELU's fp32 output s·b·f·4 and down's DoRA (B·A and its weight in fp32, the "
        best = (value, words + "identity's graph, three fp32 products) ")
    if "up" in t:
        later = _gelu_kept(d) * T * f * 4 + (kept(d, cfg, "down") if "down" in t else 0)
        value = forward(d, cfg, "up") - later
        if best is None or value > best[0]:
            words = "up's DoRA (B·A and its weight in fp32, the identity's graph, three fp32 "
            best = (value, words + "products) less GELU's saved tensors and down's, made later ")
    return best


def at_qkv(d: Dims, e: Bytes, cfg: TrainingConfig) -> int | None:
    """GPT-NeoX's fused query_key_value going forward (attention and MLP in parallel, only q, k,
    v adapted; None elsewhere), beyond the end of forward less the loss's tensors plus what the
    forward holds unsaved (``neox_amp_moments.forward``'s): its DoRA (``forward``) beside the
    input norm's fp32 output (its input), less what the block keeps after it — SDPA's 16-bit
    q, k, v and its output, the logsumexp (transformers' ``GPTNeoXAttention`` on the fused
    output's fp32 views: autocast's copies are saved), the MLP norm's statistics and GELU's
    fp32 input (up's 4-bit output)."""
    t = set(cfg.lora_targets)
    if d.extra.get("hf_module") != "gpt_neox" or d.extra["neox"]["residual"] != "parallel":
        return None
    if not t or not t <= {"q", "k", "v"}:
        return None
    T, h, f = d.s * d.b, d.h, d.f
    q = int(d.extra["neox"]["q_dim"])
    after = T * (q + 2 * d.k) * 2 + T * q * 2 + _lse(d, e, cfg)[0] + T * 8 + T * f * 4
    return T * h * 4 + forward(d, cfg, "qkv") - after


def backward(d: Dims, cfg: TrainingConfig, after: float, reach: int) -> tuple[float, str] | None:
    """An adapted up going back (None: up not adapted): beyond the gradient reaching the block
    (``reach``), GELU's input gradient and three fp32 f-wide products with the magnitude's
    reduced f·4, what GELU saved freed; an adapted down's tensors freed before."""
    if "up" not in cfg.lora_targets:
        return None
    T, f = d.s * d.b, d.f
    freed = kept(d, cfg, "down") if "down" in cfg.lora_targets else 0
    value = after + reach + (4 - _gelu_kept(d)) * T * f * 4 + f * 4 - freed
    words = (
        "at up's DoRA going back: GELU's input gradient and three fp32 products s·b·4f·4 + f·4, "
        "GELU's saved input freed"
    )
    return value, words + (" and down's adapter's tensors" if freed else "")


__all__ = ["applies", "at_mlp", "at_qkv", "backward", "forward", "kept"]
