"""The optimizers a trace can run, made as the step makes them: torch's own (the one list lives in
``profiling.config``), bitsandbytes' 8-bit and paged Adam as the trace's stand-ins
(``profiling.trace.bnb``) and transformers' Adafactor as the Trainer makes it.

Imports torch; transformers only inside :func:`_adafactor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from profiling.config import OPTIMIZERS as CONFIG_OPTIMIZERS
from profiling.errors import ProfilingError

if TYPE_CHECKING:
    from torch.optim.optimizer import ParamsT

# The optimizers a trace can run: torch's (the one list lives in profiling.config),
# bitsandbytes' 8-bit Adam, represented (profiling.trace.bnb), and transformers' Adafactor.
OPTIMIZERS = (
    *(name for name, spec in CONFIG_OPTIMIZERS.items() if spec.in_torch),
    "adam8bit",
    "adafactor",
)


def make_optimizer(
    name: str, params: ParamsT, foreach: bool = True, paged: bool = False, torchao: bool = False
) -> torch.optim.Optimizer:
    """torch's optimizer of that name; bitsandbytes' 8-bit one, or a paged one, as the trace's
    stand-in (``profiling.trace.bnb``: fake tensors only)."""
    if name == "adam8bit" or (paged and name in ("adam", "adamw")):
        from profiling.trace.bnb import BnbOptimizer

        bits = 8 if name == "adam8bit" else 32
        return BnbOptimizer(params, bits=bits, is_paged=paged, torchao=torchao)  # type: ignore[arg-type]  # ParamsT's parameter groups are not used here
    if name == "adafactor":
        return _adafactor(params)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, foreach=foreach)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=foreach)
    if name == "sgd-nomomentum":
        return torch.optim.SGD(params, lr=1e-2, foreach=foreach)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=1e-2, foreach=foreach)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=1e-3, foreach=foreach)
    raise ProfilingError(
        f"optimizer {name!r} cannot be traced; use one of {', '.join(OPTIMIZERS)} "
        "(Lion and the other optimizers torch does not ship: use 'estimate')"
    )


def _adafactor(params: ParamsT) -> torch.optim.Optimizer:
    """transformers' own Adafactor, as the Trainer makes it for ``optim="adafactor"``
    (``scale_parameter=False, relative_step=False``, an explicit learning rate; β1 None)."""
    try:
        from transformers.optimization import Adafactor
    except ImportError:
        raise ProfilingError(
            "tracing --optimizer adafactor runs transformers' Adafactor: pip install "
            "'journal-agent[hf]' (or estimate it)"
        ) from None
    return Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False)  # type: ignore[arg-type]  # ParamsT's groups are Adafactor's too
