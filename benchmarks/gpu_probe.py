"""What a training step holds on a GPU outside its tensors, op by op: the CUDA context as
nvidia-smi counts it, and the workspaces PyTorch's libraries allocate through the caching
allocator and keep (cuBLAS, cuBLASLt for linears with a bias, the attention kernels' backward).

    python3 benchmarks/gpu_probe.py --out DIR     # on a GPU: about a minute
    python3 benchmarks/gpu_probe.py --dry-run     # anywhere: the same ops on the CPU, no figures

Each probe runs an op once (forward, and backward where it has one) and records, after it:
``memory_allocated`` beyond the tensors the probe itself still holds (what the library keeps),
the transient ``max_memory_allocated`` above that, ``memory_reserved``, and NVML's "used" for
the device. The first probe records NVML before CUDA is initialised at all. Writes
``gpu-probe-<device>-<date>.json`` and prints it. Needs only torch (and nvidia-ml-py for NVML).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path


def _nvml_used() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    except Exception:  # NVML is optional: the allocator's counters are the measurement
        return None


def _probes(torch, dev: str) -> list[tuple[str, Callable[[], list]]]:
    """(name, op): each op returns the tensors it keeps alive (their bytes are not the
    library's), so what remains allocated beyond them is what the library kept."""
    f = torch.nn.functional
    bf16, fp32 = torch.bfloat16, torch.float32

    def rand(*shape, dtype=bf16, grad=False):
        return torch.randn(*shape, device=dev, dtype=dtype, requires_grad=grad)

    def linear(dtype, bias: bool, backward: bool):
        def op():
            x = rand(4096, 768, dtype=dtype, grad=backward)
            w = rand(3072, 768, dtype=dtype, grad=backward)
            b = rand(3072, dtype=dtype, grad=backward) if bias else None
            y = f.linear(x, w, b)
            if not backward:
                return [x, w, y] + ([b] if b is not None else [])
            y.sum().backward()
            keep = [x, w, x.grad, w.grad]
            return keep + ([b, b.grad] if b is not None else [])

        return op

    def threaded(op):
        """Run op on another CPU thread (as autograd's engine runs backward): cuBLAS keeps a
        handle, and a workspace, per thread and stream."""

        def run():
            out: list = []
            t = threading.Thread(target=lambda: out.extend(op()))
            t.start()
            t.join()
            return out

        return run

    def sdpa(dtype, backend):
        def op():
            from torch.nn.attention import SDPBackend, sdpa_kernel

            q, k, v = (rand(4, 12, 1024, 64, dtype=dtype, grad=True) for _ in range(3))
            with sdpa_kernel(getattr(SDPBackend, backend)):
                o = f.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.sum().backward()
            return [q, k, v, q.grad, k.grad, v.grad]

        return op

    def cross_entropy():
        logits = rand(4096, 50257, dtype=fp32, grad=True)
        labels = torch.randint(0, 50257, (4096,), device=dev)
        f.cross_entropy(logits, labels).backward()
        return [logits, labels, logits.grad]

    def embedding():
        w = rand(50257, 768, dtype=fp32, grad=True)
        ids = torch.randint(0, 50257, (8, 1024), device=dev)
        f.embedding(ids, w).sum().backward()
        return [w, ids, w.grad]

    def layer_norm():
        x = rand(8192, 768, grad=True)
        w, b = rand(768, grad=True), rand(768, grad=True)
        f.layer_norm(x, (768,), w, b).sum().backward()
        return [x, w, b, x.grad, w.grad, b.grad]

    return [
        ("mm bf16 (no bias)", linear(bf16, False, False)),
        ("linear bf16 + bias", linear(bf16, True, False)),
        ("linear fp32 + bias", linear(fp32, True, False)),
        ("linear bf16 + bias, backward", linear(bf16, True, True)),
        ("mm bf16 on another thread", threaded(linear(bf16, False, False))),
        ("linear bf16 + bias on another thread", threaded(linear(bf16, True, False))),
        ("sdpa flash bf16 fwd+bwd", sdpa(bf16, "FLASH_ATTENTION")),
        ("sdpa mem-efficient fp32 fwd+bwd", sdpa(fp32, "EFFICIENT_ATTENTION")),
        ("sdpa cudnn bf16 fwd+bwd", sdpa(bf16, "CUDNN_ATTENTION")),
        ("cross_entropy fp32 fwd+bwd", cross_entropy),
        ("embedding fp32 backward", embedding),
        ("layer_norm bf16 fwd+bwd", layer_norm),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--dry-run", action="store_true", help="the same ops on the CPU")
    args = parser.parse_args(argv)
    before_init = None if args.dry_run else _nvml_used()
    import torch

    dev = "cpu" if args.dry_run else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or --dry-run to check the path")
        return 2
    cuda = dev == "cuda"
    rows: list[dict] = []
    report = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "nvml_used_before_cuda_init": before_init,
        "rows": rows,
    }
    if cuda:
        torch.zeros(1, device=dev)
        torch.cuda.synchronize()
        report["after_init"] = {
            "allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(),
            "nvml_used": _nvml_used(),
        }
    for name, op in _probes(torch, dev):
        row: dict = {"probe": name}
        try:
            if cuda:
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            kept = op()
            if cuda:
                torch.cuda.synchronize()
                own = sum(t.untyped_storage().nbytes() for t in kept if t is not None)
                now = torch.cuda.memory_allocated()
                row.update(
                    kept_beyond_tensors=now - base - own,
                    transient_above_end=torch.cuda.max_memory_allocated() - now,
                    tensors=own,
                    reserved=torch.cuda.memory_reserved(),
                    nvml_used=_nvml_used(),
                )
            del kept
        except Exception as exc:  # one probe's failure is a row, not the end of the probe
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        report["end"] = {
            "allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(),
            "nvml_used": _nvml_used(),
        }
    slug = re.sub(r"[^a-z0-9]+", "-", report["device"].lower()).strip("-")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gpu-probe-{slug}-{report['date']}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
