"""The inbox of captured moments as a page (``journal_agent.capture``), and what its two
buttons do: accept (start ``/learn`` on the moment, as a background run) or dismiss.

Accepting runs ``journal-agent learn --background`` in a subprocess, exactly as the user would
type it: the run is the CLI's own (its checks, its permissions, its sandbox, its transcript),
the view only asks for it. The moment stays waiting until ``/learn`` marks it written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from markupsafe import Markup

from journal_agent.errors import UserError
from journal_agent.view import markdown
from journal_agent.view.site import Site, code_path, record_path, relative

PAGE = "inbox.html"


def page(site: Site) -> dict[str, Any]:
    from journal_agent.capture import read_inbox

    moments = []
    for moment in read_inbox(site.root):
        files = []
        for edit in moment.files:
            target = site.files.readable(edit.path)
            first = edit.lines[0] if edit.lines else None
            fragment = "" if first is None else f"#L{first[0]}-{first[1]}"
            href = relative(PAGE, code_path(target)) + fragment if target else None
            files.append((edit.spec(), href))
        moments.append(
            {
                "moment": moment,
                "html": Markup(markdown.render(moment.text, lambda _: None, lambda _: None)),
                "files": files,
                "records": [(r, relative(PAGE, record_path(r))) for r in moment.records],
            }
        )
    return {"moments": moments}


def topic(moment: Any) -> str:
    """What ``/learn`` is asked: the moment, and to mark it written when the entry is in."""
    where = ", ".join(f.spec() for f in moment.files)
    cited = " ".join(f"[m:{r}]" for r in moment.records)
    return (
        f"the captured moment {moment.id} from the inbox (mark it written when the entry is "
        f"appended): {moment.text}" + (f" (files: {where})" if where else "") + f" {cited}"
    ).strip()


def accept(site: Site, moment_id: str) -> dict[str, Any]:
    """Start ``/learn`` on a waiting moment in the background; the run's status."""
    from journal_agent.capture import find

    moment = _find(find, site, moment_id)
    command = [sys.executable, "-m", "journal_agent", "learn", "--background", "--json"]
    command += ["--root", str(site.root), "--", topic(moment)]
    done = subprocess.run(
        command,
        cwd=site.root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        raise UserError(message.removeprefix("error: ") or "/learn could not be started.")
    status = json.loads(done.stdout)
    return {"id": moment.id, "run": status.get("id"), "status": status.get("status")}


def dismiss(site: Site, moment_id: str) -> dict[str, Any]:
    from journal_agent.capture import dismiss as drop
    from journal_agent.capture import find

    moment = _find(find, site, moment_id)
    drop(site.root, moment.id)
    return {"id": moment.id, "dismissed": True}


def _find(find: Any, site: Site, moment_id: str) -> Any:
    # Only a full id: a position or a prefix could name another moment by the time it acts.
    try:
        moment = find(site.root, moment_id)
    except KeyError as exc:
        raise UserError(f"{exc.args[0]}; reload the inbox.") from None
    if moment.id != moment_id:
        raise UserError(f"no waiting moment has the id {moment_id!r}; reload the inbox.")
    return moment
