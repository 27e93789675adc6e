"""Every row ``fit --gpus N`` prints is reproduced by ``estimate`` with the row's flags
(``fit_plans.estimate_flags``, the flags fit prints under its table as "estimate it (the same
numbers)"): ``estimate --gpus N`` is the data-parallel degree and a plan's ``--dp-shard``,
``--tp``, ``--pp`` its degrees, so each row — DDP, ZeRO-1/2/3, offload, LoRA, QLoRA and the
multi-axis plans — prints the same allocated peak, tokens/s and nvidia-smi figure."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from typing import Any

import pytest

from profiling.config import TrainingConfig

pytest.importorskip("torch")


def _estimate(flags: str) -> dict[str, Any]:
    from journal_agent.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["estimate", *shlex.split(flags), "--json", "--no-save"])
    text = out.getvalue()
    return json.loads(text[text.index("{") :])


def _tokens(o: object) -> float | None:
    if isinstance(o, dict):
        if o.get("tokens_per_second") is not None:
            return o["tokens_per_second"]
        o = list(o.values())
    if isinstance(o, list):
        return next((t for t in map(_tokens, o) if t is not None), None)
    return None


@pytest.mark.parametrize("gpus", [2, 8])
def test_every_row_of_fit_gpus_reproduces_with_its_flags(gpus: int) -> None:
    from profiling.fit_gpus import fit_gpus
    from profiling.fit_plans import estimate_flags

    res = fit_gpus(TrainingConfig(model="tiny-llama", gpus=gpus, gpu="h100-sxm"), confirm=0)
    rows = res.fitting[:10] + res.fitting[10 :: max(1, len(res.fitting) // 8)]
    # the best plans too: on 2 GPUs TP or PP without FSDP, torchtitan's fp32, rank low
    rows += [c for c in res.fitting if c.config.is_plan][:2]
    assert any(c.config.is_plan for c in rows) and any(not c.config.is_plan for c in rows)
    for c in rows:
        flags = " ".join(estimate_flags(c.config))
        got = _estimate(flags)
        assert got["per_gpu_bytes"] == c.peak_bytes, (c.label(), flags)
        assert _tokens(got.get("time")) == pytest.approx(c.tokens_per_second), (c.label(), flags)
        if c.config.is_plan:  # a plan's nvidia-smi figure: the most any rank shows
            assert max(got["nvml_bytes"].values()) == c.nvml_bytes, (c.label(), flags)
