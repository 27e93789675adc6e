"""torchtune's DPO configs (``loss._component_: torchtune.rlhf.loss.DPOLoss``), read as
recipes/lora_dpo_single_device.py, lora_dpo_distributed.py and full_dpo_distributed.py run them
(torchtune at bd2a0fc): ``--dpo`` (``profiling.estimate.preference``,
``profiling.trace.preference``) on twice ``batch_size`` rows — ``padded_collate_dpo``
(torchtune/data/_collate.py) concatenates the chosen and the rejected responses."""

from __future__ import annotations

from profiling.recipes.recipe import NO_MEMORY, Reading


def dpo(r: Reading) -> bool:
    """Whether ``r`` is a DPO config; if so its DPO fields are read (the batch doubled)."""
    if str(r.get("loss._component_", "")).rsplit(".", 1)[-1] != "DPOLoss":
        return False
    lora = str(r.get("model._component_", "")).rsplit(".", 1)[-1].startswith(("lora_", "qlora_"))
    reference = ("the policy with its adapters off (disable_adapter), its fp32 logits held to "
                 "the next step" if lora else
                 "a frozen copy of the model (_setup_reference_model)")  # fmt: skip
    r.use("loss._component_", "dpo", True, f"DPOLoss: a reference forward under no_grad through "
          f"{reference}")  # fmt: skip
    if r.has("batch_size"):
        pairs = int(r.get("batch_size") or 1)
        r.use("batch_size", "batch", 2 * pairs, f"{pairs} pairs per device: chosen and "
              "rejected concatenated (padded_collate_dpo), twice the rows")  # fmt: skip
    for key in ("loss.beta", "loss.label_smoothing"):
        r.ignore(key, NO_MEMORY + " (DPOLoss's scalars)")
    for key in [k for k in r.flat if k.startswith("ref_checkpointer.")]:
        r.ignore(key, "the reference's checkpoint: the frozen copy --dpo counts, the policy's "
                 "shape")  # fmt: skip
    return True


__all__ = ["dpo"]
