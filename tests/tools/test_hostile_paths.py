"""Property tests: generated hostile paths never get a tool outside the workspace.

A fixed workspace is laid with traps (symlinks out, relative and absolute, chains, loops, a
dangling link pointing out, a sibling whose name extends the root's); hypothesis builds paths
from ``..`` runs, absolute prefixes, those traps, arbitrary unicode, NUL bytes and surrogates.
For every path: either a refusal, or a result whose *kernel* resolution lies inside the root;
Read never shows the secret; Write and Edit never change anything outside.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal_agent.tools.base import ToolContext, ToolError
from journal_agent.tools.confined_paths import resolve_path
from journal_agent.tools.edit import Edit
from journal_agent.tools.glob import Glob
from journal_agent.tools.grep import Grep
from journal_agent.tools.permissions import PermissionPolicy
from journal_agent.tools.read import Read
from journal_agent.tools.read_tracking import ReadTracker
from journal_agent.tools.write import Write

SECRET = "TOPSECRET-hostile"


class Layout:
    def __init__(self, base: Path) -> None:
        self.base = Path(os.path.realpath(base))
        self.ws = self.base / "ws"
        self.outside = self.base / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.base / "ws-evil").mkdir()
        (self.base / "ws-evil" / "secret.txt").write_text(SECRET + "\n")
        ws = self.ws
        (ws / "inside").mkdir(parents=True)
        (ws / "inside" / "file.txt").write_text("fine\n")
        (ws / "sub").mkdir()
        (ws / "é 日本").mkdir()
        (ws / "sub" / "up").symlink_to("../..")  # -> base
        (ws / "link_out").symlink_to(self.outside)  # absolute, out
        (ws / "rel_out").symlink_to("../outside")  # relative, out
        (ws / "c1").symlink_to("c2")  # chain c1 -> c2 -> sub/c3 -> ../../outside
        (ws / "c2").symlink_to("sub/c3")
        (ws / "sub" / "c3").symlink_to("../../outside")
        (ws / "loop_a").symlink_to("loop_b")
        (ws / "loop_b").symlink_to("loop_a")
        (ws / "dangle").symlink_to(self.outside / "created.txt")
        (ws / "ok_link").symlink_to("inside")
        (ws / "sneaky").symlink_to("inside/../../ws-evil")

    def outside_snapshot(self) -> dict[str, bytes | str]:
        """Everything under base except the workspace: names, contents, link targets."""
        snap: dict[str, bytes | str] = {}
        for dirpath, dirnames, filenames in os.walk(self.base):
            if Path(dirpath) == self.base:
                dirnames[:] = [d for d in dirnames if d != "ws"]
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                rel = str(p.relative_to(self.base))
                if p.is_symlink():
                    snap[rel] = "-> " + os.readlink(p)
                elif p.is_file():
                    snap[rel] = p.read_bytes()
                else:
                    snap[rel] = "dir"
        return snap


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return Layout(tmp_path_factory.mktemp("hostile"))


TRAPS = [
    "..",
    ".",
    "",
    "inside",
    "file.txt",
    "sub",
    "up",
    "link_out",
    "rel_out",
    "c1",
    "c2",
    "c3",
    "loop_a",
    "dangle",
    "ok_link",
    "sneaky",
    "é 日本",
    "secret.txt",
    "outside",
    "ws",
    "ws-evil",
    "created.txt",
    "new",
]


def prefixes(layout: Layout) -> list[str]:
    return [
        "",
        "./",
        "/",
        "//",
        "~/",
        "~root/",
        "/tmp/",
        "/etc/",
        f"{layout.ws}/",
        f"{layout.base}/",
        f"{layout.outside}/",
        f"{layout.ws}-evil/",
        f"{layout.ws}/../",
    ]


component = st.one_of(
    st.sampled_from(TRAPS),
    st.text(min_size=1, max_size=6),  # any unicode: "/", NUL, surrogates, control characters
    st.integers(1, 8).map(lambda n: "/".join([".."] * n)),
)


@st.composite
def hostile_path(draw: st.DrawFn, layout: Layout) -> str:
    prefix = draw(st.sampled_from(prefixes(layout)))
    parts = draw(st.lists(component, min_size=0, max_size=7))
    path = prefix + "/".join(parts)
    if draw(st.booleans()) and path:
        at = draw(st.integers(0, len(path)))
        path = (
            path[:at]
            + draw(st.sampled_from(["\x00", "\ud800", "/..", "\\..", "%2e%2e"]))
            + path[at:]
        )
    return path


def assert_confined(layout: Layout, path: Path) -> None:
    ws = str(layout.ws)
    assert str(path) == ws or str(path).startswith(ws + "/"), path
    kernel = os.path.realpath(path)  # what open() would actually reach
    assert kernel == ws or kernel.startswith(ws + "/"), (path, kernel)


SETTINGS = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data())
def test_resolved_paths_never_leave_the_workspace(layout: Layout, data: st.DataObject) -> None:
    file_path = data.draw(hostile_path(layout))
    try:
        resolved = resolve_path(layout.ws, file_path)
    except ToolError as exc:
        assert str(exc)  # a message for the model, never empty
        return
    assert_confined(layout, resolved)


def run_every_tool(layout: Layout, file_path: str, *, with_policy: bool = False) -> None:
    before = layout.outside_snapshot()
    # bypassPermissions: the policy allows everything, so only confinement stands in the way.
    policy = PermissionPolicy(layout.ws, mode="bypassPermissions") if with_policy else None
    ctx = ToolContext(root=layout.ws, policy=policy, reads=ReadTracker())
    read = Read().call(ctx, {"file_path": file_path})
    assert SECRET not in read.content
    write = Write().call(ctx, {"file_path": file_path, "content": "PWNED\n"})
    edit = Edit().call(ctx, {"file_path": file_path, "old_string": "", "new_string": "PWNED\n"})
    edit2 = Edit().call(ctx, {"file_path": file_path, "old_string": "fine", "new_string": "PWNED"})
    # Grep and Glob take the path as the directory (or file) to search.
    grep = Grep().call(ctx, {"pattern": "TOPSECRET", "path": file_path, "output_mode": "content"})
    glob = Glob().call(ctx, {"pattern": "**/secret.txt", "path": file_path})
    for result in (read, write, edit, edit2, grep):
        assert isinstance(result.content, str)
        assert SECRET not in result.content
    if not glob.is_error and glob.content != "No files found":
        for line in glob.content.splitlines():  # workspace-relative paths, each really inside
            assert_confined(layout, layout.ws / line)
    assert layout.outside_snapshot() == before


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_tools_never_read_or_change_anything_outside(layout: Layout, data: st.DataObject) -> None:
    run_every_tool(layout, data.draw(hostile_path(layout)), with_policy=data.draw(st.booleans()))


KNOWN_TRAPS = [
    "link_out/secret.txt",
    "rel_out/secret.txt",
    "c1/secret.txt",
    "c2/secret.txt",
    "sub/c3/secret.txt",
    "sub/up/outside/secret.txt",
    "sub/up/ws-evil/secret.txt",
    "sneaky/secret.txt",
    "ok_link/../link_out/secret.txt",
    "dangle",
    "loop_a",
    "../outside/secret.txt",
    "inside/../../outside/secret.txt",
    "@ws-evil/secret.txt",
    "@outside/secret.txt",
    "@outside/new.txt",
]


@pytest.mark.parametrize("file_path", KNOWN_TRAPS)
def test_known_traps_through_every_tool(layout: Layout, file_path: str) -> None:
    file_path = file_path.replace("@", f"{layout.base}/")
    with pytest.raises(ToolError):
        resolve_path(layout.ws, file_path)
    run_every_tool(layout, file_path)
    run_every_tool(layout, file_path, with_policy=True)


targets = st.one_of(
    st.sampled_from(["../outside", "../../outside", "../../../outside", "/", "..", "."]),
    st.just("@outside"),  # placeholder for the absolute outside path
    st.integers(0, 5).map(lambda j: f"l{j}"),  # another link of the chain (maybe a loop)
    st.integers(0, 5).map(lambda j: f"../l{j}"),
    st.sampled_from(["inside", "../inside", "../../ws/inside", "nested/deeper"]),
)


@SETTINGS
@given(chain=st.lists(targets, min_size=1, max_size=6), tail=st.sampled_from(["", "secret.txt"]))
def test_generated_symlink_chains_never_lead_out(
    layout: Layout, chain: list[str], tail: str
) -> None:
    # A fresh directory of links l0..ln per example: l0 -> chain[0], l1 -> chain[1], ...
    d = layout.ws / "chains" / uuid.uuid4().hex
    d.mkdir(parents=True)
    for j, target in enumerate(chain):
        os.symlink(str(layout.outside) if target == "@outside" else target, d / f"l{j}")
    rel = f"chains/{d.name}/l0" + (f"/{tail}" if tail else "")
    try:
        resolved = resolve_path(layout.ws, rel)
    except ToolError:
        return
    assert_confined(layout, resolved)
