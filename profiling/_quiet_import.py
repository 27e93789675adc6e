"""Importing an optional library without its import-time log lines.

torchao, when installed, is imported by peft's own import as well as by ``trace --float8``. On a
machine without CUDA its import logs that it cannot load its CUDA kernels, and torch's pytree
warns of the Enums torchao registers: neither matters to a trace under fake tensors, and both
would land on the stderr of every LoRA run. Errors still show."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

_NOISY = ("torchao", "torch.utils._pytree")


def import_quietly(name: str) -> ModuleType:
    """``importlib.import_module(name)`` with torchao's and pytree's warnings held back."""
    loggers = [logging.getLogger(n) for n in _NOISY]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        return importlib.import_module(name)
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
