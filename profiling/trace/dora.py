"""DoRA in the traced step: peft's own ``use_dora`` layers, on a 16-bit or a 4-bit base.

peft's ``DoraLinearLayer`` (peft/tuners/lora/dora.py) runs in every forward of an adapted layer:
B·A rebuilt as a full-size weight through the adapters (``lora_B(lora_A(eye(in)))``: the
identity kept for A's gradient), the base weight in the input's dtype (dequantized first on a
4-bit base: ``dequantize_module_weight``), the norm of W + scale·B·A per output row (B·A
detached, so a full-size temporary without a graph), the norm detached as the DoRA paper's
section 4.3 suggests, and the magnitude vector (one trainable value per output row) scaling
the base layer's and the adapters' outputs. The trace runs exactly that code; only the one
function that reads a quantized weight is taught our NF4 stand-in (bitsandbytes' kernels need
CUDA), which dequantizes it as ``dequantize_4bit`` does.

Imports torch; peft inside the function.
"""

from __future__ import annotations

from typing import Any

from profiling._quiet_import import import_quietly
from profiling.config import TrainingConfig
from profiling.estimate.dora_torchtune import problem as torchtune_problem


def teach_peft_nf4(nf4_linear: type) -> None:
    """peft's DoRA reads the base weight through ``dequantize_module_weight``, which knows
    bitsandbytes' Params4bit; our ``nf4_linear`` (trace.nf4's NF4Linear) stands in for it
    under fake tensors: dequantized to the compute dtype as bitsandbytes' ``dequantize_4bit``
    writes it (the absmax first). Idempotent; every other module is peft's own path."""
    dora = import_quietly("peft.tuners.lora.dora")
    original = dora.dequantize_module_weight
    if getattr(original, "nf4_stand_in", False):
        return

    def dequantize_module_weight(module: Any) -> Any:
        if isinstance(module, nf4_linear):
            return module.dequantize(module.compute_dtype)
        return original(module)

    dequantize_module_weight.nf4_stand_in = True  # type: ignore[attr-defined]  # the mark read above
    dora.__dict__["dequantize_module_weight"] = dequantize_module_weight  # read by name in forward


def free_dead_graphs(model: Any, config: TrainingConfig) -> int:
    """Each DoRA layer's dead graph freed when its forward returns, as eager frees it (and,
    under ``torchtune_dora``, each layer run in torchtune's order: ``trace.dora_torchtune``);
    returns how many layers.

    peft builds B·A with grad (``lora_B(lora_A(eye))``) and uses it only detached, so in eager
    its graph (the in × in identity saved for A's gradient, A's output saved for B's) lives
    until the forward returns and dies with the local ``lora_weight``. Under the trace, torch's
    ModTracker puts backward hooks on lora_A's and lora_B's outputs, and those hooks close a
    reference cycle that keeps the dead graph alive until the garbage collector runs: bytes
    eager never holds there. So the outputs made inside ``get_lora_weight`` are noted, and once
    the layer's forward has returned their hooks are dropped (the graph can never run
    backward: nothing reaches it), which frees it at the moment eager does."""
    count = 0
    for module in model.modules():
        if type(module).__name__ == "DoraLinearLayer":
            _release_after_forward(module)
            count += 1
    if config.torchtune_dora:
        from profiling.trace.dora_torchtune import run_as_torchtune

        run_as_torchtune(model)
    return count


def _release_after_forward(layer: Any) -> None:
    made: list[Any] = []  # lora_A's and lora_B's outputs inside get_lora_weight
    inside = [False]
    get_lora_weight = layer.get_lora_weight

    def noting(*args: Any, **kwargs: Any) -> Any:
        for adapter in (kwargs.get("lora_A"), kwargs.get("lora_B")):
            if adapter is not None and not getattr(adapter, "dora_notes", False):
                adapter.register_forward_hook(
                    lambda _m, _i, out: made.append(out) if inside[0] else None
                )
                adapter.dora_notes = True
        inside[0] = True
        try:
            return get_lora_weight(*args, **kwargs)
        finally:
            inside[0] = False
            # Their hooks dropped and our references with them as get_lora_weight returns:
            # from here only peft holds them, as in eager (under autocast B's 16-bit output
            # dies as soon as peft casts it to the input's dtype; the graph with the layer's
            # forward)
            for out in made:
                if out._backward_hooks:
                    out._backward_hooks.clear()
            made.clear()

    # On the instance: peft's class and other models are left alone.
    layer.get_lora_weight = noting


def problem(config: TrainingConfig, arch: str) -> str | None:
    """Why the trace cannot run peft's DoRA here (None: it can): on a Llama-family model, or
    GPT-NeoX's kind — q, k, v apart (Phi), or a fused ``query_key_value`` that peft adapts
    whole (``profiling.trace.lora_neox.peft_names``: its target_modules cannot name a slice,
    so all of q, k, v or none); torchtune's ``DoRALinear`` is its own."""
    slices = {"q", "k", "v"} & set(config.lora_targets)
    if arch == "neox" and slices and slices != {"q", "k", "v"}:
        from profiling.models.shape_overrides import workload_of

        w = workload_of(config)
        if w is None or w.fused_qkv:
            return (
                "--lora-targets with all of q, k, v for DoRA on a fused query_key_value (peft "
                "adapts it whole: its target_modules name no slice)"
            )
    if why := torchtune_problem(config, arch):  # torchtune's DoRALinear
        return why
    if arch in ("llama", "neox") and not config.torchao_nf4:
        return None
    return "peft's DoRA on a Llama-family model or GPT-NeoX's kind (--dora: not torchtune's)"


def note(config: TrainingConfig) -> str:
    """What the record says of DoRA."""
    base = "dequantized from NF4" if config.qlora else "the frozen weight"
    return (
        "DoRA by peft (use_dora=True): each adapted layer trains a magnitude vector (one value "
        f"per output row) and in every forward rebuilds B·A through the adapters (the in × in "
        f"identity kept for A's gradient) and the norm of W + scale·B·A ({base}, a full-size "
        "temporary, detached)"
    ) + (
        "; run as torchtune's DoRALinear runs it (torchtune 00a080a6: the base output from the "
        "undropped input, nothing rerun under dropout, B's output made before the norm)"
        if config.torchtune_dora
        else ""
    )


__all__ = ["free_dead_graphs", "note", "problem", "teach_peft_nf4"]
