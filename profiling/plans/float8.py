"""torchao's Float8 training on a plan's stage, converted as torchtitan's float8 converter does.

torchtitan (``components/quantization/float8.py``; ``float8_ln.py`` before) builds torchao's
``Float8LinearConfig`` — ``from_recipe_name(recipe)`` for rowwise and rowwise_with_gw_hp, the
tensorwise default with ``enable_fsdp_float8_all_gather`` otherwise — and calls
``convert_to_float8_training(model, config=…, module_filter_fn=…)`` before parallelizing, its
filter leaving out the ``output`` projection (``filter_fqns``) and every Linear whose dimensions
do not divide by 16 (``torch._scaled_mm``'s rule).

What torchao 0.18 runs (``torchao/float8/float8_linear.py``, ``matmul_with_hp_or_float8_args``):
the forward keeps the **high-precision** input and weight for backward, exactly what an
``nn.Linear`` keeps, and casts both to fp8 for ``torch._scaled_mm`` (transients: ``|x|``, the
scale, the scaled fp32 copy, the fp8 copy); the backward casts the output gradient, the weight
and the input again, per the recipe (rowwise_with_gw_hp keeps the weight gradient's matmul in
bf16). With ``enable_fsdp_float8_all_gather`` each converted weight is a
``WeightWithDynamicFloat8CastTensor``: FSDP2 casts the shard to fp8 before its all-gather
(``fsdp_pre_all_gather``) and gathers one byte per element, the gathered weight a
``Float8TrainingTensor`` the matmul uses as it is.

The trace runs torchao's own modules under fake tensors (``pip install 'journal-agent[float8]'``).
Imports torch.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from profiling._quiet_import import import_quietly
from profiling.errors import ProfilingError

FILTER_FQNS = ("output",)  # torchtitan's Float8 default filter_fqns


def _import_torchao() -> Any:
    """``torchao.float8``, its import's log lines held back (profiling._quiet_import)."""
    return import_quietly("torchao.float8")


def float8_config(recipe: str, all_gather: bool) -> Any:
    """torchao's ``Float8LinearConfig`` for torchtitan's settings."""
    try:
        Float8LinearConfig = _import_torchao().Float8LinearConfig  # torchao's class
    except ImportError:
        raise ProfilingError(
            "tracing --float8 runs torchao's own Float8Linear: install it with pip install "
            "'journal-agent[float8]' (torchao), or estimate the plan ('journal-agent estimate' "
            "with the same flags)"
        ) from None
    if recipe == "tensorwise":
        return Float8LinearConfig(enable_fsdp_float8_all_gather=all_gather)
    return Float8LinearConfig.from_recipe_name(recipe)


def converts(fqn: str, module: nn.Module) -> bool:
    """torchtitan's ``module_filter_fn``: not a filtered name, both dimensions divisible by 16."""
    if not isinstance(module, nn.Linear) or any(f in fqn for f in FILTER_FQNS):
        return False
    return module.in_features % 16 == 0 and module.out_features % 16 == 0


def convert(model: nn.Module, recipe: str, all_gather: bool) -> int:
    """Swap the stage's Linears for torchao's ``Float8Linear`` (see the module); how many."""
    config = float8_config(recipe, all_gather)
    convert_to_float8_training = _import_torchao().convert_to_float8_training
    count = [0]

    def keep(module: nn.Module, fqn: str) -> bool:
        ok = converts(fqn, module)
        count[0] += ok
        return ok

    convert_to_float8_training(model, config=config, module_filter_fn=keep)
    return count[0]


def tp_styles() -> tuple[type, type, type]:
    """torchao's tensor-parallel styles for Float8 tensorwise (torchtitan's
    ``enable_float8_tensorwise_tp``): (column-wise, row-wise, the module input's)."""
    styles = import_quietly("torchao.float8.float8_tensor_parallel")
    return (styles.Float8ColwiseParallel, styles.Float8RowwiseParallel,
            styles.PrepareFloat8ModuleInput)  # fmt: skip


__all__ = ["FILTER_FQNS", "convert", "converts", "float8_config", "tp_styles"]
