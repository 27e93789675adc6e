"""The optimizers a configuration names, for ``profiling.config``: the per-parameter state each
keeps and whether torch ships it (what a trace can run). No torch here.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from profiling.errors import ConfigError


class OptimizerSpec(BaseModel):
    """One optimizer: the per-parameter state it keeps and whether torch ships it."""

    model_config = ConfigDict(frozen=True)

    name: str
    states: tuple[str, ...]  # one full-size tensor per parameter each (adafactor: factored)
    in_torch: bool  # torch.optim has it, so a trace can run it
    note: str = ""


OPTIMIZERS: dict[str, OptimizerSpec] = {
    o.name: o
    for o in (
        OptimizerSpec(name="adamw", states=("momentum", "variance"), in_torch=True),
        OptimizerSpec(name="adam", states=("momentum", "variance"), in_torch=True),
        OptimizerSpec(name="sgd", states=("momentum",), in_torch=True, note="momentum 0.9"),
        OptimizerSpec(name="sgd-nomomentum", states=(), in_torch=True),
        OptimizerSpec(name="adagrad", states=("sum of squares",), in_torch=True),
        OptimizerSpec(name="rmsprop", states=("square average",), in_torch=True),
        OptimizerSpec(name="lion", states=("momentum",), in_torch=False, note="lion-pytorch"),
        OptimizerSpec(
            name="adam8bit",
            states=("momentum (8-bit)", "variance (8-bit)"),
            in_torch=False,
            note="bitsandbytes, needs a GPU",
        ),
        OptimizerSpec(
            name="adafactor",
            states=("factored variance",),
            in_torch=False,
            note="transformers' Adafactor (β1 None): a row and a column mean per matrix, fp32; "
            "traced with transformers installed",
        ),
    )
}
Optimizer = Literal[
    "adamw", "adam", "sgd", "sgd-nomomentum", "adagrad", "rmsprop", "lion", "adam8bit", "adafactor"
]
assert set(get_args(Optimizer)) == set(OPTIMIZERS)  # one list: the Literal mirrors the table

PAGED_FIELD: Any = Field(
    False,
    description="bitsandbytes' paged optimizer (paged_adamw_8bit, PagedAdamW…): states of "
    "parameters of 10^5 values or more in CUDA unified memory, outside PyTorch's allocator, "
    "moved to host memory when the GPU runs out (adam8bit, adamw, lion).",
)

IN_BWD_FIELD: Any = Field(
    False,
    description="Step each parameter as soon as its gradient is ready, then free the "
    "gradient (torchtune's optimizer_in_bwd): no step after backward, no full set of "
    "gradients.",
)

TORCHAO_OPTIM_FIELD: Any = Field(
    False,
    description="adam8bit as torchao's AdamW8bit (a torchtune config's torchao optimizer): "
    "8-bit states only for tensors of 4,096 values or more that divide by 256, the others "
    "in the parameter's dtype; its compiled step holds the new states in fp32.",
)


def check_torchao_optim(cfg: Any) -> None:  # a TrainingConfig (which imports this module)
    """torchao's 8-bit AdamW is a description of --optimizer adam8bit, never paged."""
    if cfg.torchao_optim and (cfg.optimizer != "adam8bit" or cfg.paged_optimizer):
        raise ConfigError(
            "--torchao-optim describes --optimizer adam8bit as torchao's AdamW8bit, which "
            "pages nothing: give --optimizer adam8bit without --paged-optimizer",
            "torchao_optim",
        )


__all__ = [
    "IN_BWD_FIELD",
    "OPTIMIZERS",
    "PAGED_FIELD",
    "TORCHAO_OPTIM_FIELD",
    "Optimizer",
    "OptimizerSpec",
    "check_torchao_optim",
]
