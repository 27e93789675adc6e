"""Workspace confinement: what resolves inside the root, and what is refused with which message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journal_agent.tools.base import ToolError
from journal_agent.tools.confined_paths import permitted_path, resolve_path
from journal_agent.tools.permissions import PermissionPolicy


def refused(root: Path, file_path: str) -> str:
    with pytest.raises(ToolError) as info:
        resolve_path(root, file_path)
    return str(info.value)


def test_relative_and_absolute_paths_inside_resolve(ws: Path) -> None:
    (ws / "src").mkdir()
    assert resolve_path(ws, "src/model.py") == ws / "src" / "model.py"
    assert resolve_path(ws, str(ws / "src" / "model.py")) == ws / "src" / "model.py"
    assert resolve_path(ws, "./src/../src/./model.py") == ws / "src" / "model.py"
    assert resolve_path(ws, ".") == ws
    assert resolve_path(ws, str(ws)) == ws


def test_paths_that_do_not_exist_yet_resolve_for_write(ws: Path) -> None:
    assert resolve_path(ws, "new/deeper/file.md") == ws / "new" / "deeper" / "file.md"


def test_dotdot_out_of_the_root_is_refused_with_a_message_naming_the_root(ws: Path) -> None:
    message = refused(ws, "../outside/secret.txt")
    assert "outside the workspace root" in message
    assert str(ws) in message
    assert "use a path inside it" in message
    refused(ws, "src/../../..")
    refused(ws, "a/b/../../../x")


def test_dotdot_that_comes_back_inside_is_fine(ws: Path) -> None:
    assert resolve_path(ws, f"../{ws.name}/notes.md") == ws / "notes.md"


def test_absolute_path_elsewhere_is_refused(ws: Path, outside: Path) -> None:
    assert "outside the workspace root" in refused(ws, "/etc/passwd")
    refused(ws, str(outside / "secret.txt"))
    refused(ws, "/")


def test_sibling_with_the_root_as_name_prefix_is_outside(ws: Path) -> None:
    sibling = ws.parent / (ws.name + "-evil")
    sibling.mkdir()
    refused(ws, str(sibling / "x"))


def test_symlink_leading_out_is_refused_and_named(ws: Path, outside: Path) -> None:
    (ws / "data").symlink_to(outside)
    message = refused(ws, "data/secret.txt")
    assert "symlink" in message
    assert str(outside / "secret.txt") in message


def test_symlink_chain_leading_out_is_refused(ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "c3").symlink_to("../outside")  # relative, one level up from the root
    (ws / "sub" / "c2").symlink_to("../c3")
    (ws / "c1").symlink_to("sub/c2")
    assert os.path.realpath(ws / "c1") == str(outside)
    refused(ws, "c1/secret.txt")
    refused(ws, "c1")


def test_dangling_symlink_pointing_out_is_refused(ws: Path, outside: Path) -> None:
    # Writing through it would create outside/new.txt.
    (ws / "new.txt").symlink_to(outside / "new.txt")
    refused(ws, "new.txt")


def test_symlink_inside_the_workspace_resolves_to_its_target(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to("real")
    assert resolve_path(ws, "alias/file.md") == ws / "real" / "file.md"


def test_symlink_loop_is_refused(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    assert "loop" in refused(ws, "a/x")


def test_nul_bytes_and_empty_paths_are_refused(ws: Path) -> None:
    assert "NUL" in refused(ws, "notes\x00.md")
    assert "empty" in refused(ws, "")
    refused(ws, "   ")


def test_unencodable_path_is_refused(ws: Path) -> None:
    assert "not a valid file name" in refused(ws, "bad\ud800name")


def test_tilde_expands_to_home_which_is_outside(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(outside))
    refused(ws, "~/secret.txt")


def test_path_through_a_regular_file_is_refused(ws: Path) -> None:
    (ws / "file.txt").write_text("x")
    assert "not a directory" in refused(ws, "file.txt/inner")


def test_root_reached_through_a_symlink_still_confines(ws: Path, outside: Path) -> None:
    link = ws.parent / "ws-link"
    link.symlink_to(ws)
    assert resolve_path(link, "notes.md") == ws / "notes.md"
    assert resolve_path(link, str(link / "notes.md")) == ws / "notes.md"
    refused(link, "../outside/secret.txt")


def test_confine_consults_the_permission_policy(make_ctx, ws: Path) -> None:
    (ws / "private").mkdir()
    ctx = make_ctx(policy=PermissionPolicy(ws, deny=["Read(./private/**)"]))
    with pytest.raises(ToolError, match=r"Read\(./private/\*\*\)"):
        permitted_path(ctx, "Read", "private/notes.md")
    assert permitted_path(ctx, "Read", "public.md") == ws / "public.md"
    # Without a policy (a library caller) the call is allowed, confinement still holds.
    bare = make_ctx()
    assert permitted_path(bare, "Read", "private/notes.md") == ws / "private" / "notes.md"
    with pytest.raises(ToolError, match="outside the workspace"):
        permitted_path(bare, "Read", "/etc/passwd")


def test_a_directory_swapped_for_a_symlink_after_resolving_is_not_followed(
    ws: Path, outside: Path
) -> None:
    from journal_agent.tools.confined_paths import open_beneath
    from journal_agent.tools.write import atomic_write

    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")
    path = resolve_path(ws, "sub/secret.txt")
    # Between the check and the open, someone replaces sub/ with a link out.
    (ws / "sub").rename(ws / "sub-old")
    (ws / "sub").symlink_to(outside)
    with pytest.raises(OSError):
        os.close(open_beneath(ws, path, os.O_RDONLY))
    with pytest.raises(ToolError, match="the path changed while the tool ran"):
        atomic_write(ws, path, b"PWNED\n")
    assert (outside / "secret.txt").read_text().startswith("TOPSECRET")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
