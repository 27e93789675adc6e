"""Write deepspeed_estimator.json: DeepSpeed's own ZeRO-2 and ZeRO-3 model-state estimators run
on transformers' own models, as a user runs them.

For each model of the catalogue below, transformers builds the model from the catalogue's
config.json on the meta device and ``to_empty`` gives it real, uninitialised CPU storage (the
pages are never touched: a 70B model costs a few hundred MB of resident memory), so DeepSpeed's
``estimate_zero{2,3}_model_states_mem_needs_all_live`` count its parameters themselves (shared
ones once, by ``data_ptr``) and print their table; each printed line is kept as printed, with the
bytes the same call returns (``estimate_zero{2,3}_model_states_mem_needs``).

Needs DeepSpeed 0.19.6 (edaa7221) and transformers; neither is a dependency of ours:

    pip install --no-deps --no-build-isolation --target /tmp/ds deepspeed==0.19.6 \\
        py-cpuinfo hjson msgpack ninja einops
    PYTHONPATH=/tmp/ds python benchmarks/peer/make_deepspeed_rows.py
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOGUE = HERE.parent.parent / "profiling" / "models" / "catalogue"
MODELS = ["gpt2", "llama-3.2-1b", "llama-2-7b", "llama-3.1-8b", "mistral-7b", "llama-2-13b",
          "qwen2.5-14b", "llama-3.1-70b", "mixtral-8x7b"]  # fmt: skip
HARDWARE = [(1, 1), (8, 1), (8, 4)]  # (GPUs per node, nodes)
LINE = re.compile(r"^\s*([\d.]+)GB \|\s*([\d.]+)GB \| (.*)$")


def _model(name: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    entry = json.loads((CATALOGUE / f"{name}.json").read_text(encoding="utf-8"))
    config = AutoConfig.for_model(**entry["config"])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model = model.to_empty(device="cpu")
    model.tie_weights()  # to_empty keeps tied parameters one object; tie again to be sure
    return entry, model


def _printed(call, *args) -> list[tuple[str, str, str]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        call(*args)
    return [m.groups() for m in map(LINE.match, out.getvalue().splitlines()) if m]


def _options(text: str) -> dict[str, bool]:
    opts = dict(part.split("=") for part in text.split(", "))
    return {key: value != "none" and value != "0" for key, value in opts.items()}


def main() -> None:
    import deepspeed
    from deepspeed.runtime.zero import stage3, stage_1_and_2

    rows = []
    for name in MODELS:
        entry, model = _model(name)
        total, largest = stage3.model_to_params(model)
        for per_node, nodes in HARDWARE:
            printed = {
                2: _printed(stage_1_and_2.estimate_zero2_model_states_mem_needs_all_live,
                            model, per_node, nodes),
                3: _printed(stage3.estimate_zero3_model_states_mem_needs_all_live,
                            model, per_node, nodes),
            }  # fmt: skip
            for stage, lines in printed.items():
                for cpu, gpu, text in lines:
                    opt = _options(text)
                    off, off_p = opt["offload_optimizer"], opt.get("offload_param", False)
                    init = opt.get("zero_init", False)
                    if stage == 2:
                        cpu_b, gpu_b = stage_1_and_2.estimate_zero2_model_states_mem_needs(
                            total, per_node, nodes, off
                        )
                    else:
                        cpu_b, gpu_b, _ = stage3.estimate_zero3_model_states_mem_needs(
                            total, largest, per_node, nodes, off, off_p, init
                        )
                    rows.append({
                        "id": f"{name} zero{stage} {per_node}x{nodes} opt={int(off)}"
                              + (f" param={int(off_p)} init={int(init)}" if stage == 3 else ""),
                        "model": f"hf:{name}", "repo": entry["repo"], "stage": stage,
                        "gpus_per_node": per_node, "nodes": nodes,
                        "offload_optimizer": off, "offload_param": off_p,
                        **({"zero_init": init} if stage == 3 else {}),
                        "total_params": total,
                        **({"largest_layer_params": largest} if stage == 3 else {}),
                        "printed_cpu_per_node": f"{cpu}GB", "printed_gpu": f"{gpu}GB",
                        "cpu_bytes_per_node": cpu_b, "gpu_bytes": gpu_b,
                    })  # fmt: skip
    out = {
        "source": {
            "repository": "deepspeedai/DeepSpeed",
            "version": deepspeed.__version__,
            "commit": "edaa72212",
            "functions": [
                "deepspeed/runtime/zero/stage_1_and_2.py: "
                "estimate_zero2_model_states_mem_needs_all_live",
                "deepspeed/runtime/zero/stage3.py: estimate_zero3_model_states_mem_needs_all_live",
            ],
            "docs": "docs/code-docs/source/memory.rst",
            "made_by": "benchmarks/peer/make_deepspeed_rows.py",
        },
        "rows": rows,
    }
    text = json.dumps(out, indent=1)
    # one row per line: 200+ rows stay readable and diffable
    text = re.sub(r"\{\n\s+(\"id\"[^{}]*?)\n\s+\}", lambda m: "{" + " ".join(
        s.strip() for s in m.group(1).splitlines()) + "}", text)  # fmt: skip
    (HERE / "deepspeed_estimator.json").write_text(text + "\n", encoding="utf-8")
    print(f"{len(rows)} rows")


if __name__ == "__main__":
    main()
