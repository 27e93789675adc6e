"""A Seatbelt profile for ``sandbox-exec`` on macOS, generated from the same :class:`~.view.View`.

Not testable on the Linux machines this project is developed on: it is kept small so that it
can be read in full. Reads are allowed everywhere except the masked paths; writes only under
the writable paths (minus the read-only ones) and the temporary directories; network only when
the view allows it. Seatbelt's last matching rule wins, so the denials come after the grants.
"""

from __future__ import annotations

from pathlib import Path

from journal_agent.tools.sandbox.view import View


def _q(p: Path) -> str:
    return '"' + str(p).replace("\\", "\\\\").replace('"', '\\"') + '"'


def seatbelt_profile(view: View) -> str:
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-exec process-fork signal (target same-sandbox))",
        "(allow sysctl-read mach-lookup ipc-posix-shm iokit-open)",
        "(allow file-read*)",
        '(allow file-write* (subpath "/private/tmp") (subpath "/private/var/folders")'
        ' (literal "/dev/null") (literal "/dev/tty"))',
    ]
    lines += [f"(allow file-write* (subpath {_q(p)}))" for p in view.writable]
    lines += [f"(deny file-write* (subpath {_q(p)}))" for p in view.read_only]
    lines += [f"(deny file-write* (literal {_q(p)}))" for p in view.ours]
    lines += [f"(allow file-write* (subpath {_q(p)}))" for p in view.rewritable]
    lines += [f"(deny file-read* file-write* (subpath {_q(p)}))" for p in view.masked]
    if view.network:
        lines.append("(allow network*)")
    return "\n".join(lines) + "\n"


def sandbox_exec_argv(program: str, view: View, argv: list[str]) -> list[str]:
    return [program, "-p", seatbelt_profile(view), *argv]
