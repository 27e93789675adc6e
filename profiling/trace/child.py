"""A trace in a process of its own, so that nothing it does can end the caller's.

``profile`` traces the step it has just measured. A trace runs a torch the tracer does not
control: on a GPU machine's torch a failed trace once ended the process with a C++ abort
(exit 134) after the measurement, and the measurement was lost. :func:`trace_in_child` runs
the trace in a child Python (``python -I``: no environment variables, no working directory on
the path — the child's ``sys.path`` is the parent's, sent with the configuration) and returns
its result; a child that fails, aborts or runs out of time becomes one
:class:`~profiling.errors.ProfilingError` sentence, which the caller keeps as a note.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from profiling.errors import ProfilingError

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.trace.step import TraceResult

# Past its own bound the child stops itself and says so; it is killed from outside this much
# later (torch's import comes first, and a stop takes a moment to unwind).
_GRACE_S = 30.0
_CHILD = "import sys; sys.path[:0] = __import__('json').loads(sys.stdin.readline()); " + (
    "from profiling.trace.child import main; main()"
)


def trace_in_child(config: TrainingConfig, timeout: float | None = None) -> TraceResult:
    """``trace_step(config)`` in a child process; its :class:`TraceResult`."""
    from profiling.trace.step import TraceResult

    request = (
        json.dumps(list(sys.path)) + "\n" + config.model_dump_json() + "\n" + json.dumps(timeout)
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _CHILD],
            input=request + "\n",
            capture_output=True,
            text=True,
            timeout=None if timeout is None else timeout + _GRACE_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProfilingError(f"the trace did not finish within {timeout:g} s") from None
    if proc.returncode == 0:
        return TraceResult.model_validate_json(proc.stdout)
    raise ProfilingError(_failure(proc.returncode, proc.stdout, proc.stderr))


def _failure(code: int, stdout: str, stderr: str) -> str:
    """One sentence for a child that failed: its own sentence, or how it ended."""
    if code == 2 and stdout.strip():  # main() reports a ProfilingError this way
        return json.loads(stdout)["error"]
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "Error" in ln or "what()" in ln), "")
    last = last or (lines[-1] if lines else "")
    if code < 0 or code in (134, 139):
        sig = -code if code < 0 else code - 128
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        return f"the trace process was killed by {name} (a crash in torch's C++: {last[:300]})"
    return f"the trace process failed (exit {code}: {last[:300]})"


def main() -> None:
    """The child: a configuration on stdin (after the path line), the result JSON on stdout."""
    from profiling.config import TrainingConfig
    from profiling.trace.run import trace_bound
    from profiling.trace.step import trace_step

    config = TrainingConfig.model_validate_json(sys.stdin.readline())
    timeout = json.loads(sys.stdin.readline())
    try:
        with trace_bound(timeout, config):
            result = trace_step(config)
    except ProfilingError as exc:
        print(json.dumps({"error": str(exc)}))
        sys.exit(2)
    sys.stdout.write(result.model_dump_json())


__all__ = ["trace_in_child"]
