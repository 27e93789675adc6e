"""LitGPT's finetuning configs (``config_hub/finetune/*/*.yaml``: full, lora, qlora, adapter), as
``litgpt finetune_* --config FILE`` reads them (litgpt/finetune/{full,lora,adapter}.py).

- ``precision``: ``bf16-true`` trains pure bf16 (weights, gradients, optimizer state), ``-mixed``
  runs autocast over fp32 parameters, ``32-true`` fp32; unset, LitGPT picks ``bf16-mixed`` for
  training on a GPU with bf16.
- ``quantize: bnb.nf4`` (``-dq``: double quantization) puts the base in 4 bits (QLoRA).
- ``devices`` × ``num_nodes`` > 1: every block FSDP-sharded (full, LoRA and adapter alike:
  Lightning's FSDPStrategy, FSDP1, whose plain-tensor parameters make torch's AdamW run foreach)
  and activation-checkpointed; one GPU: neither.
- ``train.micro_batch_size`` per GPU; ``global_batch_size / (micro × GPUs)`` > 1 accumulates
  gradients, which then stay allocated through the next micro-batches' forward; full.py on more
  than one GPU accumulates them unsharded (``fabric.no_backward_sync``: FSDP1's ``no_sync``).
- ``lora_r``, ``lora_dropout`` and the adapted layers (``lora_query`` … ``lora_head``: LitGPT's
  fused ``qkv`` counts q, k and v apart, ``lora_mlp`` is the MLP's three matrices).
- The finetuning scripts compute the LM head in chunks of 128 tokens (LoRA, adapter) and the
  cross-entropy in chunks of 128 (all): stated as what the script does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError
from profiling.recipes.model_names import hub_model, local_config
from profiling.recipes.recipe import NO_MEMORY, TORCH_ADAFACTOR, Reading

KNOWN = [
    ("out_dir", NO_MEMORY),
    ("data*", NO_MEMORY),
    ("eval.*", NO_MEMORY),
    ("logger_name", NO_MEMORY),
    ("seed", NO_MEMORY),
    ("resume", NO_MEMORY),
    ("access_token", NO_MEMORY),
    ("lora_alpha", NO_MEMORY),
    ("train.save_interval", NO_MEMORY),
    ("train.log_interval", NO_MEMORY),
    ("train.lr_warmup_steps", NO_MEMORY),
    ("train.lr_warmup_fraction", NO_MEMORY),
    ("train.epochs", NO_MEMORY),
    ("train.max_tokens", NO_MEMORY),
    ("train.max_steps", NO_MEMORY),
    ("train.max_norm", NO_MEMORY),
    ("train.min_lr", NO_MEMORY),
    # Before the optimizer block (litgpt/args.py's TrainArgs at 43c44323, where the Gemma 2B
    # rows were measured): AdamW's arguments, finetune/*.py building torch's AdamW with them
    ("train.learning_rate", NO_MEMORY),
    ("train.weight_decay", NO_MEMORY),
    ("train.beta1", NO_MEMORY),
    ("train.beta2", NO_MEMORY),
    ("optimizer.init_args.lr", NO_MEMORY),
    ("optimizer.init_args.weight_decay", NO_MEMORY),
    ("optimizer.init_args.betas", NO_MEMORY),
    ("optimizer.init_args.eps", NO_MEMORY),
    ("optimizer.init_args.amsgrad", "AMSGrad keeps a third state: not modelled"),
]  # fmt: skip

_PRECISIONS = {
    "bf16-true": ("bf16", "LitGPT's bf16-true: weights, gradients and optimizer state in bf16"),
    "16-true": ("bf16", "16-true: pure fp16, the same bytes as pure bf16"),
    "bf16-mixed": ("amp-bf16", "autocast(bf16) over fp32 parameters"),
    "16-mixed": ("amp-fp16", "autocast(fp16) over fp32 parameters"),
    "32-true": ("fp32", ""),
}

_OPTIMIZERS = {
    "adamw": "adamw", "adam": "adam", "sgd": "sgd", "adagrad": "adagrad", "rmsprop": "rmsprop",
    "adamw8bit": "adam8bit", "pagedadamw8bit": "adam8bit", "adam8bit": "adam8bit",
    "pagedadam8bit": "adam8bit", "pagedadamw": "adamw", "pagedadamw32bit": "adamw",
    "adafactor": "adafactor", "lion": "lion",
}  # fmt: skip

_TARGETS = [
    ("lora_query", ["q"]), ("lora_key", ["k"]), ("lora_value", ["v"]),
    ("lora_projection", ["o"]), ("lora_mlp", ["gate", "up", "down"]), ("lora_head", ["lm_head"]),
]  # fmt: skip
# LitGPT's defaults (litgpt/finetune/lora.py): query and value adapted, the rest not.
_TARGET_DEFAULTS = {"lora_query": True, "lora_value": True}


def looks_like(data: dict[str, Any]) -> bool:
    return "checkpoint_dir" in data or (
        isinstance(data.get("train"), dict) and "micro_batch_size" in data["train"]
    )


def method_of(path: Path, data: dict[str, Any]) -> str:
    """full, lora or adapter: the script the config is for (config_hub names its files so)."""
    stem = path.stem.lower()
    if "adapter" in stem:
        return "adapter_v2" if "v2" in stem else "adapter"
    if "lora" in stem or any(k.startswith("lora_") for k in data):
        return "lora"
    return "full"


def read(path: Path, data: dict[str, Any]) -> tuple[str, Reading]:
    method = method_of(path, data)
    r = Reading(path.name, data, KNOWN)
    _model(r, path)
    _precision(r)
    gpus = _devices(r, method)
    _batches(r, gpus, method)
    _optimizer(r)
    _optim_block(r)
    _longlora(r)
    _compile(r)
    if method == "lora":
        _lora(r)
    elif method.startswith("adapter"):
        r.imply("(the script)", "adapter", method, f"litgpt finetune_{method}: LLaMA-Adapter")
    if method != "full":
        r.imply(
            "(the script)",
            "loss",
            "litgpt",
            "LitGPT's finetune script: the LM head in chunks of 128 tokens, cast to fp32 by "
            "Lightning Fabric as the model returns them, then chunked_cross_entropy",
        )
    else:  # full.py: the whole logits, then the loss in chunks of 128 rows
        r.imply(
            "(the script)",
            "loss",
            "litgpt-full",
            "LitGPT's full.py: the whole logits, cast to fp32 by Lightning Fabric as the model "
            "returns them, then chunked_cross_entropy on their rows in chunks of 128",
        )
    r.imply("(the script)", "litgpt_norm", True, LITGPT_NORM)
    r.finish()
    return f"LitGPT finetune {method}", r


# LitGPT's GaLore configs (config_hub/finetune/{tiny-llama,gemma-2b,phi-2,stablelm-base-alpha-3b}/
# galore.yaml) name the optimizer in an ``optim`` block, its choices "adamw", "galore_adamw",
# "galore_adamw_8bit", GaLore's arguments in ``extra_kwargs`` ("rank=8, update_proj_gap=200, …").
# GaLore (galore_torch's GaLoreAdamW) keeps per target matrix m×n a projector m×r and Adam's two
# moments of the projected r×n gradient, in the parameter's dtype: under AdamW's two m×n moments
# while r is under a third of the smaller side, so AdamW's count bounds it (as the Trainer's
# galore_adamw, recipes/hf_trainer_optim). Its 8-bit form adds fp32 projectors to 1-byte moments,
# which 8-bit AdamW's count does not bound. Each was listed as unknown and estimated as AdamW.
_GALORE_BOUND = (
    "GaLore's projected moments counted as AdamW's full moments on every parameter: a bound "
    "above while its rank (optim.extra_kwargs) is under a third of each target matrix's side"
)


def _optim_block(r: Reading) -> None:
    name = r.get("optim.optimizer")
    if name is None:
        return
    key, said = "optim.optimizer", str(name).lower()
    for other in ("optim.learning_rate", "optim.weight_decay", "optim.beta1", "optim.beta2"):
        r.ignore(other, NO_MEMORY)
    r.seen("optim.extra_kwargs", main=key)
    if said == "adamw":
        r.use(key, "optimizer", "adamw")
    elif said == "galore_adamw":
        r.use(key, "optimizer", "adamw", _GALORE_BOUND)
    else:
        r.refuse(
            key,
            f"{r.file}: optim.optimizer = {name!r} is not modelled (GaLore's 8-bit moments come "
            "with its projectors and a full-size update per matrix, which 8-bit AdamW's count "
            "does not bound): not estimated; give --optimizer to estimate another",
            unless="optimizer",
        )


def _longlora(r: Reading) -> None:
    """LitGPT's LongLoRA (config_hub/finetune/{llama-2-7b,mistral-7b}/longlora.yaml,
    ``longlora.use_longlora``): besides the adapters it trains ``longlora.trainable_params``
    ("wte,norm,ln": the embedding table's gradient and optimizer state, Ψ_emb · (2 + 2·states) B)
    and splits attention into ``n_groups`` shifted groups over ``context_length`` tokens. None
    of it is modelled, and estimated as plain LoRA it was low (its keys were listed unknown)."""
    if not r.get("longlora.use_longlora"):
        r.ignore("longlora.use_longlora", NO_MEMORY + " (false: plain LoRA)")
        for key in r.unseen("longlora."):
            r.ignore(key, NO_MEMORY + " (read only with longlora.use_longlora true)")
        return
    trained = r.get("longlora.trainable_params", "wte,norm,ln")
    r.refuse(
        "longlora.use_longlora",
        f"{r.file}: longlora.use_longlora = true is LitGPT's LongLoRA, which also trains "
        f"{trained} beside the adapters (the embedding's gradient and optimizer state) and "
        "splits attention into shifted groups: not modelled, so not estimated; set "
        "longlora.use_longlora: false to estimate its plain LoRA",
    )
    r.seen(*r.unseen("longlora."), main="longlora.use_longlora")


def _compile(r: Reading) -> None:
    key = "compile" if r.has("compile") else "compiler"
    value = r.get(key)
    if value is True or value == "torch":
        r.use(key, "compile", True, "torch.compile of the model: each block as the partitioner "
              "splits it (the LM head and loss counted eager)")  # fmt: skip
    else:
        r.ignore(key, NO_MEMORY + f" ({value!r}: no torch.compile)" if r.has(key) else "")


def _model(r: Reading, path: Path) -> None:
    folder = r.get("checkpoint_dir")
    if folder is None:
        return
    local = local_config(folder, path.parent) or local_config(folder)
    if local is not None:
        r.use("checkpoint_dir", "model", local, "its config.json")
        return
    model, note = hub_model(str(folder))
    if model is None:
        r.ignore("checkpoint_dir", f"{note}; give --model hf:NAME or hf:PATH")
        return
    r.use("checkpoint_dir", "model", model, note)


def _precision(r: Reading) -> None:
    value = r.get("precision")
    if value is None:
        r.imply(
            "precision",
            "precision",
            "amp-bf16",
            "unset: LitGPT trains in bf16-mixed on a GPU with bf16",
        )
    elif str(value) not in _PRECISIONS:
        r.ignore("precision", f"{value!r} is not a precision this reader knows; give --precision")
    else:
        ours, why = _PRECISIONS[str(value)]
        r.use("precision", "precision", ours, why)
    quantize = r.get("quantize")
    if quantize is None:
        r.ignore("quantize", NO_MEMORY + " (unset: no quantization)")
        return
    q = str(quantize).removeprefix("bnb.")
    if q in ("nf4", "nf4-dq", "fp4", "fp4-dq"):
        r.use("quantize", "qlora", True, "bitsandbytes 4-bit base (QLoRA)")
        r.use(
            "quantize",
            "double_quant",
            q.endswith("-dq"),
            "double quantization of the 4-bit blocks' constants",
        )
        r.use(
            "quantize",
            "fabric_bnb",
            True,
            "Lightning Fabric's BitsandbytesPrecision: the LM head in 4 bits too, each weight "
            "quantized from fp16 (every 4-bit matmul dequantizes to fp16, then casts to bf16)",
        )
    else:
        r.ignore("quantize", f"{quantize!r} (8-bit weights) is not modelled; estimate without it")


FSDP1_FOREACH = (
    "Lightning's FSDPStrategy is FSDP1: its flat parameters are plain tensors, so torch's AdamW "
    "runs foreach (one temporary per state tensor at the step)"
)


LITGPT_NORM = (
    "LitGPT's own GPT (litgpt/model.py): its RMSNorm, where the model has one, keeps the fp32 "
    "normalized values and the weight's fp32 copy; its attention fuses q, k, v (LoRA on them "
    "one LoRAQKVLinear)"
)
FSDP1_FLAT = (
    "Lightning's FSDPStrategy is FSDP1 (use_orig_params=True, Lightning's default): each "
    "block's parameters and the root's are views of one flat parameter in forward, whose "
    "gradient autograd makes by concatenating the views' gradients while the root is gathered"
)


def _devices(r: Reading, method: str) -> int:
    devices, nodes = r.get("devices", 1), r.get("num_nodes", 1)
    if devices in ("auto", -1):
        r.ignore("devices", "'auto' is every GPU of the machine: give --gpus N")
        devices = 1
    try:
        gpus = int(devices) * int(nodes or 1)
    except (TypeError, ValueError):
        raise ProfilingError(f"{r.file}: devices {devices!r} is not a GPU count") from None
    r.use("devices", "gpus", gpus, "× num_nodes" if (nodes or 1) > 1 else "")
    r.seen("num_nodes", main="devices")
    if gpus > 1:
        # finetune/lora.py too (``strategy = FSDPStrategy(auto_wrap_policy={Block}, ...)`` when
        # devices > 1, at 43c44323 and at 00af8b0): every script's sharding is FSDP1
        r.use("devices", "fsdp", True, "FSDP full shard of every block on more than one GPU")
        r.use("devices", "checkpointing", "full", "LitGPT checkpoints every block when sharded")
        said = r.has("optimizer.init_args.foreach") or r.get("optimizer.init_args.fused")
        if not said:
            # finetune/full.py, lora.py and adapter.py shard with Lightning's FSDPStrategy: FSDP1
            # (FullyShardedDataParallel), whose parameters are plain tensors, so torch's AdamW,
            # built without a foreach argument (instantiate_torch_optimizer), takes the
            # multi-tensor path (torch/optim/optimizer.py, _default_to_fused_or_foreach: foreach
            # for torch.Tensor and Parameter on CUDA); FSDP2's DTensors get the for-loop. Its
            # step holds a sqrt of every second moment at once (_multi_tensor_adamw). A file
            # that says foreach or fused is read as it says (_optimizer).
            r.imply("(the script)", "foreach", True, FSDP1_FOREACH)
        if method != "full":
            # Lightning's FSDPStrategy sets use_orig_params=True (lightning/fabric/strategies/
            # fsdp.py at 438f29f and 12881e8, the lightning LitGPT 43c44323 and 00af8b0 pin:
            # ``self._fsdp_kwargs.setdefault("use_orig_params", True)``), which lets one flat
            # parameter hold a block's frozen and adapted weights; its forward's views all come
            # from the flat parameter, so the frozen weights' gradients are made and kept too
            # (torch's FullyShardedDataParallel docs: "higher than expected gradient memory").
            # What it costs, read from torch/distributed/fsdp/_flat_param.py (torch 2.13): the
            # flat parameter requires grad if any of its tensors does (_validate_tensors_to_
            # flatten), and its gradient is dropped only when every original parameter's is None
            # (_reset_flat_param_grad_info_if_needed): a full finetune's gradients, Ψ/N·2 B
            # sharded through the step, Ψ·2 B unsharded on every device while LitGPT's
            # fabric.no_backward_sync accumulates (the --accumulate-unsharded moments), and every
            # frozen Linear's input kept for its weight's gradient
            raise ProfilingError(
                f"{r.file}: LitGPT's {method} on {gpus} GPUs shards with Lightning's FSDPStrategy "
                "(FSDP1, use_orig_params=True), whose flat parameters mix each block's frozen "
                "and adapted weights, so the frozen weights' gradients are made too (a full "
                "finetune's: Ψ/N·2 B sharded, Ψ·2 B on every device while micro-batches "
                "accumulate unsynced): not modelled (our count would be low); set devices: 1"
            )
        r.imply("(the script)", "fsdp_flat", True, FSDP1_FLAT)
    return gpus


def _batches(r: Reading, gpus: int, method: str) -> None:
    micro = r.get("train.micro_batch_size")
    if micro is not None:
        r.use("train.micro_batch_size", "batch", micro)
    seq = r.get("train.max_seq_length")
    if seq is not None:
        r.use("train.max_seq_length", "seq", seq)
    else:
        r.ignore("train.max_seq_length", "unset: the data decides; give --seq")
        r.notes.append(
            "train.max_seq_length unset: LitGPT pads to the longest sample of the data; give --seq"
        )
    total = r.get("train.global_batch_size")
    if total is not None and micro:
        steps = max(1, int(total) // (int(micro) * gpus))
        if steps > 1 and gpus > 1 and method == "full":
            # full.py runs each micro-batch but the last under fabric.no_backward_sync, which
            # Lightning's FSDPStrategy makes FSDP1's no_sync(): each rank keeps the unsharded
            # gradients until the last micro-batch reduce-scatters them.
            r.use(
                "train.global_batch_size",
                "accumulate_unsharded",
                steps,
                f"{steps} micro-batches accumulated per step, all but the last under "
                "fabric.no_backward_sync (FSDP1's no_sync): every rank keeps the whole model's "
                "unsharded gradients until the last one",
            )
        elif steps > 1:
            r.use(
                "train.global_batch_size",
                "grads_kept",
                True,
                f"{steps} micro-batches accumulated: gradients stay allocated through the "
                "later micro-batches' forward",
            )
        else:
            r.ignore("train.global_batch_size", NO_MEMORY + " (no accumulation)")
    # LitGPT's GPT always has its own lm_head: convert_hf_checkpoint copies the embedding into
    # it when a Hugging Face checkpoint ties them (litgpt/scripts/convert_hf_checkpoint.py,
    # `if "lm_head.weight" not in state_dict: state_dict["lm_head.weight"] = ...wte.weight`),
    # and the finetune scripts refuse tie_embeddings (validate_args' unsupported list); only
    # pretrain.py ties them, when told to.
    tie = r.get("train.tie_embeddings")
    if tie is None:
        r.imply(
            "train.tie_embeddings",
            "tied_head",
            False,
            "unset: LitGPT's checkpoints give the LM head its own copy of a tied embedding",
        )
    else:
        r.use("train.tie_embeddings", "tied_head", bool(tie), "the LM head shares the embedding")


def _optimizer(r: Reading) -> None:
    spec = r.get("optimizer.class_path", r.get("optimizer"))
    key = "optimizer.class_path" if r.has("optimizer.class_path") else "optimizer"
    if str(r.get("quantize", "")).startswith("bnb."):
        _bnb_optimizer(r, spec, key)
        return
    if spec is None:
        return
    name = str(spec).rsplit(".", 1)[-1].lower()
    ours = _OPTIMIZERS.get(name)
    if ours is None:
        r.ignore(key, f"{spec} is not an optimizer this reader knows; give --optimizer")
        return
    paged = "paged" in name
    why = "bitsandbytes' paged optimizer: state paged to CPU memory under pressure" * paged
    why = TORCH_ADAFACTOR if ours == "adafactor" else why  # LitGPT builds torch.optim's
    if ours == "sgd" and not r.get("optimizer.init_args.momentum"):
        ours = "sgd-nomomentum"
    r.seen("optimizer.init_args.momentum", main=key)
    r.use(key, "optimizer", ours, why)
    if paged:
        r.use(key, "paged_optimizer", True, "bitsandbytes.optim.Paged…: states in managed memory")
    if r.get("optimizer.init_args.fused"):
        r.use(
            "optimizer.init_args.fused",
            "fused_optimizer",
            True,
            "one fused kernel: no foreach temporaries",
        )
    if r.has("optimizer.init_args.foreach"):
        r.use("optimizer.init_args.foreach", "foreach", bool(r.get("optimizer.init_args.foreach")))


def _bnb_optimizer(r: Reading, spec: Any, key: str) -> None:
    """``quantize: bnb.*`` swaps the optimizer: finetune/lora.py and adapter.py call
    ``instantiate_bnb_optimizer`` under ``BitsandbytesPrecision`` (litgpt/utils.py), which
    refuses all but AdamW and builds ``bnb.optim.PagedAdamW`` (32-bit, fp32 states, paged) with
    only the init_args its signature takes (``fused``, ``foreach`` are dropped)."""
    name = "adamw" if spec is None else str(spec).rsplit(".", 1)[-1].lower()
    if "adamw" not in name:
        raise ProfilingError(
            f"{r.file}: LitGPT refuses {spec} with quantize {r.get('quantize')!r} (only AdamW, "
            "as bitsandbytes' PagedAdamW); set optimizer to AdamW or remove quantize"
        )
    why = "quantize bnb.*: LitGPT builds bitsandbytes' PagedAdamW (32-bit states, paged)"
    (r.use if spec is not None else r.imply)(key, "optimizer", "adamw", why)
    r.imply(key, "paged_optimizer", True, why)
    r.seen("optimizer.init_args.momentum", main=key)
    for arg in ("fused", "foreach"):
        r.ignore(f"optimizer.init_args.{arg}", "PagedAdamW takes no such argument: LitGPT drops it")


def _lora(r: Reading) -> None:
    if r.has("lora_r"):
        r.use("lora_r", "lora_rank", r.get("lora_r"))
    else:
        r.imply("lora_r", "lora_rank", 8, "unset: LitGPT's default rank")
    targets: list[str] = []
    for key, roles in _TARGETS:
        if r.get(key, _TARGET_DEFAULTS.get(key, False)):
            targets += roles
    first = next((k for k, _ in _TARGETS if r.has(k)), None)
    if first is None:
        r.imply("lora_query", "lora_targets", targets, "unset: LitGPT adapts query and value")
    else:
        r.use(first, "lora_targets", targets, "LitGPT's lora_query … lora_head together")
    r.seen(*(k for k, _ in _TARGETS), main=first or "lora_query")
    dropout = r.get("lora_dropout")
    if dropout is not None:
        r.use("lora_dropout", "lora_dropout", float(dropout))


__all__ = ["looks_like", "read"]
