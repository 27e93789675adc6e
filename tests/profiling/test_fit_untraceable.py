"""``fit --max-batch``/``--max-seq`` on a configuration the trace cannot run (QLoRA in fp32,
audit4's D46): the answer the search found, said to be estimated only, as ``--confirm 0``
gives it — not the trace's refusal after the search, with no answer."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from profiling.config import TrainingConfig
from profiling.fit_search import largest

_LLAMA = {
    "vocab_size": 128, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "model_type": "llama", "tie_word_embeddings": True,
}  # fmt: skip


@pytest.mark.parametrize("dim", ["batch", "seq"])
def test_an_untraceable_search_answers_its_estimate(tmp_path, dim) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_LLAMA))
    base = TrainingConfig(
        model=f"hf:{path}", seq=64, batch=1, lora_rank=4, qlora=True, gpu_mem=0.7
    )  # fp32, the default: the trace refuses QLoRA there
    res = largest(base, dim, confirm=True)
    assert res.best is not None and res.traces == 0
    assert res.best.traced_nvml is None
    said = [n for n in res.notes if "is estimated, not traced" in n]
    assert len(said) == 1 and "--qlora" in said[0]
    unconfirmed = largest(base, dim, confirm=False)
    assert unconfirmed.best is not None and unconfirmed.best.value == res.best.value
