"""The detached refresh child's bounds: CPU time and memory, set by the child on itself.

The child SessionStart and SessionEnd start (``capture.py refresh``) hashes every referenced
file and looks for moved lines, with nobody waiting for it: on a large or hostile journal it ran
224 s of CPU with no bound. It now runs under ``RLIMIT_CPU`` (120 s of CPU time; the kernel
sends SIGXCPU, and SIGKILL 5 s later if that was ignored) and ``RLIMIT_AS`` (512 MiB of address
space: an allocation past it is a ``MemoryError``). Either ends the child with one line in
``.journal/hooks.log`` saying which limit it met; the cached status stays as it was (replaced
whole or not at all), so SessionStart keeps saying what it said.

``JOURNAL_AGENT_REFRESH_LIMITS`` (``cpu=SECONDS,memory=MB``, either part alone) lowers them, never
raises them: for a slow machine's user who wants less, and for the tests that run into them.
Stdlib only, imported by the hook's detached child alone.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (typing is one more import for the child)
if TYPE_CHECKING:
    from collections.abc import Callable

CPU_S = 120  # seconds of CPU time
MEMORY_MB = 512  # MiB of address space
ENV = "JOURNAL_AGENT_REFRESH_LIMITS"
_KILL_AFTER_S = 5  # the hard CPU limit: SIGKILL if SIGXCPU did not end the child


def limits() -> tuple[int, int]:
    """``(cpu seconds, memory MiB)``: the defaults, lowered by the environment's setting."""
    cpu, memory = CPU_S, MEMORY_MB
    for part in os.environ.get(ENV, "").split(","):
        key, _, value = part.partition("=")
        try:
            number = int(value.strip())
        except ValueError:
            continue
        if number <= 0:
            continue
        if key.strip() == "cpu":
            cpu = min(cpu, number)
        elif key.strip() == "memory":
            memory = min(memory, number)
    return cpu, memory


def memory_message(memory_mb: int) -> str:
    return (
        f"stopped at its memory limit ({memory_mb} MiB): the stale references were not "
        "counted this time; `journal-agent journal check` counts them"
    )


def bound_self(say: Callable[[str], None]) -> int:
    """Put the limits on this process; at the CPU limit, ``say`` (a one-argument callable)
    the line for hooks.log and end at once. Returns the memory limit in MiB (for
    :func:`memory_message`); 0 where the platform has no such limits."""
    try:
        import resource
        import signal
    except ImportError:  # not a Unix: nothing to set
        return 0
    cpu, memory = limits()

    def at_cpu_limit(_signum: int, _frame: object) -> None:
        try:
            say(
                f"stopped at its CPU time limit ({cpu} s): the stale references were not "
                "counted this time; `journal-agent journal check` counts them"
            )
        finally:
            os._exit(0)

    signal.signal(signal.SIGXCPU, at_cpu_limit)
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime)
    _lower(resource.RLIMIT_CPU, spent + cpu, spent + cpu + _KILL_AFTER_S)
    _lower(resource.RLIMIT_AS, memory << 20, memory << 20)
    return memory


def _lower(which: int, soft: int, hard: int) -> None:
    """Lower the limit ``which`` to ``soft``/``hard``, never above what is set already."""
    import resource

    old_soft, old_hard = resource.getrlimit(which)
    infinity = resource.RLIM_INFINITY
    if old_hard != infinity:
        hard = min(hard, old_hard)
        soft = min(soft, hard)
    if old_soft != infinity:
        soft = min(soft, old_soft)
    try:  # noqa: SIM105 (contextlib is one more import for the child)
        resource.setrlimit(which, (soft, hard))
    except (ValueError, OSError):
        pass  # a limit we may not set here: the child runs as it did before
