"""The light conversion of option values (cli/_typer_values.py) answers as typer's own does.

typer converts through pydantic; the light path skips pydantic for an absent option, a str, a
list of str and a plain Path. Each case here runs both on the same parameter and value: equal
results, or the same error message. A typer release that changes its conversion fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main
from typer import _coercion

from journal_agent.cli._typer_values import _LightParam


def _command() -> typer.main.TyperCommand:
    app = typer.Typer()

    @app.command()
    def cmd(
        name: str | None = None,
        tag: Annotated[list[str] | None, typer.Option("--tag")] = None,
        root: Path | None = None,
        folder: Annotated[Path, typer.Option(exists=True, file_okay=False)] = Path("."),
        count: int = 3,
        ratio: float | None = None,
    ) -> None:
        """A command with one option of each kind."""

    return typer.main.get_command(app)


def _both(param_name: str, value, tmp_path: Path):
    command = _command()
    ctx = command.make_context("cmd", [])
    param = next(p for p in command.params if p.name == param_name)
    answers = []
    for converter in (
        _coercion.build_runtime_param(param.type_descriptor),
        _LightParam(param.type_descriptor, _coercion.build_runtime_param),
    ):
        try:
            answers.append(("value", converter.coerce(value, param=param, ctx=ctx)))
        except typer.BadParameter as exc:
            answers.append(("error", exc.format_message()))
    return answers


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("name", None),
        ("name", "zero"),
        ("name", " x "),
        ("name", ""),
        ("name", "ünïcode with spaces"),
        ("tag", ()),
        ("tag", ("a", "b")),
        ("tag", ["#zero"]),
        ("tag", "one"),  # a bare str for a list: typer's error
        ("root", None),
        ("root", "."),
        ("root", ""),
        ("root", "~/x/../y"),
        ("root", "does/not/exist"),
        ("folder", "."),
        ("folder", "missing-dir"),
        ("folder", "a-file"),
        ("count", "7"),
        ("count", "seven"),
        ("ratio", "0.5"),
        ("ratio", None),
    ],
)
def test_light_conversion_answers_as_typer_does(param, value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    typer_answer, light_answer = _both(param, value, tmp_path)
    assert light_answer == typer_answer
    assert type(light_answer[1]) is type(typer_answer[1])
