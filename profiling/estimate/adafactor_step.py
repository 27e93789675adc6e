"""The step scratch of the optimizers stepped tensor by tensor outside torch: transformers'
Adafactor, and torchao's compiled 8-bit AdamW (``torchao_optim``).

transformers' ``Adafactor.step`` (transformers/optimization.py, the loop over
``group["params"]``) holds, for parameter i of n_i elements, two full fp32 tensors at each of
two moments: ``update = (grad**2) + eps`` (the square and its sum) while the local ``update``
still holds the previous parameter's (it is rebound only by that line), and, for a factored
(2-D) tensor, ``_approx_sq_grad``'s product beside that sum and its row and column factors
(``r_factor``, ``c_factor``). At its highest: ``k · n_i + max(n_(i−1), rows_i + cols_i)`` in
the step's order (``step_order.loop_elements``), bounded by
``max(max_i (k · n_i + n_(i−1)), k · largest + max (rows + cols))``; k = 2, a 16-bit parameter
adds its gradient's and its own fp32 copies (``grad.float()``, ``p.float()``: k = 4).
``mixed``'s master-weight optimizer (profiling/trace/master_weights.py) steps one parameter per
``step()`` call, its fp32 gradient beside (k = 3) and no previous update (the local dies with
the call); with ``--fp32-grads`` (or sharded) it steps every master at once (k = 2).
"""

from __future__ import annotations

from typing import Any

from profiling._config_lora import trains_16bit
from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.optim_states import largest_adapter, trainable_numels
from profiling.estimate.step_order import loop_elements
from profiling.estimate.torchao_optim import torchao_temporaries
from profiling.units import fmt_count


def tensorwise_temporaries(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> bool:
    """The step scratch of the optimizers stepped tensor by tensor outside torch (transformers'
    Adafactor, torchao's compiled 8-bit AdamW); False for another optimizer."""
    numels = trainable_numels(cfg, shape) if cfg.torchao_optim else None
    return adafactor_temporaries(ledger, cfg, shape) or torchao_temporaries(
        ledger, cfg, shape, numels
    )


def adafactor_temporaries(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> bool:
    """transformers' Adafactor's scratch at its highest (the module docstring); False for
    another optimizer."""
    if cfg.optimizer != "adafactor" or cfg.offload_optimizer:
        return cfg.optimizer == "adafactor"
    largest = int(shape.get("largest_tensor") or 0)
    if cfg.lora_rank is not None:
        largest = largest_adapter(cfg, shape)
    if not largest:
        ledger.note("optimizer step temporaries need the model's shape (none counted)")
        return True
    k, what = 2, "the squared gradient + the update"
    one_per_call = cfg.precision == "mixed" and cfg.lora_rank is None
    one_per_call = one_per_call and not (cfg.fp32_grads or cfg.fsdp or cfg.sharded)
    if trains_16bit(cfg):  # 16-bit parameters (or adapters): stepped in fp32 copies
        k, what = 4, "fp32 copies of the gradient and the parameter + the squared gradient + update"
    elif one_per_call:
        k, what = 3, "the fp32 gradient + the squared gradient + the update"
    factors = _factors(cfg, shape)
    elements, held = k * largest + factors, f"{k} · largest tensor + max (rows + cols)"
    if not one_per_call:
        pairs, in_order = loop_elements(cfg, shape, k, largest)
        elements, held = max(pairs, elements), f"max({in_order}, {held})"
    scalars, also = 0, ""
    if one_per_call:  # each tensor's previous RMS (a 0-dim fp32 tensor), still mirrored in the
        # wrapper's state until its step ends (MasterWeightOptimizer._refresh_state)
        scalars = int(shape.get("param_tensors") or 0)
        also = f" + {scalars} earlier RMS scalars"
    ledger.add(
        Line(
            name="Optimizer step temporaries (for-loop, largest tensor)",
            bytes=(elements + scalars) * 4,
            unsharded=(elements + scalars) * 4,
            formula=f"({held}{also}) · 4 B ({what}; n_(i−1): the previous update)",
            substituted=f"({fmt_count(elements)} + {scalars}) · 4"
            if scalars
            else f"{fmt_count(elements)} · 4",
            group="temporaries",
            category="temporaries",
        )
    )
    return True


def _factors(cfg: TrainingConfig, shape: dict[str, Any]) -> int:
    """The most elements a factored tensor's row and column factors hold (its second moment's
    size, ``factored_numels``; a vector's whole, which bounds them): the hidden size and the
    vocabulary where the tensors are not known."""
    numels = trainable_numels(cfg, shape, factored=True)
    if numels:
        return max(n for n, _ in numels)
    return int(shape.get("hidden") or 0) + int(shape.get("vocab") or 0)


__all__ = ["adafactor_temporaries", "tensorwise_temporaries"]
