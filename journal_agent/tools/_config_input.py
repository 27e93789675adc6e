"""Tool input models generated from ``profiling.config.TrainingConfig`` (one source of truth).

The model sees the configuration's fields, descriptions and choices as the tool's JSON schema;
the tool then builds the real configuration with ``TrainingConfig.parse(style="field")`` so a
bad combination comes back as one sentence naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from journal_agent.tools._schema import tidy_schema
from profiling.config import LEGACY, TrainingConfig, flag_name

if TYPE_CHECKING:
    from journal_agent.tools.base import ToolContext


class _ConfigInput(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=tidy_schema)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: object) -> object:
        # Older field names (dtype, world_size, recompute …) are accepted, not advertised.
        if isinstance(data, dict) and set(data) & set(LEGACY):
            from profiling._config_legacy import map_legacy

            return map_legacy({k: v for k, v in data.items() if v is not None})
        return data

    def config_values(self) -> dict[str, object]:
        """What the caller set, for ``TrainingConfig.parse``."""
        own = set(type(self).extra_fields) - set(TrainingConfig.model_fields)
        return {k: v for k, v in self.model_dump(exclude_unset=True).items() if k not in own}

    extra_fields: ClassVar[tuple[str, ...]] = ()


def config_input_model(
    name: str,
    include: tuple[str, ...] | None = None,
    exclude: tuple[str, ...] = (),
    **extra: tuple[Any, Any],
) -> type[_ConfigInput]:
    """A tool input model: the configuration's fields (``include``, less ``exclude``), with
    their descriptions, choices and defaults, plus the tool's own ``extra`` fields."""
    fields: dict[str, Any] = {}
    for field, info in TrainingConfig.model_fields.items():
        if (include is not None and field not in include) or field in exclude:
            continue
        if field in extra:  # the tool's own spelling of a field, in the configuration's place
            fields[field] = extra[field]
            continue
        annotation = info.annotation
        if field == "params":  # counts as text too: "7B", "124M"
            annotation = int | str | None
            info = Field(None, description=info.description)
        fields[field] = (annotation, info)
    fields.update({k: v for k, v in extra.items() if k not in fields})
    model = create_model(name, __base__=_ConfigInput, **fields)
    model.extra_fields = tuple(extra)
    return model


def as_flags(values: Mapping[str, object]) -> list[str]:
    """Configuration values as the CLI's flags (``{"seq": 128}`` -> ``--seq 128``): how a tool
    that runs ``journal-agent`` in a child process passes them on."""
    args: list[str] = []
    for field, value in values.items():
        flag = flag_name(field)
        if isinstance(value, bool):
            default = TrainingConfig.model_fields[field].default
            if value:
                args.append(flag)
            elif default is None:  # a tri-state switch: --foreach / --no-foreach
                args.append(f"--no-{flag[2:]}")
        elif value is not None:
            args += [flag, str(value)]
    return args


__all__ = ["FROM_FILE_FIELD", "as_flags", "config_input_model", "with_recipe"]


FROM_FILE_FIELD = (
    list[str] | None,
    Field(
        None,
        description="Your recipe, read as its framework reads it: files in the workspace (LitGPT "
        "or torchtune YAML, the Hugging Face Trainer's arguments as JSON or training_args.bin, "
        "peft's adapter_config.json, a bitsandbytes or DeepSpeed config, torchtitan TOML) or a "
        "checkpoint folder holding them. Fields given here win over the files.",
    ),
)


def with_recipe(
    ctx: ToolContext,
    values: dict[str, object],
    from_file: list[str] | None,
    only: tuple[str, ...] | None = None,
    tool: str = "",
) -> tuple[dict[str, object], list[str]]:
    """``values`` over the recipe's (``from_file``, each path confined to the workspace and
    checked as a Read; references inside a recipe are not followed), and the recipe's lines
    for the result; ``only``: the fields the tool honours (the recipe's others are listed as
    ignored)."""
    if not from_file:
        return values, []
    from journal_agent.tools.confined_paths import permitted_path
    from profiling.errors import ConfigError
    from profiling.recipes import FOLDER_FILES, explain, read_recipe
    from profiling.recipes import with_recipe as merged

    paths = []
    for given in from_file:
        path = permitted_path(ctx, "Read", given)
        if path.is_dir():
            paths += [
                permitted_path(ctx, "Read", str(path / name))
                for name in FOLDER_FILES
                if (path / name).is_file()
            ]
        else:
            paths.append(path)
    recipe = read_recipe(paths, follow=False)
    for setting in [x for x in recipe.used if only is not None and x.field not in only]:
        recipe.used.remove(setting)
        recipe.values.pop(setting.field or "", None)
        why = f"{tool} does not run it (estimate or trace it)"
        recipe.ignored.insert(0, setting.model_copy(update={"why": why, "to": None}))
    from profiling.recipes.hf_trainer_ddp import off_ddp

    out = merged(recipe, values)
    try:
        cfg = TrainingConfig.parse(style="field", **out)
    except ConfigError as exc:
        raise explain(recipe, exc) from None
    if not off_ddp(recipe, cfg, values).ddp_find_unused:  # the recipe's, off DDP: listed ignored
        out.pop("ddp_find_unused", None)
    return out, recipe.lines()


def confined_hf_model(ctx: ToolContext, values: dict[str, object]) -> dict[str, object]:
    """``model: hf:PATH`` read by a tool: the path resolved inside the workspace (``..``, an
    absolute path elsewhere or a symlink out is refused) and checked against the permission
    rules as a Read would be — a model folder's ``config.json`` too (a symlink out of the
    workspace there is refused like the folder); a shipped ``hf:NAME`` passes unchanged."""
    model = values.get("model")
    if not (isinstance(model, str) and model.startswith("hf:")):
        return values
    from journal_agent.tools.confined_paths import permitted_path
    from profiling.models.hf_config import catalogue_names

    rest = model.removeprefix("hf:")
    if rest in catalogue_names():
        return values
    path = permitted_path(ctx, "Read", rest)
    if path.is_dir():  # a model folder: its config.json is the file read, so it is checked
        path = permitted_path(ctx, "Read", str(path / "config.json"))
    return {**values, "model": f"hf:{path}"}
