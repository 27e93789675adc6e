"""A conservative reading of a Bash command line for the permission checks.

We do not try to be a shell. We split a command line into simple commands at the
operators ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses, keep each command's
words and redirections, and answer three questions the policy asks:

- which paths could this command touch (every word that looks like a path, every redirection
  target, every path inside a quoted code string such as ``python -c "open('/etc/x')"``);
- is it read-only (a known list of commands that only read, no output redirection);
- does it escalate privileges (``sudo``, ``su``, ``doas``).

When in doubt the answer is the safer one: "not read-only", "may touch that path".
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from journal_agent.errors import JournalAgentError

SEPARATORS = {";", "&&", "||", "|", "&", "\n", "(", ")", "|&", ";;"}
REDIRECTS = {">", ">>", "<", "<<", "<<<", ">|", "&>", "&>>", ">&", "<&", "<>"}
OUTPUT_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>"}
PRIVILEGE = {"sudo", "su", "doas", "pkexec"}
SHELLS = {"bash", "sh", "zsh", "dash"}
# Wrappers that run the rest of the words as a command.
WRAPPERS = {"time", "nice", "nohup", "timeout", "command", "builtin", "env", "exec", "setsid"}

# Paths outside the workspace that are harmless to name.
SAFE_DEVICES = {
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/dev/tty",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
}

READ_ONLY_COMMANDS = {
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep", "fgrep", "rg",
    "file", "stat", "du", "df", "tree", "which", "type", "whoami", "date", "uname", "true",
    "false", "uniq", "cut", "tr", "diff", "cmp", "basename", "dirname", "realpath", "readlink",
    "nl", "od", "hexdump", "sha256sum", "sha1sum", "md5sum", "jq", "column", "seq", "test", "[",
    "nproc", "free", "id", "hostname", "nvidia-smi", "lscpu", "comm", "paste", "fold", "expand",
    "strings", "sleep", "cd", "pushd", "popd",
}  # fmt: skip
GIT_READ_ONLY = {
    "status", "diff", "log", "show", "rev-parse", "ls-files", "blame", "grep", "describe",
    "shortlog", "cat-file", "ls-tree", "rev-list", "merge-base", "show-ref", "version", "help",
}  # fmt: skip
PIP_READ_ONLY = {"list", "show", "freeze", "--version", "-V"}
FIND_WRITES = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
               "-fls"}  # fmt: skip
# In ``python -c CODE``: names that suggest writing, running programs or reaching the network.
PYTHON_SIDE_EFFECTS = re.compile(
    r"open\s*\(|write|remove|unlink|rmdir|rmtree|rename|replace\s*\(|mkdir|makedirs|chmod|chown|"
    r"system|popen|subprocess|\bexec\b|\beval\b|__import__|importlib|shutil|socket|urllib|http|"
    r"requests|ctypes|\bkill\b|symlink|truncate|touch|setattr|compile\s*\(|builtins|\.save\b"
)
# Paths embedded in a quoted code string: "/x", "~/x", "../x" not preceded by a word char,
# ':' (URLs) or another path character.
EMBEDDED_PATH = re.compile(r"(?<![\w:/.~$-])(/[^\s'\"`,;)\]}]*|~[^\s'\"`,;)\]}]*|\.\.(?=/|$))")


@dataclass
class SimpleCommand:
    words: list[str]  # after leading VAR=value assignments and wrappers
    assignments: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target)
    text: str = ""

    @property
    def name(self) -> str:
        return self.words[0] if self.words else ""


class ShellParseError(JournalAgentError, ValueError):
    """A command line the analysis cannot read (an unclosed quote, a lone operator)."""


def _lexer(command: str) -> shlex.shlex:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    return lex


def split_commands(command: str) -> list[SimpleCommand]:
    """Split a command line into simple commands; raise ShellParseError if it cannot be read."""
    try:
        tokens = list(_lexer(command))
    except ValueError as exc:
        raise ShellParseError(str(exc)) from exc
    commands: list[SimpleCommand] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            commands.append(_simple(current))
            current.clear()

    for token in _split_operators(tokens):
        if token in SEPARATORS:
            flush()
        else:
            current.append(token)
    flush()
    return commands


_PUNCTUATION = set(";&|<>()\n")
_OPERATORS = sorted(SEPARATORS | REDIRECTS, key=len, reverse=True)


def _split_operators(tokens: list[str]) -> list[str]:
    """The lexer glues adjacent operator characters (``)|``, ``&&(``); take them apart.

    Longest known operator first; a character that starts no operator becomes a separator,
    which can only make the analysis stricter (more, smaller commands).
    """
    out: list[str] = []
    for token in tokens:
        if not token or not set(token) <= _PUNCTUATION or token in SEPARATORS | REDIRECTS:
            out.append(token)
            continue
        i = 0
        while i < len(token):
            op = next((o for o in _OPERATORS if token.startswith(o, i)), None)
            out.append(op or ";")
            i += len(op) if op else 1
    return out


def _simple(tokens: list[str]) -> SimpleCommand:
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in REDIRECTS:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            # "2>&1": the lexer gives "2", ">&", "1" — a descriptor number, not a file.
            if words and words[-1].isdigit() and tok in (">", ">>", ">&", "<&", "<"):
                words.pop()
            redirects.append((tok, target))
            i += 2
            continue
        words.append(tok)
        i += 1
    assignments: list[str] = []
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        assignments.append(words.pop(0))
    while words and words[0] in WRAPPERS:
        wrapper = words[0]
        rest = words[1:]
        # Skip the wrapper's own options and, for timeout, its duration.
        options = []
        while rest and rest[0].startswith("-") and rest[0] != "-":
            options.append(rest.pop(0))
            if options[-1] == "-n" and wrapper == "nice" and rest:
                rest.pop(0)  # "nice -n 10 cmd"
        if wrapper in ("env", "exec") and any(o not in ("-i", "--ignore-environment", "-c")
                                              for o in options):  # fmt: skip
            break  # "env -C dir", "env -S string", "exec -a name": keep the wrapper visible
        if wrapper == "env":
            while rest and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", rest[0]):
                assignments.append(rest.pop(0))
            if not rest:
                break  # plain "env" prints the environment: it is the command
        if wrapper == "timeout" and rest:
            rest.pop(0)
        words = rest
    return SimpleCommand(words, assignments, redirects, " ".join(tokens))


def inner_scripts(cmd: SimpleCommand) -> list[str]:
    """Command strings this command runs itself: ``bash -c '...'``, ``eval ...``."""
    if not cmd.words:
        return []
    name = os.path.basename(cmd.name)
    if name in SHELLS and "-c" in cmd.words[1:]:
        idx = cmd.words.index("-c", 1)
        return cmd.words[idx + 1 : idx + 2]
    if name == "eval":
        return [" ".join(cmd.words[1:])]
    return []


def is_read_only(cmd: SimpleCommand) -> bool:
    """True only for commands we know do nothing but read (and print)."""
    if any(op in OUTPUT_REDIRECTS and target not in SAFE_DEVICES for op, target in cmd.redirects):
        return False
    if any(op == ">&" and not target.isdigit() and target != "-" for op, target in cmd.redirects):
        return False
    if not cmd.words:
        return not cmd.assignments  # a bare "X=1" changes shell state only
    if any("$" in w or "`" in w or "<(" in w for w in cmd.words):
        return False  # expansions could name anything
    name = os.path.basename(cmd.name)
    args = cmd.words[1:]
    if name in READ_ONLY_COMMANDS:
        return not _runs_or_writes(name, args)
    if name == "find":
        return not any(a in FIND_WRITES for a in args)
    if name == "sort":
        return not any(a == "-o" or a.startswith(("--output", "--compress-program")) for a in args)
    if name == "git":
        return _git_read_only(args)
    if name in ("pip", "pip3"):
        return bool(args) and args[0] in PIP_READ_ONLY
    if re.fullmatch(r"python(3(\.\d+)?)?", name):
        return _python_read_only(args)
    return False


def _git_read_only(args: list[str]) -> bool:
    while args and args[0] in ("--no-pager", "--no-optional-locks", "-P"):
        args = args[1:]
    if not args or args[0].startswith("-"):
        return False  # global options such as -C / -c change what runs
    sub, rest = args[0], args[1:]
    if any(a.startswith("--output") or a == "--ext-diff" for a in rest):
        return False
    if sub == "grep" and any(re.match(r"-[A-Za-z]*O|--open-files-in-pager", a) for a in rest):
        return False  # -O runs a pager program on the matching files
    if sub in GIT_READ_ONLY:
        return True
    if sub == "branch":
        return all(a in ("-a", "-r", "-v", "-vv", "--list", "--all", "--show-current")
                   for a in rest)  # fmt: skip
    if sub in ("remote", "tag", "stash"):
        return rest in ([], ["-v"], ["list"], ["-l"])
    return False


def _python_read_only(args: list[str]) -> bool:
    if args in (["--version"], ["-V"]):
        return True
    if len(args) >= 2 and args[0] == "-c":
        return not PYTHON_SIDE_EFFECTS.search(args[1])
    return False


# Without a sandbox, the commands that may run unasked: programs that only read and print,
# whose options cannot name a program to run or a file to write. Not git (hooks, fsmonitor,
# textconv and pagers come from files a command could have written), not python, not find.
PLAIN_READ_ONLY = {
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep", "fgrep", "rg",
    "file", "stat", "du", "df", "tree", "which", "whoami", "date", "uname", "true", "false",
    "uniq", "cut", "diff", "cmp", "basename", "dirname", "realpath", "readlink", "nl",
    "sha256sum", "sha1sum", "md5sum", "seq", "nproc", "free", "id", "hostname", "comm",
}  # fmt: skip
# Characters that make the shell expand a word into something the text does not show.
_EXPANSIONS = re.compile(r"[$`*?\[\]{}~\\!]")


def is_plain_read_only(cmd: SimpleCommand) -> bool:
    """A known read-only program, called by its bare name as written, with no variables,
    redirections or expansions, and no option that carries a path (``grep -f/etc/x``)."""
    if cmd.assignments or cmd.redirects or not cmd.words:
        return False
    first = cmd.text.split(None, 1)[0] if cmd.text.strip() else ""
    if cmd.words[0] not in PLAIN_READ_ONLY or first != cmd.words[0]:
        return False  # a path (tools/ls) or a wrapper (env ls, nohup ls)
    for word in cmd.words[1:]:
        if _EXPANSIONS.search(word) or (word.startswith("-") and "/" in word):
            return False
    return is_read_only(cmd)


# Options that make a listed "read-only" command run a program or write a file. We run as
# whoever started us (often root in containers), so setting the clock or hostname counts too.
_RUNS_OR_WRITES = {
    "rg": ("--pre",),  # runs a program on every file searched
    "tree": ("-o",),  # writes its listing to a file
    "file": ("-C", "--compile"),  # writes a compiled magic file
    "date": ("-s", "--set"),
}
_NVIDIA_SMI_SETTERS = re.compile(
    r"^(-pm|-pl|-r|-c|-e|-am|-caa|-ac|-rac|-acp|-lgc|-rgc|-lmc|-rmc|-mig|-cc|--persistence-mode"
    r"|--power-limit|--gpu-reset|--compute-mode|--ecc-config|--applications-clocks"
    r"|--lock-gpu-clocks|--lock-memory-clocks|--reset|--multi-instance-gpu|--accounting-mode"
    r"|--clear-accounted-apps|--auto-boost|--cuda-clocks|mig|nvlink|clocks|drain|vgpu|conf-compute)"
)


def _runs_or_writes(name: str, args: list[str]) -> bool:
    """Whether this use of a command in ``READ_ONLY_COMMANDS`` is not read-only after all."""
    flags = _RUNS_OR_WRITES.get(name, ())
    if any(a == f or a.startswith(f + "=") or (len(f) == 2 and a.startswith(f)) for a in args
           for f in flags):  # fmt: skip
        return True
    operands = [a for a in args if not a.startswith("-")]
    if name == "uniq":
        return len(operands) > 1  # "uniq IN OUT" writes OUT
    if name == "hostname":
        return bool(operands) or any(a in ("-F", "--file", "-b", "--boot") for a in args)
    if name == "nvidia-smi":
        return any(_NVIDIA_SMI_SETTERS.match(a) for a in args)
    return False


# Options of grep / rg that take the next word as their value.
_VALUE_OPTIONS_COMMON = {
    "-A", "-B", "-C", "-e", "-f", "-m", "--regexp", "--file", "--max-count", "--context",
    "--after-context", "--before-context", "--color", "--colors",
}  # fmt: skip
_VALUE_OPTIONS = {
    "rg": _VALUE_OPTIONS_COMMON | {
        "-g", "-t", "-T", "-M", "-j", "-E", "-r", "-d", "--glob", "--iglob", "--type",
        "--type-not", "--type-add", "--max-columns", "--replace", "--encoding", "--sort",
        "--sortr", "--threads", "--max-depth", "--pre", "--pre-glob", "--max-filesize",
        "--context-separator", "--path-separator",
    },
    "grep": _VALUE_OPTIONS_COMMON | {
        "-d", "-D", "--include", "--exclude", "--exclude-dir", "--label", "--devices",
        "--directories", "--binary-files",
    },
}  # fmt: skip


def _split_search_args(name: str, args: list[str]) -> tuple[list[str], list[str]]:
    """(options, path operands) of a grep/rg command line: option values and the pattern
    (the first operand, unless -e/-f gave it) are left out of the operands."""
    takes_value = _VALUE_OPTIONS["rg" if name == "rg" else "grep"]
    options: list[str] = []
    operands: list[str] = []
    pattern_given = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            operands += args[i + 1 :]
            break
        if a.startswith("-") and a != "-":
            options.append(a)
            if a in ("-e", "-f", "--regexp", "--file") or a.startswith(("--regexp=", "--file=")):
                pattern_given = True
            if a in takes_value:
                i += 1
        else:
            operands.append(a)
        i += 1
    if not pattern_given and operands:
        operands = operands[1:]
    return options, operands


def recursive_search(cmd: SimpleCommand) -> tuple[list[str], list[str]] | None:
    """For a command that reads whole directory trees (``grep -r``, ``rg``): the ``rg --files``
    flags that list the files it reads, and its operand words (any may be a directory).
    None for other commands."""
    name = os.path.basename(cmd.name) if cmd.words else ""
    if name not in ("grep", "egrep", "fgrep", "rg"):
        return None
    options, operands = _split_search_args(name, cmd.words[1:])
    if name in ("grep", "egrep", "fgrep"):
        short = "".join(o[1:] for o in options if not o.startswith("--"))
        deref = "R" in short or "--dereference-recursive" in options
        recursive = deref or "r" in short or "--recursive" in options
        recursive = recursive or any(o in ("--directories=recurse",) for o in options)
        if not recursive:
            return None
        return ["--no-ignore", "--hidden", *(["--follow"] if deref else [])], operands
    if name == "rg":
        flags: list[str] = []
        unrestricted = sum(o.count("u") for o in options if re.fullmatch(r"-u+", o))
        if unrestricted >= 1 or any(o.startswith("--no-ignore") for o in options):
            flags.append("--no-ignore")
        if unrestricted >= 2 or "--hidden" in options or "-." in options:
            flags.append("--hidden")
        if "-L" in options or "--follow" in options:
            flags.append("--follow")
        return flags, operands
    return None


# journal-agent's own subcommands that agents are told to run: they write only through the
# journal store's validated, locked append, or under .journal/ (records). Not `trace`, which can
# import a user's model factory (arbitrary code), nor `journal repair`, nor anything that calls
# a model.
OWN_SAFE_SUBCOMMANDS = {
    ("journal", "append"), ("journal", "check"), ("journal", "list"), ("journal", "show"),
    ("journal", "search"), ("journal", "related"), ("journal", "refresh"), ("estimate",),
    ("measurements",), ("agents",), ("commands",), ("ledger",), ("ledger", "check"),
    ("ledger", "session"), ("ledger", "insight"), ("ledger", "add-item"), ("ledger", "move"),
    ("ledger", "add-action"), ("ledger", "tick"), ("ledger", "add-goal"),
    ("ledger", "tick-goal"), ("ledger", "updated"), ("ledger", "apply"),
}  # fmt: skip


def is_own_safe_command(cmd: SimpleCommand) -> bool:
    """``journal-agent journal append --file …``, ``journal-agent estimate …`` and the like."""
    if any(op in OUTPUT_REDIRECTS and target not in SAFE_DEVICES for op, target in cmd.redirects):
        return False
    words = cmd.words
    if any("$" in w or "`" in w or "<(" in w for w in words):
        return False
    if words and os.path.basename(words[0]) == "journal-agent":
        args = words[1:]
    elif (
        len(words) >= 3
        and re.fullmatch(r"python(3(\.\d+)?)?", os.path.basename(words[0]))
        and words[1:3] == ["-m", "journal_agent"]
    ):
        args = words[3:]
    else:
        return False
    if "--eject" in args or any(a.startswith("--eject=") for a in args):
        return False
    if args[:1] == ["ledger"] and len(args) > 1 and not args[1].startswith("-"):
        return tuple(args[:2]) in OWN_SAFE_SUBCOMMANDS  # not `ledger init`
    return tuple(args[:1]) in OWN_SAFE_SUBCOMMANDS or tuple(args[:2]) in OWN_SAFE_SUBCOMMANDS


def candidate_paths(cmd: SimpleCommand) -> list[str]:
    """Every string in this command that may name a file: checked against the workspace."""
    out: list[str] = []
    for op, target in cmd.redirects:
        if op in (">&", "<&") and (target.isdigit() or target == "-"):
            continue
        if op in ("<<", "<<<"):
            continue  # a here-document delimiter / here-string is data, not a path
        out.append(target)
    for assign in cmd.assignments:
        out.append(assign.split("=", 1)[1])
    for i, word in enumerate(cmd.words):
        word = word.strip("`")
        if i == 0 and _is_system_program(word):
            continue
        if word.startswith("-"):
            if "=" in word:
                out.append(word.split("=", 1)[1])
            continue
        if any(ch.isspace() for ch in word) or "'" in word or '"' in word:
            # A file name with spaces, or a code string (python -c, awk program, ...): the
            # word as a whole, and every path-looking piece inside it.
            out.append(word)
            out.extend(m.group(1) for m in EMBEDDED_PATH.finditer(word))
            continue
        out.append(word)
    if cd_target(cmd) == "~":
        out.append("~")  # a bare `cd` goes home
    return [p for p in out if p]


def _is_system_program(word: str) -> bool:
    if not word.startswith("/"):
        return False
    prefixes = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/")
    return word.startswith(prefixes) or os.path.dirname(word) in _python_bin_dirs()


def _python_bin_dirs() -> set[str]:
    import sys

    return {os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")}


def is_safe_device(word: str) -> bool:
    return word in SAFE_DEVICES or word.startswith("/dev/fd/")


def escapes(word: str, cwd: Path, root: Path) -> Path | None:
    """The outside-the-workspace path ``word`` names, or None if it stays inside."""
    if is_safe_device(word):
        return None
    if word.startswith("$HOME") or word.startswith("${HOME}"):
        return Path(os.path.expanduser("~"))
    if word.startswith("~"):
        return Path(os.path.expanduser(word.split("/", 1)[0]) or "/")
    candidate = Path(word) if word.startswith("/") else cwd / word
    try:
        resolved = Path(os.path.realpath(candidate))
    except (OSError, ValueError):
        return candidate
    if resolved == root or root in resolved.parents:
        return None
    return resolved


def cd_target(cmd: SimpleCommand) -> str | None:
    """For ``cd DIR`` / ``pushd DIR``: the directory word ("~" for a bare ``cd``)."""
    if cmd.name not in ("cd", "pushd"):
        return None
    args = [a for a in cmd.words[1:] if not a.startswith("-") or a == "-"]
    if not args:
        return "~"
    return args[0]
