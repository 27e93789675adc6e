"""Datasheet numbers of the GPUs people train on: memory, dense tensor FLOP/s, bandwidth.

Plain data, no torch: ``estimate --gpu NAME`` turns FLOPs into time with it, and ``fit`` reads
the memory. Peaks are *dense* (no 2:4 sparsity), as the vendor datasheets list them beside the
sparse figure; the sources are in ``docs/profiling.md`` (section "GPU table"). 16-bit is the
tensor-core rate for bf16/fp16 inputs (fp32 accumulate on the GeForce cards); fp32 is the plain
(non-tensor-core) fp32 rate, which is what PyTorch uses for fp32 matmuls by default
(``torch.backends.cuda.matmul.allow_tf32`` is False since 1.12).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from profiling.errors import ProfilingError


class GpuSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    memory_gb: float  # 10^9 bytes, as the datasheet quotes it
    bf16_tflops: float  # dense 16-bit tensor-core peak, 10^12 FLOP/s
    fp32_tflops: float  # plain fp32 peak, 10^12 FLOP/s
    bandwidth_tbs: float  # memory bandwidth, 10^12 B/s
    pcie_gbs: float  # the host link, one direction, 10^9 B/s (PCIe 4.0 x16: 32, 5.0 x16: 64)
    source: str  # the datasheet the numbers come from

    def peak_flops(self, sixteen_bit: bool) -> float:
        """Peak FLOP/s for matmuls in 16-bit (tensor cores) or in plain fp32."""
        return (self.bf16_tflops if sixteen_bit else self.fp32_tflops) * 1e12


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023)"
# NVIDIA publishes no A10G datasheet (a GA102 made for AWS's G5 instances): memory and bandwidth
# are AWS's (EC2 G5 instance page: 24 GB GDDR6 per GPU, as the A10's 600 GB/s), the peaks the
# GA102 whitepaper's per-clock rates at the A10G's 80 SMs and 1.71 GHz boost — 16-bit tensor
# FLOPs with fp32 accumulate at the GeForce half rate (4 × 128 per SM per clock: 70 TFLOP/s, half
# the A10's 125), plain fp32 128 FMA per SM per clock (35 TFLOP/s).
_A10G = (
    "AWS EC2 G5 (A10G: 24 GB, 600 GB/s); peaks from the NVIDIA Ampere GA102 whitepaper's "
    "per-SM rates at 80 SMs × 1.71 GHz (no NVIDIA A10G datasheet is published)"
)
_HGX_B200 = "NVIDIA HGX B200 datasheet (2024): 8-GPU totals divided by 8"

GPUS: dict[str, GpuSpec] = {
    g.key: g
    for g in (
        GpuSpec(
            key="a100-40gb",
            name="A100 40GB SXM",
            memory_gb=40,
            bf16_tflops=312,
            fp32_tflops=19.5,
            bandwidth_tbs=1.555,
            pcie_gbs=32,
            source=_A100,
        ),
        GpuSpec(
            key="a100-80gb",
            name="A100 80GB SXM",
            memory_gb=80,
            bf16_tflops=312,
            fp32_tflops=19.5,
            bandwidth_tbs=2.039,
            pcie_gbs=32,
            source=_A100,
        ),
        GpuSpec(
            key="h100-sxm",
            name="H100 SXM 80GB",
            memory_gb=80,
            bf16_tflops=989,
            fp32_tflops=67,
            bandwidth_tbs=3.35,
            pcie_gbs=64,
            source=_H100,
        ),
        GpuSpec(
            key="h100-pcie",
            name="H100 PCIe 80GB",
            memory_gb=80,
            bf16_tflops=756,
            fp32_tflops=51,
            bandwidth_tbs=2.0,
            pcie_gbs=64,
            source=_H100,
        ),
        GpuSpec(
            key="h100-nvl",
            name="H100 NVL 94GB",
            memory_gb=94,
            bf16_tflops=835,
            fp32_tflops=60,
            bandwidth_tbs=3.9,
            pcie_gbs=64,
            source=_H100 + ": the H100 NVL column (1,671 TFLOPS with sparsity)",
        ),
        GpuSpec(
            key="h200",
            name="H200 SXM 141GB",
            memory_gb=141,
            bf16_tflops=989,
            fp32_tflops=67,
            bandwidth_tbs=4.8,
            pcie_gbs=64,
            source="NVIDIA H200 Tensor Core GPU datasheet (2024)",
        ),
        GpuSpec(
            key="b200",
            name="B200 180GB (HGX)",
            memory_gb=180,
            bf16_tflops=2250,
            fp32_tflops=75,
            bandwidth_tbs=8.0,
            pcie_gbs=64,
            source=_HGX_B200,
        ),
        GpuSpec(
            key="a10",
            name="A10 24GB",
            memory_gb=24,
            bf16_tflops=125,
            fp32_tflops=31.2,
            bandwidth_tbs=0.600,
            pcie_gbs=32,
            source="NVIDIA A10 Tensor Core GPU datasheet (2021)",
        ),
        GpuSpec(
            key="a10g",
            name="A10G 24GB (AWS G5)",
            memory_gb=24,
            bf16_tflops=70,
            fp32_tflops=35,
            bandwidth_tbs=0.600,
            pcie_gbs=32,
            source=_A10G,
        ),
        GpuSpec(
            key="l4",
            name="L4 24GB",
            memory_gb=24,
            bf16_tflops=121,
            fp32_tflops=30.3,
            bandwidth_tbs=0.300,
            pcie_gbs=32,
            source="NVIDIA L4 Tensor Core GPU datasheet (2023)",
        ),
        GpuSpec(
            key="l40s",
            name="L40S 48GB",
            memory_gb=48,
            bf16_tflops=362,
            fp32_tflops=91.6,
            bandwidth_tbs=0.864,
            pcie_gbs=32,
            source="NVIDIA L40S GPU datasheet (2023)",
        ),
        GpuSpec(
            key="rtx-4090",
            name="GeForce RTX 4090 24GB",
            memory_gb=24,
            bf16_tflops=165.2,
            fp32_tflops=82.6,
            bandwidth_tbs=1.008,
            pcie_gbs=32,
            source="NVIDIA Ada Lovelace GPU architecture whitepaper (v2.1), appendix table: "
            "FP16/BF16 tensor TFLOPS with FP32 accumulate, dense",
        ),
        GpuSpec(
            key="rtx-3090",
            name="GeForce RTX 3090 24GB",
            memory_gb=24,
            bf16_tflops=71,
            fp32_tflops=35.6,
            bandwidth_tbs=0.936,
            pcie_gbs=32,
            source="NVIDIA Ampere GA102 GPU architecture whitepaper (v2.0), table 9: "
            "FP16/BF16 tensor TFLOPS with FP32 accumulate, dense",
        ),
    )
}

# Names people type for the same card. "a100" and "h100" alone are ambiguous (two memory sizes,
# two form factors with different clocks) and get a question back instead of a guess.
_ALIASES = {
    "a10040gb": "a100-40gb",
    "a100-40": "a100-40gb",
    "a10080gb": "a100-80gb",
    "a100-80": "a100-80gb",
    "h100sxm": "h100-sxm",
    "h100pcie": "h100-pcie",
    "h200sxm": "h200",
    "h100nvl": "h100-nvl",
    "a10g24gb": "a10g",
    "a1024gb": "a10",
    "l40s48gb": "l40s",
    "l424gb": "l4",
    "4090": "rtx-4090",
    "rtx4090": "rtx-4090",
    "3090": "rtx-3090",
    "rtx3090": "rtx-3090",
}
_AMBIGUOUS = {"a100": ("a100-40gb", "a100-80gb"), "h100": ("h100-sxm", "h100-pcie")}


def gpu_names() -> list[str]:
    return list(GPUS)


def find_gpu(name: str, flag: str = "--gpu") -> GpuSpec:
    """The GPU called ``name`` (case, spaces and underscores ignored); one sentence if unknown."""
    key = re.sub(r"[\s_]+", "-", name.strip().lower())
    key = _ALIASES.get(key, _ALIASES.get(key.replace("-", ""), key))
    if key in GPUS:
        return GPUS[key]
    if key.replace("-", "") in _AMBIGUOUS:
        options = " or ".join(_AMBIGUOUS[key.replace("-", "")])
        raise ProfilingError(f"{flag} {name!r} is ambiguous; say {options}")
    raise ProfilingError(f"{flag} {name!r} is not a GPU we know; use one of {', '.join(GPUS)}")


__all__ = ["GPUS", "GpuSpec", "find_gpu", "gpu_names"]
