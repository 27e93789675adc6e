"""The Trainer's ``optim``, ``optim_args`` and ``optim_target_modules``, as transformers builds
the optimizer (transformers 5.24, trainer_optimizer.py: the ``OptimizerNames`` of
training_args.py, each name's ``_get_*`` builder): every name is read as one of our optimizers
(said when the count is a bound above the real state) or refused in one sentence in the file's
own keys (unless ``--optimizer`` is given). No torch, no framework.
"""

from __future__ import annotations

from profiling.recipes.recipe import NO_MEMORY, Reading

# name: (our optimizer, how it was read)
_OPTIM = {
    "adamw_torch": ("adamw", "torch's AdamW (foreach)"),
    "adamw_hf": ("adamw", ""),
    "adamw_torch_fused": ("adamw", "torch's fused AdamW"),
    "adamw_apex_fused": ("adamw", "apex's fused AdamW"),
    "adamw_bnb_8bit": ("adam8bit", "bitsandbytes' 8-bit AdamW"),
    "adamw_8bit": ("adam8bit", "bitsandbytes' 8-bit AdamW"),
    "paged_adamw_8bit": ("adam8bit", "bitsandbytes' paged 8-bit AdamW"),
    "paged_adamw_32bit": ("adamw", "bitsandbytes' paged 32-bit AdamW"),
    "adamw_torch_4bit": ("adam8bit", "torchao's 4-bit AdamW (counted as 8-bit: 2 B of state)"),
    "adamw_torch_8bit": ("adam8bit", "torchao's 8-bit AdamW"),
    "adamw_anyprecision": (
        "adamw",
        "torchdistx's AnyPrecisionAdamW: its fp32 moments (bf16 "
        "through optim_args, counted fp32: a bound)",
    ),
    "adafactor": ("adafactor", "transformers' Adafactor"),
    "sgd": ("sgd", "torch's SGD (momentum 0.9 assumed; set --optimizer sgd-nomomentum if none)"),
    "adagrad": ("adagrad", ""),
    "rmsprop": ("rmsprop", ""),
    "rmsprop_bnb": ("rmsprop", "bitsandbytes' 32-bit RMSprop"),
    "rmsprop_bnb_32bit": ("rmsprop", "bitsandbytes' 32-bit RMSprop"),
    "rmsprop_bnb_8bit": (
        "adam8bit",
        "bitsandbytes' 8-bit RMSprop (one 1-byte state; counted as two)",
    ),
    "lion_8bit": ("adam8bit", "bitsandbytes' 8-bit Lion (one 1-byte state; counted as two)"),
    "lion_32bit": ("lion", ""),
    "paged_lion_8bit": (
        "adam8bit",
        "bitsandbytes' paged 8-bit Lion (one 1-byte state; counted as two)",
    ),
    "paged_lion_32bit": ("lion", "bitsandbytes' paged 32-bit Lion"),
    # GaLore (galore_torch's GaLoreAdamW): per target matrix m×n a projector m×r and Adam's two
    # moments of the projected r×n gradient, r(m + 2n)·4 B, under AdamW's 2mn·4 B while r is
    # under a third of the matrix's smaller side; its for-loop step's temporaries are one
    # matrix's, under foreach AdamW's counted; layerwise steps each parameter in backward
    "galore_adamw": (
        "adamw",
        "GaLore's projected moments counted as AdamW's full moments on "
        "every parameter: a bound above while its rank (128 unless optim_args "
        "says) is under a third of each target matrix's smaller side",
    ),
    "galore_adamw_layerwise": (
        "adamw",
        "GaLore's projected moments, stepped layer by layer in "
        "backward, counted as AdamW's on every parameter with every "
        "gradient kept: a bound above while its rank (128 unless "
        "optim_args says) is under a third of each target matrix's "
        "smaller side",
    ),
}

# name (or its start): why it is refused
_NOT_MODELLED = {
    "galore_adamw_8bit": "GaLore's 8-bit moments come with its fp32 projectors and a full-size "
    "update per matrix, which 8-bit AdamW's count does not bound",
    "galore_adafactor": "GaLore's fp32 projectors (m×rank per matrix) are larger than "
    "Adafactor's factors, so Adafactor's count is no bound",
    "apollo_": "APOLLO's random projections and channel scales are not modelled",
    "ademamix": "AdEMAMix keeps three states per parameter (two momenta and the variance)",
    "paged_ademamix": "AdEMAMix keeps three states per parameter (two momenta and the variance)",
    "grokadamw": "GrokAdamW keeps a third state (its gradient's slow average)",
    "schedule_free_": "the schedule-free optimizers' z and x sequences are not modelled",
    "stable_adamw": "optimi's StableAdamW (its Kahan buffers on 16-bit weights) is not modelled",
    "lomo": "LOMO updates each weight in its backward with no gradient kept, which is not modelled",
    "adalomo": "AdaLomo updates each weight in its backward with its factored second moments, "
    "which is not modelled",
    "adamw_torch_xla": "it runs on XLA devices, not a CUDA GPU",
    "adamw_torch_npu_fused": "it runs on Ascend NPUs, not a CUDA GPU",
}

# optim_args keys that add state, per optimizer (transformers' _get_rmsprop, torchdistx's
# AnyPrecisionAdamW): (name's start, key, the values that keep it off)
_STATE_ARGS = (
    ("rmsprop", "momentum", ("0", "0.0")),
    ("rmsprop", "centered", ("false", "0", "no")),
    ("adamw_anyprecision", "use_kahan_summation", ("false", "0", "no")),
)


def read_optimizer(r: Reading) -> None:
    """``optim``, its ``optim_args`` and ``optim_target_modules``, as said in the module."""
    optim = r.get("optim")
    if r.get("adafactor") is True:  # transformers 4.x: adafactor = True is optim "adafactor"
        r.seen("optim", main="adafactor (true: transformers 4.x's optim 'adafactor')")
        optim, key = "adafactor", "adafactor"
    else:
        r.ignore("adafactor", NO_MEMORY + " (false: optim is read)")
        key = "optim"
    name = str(optim).lower() if optim is not None else ""
    args = _optim_args(r.get("optim_args"))
    _targets(r, name)
    if optim is None:
        r.ignore("optim_args", NO_MEMORY + " (no optim given)")
        return
    refused = next((why for k, why in _NOT_MODELLED.items() if name.startswith(k)), None)
    if refused is None and name not in _OPTIM:
        refused = "it is not one of the optimizers transformers names (OptimizerNames)"
    for start, arg, off in _STATE_ARGS:
        if (
            refused is None
            and name.startswith(start)
            and str(args.get(arg, off[0])).lower() not in off
        ):
            refused = f"its optim_args {arg} = {args[arg]} adds a state that is not modelled"
    if refused is not None:
        r.refuse(key, f"{r.file}: {key} = {r.get(key)!r} is not estimated: {refused}; give "
                 "--optimizer for the nearest one", unless="optimizer")  # fmt: skip
        r.seen("optim_args", main="optim")
        return
    ours, why = _OPTIM[name]
    r.use(key, "optimizer", ours, why)
    if args:
        r.seen("optim_args", main=f"optim ({', '.join(args)}: {NO_MEMORY} here)")
    else:
        r.ignore("optim_args", NO_MEMORY + " (none)")
    if name in ("adamw_torch_fused", "adamw_apex_fused"):  # one kernel: no foreach lists
        r.use(key, "foreach", False, "one fused kernel keeps no foreach temporaries: "
              "counted as the for-loop step's scratch, a bound above the kernel's")  # fmt: skip
    if name.startswith("paged_"):
        r.use(key, "paged_optimizer", True, "bitsandbytes pages its state under pressure")
    if name in ("adamw_torch_8bit", "adamw_torch_4bit"):  # transformers' _TORCHAO_OPTIMIZERS
        r.use(key, "torchao_optim", True, "torchao's rule and compiled step")


def _targets(r: Reading, name: str) -> None:
    """``optim_target_modules``: the matrices GaLore and APOLLO project; other optimizers
    never read it (transformers' _setup_low_rank_optimizer)."""
    if name.startswith(("galore_", "apollo_")):
        r.seen("optim_target_modules", main="optim (the matrices it projects)")
    else:
        r.ignore("optim_target_modules", "read only by the GaLore and APOLLO optimizers")


def _optim_args(value: object) -> dict[str, str]:
    """transformers' parsing of ``optim_args``: ``"a=1,b=2"`` (trainer_optimizer.py)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str) or not value.strip():
        return {}
    pairs = (item.split("=", 1) for item in value.replace(" ", "").split(",") if "=" in item)
    return {k: v for k, v in pairs}


__all__ = ["read_optimizer"]
