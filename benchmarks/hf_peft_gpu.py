"""A real Hugging Face Trainer step with peft — LoRA, and QLoRA through bitsandbytes — on a GPU,
beside what ``--from`` predicts from the same files.

    python3 benchmarks/hf_peft_gpu.py --out DIR             # on a GPU: about 3 minutes
    python3 benchmarks/hf_peft_gpu.py --dry-run --out DIR   # anywhere: a tiny model on the CPU
    python benchmarks/hf_peft_gpu.py --compare DIR/hf-peft-<device>-<date>.json
                                                            # here: --from beside each measurement

Each case is a folder in ``benchmarks/hf_peft/`` holding the files a user of the Trainer has:
``args.json`` (``TrainingArguments``), peft's ``adapter_config.json``, the model's
``config.json`` (Llama 3.2 1B's shape; the weights are random: memory does not depend on their
values), for QLoRA a ``bnb_config.json`` (``BitsAndBytesConfig``), and ``run.json`` with what the
arguments do not record: the dtype the model was loaded in, the sequence length, whether peft's
``prepare_model_for_kbit_training`` ran, and the flags that tell ``--from`` so.

On the GPU every case runs in a child process of its own (clean allocator counters): the model
is built, the adapters added as peft adds them, and the Trainer trains ``max_steps`` steps on
fixed-length sequences (labels = the inputs). A callback reads, for each step, the peak of
``torch.cuda.max_memory_allocated`` and ``max_memory_reserved`` (reset at the step's start) and
what NVML shows used on the device at its end. The steady state is the highest step after the
first (the first also makes the optimizer's states). It writes ``hf-peft-<device>-<date>.json``;
``--compare`` runs ``journal-agent estimate --from`` on each case's files (``--counter
reserved``: allocated, reserved and nvidia-smi's figures) and writes the table beside it.

On the GPU it needs transformers, peft and (for QLoRA) bitsandbytes, nothing of this project.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parent))  # _md, also when loaded as a module
from _md import table

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "benchmarks" / "hf_peft"
RESULTS = REPO / "benchmarks" / "results"
# a tiny Llama for --dry-run: the same path, seconds on a CPU
TINY = {
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}


def _case_files(case: Path) -> dict:
    files = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in case.glob("*.json")}
    files["name"] = case.name
    return files


class _Tokens:
    """Fixed-length random token sequences, labels = inputs (a pretraining-style batch)."""

    def __init__(self, vocab: int, seq: int, count: int):
        import torch

        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, seq), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i].clone()}


def _nvml_used() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        # v2, as nvidia-smi: v1's "used" also holds what the driver reserves for itself
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2).used)
    except Exception:  # NVML is optional: the torch counters are the measurement
        return None


def _build_model(files: dict, device: str, dry: bool, scratch: Path):
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig

    run = files["run"]
    config = dict(files["config"])
    if dry:
        config.update(TINY)
        config.pop("rope_scaling", None)
    cfg = LlamaConfig(**{k: v for k, v in config.items() if k != "architectures"})
    dtype = getattr(torch, run["load_dtype"])
    if "bnb_config" not in files:
        with torch.device(device):
            return AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    # QLoRA: bitsandbytes quantizes while loading a checkpoint, so write one first (random
    # weights in 16 bits), free it, and load it 4-bit as a user's script does.
    with torch.device(device):
        full = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    full.save_pretrained(scratch / "base")
    del full
    if device == "cuda":
        torch.cuda.empty_cache()
    bnb = dict(files["bnb_config"])
    bnb["bnb_4bit_compute_dtype"] = getattr(torch, bnb.get("bnb_4bit_compute_dtype", "bfloat16"))
    return AutoModelForCausalLM.from_pretrained(
        scratch / "base",
        quantization_config=BitsAndBytesConfig(**bnb),
        dtype=dtype,
        device_map={"": 0},
        attn_implementation="sdpa",
    )


def worker(case: Path, dry: bool, scratch: Path) -> dict:
    """One case, in this process: build, adapt, train; the per-step peaks."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import Trainer, TrainerCallback, TrainingArguments

    files = _case_files(case)
    device = "cpu" if dry else "cuda"
    t0 = time.perf_counter()
    model = _build_model(files, device, dry, scratch)
    if files["run"].get("prepare_model_for_kbit_training"):
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=bool(files["args"].get("gradient_checkpointing")),
            gradient_checkpointing_kwargs=files["args"].get("gradient_checkpointing_kwargs"),
        )
    adapter = {k: v for k, v in files["adapter_config"].items() if k != "peft_type"}
    model = get_peft_model(model, LoraConfig(**adapter))
    args = dict(files["args"], output_dir=str(scratch / "out"))
    if dry:
        args.update(use_cpu=True, bf16=False, max_steps=3)
        args["optim"] = "adamw_torch" if "8bit" in args["optim"] else args["optim"]
    steps: list[dict] = []

    class Peaks(TrainerCallback):
        def on_step_begin(self, *a, **k):
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()

        def on_step_end(self, *a, **k):
            if device != "cuda":
                steps.append({})
                return
            torch.cuda.synchronize()
            steps.append(
                {
                    "max_allocated": torch.cuda.max_memory_allocated(),
                    "max_reserved": torch.cuda.max_memory_reserved(),
                    "allocated_after": torch.cuda.memory_allocated(),
                    "nvml_used_after": _nvml_used(),
                }
            )

    seq = 64 if dry else int(files["run"]["seq"])
    vocab = model.config.vocab_size
    batch = int(args["per_device_train_batch_size"]) * int(args["gradient_accumulation_steps"])
    data = _Tokens(vocab, seq, batch * int(args["max_steps"]))
    trainer = Trainer(
        model=model, args=TrainingArguments(**args), train_dataset=data, callbacks=[Peaks()]
    )
    setup_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    trainer.train()
    row: dict = {
        "case": files["name"],
        "steps": steps,
        "setup_s": round(setup_s, 1),
        "train_s": round(time.perf_counter() - t1, 1),
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    if steps and device == "cuda":
        later = steps[1:] or steps
        row["steady_max_allocated"] = max(s["max_allocated"] for s in later)
        row["steady_max_reserved"] = max(s["max_reserved"] for s in later)
        row["first_step_max_allocated"] = steps[0]["max_allocated"]
        row["process_max_reserved"] = torch.cuda.max_memory_reserved()
    return row


def _versions() -> dict:
    out = {}
    for name in ("torch", "transformers", "peft", "bitsandbytes", "accelerate"):
        try:
            out[name] = __import__(name).__version__
        except Exception as exc:  # a missing package is a fact of the run, said in the report
            out[name] = f"missing ({type(exc).__name__})"
    return out


def measure(out: Path, dry: bool, only: list[str] | None) -> Path:
    import torch

    report: dict = {
        "device": "cpu" if dry else torch.cuda.get_device_name(0),
        "date": datetime.date.today().isoformat(),
        "dry_run": dry,
        "versions": _versions(),
        "nvml_version": 2,
        "rows": [],
    }
    for case in sorted(p for p in CASES.iterdir() if p.is_dir()):
        if only and not any(o in case.name for o in only):
            continue
        if dry and (case / "bnb_config.json").exists():
            report["rows"].append({"case": case.name, "error": "skipped: bitsandbytes on a GPU"})
            continue
        print(f"{case.name} …", file=sys.stderr, flush=True)
        cmd = [sys.executable, __file__, "--worker", str(case)] + (["--dry-run"] if dry else [])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
        lines = [x for x in done.stdout.splitlines() if x.startswith("ROW ")]
        if done.returncode == 0 and lines:
            report["rows"].append(json.loads(lines[-1][4:]))
        else:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            report["rows"].append({"case": case.name, "error": " | ".join(tail)[:600]})
    slug = re.sub(r"[^a-z0-9]+", "-", report["device"].lower()).strip("-")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"hf-peft-{slug}{'-dryrun' if dry else ''}-{report['date']}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=1))
    return path


# NVML memory info v1's "used" on the H200 of 2026-11-30 before any CUDA context
# (benchmarks/results/gpu-probe-nvidia-h200-2026-11-30.json): the driver's own reserve, which
# v2 and nvidia-smi leave out; that run's figures were read with v1.
V1_DRIVER_RESERVE = {"NVIDIA H200": 644_939_776}


def _gpu_flags(device: str) -> list[str]:
    """--gpu for the device measured: the CUDA context and workspaces are the GPU's."""
    for key, flag in (("h200", "h200"), ("h100", "h100-sxm"), ("a100", "a100-80gb")):
        if key in device.lower():
            return ["--gpu", flag]
    return []


def _predict(case: Path, gpu: list[str]) -> dict:
    files = sorted(case.glob("*.json"))
    run = json.loads((case / "run.json").read_text(encoding="utf-8"))
    cmd = [sys.executable, "-m", "journal_agent", "estimate", "--seq", str(run["seq"])]
    for f in files:
        if f.name != "run.json":
            cmd += ["--from", str(f.relative_to(REPO))]
    cmd += [*run["flags"], *gpu, "--counter", "reserved", "--json"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:300], "command": cmd[2:]}
    e = json.loads(done.stdout)
    return {
        "command": "journal-agent " + " ".join(cmd[3:]),
        "tensors": e["per_gpu_bytes"],
        # what max_memory_allocated counts: the tensors, 512-byte rounding, cuBLAS workspaces
        "allocated": e["counters"]["allocated"]["bytes"],
        "reserved": e["counters"]["reserved"]["bytes"],
        "nvml": e["counters"]["nvml"]["bytes"],
        "notes": e["notes"],
    }


_HEADER = [
    "case",
    "max_memory_allocated",
    "÷ predicted",
    "max_memory_reserved",
    "÷ predicted",
    "nvidia-smi used",
    "÷ predicted",
]


def compare(measured: Path) -> Path:
    report = json.loads(measured.read_text(encoding="utf-8"))
    lines = [
        f"Hugging Face Trainer + peft on {report['device']} ({report['versions']}), "
        f"{report['date']}: measured (steady-state step) ÷ `--from` on the same files",
        "",
    ]
    rows = []
    for row in report["rows"]:
        if "error" in row:
            rows.append([row["case"], row["error"]])
            continue
        p = row["prediction"] = _predict(CASES / row["case"], _gpu_flags(report["device"]))
        if "error" in p or "steady_max_allocated" not in row:
            rows.append([row["case"], p.get("error", "no GPU figures")])
            continue
        row["allocated_ratio"] = row["steady_max_allocated"] / p["allocated"]
        row["reserved_ratio"] = row["steady_max_reserved"] / p["reserved"]
        nvml = max((s.get("nvml_used_after") or 0) for s in row["steps"][1:] or row["steps"])
        if nvml and report.get("nvml_version", 1) == 1:
            nvml -= V1_DRIVER_RESERVE.get(report["device"], 0)
        row["nvml_ratio"] = nvml / p["nvml"] if nvml else None
        rows.append(
            [row["case"], f"{row['steady_max_allocated']:,}", f"{row['allocated_ratio']:.4f}"]
            + [f"{row['steady_max_reserved']:,}", f"{row['reserved_ratio']:.4f}"]
            + ([f"{nvml:,}", f"{row['nvml_ratio']:.4f}"] if nvml else ["—", "—"])
        )
    lines += table(_HEADER, rows)
    out = measured.with_name(measured.stem + "-compared")
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument("--dry-run", action="store_true", help="a tiny model on the CPU")
    parser.add_argument("--cases", nargs="*", help="only the cases whose name contains these")
    parser.add_argument("--compare", type=Path, help="a measured JSON: predict beside it")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.compare)
        return 0
    if args.worker:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            row = worker(args.worker, args.dry_run, Path(scratch))
        print("ROW " + json.dumps(row))
        return 0
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or --dry-run to check the path")
        return 2
    measure(args.out, args.dry_run, args.cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
