"""torchtune's DPO step in the traced loop (``--dpo``): the policy and the reference as the
recipes run them, on the batch's rows (chosen and rejected concatenated).

Read from torchtune at bd2a0fc: recipes/lora_dpo_single_device.py and lora_dpo_distributed.py
(``concatenated_forward``: ``all_logits = model(ids)``, ``rlhf.get_batch_log_probs`` over all
rows; the train loop's ``.detach().mean()`` of the chosen and rejected logits, then ``del`` of the
policy's; the reference under ``torch.no_grad(), disable_adapter(self._model)``, whose outputs —
its fp32 logits too — the loop never deletes: they live until ``reference_chosen_rejected_outputs``
is rebound in the next step, after that step's policy forward), recipes/full_dpo_distributed.py
(``get_batch_log_probs`` on the chosen half, then the rejected half; a frozen
``self._ref_model``; the reference's logits deleted), torchtune/modules/transformer.py
(``unembed``: ``self.output(h).float()``), torchtune/rlhf/sequence_processing.py
(``get_batch_log_probs``, ``logits_to_logprobs``) and torchtune/rlhf/loss/dpo.py (``DPOLoss``).
Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from profiling.models.losses import IGNORE

BETA = 0.1  # DPOLoss's defaults (beta, label_smoothing)
SMOOTHING = 0.0


def batch_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``rlhf.get_batch_log_probs`` (return_average_logprobs=False), op for op."""
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    loss_mask = labels != IGNORE
    labels[labels == IGNORE] = 0
    # logits_to_logprobs(logits, labels, temperature=1.0): the division makes a copy
    per_token = torch.gather(F.log_softmax(logits / 1.0, dim=-1), 2, labels.unsqueeze(-1))
    return (per_token.squeeze(-1) * loss_mask).sum(-1)


@contextlib.contextmanager
def adapters_off(model: nn.Module) -> Iterator[None]:
    """torchtune's ``disable_adapter``: every adapted layer runs its base alone (peft's
    ``BaseTunerLayer.enable_adapters(False)`` on the traced model's layers, and ``disabled`` on
    a fused q/k/v's adapter, ``lora_neox.FusedQKVLoRA``, as torchtune sets it on every adapter
    module — left on, the reference forward ran the fused adapter's fp32 update: BLOOM LoRA q,v
    mixed peaked there, 90,678 B above the recipe's step)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    from profiling.trace.lora_neox import FusedQKVLoRA

    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    fused = [m for m in model.modules() if isinstance(m, FusedQKVLoRA)]
    for layer in layers:
        layer.enable_adapters(False)
    for module in fused:
        module.disabled = True
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for module in fused:
            module.disabled = False


class DPOStep(nn.Module):
    """``model(ids, labels)``: the DPO loss of the rows, the reference forward inside it.

    ``reference`` None: the LoRA recipes (the policy with its adapters off, the reference's
    logits held to the next step); a module: full_dpo_distributed.py's frozen copy (log-probs
    half by half, its logits deleted)."""

    def __init__(self, policy: nn.Module, reference: nn.Module | None) -> None:
        super().__init__()
        self.policy = policy
        self.reference = reference
        # what the recipe's loop holds between steps (rebound as the next step runs)
        self.held: torch.Tensor | None = None
        self.outputs: tuple[torch.Tensor, ...] = ()

    def _log_probs(self, logits: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
        half = logits.size(0) // 2
        if self.reference is None:  # lora_dpo_*.py: all rows at once, then sliced
            both = batch_log_probs(logits, labels)
            return [both[:half], both[half:]]
        return [batch_log_probs(logits[:half], labels[:half]),
                batch_log_probs(logits[half:], labels[half:])]  # fmt: skip

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        half = ids.size(0) // 2
        logits = self.policy(ids).float()  # the 16-bit logits freed as upcast (unembed)
        chosen, rejected = self._log_probs(logits, labels)
        means = (logits[:half].detach().mean(), logits[half:].detach().mean())
        del logits
        self.held = None  # reference_chosen_rejected_outputs = ChosenRejectedOutputs(None, …)
        self.outputs = ()
        with torch.no_grad():
            if self.reference is None:
                with adapters_off(self.policy):
                    ref_logits = self.policy(ids).float()
            else:
                ref_logits = self.reference(ids).float()
            ref_chosen, ref_rejected = self._log_probs(ref_logits, labels)
        if self.reference is None:
            self.held = ref_logits
        del ref_logits
        # DPOLoss.forward
        ratios = (chosen - rejected) - (ref_chosen - ref_rejected)
        losses = (-F.logsigmoid(BETA * ratios) * (1 - SMOOTHING)
                  - F.logsigmoid(-BETA * ratios) * SMOOTHING)  # fmt: skip
        chosen_rewards = BETA * (chosen - ref_chosen).detach()
        rejected_rewards = BETA * (rejected - ref_rejected).detach()
        self.outputs = (chosen, rejected, *means, chosen_rewards, rejected_rewards)
        return losses.mean()


def dpo_step(policy: nn.Module, reference: nn.Module | None) -> DPOStep:
    """The policy wrapped as the recipe's step; the reference frozen."""
    if reference is not None:
        reference.requires_grad_(False)
        reference.eval()
    return DPOStep(policy, reference)


__all__ = ["DPOStep", "adapters_off", "batch_log_probs", "dpo_step"]
