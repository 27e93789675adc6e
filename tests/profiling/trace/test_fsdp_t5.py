"""T5 under FSDP2: the trace shards both stacks' blocks, each its own group, as FSDP's auto-wrap
does (transformers' ``T5PreTrainedModel._no_split_modules = ["T5Block"]``) — it sharded the
decoder's alone (the largest ModuleList), leaving the encoder's blocks in the root's group —
and the estimate, whose moments are a decoder's (0.885-0.968 of the trace), refuses it in one
sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch import nn

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate.memory import estimate


class _TwoStacks(nn.Module):
    """An encoder-decoder's shape: two lists of blocks, the decoder's the larger."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.decoder = nn.ModuleList([nn.Linear(8, 16) for _ in range(2)])
        self.head = nn.Linear(16, 4)

    def block_lists(self) -> list[nn.ModuleList]:
        return [self.encoder, self.decoder]


def test_the_trace_shards_both_stacks_blocks() -> None:
    from torch.distributed.fsdp import FSDPModule

    from profiling.trace.build import _fake_process_group, _shard

    model = _TwoStacks()
    with _fake_process_group(2) as mesh:
        _shard(model, mesh, True, None)
        sharded = [isinstance(m, FSDPModule) for m in (*model.encoder, *model.decoder, model)]
    assert all(sharded), sharded


@pytest.mark.parametrize(("precision", "zero", "gpus"), [("mixed", 3, 2), ("fp32", 2, 4)])
def test_the_estimate_refuses_t5_under_fsdp(
    tmp_path: Path, precision: str, zero: int, gpus: int
) -> None:
    config = {
        "model_type": "t5", "vocab_size": 512, "d_model": 64, "d_ff": 160, "num_layers": 4,
        "num_decoder_layers": 3, "num_heads": 4, "d_kv": 16, "feed_forward_proj": "gated-gelu",
        "tie_word_embeddings": False,
    }  # fmt: skip
    path = tmp_path / "t5.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    values = {"model": f"hf:{path}", "seq": 128, "batch": 2, "target_seq": 24}
    cfg = TrainingConfig.model_validate({
        **values, "precision": precision, "fsdp": True, "zero": zero, "gpus": gpus,
    })  # fmt: skip
    with pytest.raises(ProfilingError, match=r"encoder-decoder \(T5\) under FSDP"):
        estimate(cfg)
    # one GPU: nothing sharded, estimated as before
    assert estimate(TrainingConfig.model_validate({**values, "precision": precision})).per_gpu_bytes
