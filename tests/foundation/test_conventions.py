"""The one-way-to-do-each-thing helpers: errors, lazy public names, the version, units."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import journal_agent
import profiling
from journal_agent.definitions import DefinitionError
from journal_agent.errors import JournalAgentError, UserError, as_user_error
from journal_agent.journal.verify import DraftError
from journal_agent.tools._shell import ShellParseError
from journal_agent.tools.base import ToolError
from profiling.errors import ProfilingError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "error", [UserError, DefinitionError, ToolError, DraftError, ShellParseError]
)
def test_every_expected_failure_has_the_one_root(error: type[Exception]) -> None:
    assert issubclass(error, JournalAgentError)


def test_errors_that_were_value_errors_still_are() -> None:
    # Callers catching ValueError keep working.
    assert issubclass(DraftError, ValueError) and issubclass(ShellParseError, ValueError)


def test_profilings_error_becomes_a_user_error_and_a_bug_does_not() -> None:
    error = as_user_error(ProfilingError("give --model NAME or --params N"))
    assert isinstance(error, UserError) and error.message == "give --model NAME or --params N"
    assert as_user_error(KeyError("bug")) is None
    mine = UserError("what is wrong; what to do", exit_code=3)
    assert as_user_error(mine) is mine


def test_lazy_exports_resolve_on_first_use_and_say_what_is_missing() -> None:
    from profiling.records import RecordStore

    assert profiling.RecordStore is RecordStore
    assert "render_estimate" in dir(profiling)
    with pytest.raises(AttributeError, match="module 'profiling' has no attribute 'nope'"):
        profiling.nope  # noqa: B018
    import journal_agent.runtime as runtime
    import journal_agent.tools as tools

    assert callable(tools.builtin_tools) and callable(runtime.run_agent)
    assert {"AgentLoop", "execute"} <= set(dir(runtime))


def test_the_version_lives_in_one_place() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "profiling/_version.py"
    assert journal_agent.__version__ == profiling.__version__


def test_units_are_public_and_the_old_private_path_still_imports() -> None:
    from profiling._units import parse_count as old
    from profiling.units import parse_count

    assert old is parse_count and parse_count("124M") == 124_000_000
    with pytest.raises(ProfilingError, match=r"write e\.g\. 7e9, 7B or 124M"):
        parse_count("seven")
