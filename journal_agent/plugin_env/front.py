"""The MCP server Claude Code starts (``.mcp.json``): a standard-library front that answers at
once, in every state, and hands tool calls to the full server (``journal-agent mcp``).

Claude Code records a server that fails to start and skips it for a while
(``~/.claude/mcp-needs-auth-cache.json``), and waits for every server at the start of a headless
session. So the front answers ``initialize`` and ``tools/list`` itself, within milliseconds,
from the tool list the package ships (``tools.json``: what ``journal-agent mcp`` lists, trimmed
for tokens), whether or not the environment exists yet. The full server (mcp, pydantic, the
tools) starts on the first tool call, and from then on every request and notification passes
through unchanged, both ways.

While the environment is prepared (first use, a rebuild) the list also holds
``JournalAgentStatus``, which says what is happening and how long it should take; a tool called
meanwhile waits for the preparation (with progress notifications when the client asked for
them) and then runs. Once the environment is ready the front sends
``notifications/tools/list_changed`` and the status tool is gone. A profiling tool called
before torch is there waits the same way while torch is installed. Should the full server list
other tools than the shipped list (another version on PATH), its list is taken and announced.
"""

from __future__ import annotations

import _thread  # (threading imports functools and collections: ~4 ms a session start)
import os
import sys
import time

from journal_agent.lightjson import dumps, loads
from journal_agent.plugin_env.env import (
    LAUNCHED,
    Env,
    condition,
    expected,
    failure,
    foreign_command,
    locate,
    preparing,
    start,
    torch_state,
    usable,
    wait,
)

TYPE_CHECKING = False  # (typing is an import of its own)
if TYPE_CHECKING:
    import subprocess
    import threading

STATUS = "JournalAgentStatus"
TORCH_TOOLS = {"MemoryTrace", "MemoryProfile", "DeviceInfo"}
PROTOCOLS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
WAIT_LIMIT = 1800  # seconds a tool call waits for a preparation
POLL = 2.0  # seconds between looks at a preparation, for list_changed


def shipped() -> dict:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools.json")) as f:
        return loads(f.read())  # type: ignore[return-value]  # our own file: an object


class Front:
    def __init__(self, env: Env) -> None:
        self.env = env
        listing = shipped()
        self.tools: list[dict] = listing["tools"]
        self.instructions: str = listing["instructions"]
        self.version: str = listing["version"]
        self.foreign = foreign_command()
        self.out = _thread.allocate_lock()  # (what threading.Lock is)
        self.child: subprocess.Popen | None = None
        self.child_lock = _thread.allocate_lock()
        self.ours: dict[str, dict] = {}  # our own requests to the child: id -> response
        self.ours_ready: threading.Condition | None = None  # made with the child
        self.pending: dict[str, object] = {}  # forwarded tools/call ids -> the original id
        self.init_params: dict = {}
        self.status_listed = False
        self.announce_lock = _thread.allocate_lock()

    # -- the client's side ------------------------------------------------------------------

    def send(self, message: dict) -> None:
        line = dumps(message)
        with self.out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def serve(self) -> int:
        for raw in sys.stdin.buffer:
            if raw.strip():
                self.handle(raw)
        self.stop_child()
        return 0

    def handle(self, raw: bytes) -> None:
        try:
            message = loads(raw)
        except ValueError:
            self.error(None, -32700, "Parse error: the line is not valid JSON")
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.error(None, -32600, "Invalid Request: the line is not a JSON-RPC 2.0 object")
            return
        method = message.get("method")
        if method is None:  # a response to a request of the child's
            self.forward(message)
        elif "id" not in message:
            if method == "notifications/cancelled" and self.child is not None:
                self.forward(message)
        elif method == "initialize":
            self.initialize(message)
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": self.listed()}})
        elif method == "tools/call":
            # Imported here, in the main thread (threading takes the thread that imports it for
            # the main one), once a tool is called: a session start never pays for it.
            import threading

            threading.Thread(target=self.call, args=(message,), daemon=True).start()
        else:
            self.error(message["id"], -32601, f"Method not found: {method}")

    def error(self, id_: object, code: int, text: str) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": text}})

    def initialize(self, message: dict) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        self.init_params = params
        asked = params.get("protocolVersion")
        instructions = self.instructions
        if not self.ready_for_tools():
            instructions += (
                f" Its environment is being prepared ({expected(self.env)}); the tools wait "
                f"for it, and {STATUS} says how far it is."
            )
        result = {
            "protocolVersion": asked if asked in PROTOCOLS else PROTOCOLS[-1],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "journal", "version": self.version},
            "instructions": instructions,
        }
        self.send({"jsonrpc": "2.0", "id": message.get("id"), "result": result})

    def ready_for_tools(self) -> bool:
        return self.foreign is not None or usable(self.env)

    def listed(self) -> list[dict]:
        if self.ready_for_tools():
            self.status_listed = False
            return self.tools
        if not self.status_listed:
            self.status_listed = True
            _thread.start_new_thread(self.announce_when_ready, ())  # (a daemon thread)
        return [*self.tools, status_tool()]

    def announce_when_ready(self) -> None:
        while self.status_listed and not self.ready_for_tools():
            time.sleep(POLL)
        self.announce()

    def announce(self) -> None:
        """Say list_changed once the environment is ready, if the status tool was listed: from
        the poller, or at once from a call that waited for the preparation (so the client has
        the full list before that call's result, not up to POLL seconds later)."""
        with self.announce_lock:
            if not self.status_listed or not self.ready_for_tools():
                return
            self.status_listed = False
        self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    # -- a tool call --------------------------------------------------------------------------

    def call(self, message: dict) -> None:
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if name == STATUS:
            self.result(message, self.status_text(), error=False)
            return
        torch = name in TORCH_TOOLS and self.foreign is None
        problem = self.prepare(message, torch=False) or (torch and self.prepare(message, True))
        if problem:
            self.result(message, problem, error=True)
            return
        self.announce()
        try:
            self.start_child(restart=torch and self.torch_arrived)
        except OSError as exc:
            self.result(message, f"journal-agent's server could not start ({exc}).", error=True)
            return
        self.pending[dumps(message.get("id"))] = message.get("id")
        self.forward(message)

    torch_arrived = False  # torch was installed after the full server started: restart it

    def prepare(self, message: dict, torch: bool) -> str:
        """Wait for the environment (or torch in it) to be ready, starting its preparation if
        none runs; "" when ready, else the sentence to answer with."""
        if self.foreign is not None or usable(self.env, torch):
            return ""
        said = failure(self.env, torch)
        if said:
            return said
        word, _ = condition(self.env)
        if not preparing(self.env):
            start(self.env, torch=torch, rebuild=word == "broken")
        token = (params_meta(message) or {}).get("progressToken")
        what = "torch for the profiling tools" if torch else "journal-agent's environment"
        last = [0.0]

        def tick(seconds: float) -> None:
            if token is not None and seconds - last[0] >= 5:
                last[0] = seconds
                text = f"preparing {what}: {int(seconds)} s so far, {expected(self.env, torch)}"
                progress = {"progressToken": token, "progress": int(seconds), "message": text}
                self.send(
                    {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
                )

        outcome = wait(self.env, torch=torch, limit=WAIT_LIMIT, tick=tick)
        if outcome == "ready":
            self.torch_arrived = self.torch_arrived or torch
            return ""
        return failure(self.env, torch) or (
            f"preparing {what} {outcome} (log: {self.env.log}); "
            "`journal-agent setup --rebuild` tries again."
        )

    def status_text(self) -> str:
        word, why = condition(self.env)
        log = f"log: {self.env.log}"
        if self.ready_for_tools():
            torch = torch_state(self.env)
            note = (
                "" if torch == "ready" else " (torch is installed when a profiling tool first asks)"
            )
            return f"journal-agent's environment is ready{note}; every tool works."
        if word == "preparing":
            return (
                f"journal-agent is preparing its environment (step: {why or 'starting'}), "
                f"{expected(self.env)}; calling any of its tools now waits for it. {log}"
            )
        if word == "failed":
            return failure(self.env)
        return (
            f"journal-agent's environment is {word}{': ' + why if why else ''}; the first tool "
            f"call prepares it ({expected(self.env)}). {log}"
        )

    def result(self, message: dict, text: str, *, error: bool) -> None:
        result = {"content": [{"type": "text", "text": text}], "isError": error}
        self.send({"jsonrpc": "2.0", "id": message.get("id"), "result": result})

    # -- the full server --------------------------------------------------------------------

    def start_child(self, *, restart: bool) -> None:
        with self.child_lock:
            if restart and self.child is not None:
                self.stop_child()
                self.torch_arrived = False
            if self.child is not None and self.child.poll() is None:
                return
            import subprocess  # (only once a tool is called: a session start never pays it)
            import threading  # (imported already, by the call's thread)

            if self.ours_ready is None:
                self.ours_ready = threading.Condition()

            command = self.foreign or self.env.command
            self.child = subprocess.Popen(
                [command, "mcp"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, LAUNCHED: "1"},
            )
            threading.Thread(target=self.relay, args=(self.child,), daemon=True).start()
            reply = self.ask("initialize", self.init_params or default_init())
            if "result" not in reply:  # the client's own parameters, as the server reads them
                reply = self.ask("initialize", default_init())
            if "result" not in reply:
                raise OSError(f"it answered initialize with {reply.get('error')}")
            self.write_child({"jsonrpc": "2.0", "method": "notifications/initialized"})
            listed = self.ask("tools/list", {}).get("result", {}).get("tools")
            if isinstance(listed, list) and listed != self.tools:
                self.tools = listed  # another version's tools: announce them
                self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def ask(self, method: str, params: dict) -> dict:
        id_ = f"front-{method}-{time.monotonic_ns()}"
        self.write_child({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        assert self.ours_ready is not None  # (made before the child started)
        with self.ours_ready:
            while id_ not in self.ours:
                if self.child is None or self.child.poll() is not None:
                    raise OSError("it exited while starting")
                self.ours_ready.wait(0.5)
            return self.ours.pop(id_)

    def write_child(self, message: dict) -> None:
        child = self.child
        if child is None or child.stdin is None:
            raise OSError("it is not running")
        child.stdin.write(dumps(message).encode() + b"\n")
        child.stdin.flush()

    def forward(self, message: dict) -> None:
        try:
            self.write_child(message)
        except OSError:
            if message.get("method") == "tools/call":
                self.pending.pop(dumps(message.get("id")), None)
                self.result(
                    message, "journal-agent's server is not running; try again.", error=True
                )

    def relay(self, child: subprocess.Popen) -> None:
        """Everything the child writes goes to the client, except the answers to our own
        requests; when it ends, the calls it had not answered get an error result."""
        assert child.stdout is not None
        for raw in child.stdout:
            try:
                message = loads(raw)
            except ValueError:
                continue
            if not isinstance(message, dict):
                message = {"method": "?"}  # (passed on as it came: not ours to judge)
            id_ = message.get("id")
            if isinstance(id_, str) and id_.startswith("front-") and "method" not in message:
                assert self.ours_ready is not None
                with self.ours_ready:
                    self.ours[id_] = message
                    self.ours_ready.notify_all()
                continue
            if "method" not in message:
                self.pending.pop(dumps(id_), None)
            with self.out:
                sys.stdout.write(raw.decode("utf-8", "replace").rstrip("\n") + "\n")
                sys.stdout.flush()
        code = child.wait()
        assert self.ours_ready is not None
        with self.ours_ready:
            self.ours_ready.notify_all()
        for key in list(self.pending):
            original = self.pending.pop(key, None)
            text = (
                f"journal-agent's server stopped (exit status {code}); the next call starts it "
                "again."
            )
            self.result({"id": original}, text, error=True)

    def stop_child(self) -> None:
        child, self.child = self.child, None
        if child is None:
            return
        import subprocess  # (imported already: the child is one of its Popens)

        try:
            if child.stdin is not None:
                child.stdin.close()
            child.wait(timeout=3)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()


def params_meta(message: dict) -> dict | None:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def default_init() -> dict:
    return {
        "protocolVersion": PROTOCOLS[-1],
        "capabilities": {},
        "clientInfo": {"name": "journal-agent-front", "version": "1"},
    }


def status_tool() -> dict:
    return {
        "name": STATUS,
        "description": (
            "What journal-agent is preparing (its environment, on first use) and how long it "
            "should take. Its other tools wait for it when called; call this to tell the user."
        ),
        "inputSchema": {"type": "object", "properties": {}},
    }


def serve() -> int:
    data = os.environ.get("CLAUDE_PLUGIN_DATA")
    if data:  # a Python runs it now: the note degraded.sh left for doctor no longer holds
        try:  # noqa: SIM105 (contextlib is one more import at every session start)
            os.unlink(os.path.join(data, "mcp-degraded"))
        except OSError:
            pass
    import _signal  # pyright: ignore[reportMissingImports]  # (signal: the same behind an enum, ~2.5 ms)

    # Claude Code ends its servers with SIGINT (then SIGTERM): leave at once, without
    # KeyboardInterrupt's traceback in its logs. The full server, if any, reads the end of its
    # input as ours closes, and ends too.
    for number in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(number, lambda *_: os._exit(0))
    return Front(locate()).serve()
