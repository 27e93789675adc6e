"""The calculation an estimate shows for each activation is arithmetic a reader can redo: the
substituted numbers, evaluated as written (brackets and all), give the bytes the step reports."""

from __future__ import annotations

import ast
import operator
import re

import pytest

from profiling.config import TrainingConfig
from profiling.estimate.memory import estimate

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow}  # fmt: skip


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError(ast.dump(node))


def _evaluate(shown: str) -> float:
    """``32 · (2048·1·(2·4096 + 2·4096)·2 + 4·32·2048·1)`` read as a person reads it."""
    text = shown.removesuffix(" B").replace("·", "*").replace("²", "**2")
    return _value(ast.parse(text, mode="eval"))


@pytest.mark.parametrize(
    "config",
    [
        {"model": "llama-7b", "precision": "mixed"},
        {"model": "llama-1b", "precision": "bf16", "batch": 4},
        {"model": "gpt2-large", "precision": "mixed", "tp": 2},
        {"model": "gpt2-small", "precision": "amp-bf16", "batch": 8, "seq": 1024},
        # Hugging Face configs (transformers' modules' ops when it is installed)
        {"model": "hf:gpt2", "precision": "mixed", "attention": "eager", "dropout": 0.1},
        {"model": "hf:gemma-2-2b", "precision": "amp-bf16", "seq": 8192, "target": "cpu"},
        {"model": "hf:phi-3-mini", "precision": "mixed", "dropout": 0.1, "batch": 2},
        {"model": "hf:qwen3-0.6b", "precision": "fp32", "seq": 1024},
    ],
)
def test_each_activation_step_evaluates_to_its_bytes(config: dict) -> None:
    steps = [s for s in estimate(TrainingConfig(**config)).steps if s.name.startswith("Activ")]
    # A count shown rounded ("124M · 2") is read from its own line; the rest must be exact.
    exact = [s for s in steps if not re.search(r"\d[KMGTB]\b", s.substituted)]
    assert len(exact) >= 3
    for step in exact:
        assert _evaluate(step.substituted) == pytest.approx(step.value, rel=1e-9), step


def test_a_sum_times_the_layer_count_is_bracketed() -> None:
    # Without the brackets, 32 · a + b reads as (32 · a) + b: 4 MB short of what was counted.
    steps = estimate(TrainingConfig(model="llama-7b", precision="mixed")).steps
    attention = next(s for s in steps if "attention (q, k, v" in s.name)
    assert attention.substituted.startswith("32 · (")
