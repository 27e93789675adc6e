"""``--from FILE`` on estimate, trace, fit and profile: the user's own recipe read as their
framework reads it (``profiling.recipes``), merged under the flags they gave, its settings said
one line each before the result and kept in the record (``extra.recipe``) and in ``--json``
(``recipe``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from journal_agent.cli._common import echo

if TYPE_CHECKING:
    from profiling.config import TrainingConfig
    from profiling.recipes import Recipe
    from profiling.records import RecordStore

FromOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--from",
        help="Read the configuration from your recipe: LitGPT or torchtune YAML, the Hugging "
        "Face Trainer's arguments (JSON, training_args.bin), peft's adapter_config.json, a "
        "bitsandbytes config, torchtitan TOML, or a checkpoint folder holding them (repeat for "
        "several files). Flags you give win over the file.",
        show_default=False,
    ),
]


def parse_with_recipe(
    config: dict[str, Any],
    files: list[Path] | None,
    only: Iterable[str] | None = None,
    command: str = "",
) -> tuple[TrainingConfig, Recipe | None]:
    """The configuration from the flags, over the recipe's values when ``files`` are given;
    ``only``: the fields the command honours (the rest of the recipe is listed as ignored)."""
    from profiling.config import TrainingConfig

    if not files:
        return TrainingConfig.parse(**config), None
    from profiling.errors import ConfigError
    from profiling.recipes import explain, read_recipe, with_recipe

    recipe = read_recipe(files)
    if only is not None:
        keep = set(only)
        for setting in [s for s in recipe.used if s.field not in keep]:
            recipe.used.remove(setting)
            recipe.values.pop(setting.field or "", None)
            why = f"{command} does not run it (estimate or trace it)"
            recipe.ignored.insert(0, setting.model_copy(update={"why": why, "to": None}))
    from profiling.recipes.hf_trainer_ddp import off_ddp

    values = with_recipe(recipe, config)
    try:
        cfg = TrainingConfig.parse(**values)
    except ConfigError as exc:
        raise explain(recipe, exc) from None
    return off_ddp(recipe, cfg, config), recipe


def print_recipe(recipe: Recipe | None) -> None:
    if recipe is None:
        return
    for line in recipe.lines():
        echo(line)
    echo("")


def recipe_store(store: RecordStore, recipe: Recipe | None) -> RecordStore:
    """``store``, whose records also keep the recipe they were read from."""
    if recipe is None:
        return store
    save = store.save

    def save_with_recipe(record: Any) -> str:
        record.extra.setdefault("recipe", recipe.as_json())
        return save(record)

    store.save = save_with_recipe  # type: ignore[method-assign]  # this one store, this run
    return store


__all__ = ["FromOption", "parse_with_recipe", "print_recipe", "recipe_store"]
