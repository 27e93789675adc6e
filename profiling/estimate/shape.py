"""The shape an estimate works from: a reference model's or a Hugging Face config's
(``WorkloadConfig``), or what ``--params --layers --hidden …`` give by hand. A plain dict, so
the activation and time formulas read the same keys whichever it came from.

No torch here.
"""

from __future__ import annotations

import math
from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate import activations as acts
from profiling.estimate import t5
from profiling.estimate.step_order import loop_peaks, tensor_order
from profiling.models.config import WorkloadConfig
from profiling.models.implementation import TRANSFORMERS, implementation
from profiling.models.shape_overrides import workload_of
from profiling.models.workloads import as_run, is_variant
from profiling.units import fmt_count


def workload_shape(w: WorkloadConfig) -> dict[str, Any]:
    h, f, kv = w.hidden, w.ffn, w.kv_dim
    head = w.vocab * h  # the LM head's matmul weight (tied or not, it is multiplied)
    active = None
    if w.arch == "encoder":  # the head's matmuls: the transform and decoder, or the classifier
        head = h * h + (h * w.num_labels if w.encoder_head == "classify" else w.vocab * h)
        # ViT: the classifier and the patch projection (a convolution, its weight cast too)
        head += w.channels * w.patch_size**2 * h - h * h if w.patch_size else 0
    if w.arch in ("gpt2", "encoder"):
        block_matmuls, tensors = 4 * h * h + 2 * h * f, 2 + 12 * w.layers + 2
        block_matmuls_all = w.layers * block_matmuls
        largest = max(w.vocab * h, h * f, 3 * h * h)
        if w.arch == "encoder":  # q, k, v apart (16 tensors a block); positions
            tensors = len(param_dims(w) or [])
            largest = max(w.vocab * h, h * f, (w.positions or w.max_seq) * h)
    elif w.arch == "t5":  # profiling.estimate.t5: both stacks
        block_matmuls_all, tensors = t5.block_matmuls(w), len(t5.param_dims(w))
        largest = max(w.vocab * h, h * f, h * w.q_dim)
    elif w.arch == "neox":  # profiling.models.neox_blocks
        block_matmuls = 2 * h * w.q_dim + 2 * h * kv + 2 * h * f
        block_matmuls_all = w.layers * block_matmuls
        tensors = len(param_dims(w) or [])
        largest = max(w.vocab * h, h * f, h * (w.q_dim + 2 * kv) if w.fused_qkv else h * w.q_dim)
    else:
        attn, attn_tensors = _attention_matmuls(w)
        block_matmuls = attn + w.mlp_params()
        per_layer = attn_tensors + (3 if w.qkv_bias else 0) + (2 if w.qk_norm != "none" else 0)
        per_layer += (4 if w.norms == "sandwich" else 2) + (4 if w.moe else 3)
        per_layer += 3 if w.shared_experts else 0
        dense = min(w.dense_layers, w.layers)  # DeepSeek: the first layers' MLP is dense
        tensors = 1 + per_layer * w.layers - dense * (4 + (3 if w.shared_experts else 0) - 3)
        tensors += 1 + (0 if w.tied_embeddings else 1)
        largest = max(w.vocab * h, h * w.mlp_ffn * max(w.experts, 1), h * w.q_dim)
        if w.moe:  # FLOPs: each token runs the router, k experts and the shared ones
            routed = h * w.experts + 3 * h * w.mlp_ffn * (w.experts_per_token + w.shared_experts)
            active = (w.layers - dense) * (attn + routed) + dense * (attn + 3 * h * f)
        block_matmuls_all = (w.layers - dense) * block_matmuls + dense * (attn + 3 * h * f)
    shape = {
        "name": w.name,
        "arch": w.arch,
        "params": w.param_count(),
        "layers": w.layers,
        "hidden": h,
        "heads": w.heads,
        "ffn": f,
        "vocab": w.vocab,
        "kv_dim": kv,
        "tied": w.tied_embeddings,
        "largest_layer_params": w.largest_layer_params(),
        "largest_module_params": w.largest_module_params(),
        "largest_tensor": largest,
        "param_tensors": tensors,
        "matmul_weights": block_matmuls_all + head,
        "head_params": head,  # the LM head's matmul weight (its bias, Phi's, is no matmul)
        "max_seq": w.max_seq,
        # Embedding tables (and an untied LM head): QLoRA leaves them in 16 bits.
        "unquantized_params": w.embedding_params() + (0 if w.tied_embeddings else head),
        # The Linear weights of one block, which QLoRA quantizes, and a mixture of experts'
        # expert weights: (numel, how many in a block) — each expert's gate, up and down.
        "block_linear_numels": _block_linears(w),
    }
    dims = param_dims(w)
    if dims is not None:  # each tensor's size: bitsandbytes' 8-bit and paged states, Adafactor
        shape["param_numels"] = _counted([math.prod(d) for d in dims])
        shape["factored_numels"] = _counted([factored_values(d) for d in dims])
    shape.update(_units(w), **_loop_step(w, dims))
    if w.arch == "llama":
        shape.update(_variations(w))
    if w.arch == "encoder":  # what profiling.estimate.encoder reads
        shape["encoder"] = {
            "head": w.encoder_head, "labels": w.num_labels, "kind": w.hf_model_type,
            "pixels": w.channels * w.image_size**2 if w.patch_size else 0,
            "conv": w.hidden * w.channels * w.patch_size**2 if w.patch_size else 0,
            # the embeddings' position_ids and token_type_ids buffers (int64, one row each)
            "buffers": 0 if w.patch_size else 2 * (w.positions or w.max_seq) * 8,
        }  # fmt: skip
        shape["tied"] = w.tied_embeddings and w.encoder_head == "mlm"
    if w.arch == "neox":  # what profiling.estimate.neox reads
        shape["neox"] = {
            "residual": w.residual, "rotary": w.rotary, "fused_qkv": w.fused_qkv,
            "bias": w.linear_bias, "q_dim": w.q_dim, "alibi": w.alibi, "litgpt": w.litgpt,
        }  # fmt: skip
    if w.hf_model_type:
        shape["hf_model_type"] = w.hf_model_type
    # the activations are transformers' module's (an encoder's, an encoder-decoder's and BLOOM's
    # always: no blocks of ours)
    if implementation(w) == TRANSFORMERS or w.arch in ("encoder", "t5") or w.alibi:
        shape["hf_module"] = w.hf_model_type
        if w.attn_softcap:
            shape["attn_softcap"] = w.attn_softcap
        shape.update({"litgpt_norm": True} if w.litgpt_norm else {})  # LitGPT's RMSNorm
        shape.update({"litgpt_qkv": True} if w.litgpt_qkv else {})  # and its attention
    if active is not None:
        shape["active_matmul_weights"] = active + head
    return shape


Dims = tuple[int, ...]


def _loop_step(w: WorkloadConfig, dims: list[Dims] | None) -> dict[str, list[int]]:
    """The for-loop optimizer step's highest pair of neighbours (``estimate.step_order``)."""
    order = _step_order(w, dims)
    return {"loop_step": loop_peaks(order)} if order else {}


def _step_order(w: WorkloadConfig, dims: list[Dims] | None) -> list[int] | None:
    hf = implementation(w) == TRANSFORMERS or w.arch in ("encoder", "t5") or w.alibi
    return tensor_order(w, hf, is_variant(w), [math.prod(d) for d in dims] if dims else None)


def _units(w: WorkloadConfig) -> dict[str, Any]:
    """FSDP's units: the repeated blocks (an encoder-decoder's decoder blocks, with
    cross-attention, the larger) and the root (embeddings, final norms, an untied head)."""
    dense = min(w.dense_layers, w.layers)
    blocks = (w.layers - dense) * w.layer_params() + dense * w.dense_layer_params()
    block = max(w.layer_params(), w.dense_layer_params() if dense else 0)
    if w.arch != "t5":
        units: dict[str, Any] = {"root_params": w.param_count() - blocks, "block_params": block}
        if w.moe:
            units["expert_linear_numels"] = [w.hidden * w.mlp_ffn, 3 * w.experts]
        return units
    blocks += w.decoder_layers * w.t5_decoder_layer_params()
    return {"root_params": w.param_count() - blocks, "t5": t5.shape_keys(w),
            "block_params": w.t5_decoder_layer_params()}  # fmt: skip


def param_dims(w: WorkloadConfig) -> list[Dims] | None:
    """The shape of each parameter tensor of the model ``build_model`` makes; None for
    DeepSeek-V2's latent attention (not itemized)."""
    if w.mla:
        return None
    h, f, L = w.hidden, w.ffn, w.layers
    if w.arch == "gpt2":  # wte, wpe; per block 2 LayerNorms, qkv, proj, fc, fc_proj with biases
        block = [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,), (f, h), (f,)]
        block += [(h, f), (h,)]
        # an untied head (transformers' tie_word_embeddings=False) is a tensor of its own: its
        # 8-bit states were missing (untied V 256 toy: −135,168 B, adam8bit)
        head = [] if w.tied_embeddings else [(w.vocab, h)]
        return [(w.vocab, h), (w.max_seq, h), *block * L, (h,), (h,), *head]
    if w.arch == "encoder":
        return _encoder_dims(w)
    if w.arch == "t5":
        return t5.param_dims(w)
    if w.arch == "neox":
        head: list[Dims] = [] if w.tied_embeddings else [(w.vocab, h)]
        head += [(w.vocab,)] if w.head_bias else []
        embed_norm: list[Dims] = [(h,), (h,)] if w.embed_norm else []  # BLOOM's
        return [(w.vocab, h), *embed_norm, *_neox_block_dims(w) * L, (h,), (h,), *head]
    q, kv = w.q_dim, w.kv_dim
    attn: list[Dims] = [(q, h), (kv, h), (kv, h), (h, q)]
    attn += [(q,), (kv,), (kv,)] if w.qkv_bias else []
    attn += {"none": [], "head": [(w.head_dim,)] * 2, "full": [(q,), (kv,)]}[w.qk_norm]
    norms: list[Dims] = [(h,)] * (4 if w.norms == "sandwich" else 2)
    e, s = w.mlp_ffn, w.mlp_ffn * w.shared_experts
    shared: list[Dims] = [(s, h), (s, h), (h, s)] if w.shared_experts else []
    dense_mlp: list[Dims] = [(f, h), (f, h), (h, f)]
    mlp = [(w.experts, h), *[(w.experts, e, h)] * 3, *shared] if w.moe else dense_mlp
    dense = min(w.dense_layers, L)
    dims = [(w.vocab, h), *(attn + norms + mlp) * (L - dense), *(attn + norms + dense_mlp) * dense]
    return dims + [(h,)] + ([] if w.tied_embeddings else [(w.vocab, h)])


def _encoder_dims(w: WorkloadConfig) -> list[Dims]:
    """BERT's and RoBERTa's tensors: word, position and token-type embeddings and their
    LayerNorm; per block q, k, v, the output, the MLP's two matmuls (biases on all) and two
    LayerNorms; the task's head."""
    h, f, n = w.hidden, w.ffn, w.num_labels
    embeddings: list[Dims] = [(w.vocab, h), (w.positions or w.max_seq, h), (w.type_vocab, h)]
    block: list[Dims] = [(h, h), (h,)] * 4 + [(h,), (h,), (f, h), (f,), (h, f), (h,), (h,), (h,)]
    if w.patch_size:  # ViT: the class token, positions, the patch projection; final norm
        p, tokens = w.patch_size, w.positions or w.max_seq
        patches: list[Dims] = [(1, 1, h), (1, tokens, h), (h, w.channels, p, p), (h,)]
        return [*patches, *block * w.layers, (h,), (h,), (n, h), (n,)]
    if w.encoder_head == "classify":
        head: list[Dims] = [(h, h), (h,), (n, h), (n,)]
    else:  # the decoder's bias, the transform's dense and LayerNorm, an untied decoder weight
        head = [(w.vocab,), (h, h), (h,), (h,), (h,)] + [(w.vocab, h)] * (not w.tied_embeddings)
    return [*embeddings, (h,), (h,), *block * w.layers, *head]


def _neox_block_dims(w: WorkloadConfig) -> list[Dims]:
    """One GPT-NeoX-kind block's parameter tensors: LayerNorms, q/k/v (fused or not), the
    output projection and the MLP's two matmuls, each with its bias where the config has them."""
    h, q, kv, f = w.hidden, w.q_dim, w.kv_dim, w.ffn
    linears = [(q + 2 * kv, h)] if w.fused_qkv else [(q, h), (kv, h), (kv, h)]
    linears += [(h, q), (f, h), (h, f)]
    dims: list[Dims] = [(h,), (h,)] * w.neox_norms() + linears
    return dims + [(out,) for out, _ in linears] * w.linear_bias


def factored_values(dims: Dims) -> int:
    """Adafactor's second moment of a tensor: a row and a column mean (numel/last +
    numel/second-to-last values) from two dimensions on, the whole tensor for a vector."""
    n = math.prod(dims)
    return n // dims[-1] + n // dims[-2] if len(dims) >= 2 else n


def _counted(tensors: list[int]) -> list[list[int]]:
    counts: dict[int, int] = {}
    for n in tensors:
        counts[n] = counts.get(n, 0) + 1
    return [[n, c] for n, c in sorted(counts.items(), reverse=True)]


def _attention_matmuls(w: WorkloadConfig) -> tuple[int, int]:
    """One block's attention matmul weights and its parameter tensors (MLA: DeepSeek-V2's
    projections through the latent, less its norms)."""
    if w.mla:
        norms = (w.kv_lora_rank or 0) + (w.q_lora_rank or 0)
        return w.attention_params() - norms, 7 if w.q_lora_rank else 5
    return 2 * w.hidden * w.q_dim + 2 * w.hidden * w.kv_dim, 4


def _block_linears(w: WorkloadConfig) -> list[int]:
    h, q, kv = w.hidden, w.q_dim, w.kv_dim
    if w.arch == "gpt2":
        return [3 * h * h, h * h, h * w.ffn, w.ffn * h]
    if w.arch == "encoder":
        return [h * h] * 4 + [h * w.ffn, w.ffn * h]
    if w.arch == "neox":
        qkv = [h * (q + 2 * kv)] if w.fused_qkv else [h * q, h * kv, h * kv]
        return [*qkv, q * h, h * w.ffn, w.ffn * h]
    # The router (and the shared experts' gate, up, down), or the dense gate, up, down.
    shared = [h * w.mlp_ffn * w.shared_experts] * 3 if w.shared_experts else []
    mlp = [h * w.experts, *shared] if w.moe else [h * w.ffn] * 3
    return [h * q, h * kv, h * kv, q * h, *mlp]


def _variations(w: WorkloadConfig) -> dict[str, Any]:
    """The Llama family's variations the activation and time formulas read."""
    out: dict[str, Any] = {}
    if w.q_dim != w.hidden:
        out["q_dim"] = w.q_dim
    if w.qk_norm != "none":
        out.update(qk_norm=w.qk_norm, kv_heads=w.n_kv_heads)
    if w.norms != "pre":
        out["norms"] = w.norms
    if w.mlp != "swiglu":
        out["mlp"] = w.mlp
    if w.qkv_bias:
        out["qkv_bias"] = True
    if w.moe:
        out.update(
            experts=w.experts,
            experts_per_token=w.experts_per_token,
            expert_ffn=w.mlp_ffn,
            capacity_factor=w.capacity_factor,
        )
    if w.sliding_window is not None:
        out.update(sliding_window=w.sliding_window, sliding_layers=w.sliding_layers)
    if w.mla:  # DeepSeek-V2 (profiling.estimate.mla)
        out["mla"] = {
            "rank": w.kv_lora_rank, "q_rank": w.q_lora_rank, "nope": w.qk_nope_dim,
            "rope": w.qk_rope_dim, "v": w.v_dim, "shared": w.shared_experts,
            "dense": min(w.dense_layers, w.layers),
        }  # fmt: skip
    if w.logit_softcap:
        out["logit_softcap"] = w.logit_softcap
    return out


def hand_shape(inp: TrainingConfig) -> dict[str, Any]:
    shape: dict[str, Any] = {"name": f"{fmt_count(inp.params or 0)} parameters"}
    for key in ("layers", "hidden", "heads", "vocab", "ffn", "arch"):
        if getattr(inp, key) is not None:
            shape[key] = getattr(inp, key)
    h, L, V = inp.hidden, inp.layers, inp.vocab
    if h is not None and inp.heads is not None:
        shape["kv_dim"] = (inp.kv_heads or inp.heads) * (h // inp.heads)
    if h is not None and V is not None:
        arch = inp.arch or "gpt2"
        f = inp.ffn or (4 * h if arch == "gpt2" else acts._llama_ffn(h))
        kv = shape.get("kv_dim", h)
        block = 4 * h * h + 2 * h * f if arch == "gpt2" else 2 * h * h + 2 * h * kv + 3 * h * f
        shape["largest_layer_params"] = max(V * h, block)
        shape["largest_module_params"] = max(V * h, h * f)
        shape["largest_tensor"] = max(V * h, h * f)
        if L is not None:
            shape["matmul_weights"] = L * block + V * h
            shape["head_params"] = V * h
    hand = inp.hand_workload()
    if hand is not None:
        shape["shape_params"] = hand.param_count()  # what the shape itself holds
        # one block's parameters: FSDP2's all-gather streams hold two blocks' (the reserve's
        # term read 0 for every shape given by hand); the root's stays unknown (ZeRO-3's
        # gathered root is counted where a model names it)
        shape["block_params"] = _units(hand)["block_params"]
    return shape


def shape_of(inp: TrainingConfig) -> dict[str, Any]:
    w = as_run(workload_of(inp), inp.tied_head, inp.loss, inp.litgpt_norm, inp.litgpt_uncapped)
    shape = workload_shape(w) if w is not None else hand_shape(inp)
    if "t5" in shape:  # the decoder's length: --target-seq, else the encoder's
        shape["t5"]["target_seq"] = inp.target_seq or inp.seq_or_default()
    if inp.params is not None:
        if w is not None:
            shape["shape_params"] = shape["params"]
        shape["params"] = inp.params
    heads = shape.get("heads")
    if inp.tp > 1 and heads and heads % inp.tp:
        from profiling.errors import ProfilingError

        fits = ", ".join(str(t) for t in range(2, min(heads, 64) + 1) if heads % t == 0)
        raise ProfilingError(
            f"--tp {inp.tp} does not divide the model's {heads} attention heads, which tensor "
            f"parallelism splits evenly across the GPUs; use a degree that does ({fits})"
        )
    return shape


def params_mismatch(inp: TrainingConfig, shape: dict[str, Any]) -> str | None:
    """One sentence when --params and the shape disagree by more than 10 %: the model states
    count one, the activations and FLOPs the other, and the user should know."""
    implied = shape.get("shape_params")
    if inp.params is None or not implied or abs(inp.params / implied - 1) <= 0.10:
        return None
    if inp.model is not None:
        given = f"{inp.model}'s shape"
    else:
        flags = " ".join(
            f"--{k} {getattr(inp, k)}" for k in ("layers", "hidden", "vocab") if getattr(inp, k)
        )
        given = f"the shape given ({flags}, {inp.arch or 'gpt2'} blocks)"
    return (
        f"--params {fmt_count(inp.params)} disagrees with {given}, which holds about "
        f"{fmt_count(implied)} parameters: the model states count {fmt_count(inp.params)}, the "
        f"activations and FLOPs the shape's {fmt_count(implied)}-parameter blocks; drop --params "
        "to count the shape's, or correct the shape"
    )


__all__ = [
    "factored_values",
    "hand_shape",
    "param_dims",
    "params_mismatch",
    "shape_of",
    "workload_shape",
]
