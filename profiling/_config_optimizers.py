"""The optimizers a configuration names, for ``profiling.config``: the per-parameter state each
keeps and whether torch ships it (what a trace can run). No torch here.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field


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


__all__ = ["OPTIMIZERS", "PAGED_FIELD", "Optimizer", "OptimizerSpec"]
