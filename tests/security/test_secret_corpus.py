"""The one secret detector against its corpus (tests/security/secret_corpus.toml): every shape
found, its value gone once redacted (the words around it kept), and every near miss left alone.

The fourth review (#29) found the detector missed .netrc lines, JWTs, ``Authorization: Basic``,
``mysql -p…``, ``sshpass -p``, Azure's ``AccountKey=``, a bare 40-character AWS secret after a
key id, a bare W&B key after "wandb" and "the password is …": each has rows in the corpus."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from journal_agent.secret_text import find_secrets, redact_secrets

CORPUS = tomllib.loads((Path(__file__).parent / "secret_corpus.toml").read_text("utf-8"))
SECRETS = CORPUS["secret"]
NEAR_MISSES = CORPUS["near_miss"]


def _id(case: dict) -> str:
    return case.get("kind") or case["why"]


def test_the_corpus_is_as_large_as_promised():
    assert len(SECRETS) >= 60
    assert len(NEAR_MISSES) >= len(SECRETS)
    missed_before = {".netrc password", "JSON web token", "basic auth credentials",
                     "password on a mysql command line", "sshpass password", "Azure storage key",
                     "AWS secret access key", "W&B API key", "password in prose"}  # fmt: skip
    assert missed_before <= {case["kind"] for case in SECRETS}


@pytest.mark.parametrize("case", SECRETS, ids=[_id(c) for c in SECRETS])
def test_finding_secrets_each_shape_is_found_and_redacted(case):
    text, secret = case["text"], case["secret"]
    assert secret in text
    at = text.index(secret)
    covering = [f for f in find_secrets(text) if f.start <= at < f.end]
    assert [f.kind for f in covering] == [case["kind"]], find_secrets(text)
    redacted = redact_secrets(text)
    assert secret not in redacted and "[REDACTED]" in redacted
    assert find_secrets(redacted) == []  # nothing left to find, nothing found in the marker
    # Only the value goes: what comes before it stays readable.
    assert redacted.startswith(text[: min(f.start for f in find_secrets(text))])


@pytest.mark.parametrize("case", NEAR_MISSES, ids=[_id(c) for c in NEAR_MISSES])
def test_near_misses_are_left_alone(case):
    assert find_secrets(case["text"]) == []
    assert redact_secrets(case["text"]) == case["text"]


def test_a_secret_in_a_long_text_is_found_where_it_is():
    """Line numbers and offsets hold in a text of many lines (what a refusal names)."""
    lines = [c["text"].replace("\n", " ") for c in NEAR_MISSES]
    lines.insert(40, "machine api.github.com login octocat password gh0stSecretValue42")
    text = "\n".join(lines)
    found = find_secrets(text)
    assert [(f.kind, f.line, text[f.start : f.end]) for f in found] == [
        (".netrc password", 41, "gh0stSecretValue42")
    ]
