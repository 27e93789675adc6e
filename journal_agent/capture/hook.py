"""The Claude Code hooks: one entry (``hooks/capture.py EVENT``) for every event we register.

Rules every handler keeps (docs/plugin.md, "Hooks"):

- no model call, no ``claude`` child, nothing heavy: stdlib only, run as ``python3 -I -S``;
- fail open and quiet: whatever goes wrong (garbage on stdin, a missing transcript, a read-only
  or full disk), the hook exits 0, prints nothing, and leaves one line in ``.journal/hooks.log``;
- what it prints reaches the model, so only SessionStart (one line when something is due),
  UserPromptSubmit (related entries, when the user turned that on), PostToolUse and
  SubagentStart (the entries that explain the code touched or handed over) print at all;
- anything the hooks start carries ``JOURNAL_AGENT_HOOK=1``, and a hook that sees it does
  nothing: no hook of ours can fire another;
- each event imports only what it needs, and none imports ``json``, ``re`` or ``pathlib``
  unless its input calls for it (docs/plugin.md, "What it costs"): the project root is a
  ``str``, JSON goes through :mod:`journal_agent.lightjson`;
- every file of ours is written, read, listed, locked and removed through
  :mod:`journal_agent.confined` from the project root: a link a cloned repository committed
  under ``.journal/`` (``inbox.jsonl -> ~/.bashrc``, ``capture/ended -> ~/.ssh``) is never
  followed; the hook logs the refusal and goes on.
"""

from __future__ import annotations

import os
import sys

from journal_agent import confined
from journal_agent.capture.settings import GUARD, capture_settings
from journal_agent.capture.store import now_utc
from journal_agent.lightjson import dumps, loads

TYPE_CHECKING = False  # (typing is one more import for every hook)
if TYPE_CHECKING:
    from typing import IO

MAX_STDIN = 8 << 20  # bytes: a last_assistant_message is rarely over a few hundred KB
LOG_LIMIT = 64 << 10  # bytes of hooks.log before it is rotated to hooks.log.1
OUR_AGENT = "learning-journal"  # its output is the journal itself, not a moment


def main(argv: list[str]) -> int:
    """Run the handler for ``argv[0]``; always 0."""
    event = argv[0] if argv else ""
    if os.environ.get(GUARD) and event != "refresh":
        return 0  # started, directly or not, by one of our hooks
    root = os.path.abspath(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    try:
        if event == "refresh":  # the detached child SessionEnd/SessionStart start
            _refresh(root)
            return 0
        payload = _read_payload()
        cwd = payload.get("cwd")
        if not os.environ.get("CLAUDE_PROJECT_DIR") and isinstance(cwd, str) and cwd:
            root = os.path.abspath(cwd)
        handler = HANDLERS.get(event)
        if handler is None:
            raise ValueError(f"unknown hook event {event!r}")
        out = handler(root, payload)
        if out:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
    except Exception as exc:  # fail open: the session goes on whatever happened here
        log(root, event, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, BrokenPipeError):
            # Claude Code stopped reading (a timeout): the flush at exit would fail again and
            # make the exit status 120; send what is left to /dev/null instead.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _read_payload() -> dict[str, object]:
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    if len(raw) > MAX_STDIN:
        raise ValueError(f"stdin is over {MAX_STDIN >> 20} MB; ignored")
    payload = loads(raw.decode("utf-8", "replace"))
    if not isinstance(payload, dict):
        raise ValueError("stdin is not a JSON object")
    return payload


def log(root: str, event: str, message: str) -> None:
    """One line in ``.journal/hooks.log`` (rotated at LOG_LIMIT); never raises."""
    try:
        path = os.path.join(".journal", "hooks.log")
        _rotate(root, path, LOG_LIMIT)
        now = now_utc()
        line = " ".join(f"{now} {event or '-'} {message}".split())[:400]
        confined.append(root, path, line + "\n")
    except Exception:
        pass  # a read-only or full disk, a link planted there: nowhere to say it (doctor does)


def _rotate(root: str, path: str, limit: int) -> None:
    """Move ``path`` to ``path.1`` once it is over ``limit`` bytes."""
    st = confined.lstat(root, path)
    if st is not None and st.st_size > limit:
        confined.rename(root, path, path + ".1")


# -- handlers ----------------------------------------------------------------------------------


def on_stop(root: str, payload: dict[str, object]) -> str:
    if not capture_settings(root)["enabled"]:
        return ""
    from journal_agent.capture.moments import capture_turn

    capture_turn(root, payload, subagent=False, log=lambda m: log(root, "Stop", m))
    return ""


def on_subagent_stop(root: str, payload: dict[str, object]) -> str:
    if str(payload.get("agent_type") or "").endswith(OUR_AGENT):
        return ""
    if not capture_settings(root)["enabled"]:
        return ""
    from journal_agent.capture.moments import capture_turn

    capture_turn(root, payload, subagent=True, log=lambda m: log(root, "SubagentStop", m))
    return ""


def on_session_start(root: str, payload: dict[str, object]) -> str:
    if payload.get("agent_id") or payload.get("agent_type"):
        return ""  # a sub-agent: the main thread already has the line
    _heartbeat()
    settings = capture_settings(root)
    trust = _trust_line(root)
    if not settings["session_start"]:
        return trust
    from journal_agent.capture import status

    if status.needs_refresh(root) or _sessions_ended(root):
        spawn_detached(root, "refresh")
    parts = (tools_status(), status.session_start_line(root), trust)
    return " ".join(part for part in parts if part)


def _trust_line(root: str) -> str:
    """One sentence when the project's .journal/settings.json is left out until approved."""
    from journal_agent.capture.settings import settings_ignored

    if not settings_ignored(root):
        return ""
    return (
        "journal-agent ignores this project's .journal/settings.json until the user approves it "
        "(its capture switches stay at their defaults): the user reads it and runs "
        "`journal-agent trust` in a terminal of their own."
    )


def _heartbeat() -> None:
    """Note in the plugin's data folder that the hooks ran, and with which Python; `journal-agent
    doctor` reads it to tell hooks that never ran since install (and why) from quiet ones."""
    data = os.environ.get("CLAUDE_PLUGIN_DATA")
    if not data or not os.path.isdir(data):
        return
    version = ".".join(str(n) for n in sys.version_info[:3])
    try:  # (outside the workspace, but through the room all the same: no link followed)
        for stale in ("hooks-no-python3", "hooks-python-too-old"):
            confined.unlink(data, stale)
        note = f"{now_utc()} python {version} {sys.executable}\n"
        confined.replace(data, "hooks-ran", note, durable=False)
    except OSError:
        pass  # a read-only home: doctor says it cannot tell


def _sessions_ended(root: str) -> bool:
    """Whether a session ended without its detached child having proposed its row yet."""
    from journal_agent.capture.session import ended_dir

    try:
        return bool(confined.listdir(root, ended_dir(root)))
    except OSError:
        return False  # (a link there is refused by the child too: nothing to start it for)


def tools_status() -> str:
    """One sentence while the plugin's environment is not ready ("" when it is, or when the
    user's own ``journal-agent`` is on PATH), starting its preparation if none runs: a session
    start is one of the two things that may (a tool call is the other). A few ``stat`` calls
    when it is ready; journal_agent/plugin_env/env.py."""
    if not os.environ.get("CLAUDE_PLUGIN_ROOT"):
        return ""  # not a plugin Claude Code runs: nothing to prepare
    from journal_agent.plugin_env import env as plugin_env

    if plugin_env.foreign_command():
        return ""
    env = plugin_env.locate()
    word, why = plugin_env.condition(env)
    if word == "ready":
        return ""
    if word == "failed":
        return plugin_env.failure(env)
    if word != "preparing":
        plugin_env.start(env, rebuild=word == "broken")
    if word == "stale":
        return ""  # it still runs; the new dependencies come in the background
    took = plugin_env.expected(env)
    if word == "broken":
        return (
            f"journal-agent: its environment was broken ({why}); rebuilding it ({took}; log: "
            f"{env.log}); its tools wait for it."
        )
    return (
        f"journal-agent: preparing its environment (first use, {took}; log: {env.log}); its "
        "tools wait for it. To run `journal-agent` in your own terminal: "
        f"{plugin_env.path_hint(env)}"
    )


def on_prompt(root: str, payload: dict[str, object]) -> str:
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or prompt.lstrip().startswith("<task-notification>"):
        return ""  # a background agent reporting back is not the user asking
    settings = capture_settings(root)
    if not settings["recall"] or confined.lstat(root, ".journal/index.sqlite") is None:
        return ""
    from journal_agent.capture.recall import context_line, related

    hits = related(root, prompt)
    _log_recall(root, payload, hits)
    return context_line(hits) if hits and settings["recall_inject"] else ""


def on_session_end(root: str, payload: dict[str, object]) -> str:
    # Claude Code gives every SessionEnd hook about 1.5 s in all. Inline, only a rename marks
    # the session ended; the row's proposal (it reads the search index) and the stale
    # references (it hashes the referenced code) are the detached child's.
    session_id = payload.get("session_id")
    ended = False
    if capture_settings(root)["session_row"] and isinstance(session_id, str):
        from journal_agent.capture.session import end

        ended = end(root, session_id)
    if ended or confined.lstat(root, ".journal/refs.jsonl") is not None:
        spawn_detached(root, "refresh")
    return ""


def on_tool_use(root: str, payload: dict[str, object]) -> str:
    """PostToolUse on Read, Edit, MultiEdit, Write and Grep: the entries that explain the
    lines touched (capture/touch.py), as ``additionalContext``."""
    if not capture_settings(root)["recall_touch"]:
        return ""
    if confined.lstat(root, ".journal/refs.jsonl") is None:
        return ""  # no entry cites code here: nothing to read
    from journal_agent.capture import touch

    if not touch.trusted(root):
        return ""
    text = touch.speak(root, payload)
    return _context("PostToolUse", text) if text else ""


def on_subagent_start(root: str, payload: dict[str, object]) -> str:
    """The plugin's own agents start with what the journal says of the files and topics they
    were handed (capture/handed.py), so they cite it rather than write it again."""
    from journal_agent.capture.handed import OUR_AGENTS

    if not str(payload.get("agent_type") or "").endswith(OUR_AGENTS):
        return ""  # another agent: nothing to read for it
    if not capture_settings(root)["recall_touch"]:
        return ""
    if confined.lstat(root, ".journal/refs.jsonl") is None and (
        confined.lstat(root, ".journal/index.sqlite") is None
    ):
        return ""
    from journal_agent.capture import handed, touch

    if not touch.trusted(root):
        return ""
    text = handed.brief(root, payload)
    return _context("SubagentStart", text) if text else ""


def _context(event: str, text: str) -> str:
    return dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


HANDLERS = {
    "PostToolUse": on_tool_use,
    "SubagentStart": on_subagent_start,
    "Stop": on_stop,
    "SubagentStop": on_subagent_stop,
    "SessionStart": on_session_start,
    "UserPromptSubmit": on_prompt,
    "SessionEnd": on_session_end,
}


def _log_recall(root: str, payload: dict[str, object], hits: list[dict[str, object]]) -> None:
    path = os.path.join(".journal", "capture", "recall.jsonl")
    _rotate(root, path, LOG_LIMIT * 16)
    now = now_utc()
    line = {
        "time": now,
        "session_id": payload.get("session_id"),
        "prompt_id": payload.get("prompt_id"),
        "hits": hits,
    }
    confined.append(root, path, dumps(line) + "\n")


# -- the detached child -------------------------------------------------------------------------


def spawn_detached(root: str, task: str) -> None:
    """Start ``capture.py TASK`` in its own session with stdio on /dev/null and return at once;
    the hook does not wait for it. It carries the recursion guard."""
    script = os.path.abspath(sys.argv[0])
    if not script.endswith(".py"):
        return
    argv = [sys.executable, "-I", "-S", script, task]
    env = {**os.environ, GUARD: "1", "CLAUDE_PROJECT_DIR": str(root)}
    null = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0)] + [
        (os.POSIX_SPAWN_DUP2, 0, fd) for fd in (1, 2)
    ]
    try:
        # posix_spawn (vfork and exec) rather than fork: the hook does not copy itself first.
        os.posix_spawn(sys.executable, argv, env, file_actions=null, setsid=True)
        return  # the parent exits soon; init reaps the child
    except (AttributeError, NotImplementedError):
        pass  # no posix_spawn, or no setsid in it: fork
    if not hasattr(os, "fork"):
        return
    if os.fork():
        return
    try:
        os.setsid()
        fd = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(fd, target)
        os.execve(sys.executable, argv, env)
    finally:
        os._exit(0)


def _refresh(root: str) -> None:
    """The detached child: bring PostToolUse's index of cited files and titles up to date,
    propose the 📚 rows of the sessions that ended (after any other child at it, so that none
    is missed), then recompute the cached status unless another child is at that already;
    within its CPU time and memory limits (capture/limits.py)."""
    from journal_agent.capture import limits

    memory_mb = limits.bound_self(lambda message: log(root, "refresh", message))
    try:
        _refresh_bounded(root)
    except MemoryError:
        log(root, "refresh", limits.memory_message(memory_mb))


def _refresh_bounded(root: str) -> None:
    from journal_agent.capture import refs_by_file, session, status
    from journal_agent.journal.search import titles_file

    refs_by_file.refresh(root)  # (PostToolUse's index of cited files, whole again)
    titles_file.ensure(root)  # (and its titles, for an index that has them)
    folder = status.capture_dir(root)
    if confined.lstat(root, session.ended_dir(root)) is not None:
        lock = _flock(root, os.path.join(folder, "propose.lock"), wait=True)
        if lock is not None:
            with lock:
                session.propose_ended(root)
    if not status.needs_refresh(root):
        return
    lock = _flock(root, os.path.join(folder, "refresh.lock"), wait=False)
    if lock is not None:
        with lock:
            if status.needs_refresh(root):
                status.refresh(root)


def _flock(root: str, path: str, *, wait: bool) -> IO[bytes] | None:
    """``path`` (created, through the room: never through a link, never truncated) opened and
    exclusively locked, or None when ``wait`` is False and another process holds it. (Not
    journal_agent.locks: its module imports pathlib and logging, and the detached child runs
    on the standard library's lightest parts, as the hooks do.)"""
    import fcntl

    f = os.fdopen(confined.open_lock(root, path), "rb")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        f.close()
        return None
    return f
