"""journal_agent.lightjson reads and writes exactly what json does (the hooks use it instead of
``import json``, which costs them its ``re``)."""

from __future__ import annotations

import json
import math
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
