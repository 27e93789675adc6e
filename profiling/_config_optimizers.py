"""The optimizers a configuration names, for ``profiling.config``: the per-parameter state each
keeps and whether torch ships it (what a trace can run). No torch here.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict


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
            note="β1 = None: one row and one column vector per matrix",
        ),
    )
}
Optimizer = Literal[
    "adamw", "adam", "sgd", "sgd-nomomentum", "adagrad", "rmsprop", "lion", "adam8bit", "adafactor"
]
assert set(get_args(Optimizer)) == set(OPTIMIZERS)  # one list: the Literal mirrors the table


__all__ = ["OPTIMIZERS", "Optimizer", "OptimizerSpec"]
