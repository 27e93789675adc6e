"""Every file our code writes, creates, renames, removes or locks on the host goes through the
bottom room (``journal_agent/confined.py``; profiling's own ``profiling/_files.py``), or is
named below with why it may not (docs/architecture.md, "the one place"; docs/security.md,
"Our own files").

A cloned repository can commit ``.journal/x -> ~/.bashrc``; a writer that opens its file by
name follows the link. So a new module that writes a file of the workspace with ``open(…,
"w")``, ``Path.write_text``, ``os.replace``, ``shutil``, ``sqlite3.connect``, ``filelock`` or
``fcntl.flock`` on its own fails here, and the message says the one way to do it. The scan
reads the sources' syntax (every call, those inside functions too); the allow-list names each
exception by module and function, with its reason, and an entry that no longer matches a
call fails too, so the list stays the truth.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("journal_agent", "profiling")

# The room itself: the only modules that open by descriptor, rename and unlink on their own.
ROOM = {
    "journal_agent/confined.py",
    "journal_agent/_confined_walk.py",
    "profiling/_files.py",
    "profiling/_nofollow.py",  # the refusals both rooms share (the walk, what a name is)
}

_OUTSIDE_PLUGIN_DATA = (
    "the plugin's own environment and notes under the plugin's data folder "
    "($CLAUDE_PLUGIN_DATA, ~/.cache/journal-agent): outside every workspace, never writable "
    "inside the sandbox (everything outside the workspace is read-only there), written before "
    "any project is read"
)
_OUTSIDE_TMP = (
    "a folder of its own under the system temp folder (tempfile: a random name, made with "
    "O_EXCL and mode 0700, so nothing can be planted in it), removed afterwards and by the "
    "watchdog if we are killed"
)
_SOURCE_TREE = (
    "a developer's generator writing into the source tree (python -m …), never run on a "
    "user's project"
)
_CGROUP = "cgroup files under /sys/fs/cgroup: the kernel's, outside every workspace"
_READ_SYSTEM = (
    "reads a file of the system (/proc, /dev/tty) or of our installed package, never one of "
    "the workspace"
)
_SQLITE_RO = (
    "reads the index read-only (mode=ro) by the path confined.sqlite_file gave once the "
    "database and its side files were checked plain"
)
_READ_USER = (
    "reads a user's own file (a cited source file, a recipe, a model's config, Claude Code's "
    "transcript) without following a link out: O_NONBLOCK, fstat, bounded; never one of ours"
)

# (module, function qualname) -> why this call may open a file itself.
ALLOWED: dict[tuple[str, str], str] = {
    # -- outside the workspace, by design ---------------------------------------------------
    ("journal_agent/plugin_env/env.py", "read_state"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/env.py", "write_state"): _OUTSIDE_PLUGIN_DATA
    + ("; replaced through confined.replace (random O_EXCL temp, no link followed)"),
    ("journal_agent/plugin_env/env.py", "preparing"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/env.py", "start"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/env.py", "deps_stamp"): _READ_SYSTEM,
    ("journal_agent/plugin_env/env.py", "foreign_command"): _READ_SYSTEM,
    ("journal_agent/plugin_env/build.py", "prepare"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/build.py", "_prepare"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/build.py", "_lend_torch"): (
        "a .pth file in the plugin's own virtual environment (see above)"
    ),
    ("journal_agent/plugin_env/build.py", "_remove"): (
        "removes an earlier design's environment the user's doctor named (plugin data folders)"
    ),
    ("journal_agent/plugin_env/launch.py", "_answer_without_preparing"): _READ_SYSTEM,
    ("journal_agent/plugin_env/front.py", "shipped"): _READ_SYSTEM,
    ("journal_agent/plugin_env/front.py", "serve"): _OUTSIDE_PLUGIN_DATA,
    ("journal_agent/plugin_env/tool_list.py", "<module>"): _SOURCE_TREE,
    ("profiling/_config_table_gen.py", "<module>"): _SOURCE_TREE,
    ("journal_agent/trust_store.py", "_record"): (
        "the trust store under ~/.config/journal-agent: outside every workspace by design (a "
        "clone cannot plant it), read-only inside the sandbox; its folder is made 0700, and "
        "its lock and the store itself go through the room from that folder (no link "
        "followed, random O_EXCL temp)"
    ),
    ("profiling/_seal.py", "_make_key"): (
        "the key sealing this user's measurement records, beside the trust store (outside "
        "every workspace, hidden and read-only in the sandbox): folder 0700, written under a "
        "random O_EXCL | O_NOFOLLOW temp name, mode 0600, and linked to its name, never over "
        "anything"
    ),
    ("journal_agent/tools/sandbox/view.py", "_trust_store_dir"): (
        "makes the trust store's folder (outside the workspace, 0700) so it can be bound read-only"
    ),
    ("journal_agent/tools/sandbox/limits.py", "prepare"): _CGROUP,
    ("journal_agent/tools/sandbox/limits.py", "_make"): _CGROUP,
    ("journal_agent/tools/sandbox/limits.py", "_remove"): _CGROUP,
    ("journal_agent/tools/sandbox/limits.py", "_remove_stale"): _CGROUP,
    ("journal_agent/tools/sandbox/linux.py", "_own_device_nodes"): _OUTSIDE_TMP,
    ("journal_agent/tools/sandbox/call.py", "sandboxed"): _OUTSIDE_TMP,
    ("journal_agent/tools/sandbox/_redacted_configs.py", "redacted_copies"): _OUTSIDE_TMP,
    ("journal_agent/tools/sandbox/_redacted_configs.py", "remove_copies"): _OUTSIDE_TMP,
    ("profiling/measure/distributed.py", "_ranks_of_ours"): _OUTSIDE_TMP,
    # -- reads of the system, our package or a user's own file -----------------------------
    ("journal_agent/terminal_confirm.py", "_read"): _READ_SYSTEM,
    ("journal_agent/journal/search/_bert.py", "_Vocabulary.__init__"): _READ_SYSTEM,
    ("journal_agent/journal/search/_bert.py", "BertEncoder.__init__"): _READ_SYSTEM,
    ("journal_agent/journal/search/embeddings.py", "_weights_digest"): _READ_SYSTEM,
    ("journal_agent/capture/transcript.py", "read_turn"): _READ_USER,
    ("journal_agent/capture/transcript.py", "handed_prompt"): _READ_USER,
    ("journal_agent/capture/touch.py", "titles"): _SQLITE_RO,
    ("journal_agent/trust_store.py", "read_file"): (
        "reads a project's own settings, command or agent file to hash it for approval (those "
        "may be links by design: what is approved is the bytes read; under .journal/ "
        "O_NOFOLLOW), bounded, O_NONBLOCK, fstat"
    ),
    ("journal_agent/journal/refs.py", "FileCache._read"): _READ_USER,
    ("journal_agent/tools/sandbox/_gitdirs.py", "first_line"): _READ_USER,
    ("profiling/recipes/files.py", "read_bytes"): _READ_USER,
    ("profiling/models/hf_config.py", "read_config_file"): _READ_USER,
    # -- a user's files, reached by the tools' own no-follow walk (tools.confined_paths) -----
    ("journal_agent/tools/confined_paths.py", "open_dir_beneath"): (
        "the tools' walk to a user's file (Read, Write, Edit, the view): every folder O_NOFOLLOW "
        "| O_DIRECTORY from the workspace's descriptor; writes then go through "
        "confined.replace_at"
    ),
    ("journal_agent/tools/confined_paths.py", "open_beneath"): (
        "opens a user's file from the no-follow walk above with O_NOFOLLOW"
    ),
    ("journal_agent/tools/sandbox/guard.py", "_quarantine_dir"): (
        "the quarantine folder, made by descriptor (mkdirat) from folders opened O_NOFOLLOW"
    ),
    ("journal_agent/tools/sandbox/guard.py", "_move"): (
        "moves what a sandboxed command created of a protected path into quarantine, by "
        "descriptor (renameat from folders opened O_NOFOLLOW), never by name"
    ),
    ("journal_agent/tools/sandbox/guard.py", "settle"): (
        "puts back the .git symlink a command replaced: the link is the user's, restored as it "
        "was after the command ended"
    ),
    ("journal_agent/tools/sandbox/view.py", "remove_precreated"): (
        "removes the empty mount points _precreate made through the room (rmdir never follows "
        "a link)"
    ),
    # -- exports: the folder the user named is the anchor -----------------------------------
    ("journal_agent/view/export.py", "export_html"): (
        "the export's folder the user named (a link there refused first): built in a sibling "
        "folder of a random name, made with mkdir (never over anything), and renamed into "
        "place onto nothing or an empty folder; every page is written through "
        "confined.replace from that folder"
    ),
    ("journal_agent/view/export.py", "_export_html"): (
        "copies our package's static files into the freshly made, randomly named folder above"
    ),
    ("journal_agent/view/export.py", "save_export"): (
        "makes the folder the user named for a deck or a JSON export; the file is written "
        "through confined.create (never over anything) or, with --force, confined.replace "
        "from that folder"
    ),
    # -- SQLite: every database of ours is checked by confined.sqlite_file first ----------
    ("journal_agent/journal/search/schema.py", "_open"): (
        "opens the index by the path confined.sqlite_file gave once the database and its side "
        "files were checked plain (SQLite opens by name)"
    ),
    ("journal_agent/journal/search/query.py", "_Stemmer.__init__"): "an in-memory database",
    ("journal_agent/view/site.py", "Site._index"): "an in-memory database (no journal yet)",
    ("journal_agent/capture/recall.py", "related"): _SQLITE_RO,
    ("journal_agent/capture/session.py", "_entries_dated"): _SQLITE_RO,
    ("journal_agent/capture/status.py", "_entry_ids"): _SQLITE_RO,
    ("journal_agent/journal/search/titles_file.py", "ensure"): _SQLITE_RO,
    # -- locks: taken on a descriptor the room opened ---------------------------------------
    ("journal_agent/locks.py", "held"): "flock on a descriptor from confined.open_lock",
    ("journal_agent/locks.py", "_wait"): "flock on a descriptor from confined.open_lock",
    ("journal_agent/foreign_changes.py", "_try_lock.__enter__"): (
        "flock on .journal/journal.lock opened by confined.open_lock"
    ),
    ("journal_agent/capture/hook.py", "_flock"): "flock on a descriptor from confined.open_lock",
}


# -- the scan ----------------------------------------------------------------------------------

_OS_WRITES = {
    "replace", "rename", "renames", "unlink", "remove", "removedirs", "rmdir", "mkdir",
    "makedirs", "link", "symlink", "truncate", "chmod", "chown", "lchown", "mkfifo", "mknod",
    "utime",
}  # fmt: skip
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_PATH_WRITES = {
    "write_text", "write_bytes", "touch", "mkdir", "rmdir", "unlink", "symlink_to",
    "hardlink_to", "chmod", "lchmod",
}  # fmt: skip
_SHUTIL = {"rmtree", "copy", "copy2", "copyfile", "copytree", "move", "copymode", "copystat"}
_TEMPFILE = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "TemporaryDirectory",
             "SpooledTemporaryFile"}  # fmt: skip
_SYSTEM_OPENS = ("/proc/", "/dev/", "/sys/")
_ROOM_NAMES = {"confined", "_files", "w"}  # the room's own functions, called by module name
# Names of journal_agent.paths: a read_text/read_bytes of a path built from one reads a file
# of ours by name (following a link), which the room does instead.
_OUR_PATHS = {
    "JOURNAL_FILE", "LEDGER_FILE", "STATE_DIR", "state_dir", "measurements_dir",
    "transcripts_dir", "runs_dir", "drafts_dir", "draft_usage_path", "refs_file", "index_file",
    "review_file", "inbox_file", "inbox_path",
}  # fmt: skip


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _names_in(node: ast.AST) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id
            for n in ast.walk(node) if isinstance(n, ast.Attribute | ast.Name)}  # fmt: skip


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _system_path(node: ast.AST | None) -> bool:
    """A literal path (or f-string) under /proc, /dev or /sys, or os.devnull."""
    if node is None:
        return False
    if _dotted(node) == "os.devnull":
        return True
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    text = _literal(node)
    return text is not None and text.startswith(_SYSTEM_OPENS)


_MODULE_CALLS = {
    "os": _OS_WRITES,
    "shutil": _SHUTIL,
    "tempfile": _TEMPFILE,
    "sqlite3": {"connect"},
    "fcntl": {"flock", "lockf"},
}


def _why(call: ast.Call) -> str | None:
    """What this call does to a file on its own, or None."""
    func, name = call.func, _dotted(call.func)
    first = call.args[0] if call.args else None
    if name in ("FileLock", "SoftFileLock"):
        return f"filelock.{name}"
    if name == "open":  # builtin: any file opened by name (reads follow links too)
        return None if _system_path(first) else "open() by name"
    if not isinstance(func, ast.Attribute):
        return None
    head, attr = _dotted(func.value), func.attr
    if head in _ROOM_NAMES:
        return None
    if head == "os" and attr == "open":
        return None if _system_path(first) else _os_open(call)
    if attr in _MODULE_CALLS.get(head, ()):
        return f"{head}.{attr}"
    return _method(call, func, head, attr)


def _os_open(call: ast.Call) -> str:
    flags = call.args[1] if len(call.args) > 1 else None
    if flags is None or isinstance(flags, ast.Name) or _names_in(flags) & _WRITE_FLAGS:
        return "os.open for writing"
    return "os.open"


def _method(call: ast.Call, func: ast.Attribute, head: str, attr: str) -> str | None:
    """A method of a path (the receiver's type is not known: its name and arguments tell)."""
    if attr in ("FileLock", "SoftFileLock"):
        return f"filelock.{attr}"
    if attr in ("read_text", "read_bytes") and _names_in(func.value) & _OUR_PATHS:
        return f"Path.{attr} of a file of ours"
    if attr in _PATH_WRITES and head not in _MODULE_CALLS:
        return f"Path.{attr}"
    # Path.replace / Path.rename take one path; str.replace takes two.
    if attr in ("replace", "rename") and len(call.args) == 1 and not call.keywords:
        return f"Path.{attr}"
    if attr == "open" and head not in ("webbrowser", "os"):
        mode = _literal(call.args[0]) if call.args else None
        if mode is None or set(mode) & set("wax+"):
            return "Path.open"
    return None


class _Scan(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.scope: list[str] = []
        self.found: list[tuple[str, str, int, str]] = []

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

    def visit_Call(self, node: ast.Call) -> None:
        why = _why(node)
        if why is not None:
            qual = ".".join(self.scope) or "<module>"
            self.found.append((self.file, qual, node.lineno, why))
        self.generic_visit(node)


def scan_source(file: str, source: str) -> list[tuple[str, str, int, str]]:
    scan = _Scan(file)
    scan.visit(ast.parse(source))
    return scan.found


def _all_calls() -> list[tuple[str, str, int, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            file = str(path.relative_to(REPO))
            if file in ROOM:
                continue
            found += scan_source(file, path.read_text(encoding="utf-8"))
    return found


def _scope(file: str, qual: str) -> tuple[str, str] | None:
    """The allow-list entry covering ``qual`` (a nested function is covered by its own)."""
    parts = qual.split(".")
    for end in range(len(parts), 0, -1):
        key = (file, ".".join(parts[:end]))
        if key in ALLOWED:
            return key
    return None


def test_every_write_goes_through_the_room_or_says_why_not() -> None:
    offenders = [
        f"{file}:{line} ({qual}): {why}"
        for file, qual, line, why in _all_calls()
        if _scope(file, qual) is None
    ]
    assert offenders == [], (
        "these calls reach a file on the host by themselves. A file of ours (the journal, the "
        "ledger, anything under .journal/, an export) is written, read, renamed, removed and "
        "locked through journal_agent.confined (profiling: profiling/_files.py), which never "
        "follows a link a clone committed; a file outside every workspace gets an entry in "
        "ALLOWED here with its reason:\n" + "\n".join(offenders)
    )


def test_the_allow_list_names_only_what_is_there() -> None:
    used = {_scope(file, qual) for file, qual, _, _ in _all_calls()}
    stale = sorted(f"{f}: {q}" for f, q in ALLOWED if (f, q) not in used)
    assert stale == [], "allow-list entries that match no call any more (remove them):\n" + (
        "\n".join(stale)
    )


def test_the_scan_sees_each_way_of_writing() -> None:
    # The scanner itself: each spelling a newcomer might use is found, and reads are not.
    source = """
import os, shutil, sqlite3, fcntl, tempfile
from filelock import FileLock
def writer(root, p):
    open(root / ".journal" / "x.json", "w")
    p.write_text("x")
    p.write_bytes(b"x")
    p.with_suffix(".tmp").replace(p)
    os.replace("a", "b")
    os.unlink(p)
    os.makedirs(p)
    os.open(p, os.O_WRONLY | os.O_CREAT)
    os.open(p, flags)
    shutil.rmtree(p)
    sqlite3.connect(str(p))
    fcntl.flock(3, fcntl.LOCK_EX)
    FileLock(str(p))
    tempfile.mkstemp()
    p.open("a")
    p.mkdir()
    (root / JOURNAL_FILE).read_text()
    state_dir(root).joinpath("refs.jsonl").read_bytes()
def reader(p):
    confined.unlink(root, p)
    open(f"/proc/{pid}/stat", "rb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    "text".replace("a", "b")
    p.replace(annotation=1)
    os.open("/proc/self/statm", os.O_RDONLY)
    p.read_text()
"""
    found = [why for _, qual, _, why in scan_source("x.py", source) if qual == "writer"]
    assert len(found) == 18, found
    assert [why for _, qual, _, why in scan_source("x.py", source) if qual == "reader"] == []
