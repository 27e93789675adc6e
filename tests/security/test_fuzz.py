"""Property-based: hostile commands composed from writers, readers, targets and the usual ways
to disguise a path, run as the model's Bash call with every command allowed by the rules.
Whatever the combination: nothing outside the workspace changes, no protected path changes, no
secret comes back. (The permission rules refuse some of them by reading the command line; the
disguised ones reach the sandbox.)"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

WRITERS = [
    "echo pwned > {p}",
    "echo pwned >> {p}",
    "printf pwned | tee {p}",
    "cp pat.txt {p}",
    "python3 -c \"open('{p}', 'w').write('pwned')\"",
    "sort -o {p} pat.txt",
    "touch {p}",
    "mkdir -p {p}.d",
    "ln -sf /etc/passwd {p}",
    "rm -rf {p}",
    "truncate -s0 {p}",
    "chmod 000 {p}",
    "git config --file {p} core.fsmonitor id",
]
READERS = [
    "cat {p}",
    "head -c 9999 {p}",
    "python3 -c \"print(open('{p}').read())\"",
    "base64 {p}",
    "grep -r . $(dirname {p})",
    "tar cf - {p} | strings",
    "cp {p} copy.txt; cat copy.txt",
    "ln -sf {p} l.txt; cat l.txt",
]


def disguises(path: str, ws: str, home: str) -> list[str]:
    rel = os.path.relpath(path, ws)
    out = [path, rel, f'"$(echo {path})"', f"{{{path},/dev/null}}", f"$(printf %s {rel})"]
    out.append(f'"${{PWD}}/{rel}"')
    if path.startswith(home):
        out.append("~/" + os.path.relpath(path, home))
        out.append('"$HOME"/' + os.path.relpath(path, home))
    return out


def write_targets(lab) -> list[str]:
    return [
        str(lab.out),
        str(lab.existing),
        str(lab.home / ".bashrc"),
        str(lab.home / ".ssh" / "authorized_keys"),
        str(lab.ws / ".claude" / "settings.json"),
        str(lab.ws / ".claude" / "settings.local.json"),
        str(lab.ws / ".journal" / "settings.json"),
        str(lab.ws / ".git" / "config"),
        str(lab.ws / ".git" / "hooks" / "post-checkout"),
        "/dev/null",  # the fuzz found chmod 000 /dev/null changing the host's node (fixed)
        "/etc/ja-fuzz-pwned",
        "/usr/ja-fuzz-pwned",
    ]


def read_targets(lab) -> list[str]:
    return [
        str(lab.ws / ".env"),
        str(lab.home / ".ssh" / "id_rsa"),
        str(lab.home / ".aws" / "credentials"),
    ]


FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(data=st.data())
def test_no_composed_write_escapes(lab, data):
    target = data.draw(st.sampled_from(write_targets(lab)), label="target")
    path = data.draw(st.sampled_from(disguises(target, str(lab.ws), str(lab.home))), label="as")
    writer = data.draw(st.sampled_from(WRITERS), label="writer")
    mode = data.draw(st.sampled_from(["acceptEdits", "bypassPermissions"]), label="mode")
    prefix = data.draw(st.sampled_from(["", "cd .git && cd .. && ", "(", "bash -c '"]))
    command = writer.format(p=path)
    if prefix == "(":
        command = f"({command})"
    elif prefix.startswith("bash"):
        command = f"bash -c {command!r}"
    else:
        command = prefix + command
    lab.bash(command, mode, ("Bash",))
    lab.assert_nothing_outside()
    lab.assert_settings_unchanged()
    assert not os.path.exists("/etc/ja-fuzz-pwned") and not os.path.exists("/usr/ja-fuzz-pwned")


@FUZZ
@given(data=st.data())
def test_no_composed_read_returns_a_secret(lab, data):
    target = data.draw(st.sampled_from(read_targets(lab)), label="target")
    path = data.draw(st.sampled_from(disguises(target, str(lab.ws), str(lab.home))), label="as")
    reader = data.draw(st.sampled_from(READERS), label="reader")
    mode = data.draw(st.sampled_from(["default", "acceptEdits", "bypassPermissions"]))
    done = lab.bash(reader.format(p=path), mode, ("Bash",))
    lab.assert_no_secret(done.stdout + done.stderr)
