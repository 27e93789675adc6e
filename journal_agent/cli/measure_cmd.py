"""``journal-agent gpu`` and ``profile``: what this machine has, and a measured training run.

Measured numbers come from the device at hand (``profiling.devices``): NVML and the CUDA
allocator on a GPU, live tensor bytes and RSS on the CPU. torch is imported only inside the
commands that need it; ``gpu`` on a machine without an NVIDIA driver never imports it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from journal_agent.cli import app
from journal_agent.cli._common import print_json

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts and agents.")]


def _fmt(n: int | None) -> str:
    from profiling.units import fmt_bytes

    return "—" if n is None else fmt_bytes(n)


def render_gpu_info(info: Any) -> str:
    """The text of ``journal-agent gpu`` (also what the DeviceInfo tool returns)."""
    host = info.host
    cpu = f"CPU: {host.get('cpu')}, {host.get('cpus')} CPUs, {_fmt(host.get('ram_bytes'))} RAM"
    torch = f"torch {info.torch or 'not installed'}"
    if not info.available:
        return f"{info.reason}.\n{cpu}; {torch}"
    lines = [
        f"NVIDIA driver {info.driver}, CUDA driver API {info.cuda_driver}, NVML {info.nvml}; "
        f"{torch} (built for CUDA {info.torch_cuda or 'none'}; "
        f"{'sees' if info.torch_sees_cuda else 'does NOT see'} the GPUs)"
    ]
    for d in info.devices:
        util = "—" if d.utilization_gpu_pct is None else f"{d.utilization_gpu_pct:.0f}%"
        lines.append(
            f"GPU {d.index}: {d.name} — {_fmt(d.used_bytes)} used of {_fmt(d.total_bytes)} "
            f"(driver-reserved {_fmt(d.reserved_bytes)}, free {_fmt(d.free_bytes)}), "
            f"utilization {util}"
        )
        for p in d.processes:
            lines.append(f"  pid {p.pid} {p.name}: {_fmt(p.used_bytes)}")
        if not d.processes:
            lines.append("  no compute processes")
    lines.append(cpu)
    return "\n".join(lines)


@app.command("gpu")
def gpu_command(as_json: JsonFlag = False) -> None:
    """The NVIDIA GPUs here: driver, CUDA and torch versions, memory in use and by whom.

    Without a GPU or driver: one sentence saying so (and the CPU), exit code 0.
    """
    from profiling.devices import gpu_info

    info = gpu_info()
    if as_json:
        print_json(info.model_dump(mode="json"))
        return
    typer.echo(render_gpu_info(info))
