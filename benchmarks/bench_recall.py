"""Precision of UserPromptSubmit's recall (journal_agent/capture/recall.py) on labelled prompts.

A journal of 20 entries on distinct training-systems topics; 60 prompts, 30 about one of those
topics (labelled with its entry) and 30 about nothing in the journal (everyday coding requests).
Recall is what the hook would inject if ``capture.recall_inject`` were on, so what matters is
precision: of the entries it names, how many are the right one. Injection may become the
default only at precision ≥ 0.8. Prints JSON.

    python benchmarks/bench_recall.py
"""

# ruff: noqa: E501  (the labelled set reads best as one entry, one prompt a line)

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from journal_agent.capture.recall import related

# (title, intuition): one entry per topic.
ENTRIES = [
    (
        "ZeRO stage 2 gradient sharding",
        "ZeRO-2 partitions gradients and optimizer states across data-parallel ranks so each rank keeps only its shard.",
    ),
    (
        "Activation checkpointing",
        "Recompute activations during the backward pass instead of storing them, trading compute for memory.",
    ),
    (
        "Mixed precision with bf16",
        "bfloat16 keeps the exponent range of fp32, so loss scaling is unnecessary, unlike fp16.",
    ),
    (
        "AdamW optimizer state memory",
        "AdamW stores two fp32 moments per parameter: momentum and variance, 8 bytes each parameter.",
    ),
    (
        "Learning rate warmup",
        "Warmup ramps the learning rate over the first steps so early Adam updates stay small.",
    ),
    (
        "Gradient accumulation",
        "Accumulate gradients over micro-batches before the optimizer step to emulate a larger batch.",
    ),
    (
        "FSDP parameter gathering",
        "Fully sharded data parallel all-gathers each unit's parameters before forward and frees them after.",
    ),
    (
        "Tensor parallelism in attention",
        "Megatron splits attention heads and MLP columns across GPUs with all-reduce after each block.",
    ),
    (
        "Pipeline parallel bubbles",
        "Pipeline stages idle at the start and end of a batch; more micro-batches shrink the bubble.",
    ),
    (
        "CUDA caching allocator fragmentation",
        "The PyTorch caching allocator keeps freed blocks; fragmentation shows as reserved minus allocated memory.",
    ),
    (
        "FlashAttention tiling",
        "FlashAttention computes attention in tiles held in SRAM, never materialising the full score matrix.",
    ),
    (
        "KV cache size at inference",
        "The key value cache grows with layers, heads, head dimension, sequence length and batch.",
    ),
    (
        "LoRA low-rank adapters",
        "LoRA freezes the base weights and trains two small low-rank matrices per adapted layer.",
    ),
    (
        "QLoRA 4-bit quantization",
        "QLoRA stores the frozen base model in NF4 4-bit and trains LoRA adapters in bf16.",
    ),
    (
        "NCCL all-reduce bandwidth",
        "Ring all-reduce sends 2(n-1)/n of the buffer per GPU; bus bandwidth bounds data parallel speed.",
    ),
    (
        "Torch compile graph breaks",
        "torch.compile splits the graph at unsupported Python; each graph break costs a recompilation boundary.",
    ),
    (
        "Dataloader worker prefetching",
        "DataLoader workers prefetch batches in parallel processes; pinned memory speeds host to device copies.",
    ),
    (
        "Gradient clipping by global norm",
        "Clip the global gradient norm to a threshold to stop exploding updates in early training.",
    ),
    (
        "CPU offload of optimizer states",
        "ZeRO-Offload keeps optimizer states and the update step on the CPU to save GPU memory.",
    ),
    (
        "Sequence length and activation memory",
        "Activation memory grows linearly with sequence length per layer, quadratically for attention scores.",
    ),
]
RELATED = [
    ("how does zero stage 2 shard the gradients across ranks", 0),
    ("does deepspeed zero-2 also partition optimizer states", 0),
    ("should I turn on activation checkpointing to save memory", 1),
    ("recompute activations in backward, is it worth the compute", 1),
    ("why does bf16 not need loss scaling like fp16", 2),
    ("bfloat16 exponent range versus float16", 2),
    ("how many bytes does adamw keep per parameter for its moments", 3),
    ("adamw momentum and variance memory cost", 3),
    ("why use learning rate warmup with adam", 4),
    ("how long should the warmup ramp of the learning rate be", 4),
    ("gradient accumulation over micro-batches to get a bigger batch", 5),
    ("does accumulating gradients change the optimizer step", 5),
    ("when does fsdp all-gather the parameters of a unit", 6),
    ("fully sharded data parallel frees parameters after forward?", 6),
    ("how does megatron tensor parallelism split attention heads", 7),
    ("tensor parallel all-reduce after the MLP columns", 7),
    ("how do I shrink the pipeline bubble with more micro-batches", 8),
    ("pipeline stages idle at the start of the batch", 8),
    ("reserved memory much larger than allocated, allocator fragmentation?", 9),
    ("pytorch caching allocator keeps freed blocks", 9),
    ("how does flashattention avoid materialising the score matrix", 10),
    ("flashattention tiles in sram", 10),
    ("how big is the kv cache for a long sequence at inference", 11),
    ("key value cache memory per layer and head", 11),
    ("how many parameters does lora train per layer", 12),
    ("low-rank adapters on frozen base weights", 12),
    ("can qlora train a 65b model with nf4 quantization", 13),
    ("qlora 4-bit base model with bf16 adapters", 13),
    ("what bus bandwidth does nccl ring all-reduce reach", 14),
    ("torch compile keeps recompiling because of graph breaks", 15),
]
UNRELATED = [
    "rename the variable in the parser please",
    "fix the failing unit test in test_utils",
    "write a regex that matches email addresses",
    "add a readme section about installation",
    "why is my css grid not centering the button",
    "convert this json config to yaml",
    "the docker build fails with permission denied",
    "make the cli print a nicer help message",
    "sort this list of dictionaries by date",
    "add type hints to the http client module",
    "explain what this bash one-liner does",
    "set up a github actions workflow for linting",
    "why does git say detached head",
    "format the sql query so it is readable",
    "add logging to the request handler",
    "how do I parse command line arguments with argparse",
    "write a function that merges two sorted arrays",
    "the website returns a 404 on the about page",
    "update the copyright year in the license",
    "refactor the settings loader into smaller functions",
    "what is the difference between a list and a tuple",
    "add a dark mode toggle to the frontend",
    "the pandas dataframe merge drops rows",
    "create a makefile target for the docs",
    "why is my recursion hitting the maximum depth",
    "write unit tests for the date formatting helper",
    "add pagination to the api endpoint",
    "how do I read an environment variable in node",
    "replace tabs with spaces in these files",
    "the login form does not validate the password field",
]


def _journal(root: Path) -> None:
    parts = ["# Learning Journal\n"]
    for title, intuition in ENTRIES:
        parts.append(
            f"\n## {title} (2026-11-01)\n\n**Context**: Studying training systems.\n\n"
            f"**The Key Question I Had**: *What is {title.lower()}?*\n\n"
            f"### 🎯 Intuition\n{intuition}\n\n### 🏷️ Tags\n#training\n"
        )
    (root / "learning_journal.md").write_text("".join(parts), encoding="utf-8")
    subprocess.run(  # a search builds the words index recall reads
        [sys.executable, "-m", "journal_agent", "journal", "search", "x", "--root", str(root)],
        check=True,
        capture_output=True,
        env={**os.environ, "JOURNAL_AGENT_EMBEDDING_MODEL": "off"},
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        root = Path(tmp)
        _journal(root)
        titles = [title for title, _ in ENTRIES]
        named = right = hit_prompts = 0
        misses = []
        for prompt, want in RELATED:
            hits = [h["title"] for h in related(root, prompt)]
            named += len(hits)
            right += titles[want] in hits
            hit_prompts += titles[want] in hits
            if titles[want] not in hits:
                misses.append(prompt)
        false_alarms = []
        for prompt in UNRELATED:
            hits = [h["title"] for h in related(root, prompt)]
            named += len(hits)
            if hits:
                false_alarms.append({"prompt": prompt, "named": hits})
    out = {
        "benchmark": "recall",
        "prompts": {"related": len(RELATED), "unrelated": len(UNRELATED)},
        "entries_named": named,
        "precision": round(right / named, 3) if named else None,
        "related_found": round(hit_prompts / len(RELATED), 3),
        "unrelated_prompts_with_a_hit": len(false_alarms),
        "false_alarms": false_alarms,
        "related_prompts_missed": misses,
        "injection_may_be_default": bool(named) and right / named >= 0.8,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
