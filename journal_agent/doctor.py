"""``journal-agent doctor``: what this environment offers, checked for real.

Each check returns a :class:`Check` (name, ok, one line of detail); nothing here prints. The
heavy ones (torch, NVML) import inside their function.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from journal_agent.check import Check

if TYPE_CHECKING:
    from collections.abc import Callable

    from journal_agent.workspace import Workspace

# Optional packages and what each one adds.
OPTIONAL = {
    "fsrs": "spaced-repetition review of the ledger",
    "matplotlib": "--plot for estimate and trace",
    "mcp": "the MCP server for Claude Code",
    "hypothesis": "the property-based tests",
}


def run_checks(ws: Workspace) -> list[Check]:
    root = ws.root
    return [
        check_confinement(ws),
        check_trust(root),
        *check_own_files(root),
        check_secret_history(ws),
        check_ripgrep(),
        check_api_key(),
        check_torch(),
        check_nvml(),
        check_search_by_meaning(root),
        check_capture(root),
        check_hook_failures(root),
        *_plugin_checks(root),
        *check_optional(),
    ]


def check_own_files(root: Path) -> list[Check]:
    from journal_agent.doctor_files import own_files_checks

    return own_files_checks(root)


def _plugin_checks(root: Path) -> list[Check]:
    from journal_agent.doctor_plugin import plugin_checks

    return plugin_checks(root)


def check_trust(root: Path) -> Check:
    """Which of the project's own settings, command and agent files count (project_trust)."""
    from journal_agent.project_trust import project_files

    files = project_files(root)
    waiting = [f.rel for f in files if f.state in ("not approved", "changed", "unreadable")]
    if waiting:
        return Check(
            "project files",
            False,
            f"{', '.join(waiting)} ignored until you approve them (read them, then run "
            "`journal-agent trust` in your terminal)",
        )
    counted = len(files)
    return Check("project files", True, f"{counted} approved or yours" if counted else "none")


def check_confinement(ws: Workspace) -> Check:
    from journal_agent.tools.sandbox import available_confinement

    settings = ws.settings().sandbox
    conf = available_confinement(settings, ws.root)
    if not conf.active:
        return Check(
            "sandbox",
            False,
            f"none — {conf.reason}; Bash asks before every command that is not a plain "
            "read-only one",
        )
    net = "all network" if settings.network.all_allowed else "no network"
    if conf.kind == "bubblewrap":
        from journal_agent.tools.sandbox.linux import device_nodes_protected

        if not device_nodes_protected():
            return Check(
                "sandbox",
                False,
                f"{conf.reason}; {net}; but running as root without the right to make device "
                "nodes, so a command could change /dev/null's permissions for the machine",
            )
    if conf.kind == "bubblewrap":
        from journal_agent.tools.sandbox.limits import describe

        bounds = describe(settings.limits)
        ok = "NOT bounded" not in bounds
        return Check("sandbox", ok, f"{conf.reason}; {net}; limits: {bounds}")
    return Check("sandbox", True, f"{conf.reason}; {net}")


def check_secret_history(ws: Workspace) -> Check:
    """Files the sandbox hides (``.env``, keys …) that a commit holds: still readable from
    git's object store (``git show HEAD:.env``)."""
    from journal_agent.tools.sandbox.committed_secrets import secrets_in_history
    from journal_agent.tools.sandbox.view import bare_names

    name = "secrets in git history"
    extra = bare_names(ws.settings().sandbox.filesystem.deny_read)
    found = secrets_in_history(ws.root, extra)
    if not found.repository:
        return Check(name, True, "not a git repository: no history to check")
    if found.problem:
        return Check(name, False, f"could not check ({found.problem})")
    if not found.paths:
        return Check(name, True, "no file the sandbox hides appears in any commit")
    n = len(found.paths)
    shown = ", ".join(found.paths[:5]) + (f" and {n - 5} more" if n > 5 else "")
    is_, it, s = ("is", "it", "") if n == 1 else ("are", "them", "s")
    return Check(
        name,
        False,
        f"{shown} {is_} in this repository's history, so a command can still read {it} "
        "(`git show <commit>:<path>`) — the sandbox hides the file, not its history; remove "
        f"{it} from every commit (e.g. `git filter-repo --invert-paths --path <path>`, then "
        f"force-push) and rotate the secret{s}",
    )


def check_ripgrep() -> Check:
    from journal_agent.tools._rg import rg_binary
    from journal_agent.tools.base import ToolError

    try:
        return Check("ripgrep", True, rg_binary())
    except ToolError as exc:
        return Check("ripgrep", False, str(exc))


def check_api_key() -> Check:
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return Check("api key", True, "ANTHROPIC_API_KEY is set")
    return Check("api key", False, "ANTHROPIC_API_KEY is not set: agent runs cannot call the model")


def check_torch() -> Check:
    if importlib.util.find_spec("torch") is None:
        return Check("torch", False, "not installed (pip install torch)")
    try:
        import torch
    except Exception as exc:  # a broken install must not stop the other checks
        return Check("torch", False, f"fails to import: {exc}")
    cuda = torch.version.cuda
    build = f"CUDA {cuda} build" if cuda else "CPU-only build"
    if cuda and torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        return Check("torch", True, f"{torch.__version__}, {build}, {gpus} GPU(s)")
    return Check("torch", True, f"{torch.__version__}, {build}, no GPU visible")


def check_nvml() -> Check:
    try:
        import pynvml
    except ImportError:
        return Check("NVML", False, "nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return Check("NVML", False, f"not available ({exc}): measured GPU numbers need a driver")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    return Check("NVML", True, f"driver {driver}, {count} device(s)")


def check_search_by_meaning(root: Path) -> Check:
    """The model journal search embeds with, loaded and hash-checked as a search would."""
    from journal_agent.errors import UserError
    from journal_agent.journal.search.embeddings import Unavailable, get_embedder

    try:
        embedder = get_embedder(root)
    except (Unavailable, UserError) as exc:
        why = exc.message if isinstance(exc, UserError) else str(exc)
        return Check("search by meaning", False, f"off — {why}; search works by words only")
    info = embedder.info
    source = "packaged all-MiniLM-L6-v2" if info.packaged else str(info.path)
    return Check("search by meaning", True, f"{source}, weights {info.sha256[:12]}… checked")


def check_capture(root: Path) -> Check:
    """The Claude Code hooks the plugin registers and what the settings let them do."""
    import json

    from journal_agent.capture.settings import ENV_SWITCH, capture_settings
    from journal_agent.capture.store import waiting_count
    from journal_agent.paths import plugin_root

    try:
        hooks = json.loads((plugin_root() / "hooks" / "hooks.json").read_text(encoding="utf-8"))
        events = ", ".join(hooks["hooks"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Check("capture hooks", False, f"the plugin's hooks/hooks.json is unreadable ({exc})")
    on = capture_settings(root)
    if not any(on.values()):
        return Check("capture hooks", False, f"{events}: all off ({ENV_SWITCH}=0)")
    recall = "off"
    if on["recall"]:
        recall = "logged and injected" if on["recall_inject"] else "logged, not injected"
    parts = [
        f"capture {'on' if on['enabled'] else 'off'}",
        f"session-start line {'on' if on['session_start'] else 'off'}",
        f"recall {recall}",
        f"code recall {_touch(root, on['recall_touch'])}",
        f"session rows {'proposed' if on['session_row'] else 'off'}",
        f"inbox draft {'on' if on['draft'] else 'off'}",
        f"{_waiting(root, waiting_count)} moment(s) waiting",
    ]
    return Check("capture hooks", on["enabled"], f"{events}; {'; '.join(parts)}")


def _touch(root: Path, on: bool) -> str:
    """Whether PostToolUse and SubagentStart name the entries of the code touched."""
    from journal_agent.capture.touch import trusted

    if not on:
        return "off"
    if not trusted(str(root)):
        return "silent (git tracks the journal: a clone's; `journal-agent trust` to hear it)"
    return "on"


def _waiting(root: Path, count: Callable[[Path], int]) -> str:
    """The moments waiting; "?" when the inbox cannot be read (its own check names why)."""
    try:
        return str(count(root))
    except OSError:
        return "?"


def check_hook_failures(root: Path) -> Check:
    """The failures the hooks recorded in .journal/hooks.log (they fail open and quietly)."""
    from datetime import UTC, datetime, timedelta

    from journal_agent import confined
    from journal_agent.paths import state_dir

    try:
        data = confined.read(root, state_dir(root) / "hooks.log")
    except OSError as exc:  # a link or FIFO there: the hooks cannot log either
        return Check("hook failures", False, str(exc))
    if data is None:
        return Check("hook failures", True, "none recorded (.journal/hooks.log)")
    lines = data.decode("utf-8", "replace").splitlines()
    since = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = [line for line in lines if line[:20] >= since]
    if not recent:
        return Check("hook failures", True, f"none in the last day ({len(lines)} older)")
    return Check(
        "hook failures",
        False,
        f"{len(recent)} in the last day (.journal/hooks.log); the last: {recent[-1][:160]}",
    )


def check_optional() -> list[Check]:
    out = []
    for module, what in OPTIONAL.items():
        present = importlib.util.find_spec(module) is not None
        state = "installed" if present else "not installed"
        out.append(Check(f"optional: {module}", present, f"{state} — {what}"))
    return out
