"""Agent and command markdown files → validated models, discovery, and command expansion.

The files follow Claude Code's formats (YAML frontmatter, then a markdown body), so one file
works in both hosts. Discovery looks in three places, first match wins:
project ``.claude/{agents,commands}/`` > user ``~/.claude/{agents,commands}/`` > this plugin.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from journal_agent.errors import JournalAgentError, UserError
from journal_agent.paths import plugin_root

Origin = Literal["project", "user", "plugin"]
MODEL_ALIASES = ("inherit", "haiku", "sonnet", "opus", "fable")
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_MODEL_ID = re.compile(r"^claude-[a-z0-9][a-z0-9.\-]*$")


class DefinitionError(JournalAgentError):
    """A malformed definition file: names the file and the line."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


def _split_list(value: object) -> list[str] | None:
    """``"Read, Bash(git diff:*)"`` or a YAML list → names; commas inside ``(...)`` are kept."""
    if value is None:
        return None
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    items, depth, current = [], 0, ""
    for ch in str(value):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += ch
    items.append(current.strip())
    return [i for i in items if i]


def _check_model(value: object) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    if value in MODEL_ALIASES or _MODEL_ID.match(value):
        return value
    raise ValueError(
        f"unknown model '{value}'; use one of {', '.join(MODEL_ALIASES)} or a full model id "
        "such as claude-sonnet-5-5"
    )


class AgentDefinition(BaseModel):
    # defer_build: the schema is built on first use, so `agents` does not build the command's
    # model nor `commands` the agent's (start-up, docs/architecture.md)
    model_config = ConfigDict(populate_by_name=True, extra="forbid", defer_build=True)

    name: str
    description: str
    tools: list[str] | None = None  # None: every tool the host has
    disallowed_tools: list[str] = Field(default_factory=list, alias="disallowedTools")
    model: str = "inherit"
    color: str | None = None
    max_turns: int | None = Field(default=None, alias="maxTurns", ge=1)
    permission_mode: str | None = Field(default=None, alias="permissionMode")
    extra: dict[str, object] = Field(default_factory=dict)  # keys we do not use, kept as found
    system_prompt: str = ""
    source: Path
    origin: Origin = "project"
    digest: str = ""  # SHA-256 of the file's bytes as parsed (what an approval names)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"name '{v}' must be lowercase letters, digits and hyphens")
        return v

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        if not str(v).strip():
            raise ValueError("description must not be empty")
        return str(v).strip()

    @field_validator("tools", "disallowed_tools", mode="before")
    @classmethod
    def _tools(cls, v: object) -> list[str] | None:
        return _split_list(v)

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: object) -> str:
        return _check_model(v) or "inherit"


class CommandDefinition(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", defer_build=True)

    name: str
    description: str
    argument_hint: str | None = Field(default=None, alias="argument-hint")
    allowed_tools: list[str] | None = Field(default=None, alias="allowed-tools")
    model: str | None = None
    disable_model_invocation: bool = Field(default=False, alias="disable-model-invocation")
    extra: dict[str, object] = Field(default_factory=dict)
    body: str = ""
    source: Path
    origin: Origin = "project"
    digest: str = ""  # SHA-256 of the file's bytes as parsed (what an approval names)

    @field_validator("allowed_tools", mode="before")
    @classmethod
    def _tools(cls, v: object) -> list[str] | None:
        return _split_list(v)

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: object) -> str | None:
        return _check_model(v)

    @field_validator("argument_hint", mode="before")
    @classmethod
    def _hint(cls, v: object) -> object:
        # An unquoted ``argument-hint: [topic]`` is a YAML list; Claude Code shows it as text.
        return " ".join(f"[{x}]" for x in v) if isinstance(v, list) else v


# --- parsing -------------------------------------------------------------------------------


def split_frontmatter(text: str, path: Path) -> tuple[dict[str, Any], str, dict[str, int]]:
    """Return (frontmatter, body, line number of each top-level key)."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text, {}
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise DefinitionError(path, 1, "frontmatter opened with '---' is never closed")
    raw = "".join(lines[1:end])
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DefinitionError(
            path,
            line,
            f"invalid YAML frontmatter ({problem}); a multi-line description needs a "
            "block scalar ('description: |' with the text indented below it) or quotes",
        ) from exc
    if not isinstance(data, dict):
        raise DefinitionError(path, 2, "frontmatter must be 'key: value' lines")
    key_lines = {}
    for i, line in enumerate(lines[1:end], start=2):
        m = re.match(r"^([A-Za-z][\w-]*)\s*:", line)
        if m:
            key_lines.setdefault(m.group(1), i)
    return data, "".join(lines[end + 1 :]).lstrip("\n"), key_lines


def _validation_error(
    path: Path, exc: ValidationError, key_lines: dict[str, int]
) -> DefinitionError:
    err = exc.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else ""
    aliases = {
        "disallowed_tools": "disallowedTools",
        "max_turns": "maxTurns",
        "permission_mode": "permissionMode",
        "argument_hint": "argument-hint",
        "allowed_tools": "allowed-tools",
        "disable_model_invocation": "disable-model-invocation",
    }
    key = aliases.get(key, key)
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        return DefinitionError(path, 1, f"frontmatter is missing the required field '{key}'")
    return DefinitionError(path, key_lines.get(key, 1), f"field '{key}': {msg}")


_AGENT_KEYS = {
    "name",
    "description",
    "tools",
    "disallowedTools",
    "model",
    "color",
    "maxTurns",
    "permissionMode",
}
_COMMAND_KEYS = {
    "description",
    "argument-hint",
    "allowed-tools",
    "model",
    "disable-model-invocation",
}


def parse_agent(path: Path, origin: Origin = "project") -> AgentDefinition:
    text, digest = _read(path)
    data, body, key_lines = split_frontmatter(text, path)
    known = {k: v for k, v in data.items() if k in _AGENT_KEYS}
    extra = {k: v for k, v in data.items() if k not in _AGENT_KEYS}
    try:
        return AgentDefinition(
            **known, extra=extra, system_prompt=body.strip(), source=path, origin=origin,
            digest=digest,
        )  # fmt: skip
    except ValidationError as exc:
        raise _validation_error(path, exc, key_lines) from None


def command_name(path: Path, base: Path) -> str:
    """``commands/learn.md`` → ``learn``; ``commands/ml/zero.md`` → ``ml:zero``."""
    return ":".join(path.relative_to(base).with_suffix("").parts)


def parse_command(path: Path, name: str, origin: Origin = "project") -> CommandDefinition:
    text, digest = _read(path)
    data, body, key_lines = split_frontmatter(text, path)
    known = {k: v for k, v in data.items() if k in _COMMAND_KEYS}
    extra = {k: v for k, v in data.items() if k not in _COMMAND_KEYS}
    if not str(known.get("description") or "").strip():
        first = next((ln.strip().lstrip("#").strip() for ln in body.splitlines() if ln.strip()), "")
        known["description"] = first or name
    try:
        return CommandDefinition(
            name=name, **known, extra=extra, body=body, source=path, origin=origin, digest=digest
        )
    except ValidationError as exc:
        raise _validation_error(path, exc, key_lines) from None


def _read(path: Path) -> tuple[str, str]:
    """(the file's text, the SHA-256 of its bytes): read once, so the grants parsed and the
    hash an approval is checked against are of the same bytes."""
    import hashlib

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DefinitionError(path, None, f"cannot be read ({exc.strerror})") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DefinitionError(path, line, "is not valid UTF-8; re-save it as UTF-8") from exc
    return text, hashlib.sha256(data).hexdigest()


# --- discovery -----------------------------------------------------------------------------

D = TypeVar("D", AgentDefinition, CommandDefinition)


@dataclass
class Discovery(Generic[D]):
    found: dict[str, D] = field(default_factory=dict)
    shadowed: list[tuple[D, D]] = field(default_factory=list)  # (hidden, winner)
    errors: list[DefinitionError] = field(default_factory=list)


def search_dirs(
    kind: Literal["agents", "commands"], root: Path, home: Path | None = None
) -> list[tuple[Origin, Path]]:
    home = home if home is not None else Path.home()
    return [
        ("project", root / ".claude" / kind),
        ("user", home / ".claude" / kind),
        ("plugin", plugin_root() / kind),
    ]


def _discover(kind: Literal["agents", "commands"], root: Path, home: Path | None) -> Discovery:
    result: Discovery = Discovery()
    seen_dirs: set[Path] = set()
    for origin, directory in search_dirs(kind, root, home):
        # When the project *is* this plugin (a checkout), don't list its files twice.
        if not directory.is_dir() or directory.resolve() in seen_dirs:
            continue
        seen_dirs.add(directory.resolve())
        for path in sorted(directory.rglob("*.md")):
            try:
                if kind == "agents":
                    item = parse_agent(path, origin)
                else:
                    item = parse_command(path, command_name(path, directory), origin)
            except DefinitionError as exc:
                result.errors.append(exc)
                continue
            winner = result.found.get(item.name)
            if winner is None:
                result.found[item.name] = item
            else:
                result.shadowed.append((item, winner))
    return result


def discover_agents(root: Path, home: Path | None = None) -> Discovery[AgentDefinition]:
    return _discover("agents", root, home)


def discover_commands(root: Path, home: Path | None = None) -> Discovery[CommandDefinition]:
    return _discover("commands", root, home)


def _load(kind: Literal["agents", "commands"], name: str, root: Path, home: Path | None):
    found = _discover(kind, root, home)
    if name in found.found:
        return found.found[name]
    broken = [e for e in found.errors if e.path.stem == name.split(":")[-1]]
    if broken:
        raise UserError(f"{broken[0]}; fix that file and try again.")
    names = ", ".join(sorted(found.found)) or "none"
    raise UserError(
        f"no {kind[:-1]} named '{name}' (found: {names}); check the name or add "
        f".claude/{kind}/{name.replace(':', '/')}.md."
    )


def load_agent(name: str, root: Path, home: Path | None = None) -> AgentDefinition:
    return _load("agents", name, root, home)


def load_command(name: str, root: Path, home: Path | None = None) -> CommandDefinition:
    return _load("commands", name.lstrip("/"), root, home)


# --- command expansion ---------------------------------------------------------------------

_INDEXED = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$(\d+)\b")
_BASH = re.compile(r"!`([^`\n]+)`")
_FILE = re.compile(r"(?<![\w@/])@((?:\.{0,2}/)?[\w.\-/]+[\w\-])")


def split_arguments(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:  # an unbalanced quote: fall back to whitespace, as a shell user expects
        return arguments.split()


def substitute_arguments(body: str, arguments: str) -> str:
    """``$ARGUMENTS``, ``$ARGUMENTS[N]`` and ``$N`` (0-based); else ``ARGUMENTS:`` appended."""
    has_placeholder = "$ARGUMENTS" in body or _INDEXED.search(body) is not None
    if not has_placeholder:
        return f"{body.rstrip()}\n\nARGUMENTS: {arguments}\n" if arguments.strip() else body
    parts = split_arguments(arguments)

    def indexed(m: re.Match[str]) -> str:
        i = int(m.group(1) or m.group(2))
        return parts[i] if i < len(parts) else ""

    return _INDEXED.sub(indexed, body).replace("$ARGUMENTS", arguments)


def _bash_allowed(rules: list[str], command: str) -> bool:
    from journal_agent.tools.permissions import rule_matches

    return any(rule_matches(rule, "Bash", command) for rule in rules)


def _run_bash(
    cmd: CommandDefinition, command: str, root: Path, timeout: float, allowed: list[str]
) -> str:
    if not _bash_allowed(allowed, command):
        if _bash_allowed(cmd.allowed_tools or [], command):
            raise UserError(
                f"{cmd.source} runs !`{command}`, which its allowed-tools grants but you have "
                f"not approved; read the file and run `journal-agent commands --approve "
                f"{cmd.name}` in your terminal if you trust it."
            )
        raise UserError(
            f"{cmd.source} runs !`{command}` but its allowed-tools does not permit it; add "
            f"'allowed-tools: Bash({command.split()[0]}:*)' to its frontmatter "
            "(or remove the line)."
        )
    from journal_agent.settings import load_settings
    from journal_agent.tools.base import ToolError
    from journal_agent.tools.bash import run_shell
    from journal_agent.tools.sandbox.call import sandboxed

    # In the sandbox like any Bash call, with the whole filesystem read-only: these commands
    # gather context for the prompt (git status, a diff), they have no business writing.
    settings = load_settings(root).sandbox
    try:
        with sandboxed(root, settings, writes=False) as box:
            done = run_shell(command, root, timeout, box=box)
    except ToolError as exc:
        raise UserError(f"!`{command}` in {cmd.source} could not run: {exc}") from None
    if done.timed_out is not None:
        raise UserError(f"!`{command}` in {cmd.source} did not finish within {timeout:.0f} s.")
    from journal_agent.secret_text import redact_secrets

    # What the command printed goes into the prompt: no secret reaches the model this way
    # (`git remote -v` with a token in the URL), as none does through a tool result.
    out = redact_secrets(done.output.text().rstrip("\n"))
    return out if done.returncode == 0 else f"{out}\n[exit code {done.returncode}]"


def _inline_file(root: Path, ref: str) -> str | None:
    from journal_agent.tools.base import ToolError
    from journal_agent.tools.confined_paths import resolve_path

    try:
        path = resolve_path(root, ref)
    except ToolError as exc:
        raise UserError(f"@{ref}: {exc}") from None
    if not path.is_file():
        return None  # not a file reference (an @mention, a decorator): leave the text alone
    # The rules Read follows: a secret (.env, keys, a hard link to one) or a path a Read deny
    # rule names is not sent to the model unless an allow rule names it.
    from journal_agent.tools.permissions import PermissionPolicy

    decision = PermissionPolicy.from_settings(root).check("Read", path=path)
    if not decision.allowed:
        raise UserError(f"@{ref} was not inlined: {decision.reason}")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"@{ref} is not a UTF-8 text file; reference a text file.") from None
    from journal_agent.secret_text import redact_secrets

    # Inlined like a Read result, and redacted like one (.git/config's remote URL with a token).
    return f"@{ref}:\n```\n{redact_secrets(content.rstrip())}\n```"


def expand_command(
    cmd: CommandDefinition,
    arguments: str,
    root: Path,
    bash_timeout: float = 120.0,
    allowed: list[str] | None = None,
) -> str:
    """The prompt Claude Code would send for ``/name arguments``. ``allowed``: the grants of
    ``cmd`` that count (:func:`journal_agent.approvals.command_grants`); default all of them."""
    rules = list(cmd.allowed_tools or []) if allowed is None else allowed
    text = substitute_arguments(cmd.body, arguments)
    text = _BASH.sub(lambda m: _run_bash(cmd, m.group(1), root, bash_timeout, rules), text)

    def inline(m: re.Match[str]) -> str:
        return _inline_file(root, m.group(1)) or m.group(0)

    return _FILE.sub(inline, text)
