"""LoRA on an encoder (BERT, RoBERTa, ViT) in the traced step: peft's adapters on transformers'
own module, and the task's classifier trained in full as peft's ``modules_to_save`` trains it.

Roles map to transformers' module names: q, k, v to the attention's ``query``, ``key``,
``value`` (``q_proj``, ``k_proj``, ``v_proj`` in ViT), o to the attention's output ``dense``
(``o_proj``), up to ``intermediate.dense`` (``mlp.fc1``), down to the block output's ``dense``
(``mlp.fc2``). peft matches a target name as a whole module name or its last dotted parts, so
``dense`` would also adapt the pooler and the heads: the adapted modules are named here in full,
block by block. A classifier (``…ForSequenceClassification``, ``ViTForImageClassification``)
trains its ``classifier`` through peft's ``ModulesToSaveWrapper`` — a trainable copy beside the
frozen original, as ``task_type="SEQ_CLS"`` or ``modules_to_save=["classifier"]`` make it —
and masked LM trains only the adapters. Imports torch; ``peft`` inside the function.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError

# Each role's module, by its full name's tail: BERT/RoBERTa (and older transformers' ViT), then
# transformers 5's ViT.
ROLES = {
    "q": r"\.attention\.(self|attention)\.query|\.attention\.q_proj",
    "k": r"\.attention\.(self|attention)\.key|\.attention\.k_proj",
    "v": r"\.attention\.(self|attention)\.value|\.attention\.v_proj",
    "o": r"\.attention\.output\.dense|\.attention\.o_proj",
    "up": r"\.intermediate\.dense|\.mlp\.fc1",
    "down": r"\.layers?\.\d+\.output\.dense|\.mlp\.fc2",
}
SAVED = "classifier"  # the module a classifier trains in full (peft's modules_to_save)


def target_names(model: nn.Module, roles: list[str]) -> list[str]:
    """The full names of the Linear layers the roles adapt, in the model's order."""
    pattern = re.compile("(" + "|".join(f"(?:{ROLES[r]})" for r in roles) + ")$")
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and pattern.search(n)]


class _Saved(nn.Module):
    """peft's ``ModulesToSaveWrapper``: the frozen original beside the trainable copy that
    runs. (peft's own deep-copies the module, which mixes two fake modes under the trace.)"""

    def __init__(self, original: nn.Module) -> None:
        super().__init__()
        self.add_module("original_module", original)  # frozen, held as peft holds it
        memo: dict[int, Any] = {
            id(p): nn.Parameter(torch.empty_like(p), requires_grad=True)
            for p in original.parameters()
        }
        self.modules_to_save = nn.ModuleDict({"default": copy.deepcopy(original, memo)})

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.modules_to_save["default"](*args, **kwargs)


def _save_classifier(model: nn.Module) -> None:
    for parent in list(model.modules()):
        child = getattr(parent, SAVED, None)
        if isinstance(child, nn.Module) and not isinstance(child, _Saved):
            setattr(parent, SAVED, _Saved(child))
            return


def inject(
    model: nn.Module,
    names: list[str],
    config: TrainingConfig,
    dtype: Any,
    fake_safe_moves: Callable[[], contextlib.AbstractContextManager[None]],
) -> None:
    """peft's adapters (r, alpha 2r, the config's dropout) on the named modules, A and B in the
    adapters' dtype; the ``.to`` under ``fake_safe_moves`` (``trace.fake_moves``), as the trace
    builds on fake tensors. Shared by the encoders' and the encoder-decoders' LoRA."""
    from profiling._quiet_import import import_quietly

    peft = import_quietly("peft")  # torchao, when installed, logs on peft's import

    r = int(config.lora_rank or 0)
    lora = peft.LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=config.lora_dropout,
                           target_modules=names)  # fmt: skip
    with fake_safe_moves():
        peft.inject_adapter_in_model(lora, model)
        for name, module in model.named_modules():
            if name.endswith(("lora_A.default", "lora_B.default")):
                module.to(dtype=dtype)


def apply(
    model: nn.Module,
    config: TrainingConfig,
    in_model: Callable[[int], int],
    dtype: Any,
    version: str | None,
    fake_safe_moves: Callable[[], contextlib.AbstractContextManager[None]],
) -> tuple[dict[str, Any], list[str]]:
    """peft's LoRA on the encoder's blocks, its classifier saved; what the record says."""
    r, dropout = int(config.lora_rank or 0), config.lora_dropout
    unpacked = sum(p.numel() for p in model.parameters())
    roles: list[str] = list(config.lora_targets)
    names = target_names(model, roles)
    blocks = sum(1 for n, _ in model.named_modules() if re.search(r"\.layers?\.\d+$", n))
    if len(names) != len(roles) * blocks:
        raise ProfilingError(
            f"LoRA on this encoder found {len(names)} of the {len(roles)} × {blocks} layers "
            f"{', '.join(roles)} name; estimate it instead"
        )
    classify = any(n.endswith(f".{SAVED}") for n, _ in model.named_modules())
    saved = [SAVED] if classify else None
    inject(model, names, config, dtype, fake_safe_moves)
    if classify:
        _save_classifier(model)
    for name, p in model.named_parameters():  # the base frozen, the adapters and copy train
        p.requires_grad_("lora_" in name or "modules_to_save." in name)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    copy = sum(p.numel() for n, p in model.named_parameters() if "modules_to_save." in n)
    adapters = trained - copy
    notes = [
        f"LoRA by peft: LoraConfig(r={r}, lora_alpha={2 * r}, lora_dropout={dropout:g}) on the "
        f"encoder's {', '.join(roles)} ({in_model(len(names))} layers), base weights frozen; "
        f"adapters in {str(dtype).removeprefix('torch.')}"
        + (
            f"; its classifier trains in full as peft's modules_to_save (a copy of "
            f"{copy:,} parameters beside the frozen original)"
            if classify
            else ""
        )
    ]
    info = {
        "lora": {
            "rank": r,
            "alpha": 2 * r,
            "targets": roles,
            "dropout": dropout,
            "adapted_layers": in_model(len(names)),
            "adapter_params": in_model(adapters),
            "modules_to_save": saved or [],
            "peft": version,
            "base": "frozen",
        },
        "traced_params": unpacked + trained,
    }
    return info, notes


__all__ = ["ROLES", "SAVED", "apply", "inject", "target_names"]
