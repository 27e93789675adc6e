"""The closed form's reserve and need under losses that work a chunk at a time (torchtune's
chunked and linear losses, Liger, Cut Cross-Entropy) against the allocator replay of every
block; prints JSON (``bench_reserve.py``'s rows and summary).

Three Llama-shaped models of 4 blocks whose loss is most of the step — V 32,000 at h 512; V
128,256 at h 1,024 (the LM head's V·h gradient larger than a chunk's logits at 1,024 tokens);
Qwen-2.5-shaped, tied, V 151,936 at h 896 — at 1 × 1,024, 2 × 2,048 and 4 × 4,096 tokens, bf16
without checkpointing and mixed with full, and expandable segments, LoRA, amp-bf16 and 16
chunks beside: 86 rows (``profiling.estimate.reserve.loss_segments``, audit2 D18).

    python benchmarks/bench_reserve_losses.py [--rows N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_reserve import measure, summary

SHAPES: dict[str, dict[str, Any]] = {
    "v32k": {"vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1376},
    "v128k": {"vocab_size": 128256, "hidden_size": 1024, "intermediate_size": 2816},
    "qwen": {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
             "num_attention_heads": 14, "num_key_value_heads": 2, "tie_word_embeddings": True},
}  # fmt: skip
BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 4, "tie_word_embeddings": False,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5}  # fmt: skip


def grid(root: Path) -> list[dict[str, Any]]:
    models = {}
    for name, shape in SHAPES.items():
        path = root / name / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**BASE, **shape}), encoding="utf-8")
        models[name] = f"hf:{path}"
    rows: list[dict[str, Any]] = []
    for loss in ("chunked", "linear-chunked", "liger", "cce"):
        sizes = ((1, 1024), (2, 2048), (4, 4096))
        for model, (batch, seq) in itertools.product(models.values(), sizes):
            for precision, ckpt in (("bf16", "none"), ("mixed", "full")):
                rows.append({"model": model, "batch": batch, "seq": seq, "loss": loss,
                             "precision": precision, "checkpointing": ckpt})  # fmt: skip
        wide, qwen = models["v128k"], models["qwen"]
        rows += [
            {"model": wide, "batch": 2, "seq": 2048, "precision": "bf16", "loss": loss,
             "expandable_segments": True},
            {"model": wide, "batch": 2, "seq": 2048, "precision": "mixed", "loss": loss,
             "lora_rank": 16, "checkpointing": "full"},
            {"model": qwen, "batch": 2, "seq": 2048, "precision": "amp-bf16", "loss": loss},
        ]  # fmt: skip
        if loss in ("chunked", "linear-chunked"):
            rows.append({"model": models["v32k"], "batch": 8, "seq": 1024, "precision": "bf16",
                         "loss": loss, "loss_chunks": 16})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the reserve under chunked losses vs the replay")
    ap.add_argument("--rows", type=int, default=None, help="the first N rows only")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for fields in grid(Path(tmp))[: args.rows]:
            rows.append(measure(fields))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = summary(rows)
    print(json.dumps({"summary": result, "rows": rows}, indent=1))
    ok = result["closed_at_least_replay_everywhere"]
    return 0 if ok and result["need"]["closed_at_least_replay_everywhere"] else 1


if __name__ == "__main__":
    sys.exit(main())
