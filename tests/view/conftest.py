"""A workspace the view shows (entries with live, moved, changed and missing references, a
hostile entry, a real trace and estimate, the seed ledger), the server as a real process, and
headless Chromium (Debian's, driven by Playwright) where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import CLI
from tests.entries import render_entry

REPO = Path(__file__).resolve().parents[2]
# The screenshots land in docs/img/ when asked (JOURNAL_AGENT_SCREENSHOTS=1), else in a
# temporary folder: a test run must not rewrite tracked files of the checkout it runs in.
IMG = (
    REPO / "docs" / "img"
    if os.environ.get("JOURNAL_AGENT_SCREENSHOTS")
    else Path(tempfile.gettempdir()) / "journal-agent-view-screenshots"
)
CHROMIUM = os.environ.get("JOURNAL_AGENT_CHROMIUM", "/usr/bin/chromium")

TRAIN = (
    "import torch\n\n\ndef train(model, batch):\n"
    "    loss = model(batch)\n    loss.backward()\n    return loss\n"
)
OPTIM = "def step(opt):\n    opt.step()\n    opt.zero_grad(set_to_none=True)\n"
SECRET = "API_KEY=sk-live-0123456789abcdef0123456789abcdef\n"
HOSTILE_TITLE = "Hostile Markup"


@dataclass
class Workspace:
    root: Path
    trace_id: str
    estimate_id: str
    ids: dict[str, str]  # short name -> entry id


def _append(cli: CLI, root: Path, text: str) -> str:
    done = cli("journal", "append", "-", "--force", "--json", "--root", str(root), input=text)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["entry"]


def build_workspace(root: Path, cli: CLI) -> Workspace:
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(TRAIN)
    (root / "src" / "optim.py").write_text(OPTIM)
    (root / "conf").mkdir()
    (root / "conf" / ".env").write_text(SECRET)
    trace = cli.json(
        "trace", "--model", "tiny-gpt2", "--batch", "2", "--seq", "32", "--root", str(root)
    )
    est = cli.json(
        "estimate", "--model", "llama-7b", "--gpus", "8", "--zero", "2", "--root", str(root)
    )
    ids = {}
    ids["zero"] = _append(
        cli,
        root,
        render_entry(
            "ZeRO Stage 2",
            "2026-11-20",
            context="Reading `src/train.py:5-6` and src/optim.py:2 and `conf/.env:1`.",
            question="Why does sharding gradients save memory?",
            intuition=f"The trace [m:{trace['record_id']}] splits the peak by category; the "
            f"estimate [m:{est['record_id']}] shows each step. Old code: `src/gone.py:1`.",
            tags="#zero #memory",
        ),
    )
    ids["accum"] = _append(
        cli,
        root,
        render_entry(
            "Gradient Accumulation",
            "2026-11-21",
            context="Reading `src/train.py:6`.",
            question="Why accumulate gradients over micro-batches?",
            intuition="Fewer optimizer steps for the same tokens.",
            tags="#memory #training",
            body="\n### 🔗 Related Concepts\n- **ZeRO Stage 2** (2026-11-20)\n",
        ),
    )
    ids["hostile"] = _append(
        cli,
        root,
        render_entry(
            HOSTILE_TITLE,
            "2026-11-22",
            context="<script>window.pwned = 'script'</script> and "
            "<img src=x onerror=\"window.pwned = 'img'\">",
            question="Does [this link](javascript:window.pwned='link') run?",
            intuition="It must not: [data](data:text/html,<script>alert(1)</script>) either.",
            tags="#security",
        ),
    )
    # The code moves on after the entries were written: a line inserted above train.py's
    # cited lines (moved), optim.py's line rewritten (changed).
    (root / "src" / "train.py").write_text("# a new first line\n" + TRAIN)
    (root / "src" / "optim.py").write_text(OPTIM.replace("opt.step()", "opt.step(closure)"))
    shutil.copy(
        REPO / "tests" / "learning" / "fixtures" / "seed_ledger.md", root / "learning_ledger.md"
    )
    _capture(root, trace["record_id"])
    return Workspace(root, trace["record_id"], est["record_id"], ids)


MOMENTS = (
    "Warm-up length is in steps, not epochs (src/train.py:6).",
    "set_to_none=True frees the gradients between steps.",
    "<script>window.pwned = 'moment'</script> is only text here.",
)


def _capture(root: Path, record_id: str) -> None:
    """Three moments in the inbox, as the Stop hook writes them."""
    from journal_agent.capture.store import append, new_moment

    append(
        root,
        [
            new_moment("insight", MOMENTS[0], files=[{"path": "src/train.py", "lines": [[6, 7]]}]),
            new_moment("measurement", MOMENTS[1], records=[record_id]),
            new_moment("insight", MOMENTS[2]),
        ],
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("view") / "project"
    return build_workspace(root, CLI())


@dataclass
class Server:
    url: str  # the opening address, with its token
    origin: str  # http://127.0.0.1:PORT
    token: str
    port: int
    process: subprocess.Popen[str]


def start_server(
    root: Path,
    *args: str,
    env: dict[str, str | None] | None = None,
    stderr: Path | None = None,
) -> Server:
    """``journal-agent view`` as a process; its stderr to the file ``stderr`` when given (a
    pipe nobody reads would stop a server that writes much there)."""
    proc = subprocess.Popen(
        CLI.command("view", "--no-open", "--root", str(root), *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr is None else stderr.open("w"),
        stdin=subprocess.DEVNULL,
        text=True,
        env=CLI.environment({"HOME": str(root.parent), **(env or {})}),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"(http://\S+)", line)
    if found is None:
        proc.kill()
        raise AssertionError(
            f"no address printed: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
    url = found.group(1)
    parts = urlsplit(url)
    token = parts.query.removeprefix("token=")
    return Server(url, f"{parts.scheme}://{parts.netloc}", token, parts.port or 0, proc)


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="module")
def server(workspace: Workspace) -> Iterator[Server]:
    running = start_server(
        workspace.root, env={"ANTHROPIC_API_KEY": None, "ANTHROPIC_AUTH_TOKEN": None}
    )
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium from the system's packages; skipped (with the reason) without it."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.dialogs = []  # type: ignore[attr-defined]
    tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    yield tab
    context.close()


def screenshot(page: object, name: str) -> None:
    """view-<name>.png: the pages as the user sees them, made by these tests (in docs/img/
    with JOURNAL_AGENT_SCREENSHOTS=1)."""
    IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMG / f"view-{name}.png"), full_page=False)  # type: ignore[attr-defined]
