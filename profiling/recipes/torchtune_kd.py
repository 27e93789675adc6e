"""torchtune's knowledge distillation configs (``teacher_model``, ``kd_loss``), read as
recipes/knowledge_distillation_single_device.py and _distributed.py run them (torchtune at
bd2a0fc): ``--kd-teacher`` (``profiling.estimate.distill``, ``profiling.trace.distill``) with
the teacher's builder as its model; ``ForwardKLWithChunkedOutputLoss`` is the loss modelled."""

from __future__ import annotations

from profiling.recipes.model_names import torchtune_model
from profiling.recipes.recipe import NO_MEMORY, Reading

KL = "ForwardKLWithChunkedOutputLoss"


def kd_refusal(kd_loss: str) -> str | None:
    """One sentence for a KD config whose loss is not modelled, or None."""
    name = kd_loss.rsplit(".", 1)[-1]
    if name == KL:
        return None
    return (f"torchtune's knowledge distillation recipe with kd_loss._component_ = {name} (only "
            f"{KL} is modelled: --kd-teacher) keeps other tensors of both models' logits, which "
            "is not modelled")  # fmt: skip


def distill(r: Reading) -> bool:
    """Whether ``r`` is a KD config; if so its teacher and KD fields are read."""
    component = str(r.get("teacher_model._component_", ""))
    if not component:
        return False
    model, lora, _, note = torchtune_model(component)
    if model is None:  # never the student alone: refused unless --kd-teacher is given
        r.use("teacher_model._component_", "kd_teacher", component, note)
        r.refusals["kd_teacher"] = (
            f"{r.file}: teacher_model._component_ = {component}: {note}"
            "; give --kd-teacher hf:NAME or hf:PATH (a config.json)"
        )
    else:
        why = f"the frozen teacher ({note}) in the student's dtype, its chunked logits under "
        r.use("teacher_model._component_", "kd_teacher", model, why + f"no_grad, then {KL}")
    r.seen("kd_loss._component_", main="teacher_model._component_")
    adapters = "the teacher's LoRA adapters (well under 1 % of its weights) are not counted"
    for key in r.flat:
        if key.startswith("teacher_model.") and key != "teacher_model._component_":
            r.ignore(key, adapters if lora else NO_MEMORY + " (the teacher's)")
        elif key.startswith(("teacher_checkpointer.", "kd_loss.")) and key != "kd_loss._component_":
            r.ignore(key, NO_MEMORY + " (the teacher's checkpoint; the KD loss's chunks: the "
                     "loss's num_output_chunks)")  # fmt: skip
    r.ignore("kd_ratio", NO_MEMORY + " (the two losses' weights)")
    return True


__all__ = ["KL", "distill", "kd_refusal"]
