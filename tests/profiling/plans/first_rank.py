"""A plan's first rank traced (fake tensors on a fake world, torch's own FSDP2) beside its
closed form, on the 4-block Llama the resharding tests (reshard "always", torchtitan's root
group) both compare."""

from __future__ import annotations

import pytest

from profiling.config import parse_config

SHAPE = {"layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn": 2816, "vocab": 8192,
         "arch": "llama", "precision": "mixed", "seq": 1024, "batch": 4}  # fmt: skip


def traced_and_estimated(**over: object):
    """(trace's rank 0, closed form's rank 0) of SHAPE with ``over``."""
    pytest.importorskip("torch")
    from profiling.plans.closed_form import estimate_plan
    from profiling.plans.trace import trace_plan

    cfg = parse_config(**{**SHAPE, **over})
    return trace_plan(cfg).ranks[0], estimate_plan(cfg).ranks[0]
