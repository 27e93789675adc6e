"""What a recipe file said, setting by setting: which of our configuration's fields each key set,
and why every other key was left out.

A reader walks the file's keys (nested tables flattened to dotted keys, ``train.micro_batch_size``)
and calls :meth:`Reading.use` for a key that sets one of our fields, :meth:`Reading.ignore` for a
key it knows and leaves out, with the reason. What it never looked at is ignored too, with the
reason the framework's table of known keys gives (``does not change memory``) or, for a key no
table names, that this reader does not know it. A key whose field the configuration does not
have (a behaviour not modelled yet) moves from *used* to *ignored* with that reason, so nothing
is silently dropped and nothing claims more than the estimate does.

No torch, no framework: the files are data.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import BaseModel, Field

from profiling.config import TrainingConfig

NO_MEMORY = "does not change memory"
# FSDP's cpu_offload as each framework hands it to fully_shard (estimate/fsdp_offload.py)
FSDP_OFFLOAD = (
    "FSDP2's CPU offload (CPUOffloadPolicy): the sharded weights, their gradients and the "
    "optimizer's state in host memory, judged against --cpu-mem"
)
# LitGPT and torchtune name torch.optim.Adafactor; --optimizer adafactor is transformers'.
TORCH_ADAFACTOR = (
    "counted as transformers' Adafactor: torch.optim.Adafactor keeps its factors in the "
    "parameters' dtype and a step tensor each, and its step is not traced"
)


class Setting(BaseModel):
    """One key of a recipe file and what became of it."""

    file: str  # the file's name, as given
    key: str  # dotted: ``train.micro_batch_size``
    value: Any  # as written in the file (JSON-able)
    field: str | None = None  # the configuration field it set (used) or would set (ignored)
    to: Any = None  # the value it set
    why: str = ""  # used: how it was read; ignored: the reason

    def line(self) -> str:
        """One line: ``train.micro_batch_size = 2 → --batch 2`` or the reason it was left out."""
        from profiling.config_table import flag_name

        # What the framework's script does, or its default for a key the file leaves out.
        shown = self.key if self.key.startswith("(") else f"{self.key} = {_short(self.value)}"
        if self.field is None and self.why.startswith("read with"):
            return f"{shown} ({self.why})"
        if self.field is not None and self.to is not None and not self.why.startswith("not "):
            target = f"{flag_name(self.field)} {_short(self.to)}"
            return f"{shown} → {target}" + (f" ({self.why})" if self.why else "")
        return f"{shown}: {self.why}"


class Recipe(BaseModel):
    """A training configuration read from the user's own files."""

    framework: str  # "LitGPT finetune lora", "torchtune", "Hugging Face Trainer" …
    files: list[str]
    values: dict[str, Any] = Field(default_factory=dict)  # TrainingConfig fields
    used: list[Setting] = Field(default_factory=list)
    ignored: list[Setting] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # field: the sentence refusing the recipe's value for it, unless a flag gives the field
    refusals: dict[str, str] = Field(default_factory=dict)
    # a flag's field (or a file's key, which no flag answers): the sentence refusing the file
    # unless that flag is given, whatever the recipe set
    refused: dict[str, str] = Field(default_factory=dict)

    def lines(self) -> list[str]:
        """The text the commands print: what was used, then what was left out, one line each
        (settings that move memory first)."""
        out = [f"from {', '.join(self.files)} ({self.framework}):"]
        out += [f"  used: {s.line()}" for s in self.used]
        still = [s for s in self.ignored if s.why == NO_MEMORY or s.why.startswith(NO_MEMORY + ":")]
        moves = [s for s in self.ignored if s not in still]
        out += [f"  ignored: {s.line()}" for s in moves]
        out += [f"  ignored: {s.line()}" for s in still]
        out += [f"  note: {n}" for n in self.notes]
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "files": self.files,
            "values": self.values,
            "used": [s.model_dump(mode="json") for s in self.used],
            "ignored": [s.model_dump(mode="json") for s in self.ignored],
            "notes": self.notes,
        }


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        text = str(value).lower()
    return text if len(text) <= 80 else text[:77] + "…"


class Reading:
    """One file being read: its flattened keys, what was used and what was left out."""

    def __init__(
        self, file: str, data: dict[str, Any], known: list[tuple[str, str]] | None = None
    ) -> None:
        self.file = file
        self.flat = flatten(data)
        self.known = known or []  # (glob pattern over dotted keys, why it is ignored)
        self.used: list[Setting] = []
        self.ignored: list[Setting] = []
        self.notes: list[str] = []
        self.refusals: dict[str, str] = {}  # Recipe.refusals
        self.refused: dict[str, str] = {}  # Recipe.refused
        self._seen: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        return self.flat.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.flat

    def use(self, key: str, field: str, to: Any, why: str = "") -> None:
        """``key`` sets ``field`` to ``to`` (``why``: how the framework's value was read)."""
        self._seen.add(key)
        value = self.flat.get(key)
        self.used.append(Setting(file=self.file, key=key, value=value, field=field, to=to, why=why))

    def imply(self, key: str, field: str, to: Any, why: str) -> None:
        """A setting the framework makes without the file saying it: its default for a key the
        file leaves out, or what its script does (``key`` is then ``(the script)``)."""
        self._seen.add(key)
        value = self.flat.get(key, "(unset)" if not key.startswith("(") else "")
        self.used.append(Setting(file=self.file, key=key, value=value, field=field, to=to, why=why))

    def ignore(self, key: str, why: str, field: str | None = None) -> None:
        """``key`` is left out, for ``why`` (one sentence: what it does, why it is not used)."""
        self._seen.add(key)
        if key not in self.flat:
            return
        value = self.flat[key]
        self.ignored.append(Setting(file=self.file, key=key, value=value, field=field, why=why))

    def refuse(self, key: str, sentence: str, unless: str = "") -> None:
        """The file is not estimated, for ``sentence`` (one, in the file's own keys), unless the
        flag setting the field ``unless`` is given; ``key`` is listed ignored with it."""
        self.ignore(key, sentence)
        self.refused.setdefault(unless or key, sentence)

    def seen(self, *keys: str, main: str = "") -> None:
        """Keys read as part of another setting (``lora_key`` inside the LoRA targets, ``main``):
        each is listed as used together with it, unless a line already says it."""
        said = {x.key for x in self.used + self.ignored}
        for key in keys:
            self._seen.add(key)
            if key in self.flat and key not in said:
                why = f"read with {main}" if main else "read with the settings above"
                self.used.append(Setting(file=self.file, key=key, value=self.flat[key], why=why))

    def unseen(self, prefix: str = "") -> list[str]:
        """The keys under ``prefix`` nothing has looked at yet."""
        return [k for k in self.flat if k.startswith(prefix) and k not in self._seen]

    def finish(self) -> None:
        """Every key not looked at: ignored with the known reason, or as unknown."""
        for key, value in self.flat.items():
            if key in self._seen:
                continue
            why = next((w for pattern, w in self.known if fnmatch.fnmatchcase(key, pattern)), None)
            if why is None:
                why = "not a setting this reader knows; if it changes memory, say it with a flag"
            self.ignored.append(Setting(file=self.file, key=key, value=value, why=why))


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"train": {"micro_batch_size": 2}}`` as ``{"train.micro_batch_size": 2}``; lists and
    scalars stay values; an empty table is kept as a value."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def settle(framework: str, files: list[str], readings: list[Reading]) -> Recipe:
    """The recipe of one or more files read together: a setting for a field the configuration
    lacks is moved to the ignored, and a later file's setting of a field overrides an earlier
    one's (said in a note)."""
    recipe = Recipe(framework=framework, files=files)
    fields = TrainingConfig.model_fields
    for reading in readings:
        recipe.notes += reading.notes
        recipe.refusals.update(reading.refusals)
        recipe.refused.update(reading.refused)
        recipe.ignored += reading.ignored
        for s in reading.used:
            if s.field is None:  # read together with another key
                recipe.used.append(s)
                continue
            if s.field not in fields:
                recipe.ignored.append(
                    s.model_copy(
                        update={
                            "why": f"not modelled yet: it changes memory ({s.why or s.field}), "
                            "and the estimate has no setting for it",
                            "to": None,
                        }
                    )
                )
                continue
            if s.field in recipe.values and recipe.values[s.field] != s.to:
                recipe.notes.append(
                    f"{s.file}'s {s.key} overrides an earlier file's {s.field} "
                    f"({recipe.values[s.field]!r} → {s.to!r})"
                )
            recipe.values[s.field] = s.to
            recipe.used.append(s)
    unmodelled_loss(recipe)
    return recipe


def unmodelled_loss(recipe: Recipe) -> None:
    """A stack's loss the estimate does not model with the rest of the recipe (under FSDP, say)
    moves to the ignored with that reason: the step is estimated with the reference loss."""
    from profiling._config_behaviours import loss_conflict

    conflict = loss_conflict(recipe.values)
    if conflict is None:
        return
    for name in ("loss", "loss_chunks"):
        recipe.values.pop(name, None)
    moved = [s for s in recipe.used if s.field in ("loss", "loss_chunks")]
    recipe.used = [s for s in recipe.used if s not in moved]
    why = f"not modelled yet: {conflict}; estimated with PyTorch's cross-entropy instead"
    recipe.ignored += [s.model_copy(update={"why": why, "to": None}) for s in moved]


__all__ = [
    "FSDP_OFFLOAD",
    "NO_MEMORY",
    "TORCH_ADAFACTOR",
    "Reading",
    "Recipe",
    "Setting",
    "flatten",
    "settle",
    "unmodelled_loss",
]
