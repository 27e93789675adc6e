"""journal_agent.lightjson reads and writes exactly what json does (the hooks use it instead of
``import json``, which costs them its ``re``)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from journal_agent import lightjson

VALUES = [
    {"session_id": "a45b", "files": [{"path": "train.py", "lines": [[8, 10]]}], "n": 0},
    {"text": '★ Insight ─── é 中文 \u2028 \x00 "quoted" \\ /', "z": None, "a": True},
    [1, -2, 3.5, 1e300, -0.0, 12345678901234567890, [], {}, ""],
    "just a string",
    42,
    {"b": {"d": 1, "c": [False, None]}, "a": 2},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("sort_keys", [False, True])
def test_dumps_writes_what_json_writes(value, sort_keys):
    expected = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)
    assert lightjson.dumps(value, sort_keys=sort_keys) == expected
    assert lightjson.loads(expected) == value


def test_loads_reads_what_json_reads_and_fails_where_it_fails():
    rng = random.Random(7)
    docs = [json.dumps(v, indent=rng.choice([None, 1, 2])) for v in VALUES]
    docs += ['  {"a" : [1 ,2]}\r\n', "NaN", "-Infinity", "1E5", '"\\ud83d\\ude00"']
    for doc in docs:
        for data in (doc, doc.encode(), b"\xef\xbb\xbf" + doc.encode()):
            got, want = lightjson.loads(data), json.loads(data)
            assert repr(got) == repr(want) or (math.isnan(got) and math.isnan(want))
    for bad in ["", "  ", "{", '{"a": 1} x', "[1,]", "tru", "{'a': 1}", "\ufeff{}", b"\xff{}"]:
        with pytest.raises(ValueError) as ours:
            lightjson.loads(bad)
        with pytest.raises(ValueError) as theirs:
            json.loads(bad)
        assert type(ours.value) is type(theirs.value), bad
        assert str(ours.value) == str(theirs.value), bad


def test_unserializable_values_fail_as_in_json():
    for value in [{1, 2}, object(), {"a": b"bytes"}]:
        with pytest.raises(TypeError, match="is not JSON serializable"):
            lightjson.dumps(value)
    with pytest.raises(ValueError, match="Circular reference"):
        loop: list = []
        loop.append(loop)
        lightjson.dumps(loop)


def test_importing_it_imports_neither_json_nor_re():
    # As the hook script imports it: the package without its __init__.
    code = (
        "import sys; p = type(sys)('journal_agent'); p.__path__ = [sys.argv[1]]; "
        "sys.modules['journal_agent'] = p; import journal_agent.lightjson as j; "
        "j.loads(j.dumps({'a': [1]})); "
        "print(sorted({'json', 're', 'enum'} & set(sys.modules)))"
    )
    package = str(Path(lightjson.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, package], capture_output=True, text=True
    )
    assert done.stdout.strip() == "[]", done.stderr


def _pythons() -> list[tuple[str, str | None]]:
    """(version, interpreter or None) for each Python the hooks support, 3.10 to 3.13: on PATH
    as python3.N, or under pyenv."""
    import glob
    import shutil

    found = []
    for minor in (10, 11, 12, 13):
        name = f"python3.{minor}"
        pyenv = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/{name}")))
        candidates = [*pyenv[-1:], shutil.which(name)]  # (a pyenv shim may name no version)
        works = [c for c in candidates if c and _runs(c)]
        found.append((f"3.{minor}", works[0] if works else None))
    return found


def _runs(python: str) -> bool:
    try:
        return (
            subprocess.run([python, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


PYTHONS = _pythons()


@pytest.mark.parametrize("version,python", PYTHONS, ids=[v for v, _ in PYTHONS])
def test_malformed_json_fails_as_json_does_in_a_fresh_interpreter(version, python):
    """A fresh interpreter, as a hook runs (-I -S, nothing imported yet): on 3.10 and 3.11 the
    C scanner raised SystemError for bad input before anything had imported json.decoder,
    which escaped the hooks' ValueError handlers (one trailing comma in settings.json stopped
    capture)."""
    if python is None:
        pytest.skip(f"no Python {version} on this machine (python{version} on PATH or pyenv)")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import lightjson\n"
        "for bad in ['{\"a\": 1,}', '[1, tru]', '{\"a\" 1}', '\"\\\\x\"']:\n"
        "    try: lightjson.loads(bad)\n"
        "    except ValueError as e: print(type(e).__name__, e)\n"
        "print(lightjson.loads('{\"ok\": [1]}'))\n"
    )
    package = str(Path(lightjson.__file__).parent)
    done = subprocess.run(
        [python, "-I", "-S", "-c", script, package], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "{'ok': [1]}"
    assert len(lines) == 5 and all(line.startswith("JSONDecodeError ") for line in lines[:4])
    # The same messages as that interpreter's own json module gives.
    theirs = subprocess.run(
        [python, "-I", "-S", "-c", script.replace("import lightjson", "import json as lightjson"),
         package],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert theirs.stdout == done.stdout


@pytest.mark.parametrize("version,python", PYTHONS, ids=[v for v, _ in PYTHONS])
def test_a_trailing_comma_in_settings_does_not_stop_capture(version, python, tmp_path):
    if python is None:
        pytest.skip(f"no Python {version} on this machine (python{version} on PATH or pyenv)")
    repo = Path(lightjson.__file__).parents[1]
    project = tmp_path / "project"
    (project / ".journal").mkdir(parents=True)
    (project / ".journal" / "settings.json").write_text('{"capture": {"enabled": true,}}')
    (project / ".journal" / "review.json").write_text('{"cards": {')  # truncated
    done = subprocess.run(
        [python, "-I", "-S", str(repo / "hooks" / "capture.py"), "SessionStart"],
        input=b'{"session_id": "s1", "source": "startup"}',
        cwd=project,
        env={"PATH": os.environ["PATH"], "CLAUDE_PROJECT_DIR": str(project)},
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    log = project / ".journal" / "hooks.log"
    assert not log.exists() or "SystemError" not in log.read_text()


def test_python_3_9_gets_one_sentence_not_a_silent_failure(tmp_path):
    import glob

    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9.*/bin/python3.9")))
    if not found:
        pytest.skip("no Python 3.9 under pyenv here")
    repo = Path(lightjson.__file__).parents[1]
    project = tmp_path / "project"
    (project / ".journal").mkdir(parents=True)
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [found[-1], "-I", "-S", str(repo / "hooks" / "capture.py"), "Stop"],
        input=b"{}",
        cwd=project,
        env={"CLAUDE_PROJECT_DIR": str(project), "CLAUDE_PLUGIN_DATA": str(data)},
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    line = (project / ".journal" / "hooks.log").read_text()
    assert "capture is off: the hooks need Python 3.10 or newer" in line and "3.9." in line
    assert "3.9." in (data / "hooks-python-too-old").read_text()
