"""MemoryProfile and DeviceInfo: measured numbers from this machine, saved as records.

MemoryProfile runs ``journal-agent profile`` in a child process of its own session: a model
that hangs or eats the machine is stopped by the timeout (the whole process group), never the
host's loop. Progress lines from the child go to ``ctx.progress(done, total, what)``
when the host gives one (the MCP server turns them into progress notifications).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from journal_agent.tools._config_input import (
    FROM_FILE_FIELD,
    as_flags,
    config_input_model,
    confined_hf_model,
    with_recipe,
)
from journal_agent.tools._schema import tidy_schema
from journal_agent.tools.base import Progress, Tool, ToolContext, ToolError, ToolResult
from profiling.config import PROFILE_FIELDS
from profiling.models.shape_overrides import OVERRIDES

_GRACE_S = 15.0  # beyond the child's own --timeout: building, tracing, writing the record


# The workload's fields are the shared configuration's (profiling.config.TrainingConfig): those
# a real run honours, with the same choices and defaults as `journal-agent profile`. The run's
# own length is the tool's, shorter than the CLI's: an agent's call is bounded.
MemoryProfileInput = config_input_model(
    "MemoryProfileInput",
    include=PROFILE_FIELDS,
    # a recipe in from_file sets these (each field costs tokens): torch.compile, and a shape
    # flag beside the model (profiling.models.shape_overrides)
    exclude=("compile", *OVERRIDES),
    model=(
        str | None,
        Field(
            None,
            description="A reference model (tiny-gpt2, tiny-llama, gpt2-small … llama-7b), a "
            "Hugging Face config (hf:NAME from the shipped catalogue, or hf:PATH to a "
            "config.json in the workspace), or a factory in the workspace, "
            "'package.module:function', returning a module and inputs (or the model "
            "from_file names).",
        ),
    ),
    from_file=FROM_FILE_FIELD,
    steps=(int, Field(default=5, ge=1, le=50, description="Timed steps (kept short).")),
    warmup=(int, Field(default=1, ge=0, le=10, description="Untimed steps first.")),
    timeout=(
        float,
        Field(default=120, gt=0, le=600, description="Seconds before giving up."),
    ),
    device=(
        str | None,
        Field(default=None, description="cpu, cuda or cuda:N (default: auto)."),
    ),
)


class MemoryProfile(Tool):
    name = "MemoryProfile"
    description = (
        "Measure a short real training run on THIS machine's device (GPU if present, else "
        "CPU): peak memory per phase (forward, backward, optimizer) and per step, spikes, "
        "median time per phase and step (warm-up excluded), tokens/s, achieved FLOP/s, and "
        "beside it the trace of the same step with the ratio measured ÷ traced.\n"
        "- Use it for questions about this hardware; use MemoryTrace/MemoryEstimate for "
        "hardware you do not have.\n"
        "- Returns a compact summary and a record id; cite the numbers as [m:<id>].\n"
        "- Bounded by timeout; an out-of-memory is reported as a result.\n"
        "- It runs in the sandbox, like Bash; a workspace factory runs the user's code, so it "
        "is permission-checked like Bash (a Hugging Face config, hf:NAME or hf:PATH, is data "
        "and needs no approval)."
    )
    Input = MemoryProfileInput

    def run(self, ctx: ToolContext, params: MemoryProfileInput) -> ToolResult:  # type: ignore[override,valid-type]  # Input is a model generated at import (config_input_model), not a class statement
        # hf:PATH is a file the tool reads: inside the workspace only, as a Read.
        values, said = with_recipe(
            ctx, params.config_values(), params.from_file, (*PROFILE_FIELDS, "model"), self.name
        )
        if not values.get("model"):
            raise ToolError("MemoryProfile needs model (or a from_file recipe that names one)")
        values = confined_hf_model(ctx, values)
        args = ["profile", *as_flags(values)]
        args += ["--steps", str(params.steps), "--warmup", str(params.warmup)]
        args += ["--timeout", f"{params.timeout:g}"]
        if params.device:
            args += ["--device", params.device]
        model = str(values["model"])  # a required str field of this input, confined above
        data, err = _profile_in_sandbox(ctx, model, args, params.timeout)
        if data is None:
            raise ToolError(err or "the measured run failed without a message")
        # An out-of-memory is a measured result (saved, cited), not a tool failure.
        return ToolResult("\n".join([*said, render_compact(data, err)]))


def _profile_in_sandbox(
    ctx: ToolContext, model: str, args: list[str], timeout: float
) -> tuple[dict | None, str]:
    """Run ``journal-agent profile`` as Bash would run it: in the sandbox, by the mode's rules,
    with the allow-listed environment, and as ``python -I`` (nothing of the workspace on
    ``sys.path``: a planted ``typer.py`` is never imported; a factory's module is found from
    the working directory, inside the sandbox only). Its records come back through the
    call's outbox."""
    from journal_agent.tools.confined_paths import workspace_root
    from journal_agent.tools.sandbox import SandboxSettings, available_confinement
    from journal_agent.tools.sandbox.call import sandboxed

    root = Path(workspace_root(ctx.root))
    settings = ctx.policy.sandbox if ctx.policy is not None else SandboxSettings()
    writes, read_deny, home = False, (), None
    if ctx.policy is not None:
        if ":" in model and not model.startswith("hf:"):
            # Importing a workspace factory runs the user's code: the same approval as Bash,
            # and what Bash would be allowed to write. A Hugging Face config is data.
            conf = available_confinement(settings, root)
            command = "journal-agent " + " ".join(args)
            writes = ctx.policy.ensure("Bash", command=command, confined=conf.active).writes
        else:
            ctx.policy.ensure("MemoryProfile")  # a rule naming the tool still decides
        read_deny, home = ctx.policy.read_deny_paths(), ctx.policy.home
    with sandboxed(
        root, settings, writes=writes, read_deny=read_deny, home=home, outbox=True
    ) as box:
        argv = box.argv([sys.executable, "-I", "-m", "journal_agent", *args, "--json",
                         "--root", str(root)])  # fmt: skip
        env = box.env({"JOURNAL_AGENT_PROGRESS": "lines", "NO_COLOR": "1"})
        return _run_child(argv, env, ctx, timeout)


def _run_child(
    argv: list[str], env: dict[str, str], ctx: ToolContext, timeout: float
) -> tuple[dict | None, str]:
    from journal_agent.processes import stop_groups

    proc = subprocess.Popen(
        argv,
        cwd=ctx.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    sink: list[Progress | None] = [ctx.progress]  # emptied if the host's progress sink fails
    errors: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            if line.startswith("progress: "):
                done, _, what = line.removeprefix("progress: ").partition(" ")
                n, _, total = done.partition("/")
                if callable(sink[0]) and n.isdigit() and total.isdigit():
                    try:
                        sink[0](int(n), int(total), what)
                    except Exception:  # a host's progress sink failing must not lose the run
                        sink[0] = None
            elif line.strip():
                errors.append(line)

    chunks: list[str] = []

    def read_stdout() -> None:
        assert proc.stdout is not None
        chunks.append(proc.stdout.read())

    # Both pipes drained by threads (never communicate(): it would race the stderr reader).
    readers = [threading.Thread(target=f, daemon=True) for f in (read_stderr, read_stdout)]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout + _GRACE_S)
    except subprocess.TimeoutExpired:
        stop_groups([proc.pid], grace_s=2.0, leaders=[proc])
        return None, (
            f"the measured run did not end within {timeout:g} s (+{_GRACE_S:g} s); it was "
            "stopped — use fewer steps, a smaller batch/seq, or a longer timeout"
        )
    for reader in readers:
        reader.join(timeout=5)
    out = "".join(chunks)
    message = " ".join(e.removeprefix("error: ") for e in errors if e.startswith("error:"))
    try:
        return json.loads(out), message
    except json.JSONDecodeError:
        pass
    if proc.returncode in (-9, 137) and not message:
        # The kernel's OOM killer inside the sandbox's memory bound (or a SIGKILL from outside).
        message = (
            "the measured run was killed (SIGKILL), most likely at the sandbox's memory limit; "
            "use a smaller model, batch or sequence, or raise sandbox.limits.memory in settings"
        )
    return None, message or "\n".join(errors[-5:])


def render_compact(d: dict, err: str = "") -> str:
    from profiling.citations import cite
    from profiling.measure.report import fmt_time
    from profiling.units import fmt_bytes

    dev = d["device"]
    lines = [
        f"Measured on {dev.get('label')} ({dev.get('name')}): {len(d['steps'])} steps, "
        f"{d['warmup_steps']} warm-up excluded from times. Memory = {d['memory_kind']}."
    ]
    where = f" (step {d['peak_step']}, {d['peak_phase']})" if d.get("peak_phase") else ""
    lines.append(f"Peak {fmt_bytes(d['peak_bytes'])}{where}.")
    for p in d["phases"]:
        lines.append(
            f"  {p['name']}: peak {fmt_bytes(p['peak_bytes'])}, median "
            f"{fmt_time(p['median_time_s'])} (IQR {fmt_time(p['iqr_time_s'])})"
        )
    t = d.get("time_per_step")
    if t:
        lines.append(
            f"Step: median {fmt_time(t['median'])}, IQR {fmt_time(t['iqr'])}, min "
            f"{fmt_time(t['min'])} over {t['n']} steps"
            + (f"; {d['tokens_per_s']:,.0f} tokens/s" if d.get("tokens_per_s") else "")
        )
    if d.get("backward_forward_ratio"):
        lines.append(f"backward ÷ forward = {d['backward_forward_ratio']:.2f}")
    if d.get("spikes"):
        lines.append(
            "Spikes: "
            + "; ".join(
                f"step {s['step']} {s['phase']} {fmt_bytes(s['peak_bytes'])}" for s in d["spikes"]
            )
        )
    for r in d.get("measured_over_traced") or []:
        if r["what"] == "step peak":
            lines.append(
                f"Measured ÷ traced step peak: {r['ratio']:.4f} (trace "
                f"{cite(d['trace']['record_id'])})"
            )
    if d.get("oom"):
        o = d["oom"]
        lines.append(f"OUT OF MEMORY at step {o['step']}, {o['phase']}: {err or o['message']}")
    lines.append(f"record: {d['record_id']}  (cite as {cite(d['record_id'])})")
    return "\n".join(lines)


class DeviceInfoInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)


class DeviceInfo(Tool[DeviceInfoInput]):
    name = "DeviceInfo"
    description = (
        "The hardware at hand: NVIDIA GPUs (name, memory used/total/driver-reserved, "
        "utilization, processes and their memory), driver, CUDA and torch versions, CPU and "
        "RAM; or one sentence that there is no NVIDIA GPU here.\n"
        "- Call it before measuring, to know whether MemoryProfile runs on a GPU or the CPU.\n"
        "- Returns the facts and a record id; cite them as [m:<id>]."
    )
    Input = DeviceInfoInput

    def run(self, ctx: ToolContext, params: DeviceInfoInput) -> ToolResult:
        from profiling.citations import cite
        from profiling.measure.devices import gpu_info
        from profiling.measure.report import device_record, render_gpu_info

        info = gpu_info()
        record = device_record(info)
        ctx.workspace.records.save(record)
        return ToolResult(
            f"{render_gpu_info(info)}\nrecord: {record.id}  (cite as {cite(record.id)})"
        )
