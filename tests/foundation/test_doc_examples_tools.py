"""The examples of the pages in test_doc_examples.TOOLS, rerun in the workspaces of
docs/example_scenes.py (built once for this file) and compared with what the docs say."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.foundation.doc_examples import check, checked, scenes
from tests.foundation.test_doc_examples import TOOLS


@pytest.fixture(scope="module", autouse=True)
def _scenes() -> Iterator[None]:
    yield from scenes()


@pytest.mark.parametrize("example", checked(*TOOLS))
def test_a_documented_example_prints_what_the_docs_say(example):
    check(example)
