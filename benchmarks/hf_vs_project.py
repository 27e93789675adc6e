"""The reference models (written in the project) beside Hugging Face's own modules of the same
shape, traced here under fake tensors; prints JSON, and with ``--markdown`` the table of
docs/profiling.md ("Project module ÷ real Hugging Face module"), which is pasted from here.

Each row: the project's model and transformers' module traced with the same settings (batch 1,
amp-bf16, AdamW, ``--target cuda`` — what a GPU's kernels keep — or ``cpu``, the steady-state
step); activations alive at the end of
forward and the step's peak, ours ÷ Hugging Face's; and the estimate of transformers' module ÷
its trace (the closed forms of ``profiling/estimate/hf_ops.py``). Needs transformers (the hf
extra). Slow (each 7B-shaped trace takes minutes here):

    python benchmarks/hf_vs_project.py [--markdown] [--target cuda|cpu]
        [--rows gpt2-small llama-1b llama-7b]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

# project model -> (Hugging Face config: a catalogue name, or None to write the shape as a
# `llama` config), the sequence, the dropouts to trace
ROWS = {
    "gpt2-small": ("gpt2", 1024, (0.0, 0.1)),
    "llama-1b": (None, 2048, (0.0,)),
    "llama-7b": ("llama-2-7b", 2048, (0.0,)),
}


def _llama_config(name: str, folder: Path) -> str:
    """The reference model's shape as a Hugging Face ``llama`` config.json."""
    from profiling.models.workloads import WORKLOADS

    w = WORKLOADS[name]
    config = {
        "model_type": "llama", "vocab_size": w.vocab, "hidden_size": w.hidden,
        "intermediate_size": w.ffn, "num_hidden_layers": w.layers,
        "num_attention_heads": w.heads, "num_key_value_heads": w.n_kv_heads,
        "max_position_embeddings": w.max_seq, "tie_word_embeddings": False,
    }  # fmt: skip
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"hf:{path}"


def row(project: str, hf: str, seq: int, dropout: float, target: str) -> dict:
    from profiling.config import TrainingConfig
    from profiling.estimate.memory import estimate
    from profiling.trace.step import trace_step

    common = {"seq": seq, "batch": 1, "precision": "amp-bf16", "target": target}
    ours = trace_step(TrainingConfig(model=project, dropout=dropout, **common))
    cfg = TrainingConfig(model=hf, dropout=dropout, **common)
    theirs = trace_step(cfg)
    act = ours.phases["after_forward"]["activations"], theirs.phases["after_forward"]["activations"]
    est = estimate(cfg)
    return {
        "project": project,
        "hf": hf if hf.startswith("hf:") and "/" not in hf else "hf:(the same shape as llama)",
        "implementation": theirs.model_info.get("implementation"),
        "seq": seq,
        "dropout": dropout,
        "target": target,
        "activations": {"ours": act[0], "hf": act[1], "ratio": round(act[0] / act[1], 3)},
        "peak": {
            "ours": ours.peak_bytes,
            "hf": theirs.peak_bytes,
            "ratio": round(ours.peak_bytes / theirs.peak_bytes, 3),
            "hf_phase": theirs.peak_phase,
        },
        "estimate_over_hf_trace": {
            "activations": round(est.category_bytes("activations") / act[1], 4),
            "peak": round(est.per_gpu_bytes / theirs.peak_bytes, 4),
        },
        "hf_notes": [n for n in theirs.notes if "scaled" in n],
    }


def markdown(rows: list[dict]) -> str:
    gb = 1e9
    lines = [
        "| project | Hugging Face module | seq | dropout | activations at the end of forward, "
        "ours ÷ HF | steady-state peak, ours ÷ HF | estimate ÷ HF trace (activations, peak) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        a, p, e = r["activations"], r["peak"], r["estimate_over_hf_trace"]
        impl = r["implementation"].split(" (")[0].split()[-1]
        lines.append(
            f"| `{r['project']}` | `{r['hf']}` ({impl}) | {r['seq']} | {r['dropout']:g} | "
            f"{a['ours'] / gb:.3f} GB ÷ {a['hf'] / gb:.3f} GB = **{a['ratio']:.3f}** | "
            f"{p['ours'] / gb:.2f} GB ÷ {p['hf'] / gb:.2f} GB = **{p['ratio']:.3f}** "
            f"(HF's in the {p['hf_phase'].replace('_', ' ')}) | "
            f"{e['activations']:.4f}, {e['peak']:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="also print the docs table")
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--target", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for project in args.rows:
            name, seq, dropouts = ROWS[project]
            hf = f"hf:{name}" if name else _llama_config(project, Path(tmp))
            rows += [row(project, hf, seq, p, args.target) for p in dropouts]
    print(json.dumps({"rows": rows}, indent=2))
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
