"""fit beside a paged optimizer (--paged-optimizer, or LitGPT's QLoRA recipe, whose script builds
bitsandbytes' PagedAdamW): its search offered the optimizer offloaded too, a pair the
configuration refuses, and fit ended in pydantic's traceback. A paged optimizer's state stays on
the GPU, so no offloaded candidate is searched (#31)."""

from __future__ import annotations


def test_fit_with_a_paged_optimizer_searches_no_offload(cli, tmp_path) -> None:
    args = ("--model", "tiny-llama", "--lora-rank", "8", "--paged-optimizer", "--gpu-mem", "1")
    found = cli.json("fit", *args, "--confirm", "0", "--root", str(tmp_path))
    fitting = found["fitting"]
    assert fitting and all(c["config"]["paged_optimizer"] for c in fitting)
    assert not any(c["config"].get("offload_optimizer") for c in fitting)
    assert not any("optimizer offloaded" in c["label"] for c in fitting)
