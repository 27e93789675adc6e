"""Which model a recipe names, as one of ours: a local folder holding a Hugging Face
``config.json`` (``hf:PATH``), or a Hub id, LitGPT checkpoint folder, torchtune builder or
torchtitan flavour matched to the shipped catalogue (``hf:NAME``).

A Hub id matches a catalogue entry's repository or name after the spellings that do not change
the shape are set aside: the organisation, a ``Meta-`` prefix, ``-hf``, and ``-Instruct`` /
``-it`` / ``-chat`` (an instruction-tuned model has its base model's shape). A name that still
matches nothing is not guessed: the reader says so and asks for ``--model``.

No torch here.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from pathlib import Path

from profiling.models.hf_config import catalogue_entry, catalogue_names

# Names whose model has a catalogue model's exact shape under another name, with why.
SAME_SHAPE = {
    "llama-3-8b": ("llama-3.1-8b", "Llama 3 8B has Llama 3.1 8B's shape (its context is 8,192)"),
    "llama-3-70b": (
        "llama-3.1-70b",
        "Llama 3 70B has Llama 3.1 70B's shape (its context is 8,192)",
    ),
    # torchtune/models/llama3_3/_model_builders.py: llama3_3_70b = llama3_1_70b ("identical
    # models apart from the checkpoints")
    "llama-3.3-70b": ("llama-3.1-70b", "Llama 3.3 70B is Llama 3.1 70B's model"),
    # torchtune/models/qwen2/_model_builders.py qwen2_0_5b, qwen2_1_5b and qwen2_5/
    # _model_builders.py qwen2_5_0_5b, qwen2_5_1_5b_*: the same vocabulary, layers, heads,
    # widths and tied embeddings (bd2a0fc)
    "qwen2-0.5b": ("qwen2.5-0.5b", "Qwen2 0.5B has Qwen2.5 0.5B's shape (torchtune's builders)"),
    "qwen2-1.5b": ("qwen2.5-1.5b", "Qwen2 1.5B has Qwen2.5 1.5B's shape (torchtune's builders)"),
    # qwen2_7b and qwen2_5_7b_base (bd2a0fc): 28 blocks of 3,584, 28 heads, 4 key/value heads,
    # 18,944 wide, a vocabulary of 152,064, an untied head; only max_seq_len differs
    "qwen2-7b": ("qwen2.5-7b", "Qwen2 7B has Qwen2.5 7B's shape (torchtune's builders)"),
}

# torchtune's model builders (torchtune.models.<family>.<builder>) by family and size.
_TORCHTUNE_FAMILIES = {
    "llama2": "llama-2", "llama3": "llama-3", "llama3_1": "llama-3.1", "llama3_2": "llama-3.2",
    "mistral": "mistral", "gemma": "gemma", "gemma2": "gemma-2", "qwen2_5": "qwen2.5",
    "qwen3": "qwen3", "qwen2": "qwen2", "phi3": "phi-3", "phi4": "phi-4", "mixtral": "mixtral",
    "llama3_3": "llama-3.3",
}  # fmt: skip
# Families of one size, which the catalogue names without it: torchtune's phi4_14b is Phi-4
# (microsoft/phi-4, the catalogue's hf:phi-4: 40 layers of 5,120, vocabulary 100,352 in both).
_TORCHTUNE_ONE_SIZE = {"phi4": "14b"}

# torchtitan's model names and flavours.
_TORCHTITAN = {
    ("llama3", "8B"): "llama-3.1-8b",
    ("llama3", "70B"): "llama-3.1-70b",
    ("llama3", "405B"): "llama-3.1-405b",
    ("llama2", "7B"): "llama-2-7b",
    ("llama2", "13B"): "llama-2-13b",
    ("qwen3", "0.6B"): "qwen3-0.6b",
    ("qwen3", "1.7B"): "qwen3-1.7b",
    ("qwen3", "4B"): "qwen3-4b",
    ("qwen3", "8B"): "qwen3-8b",
    ("qwen3", "14B"): "qwen3-14b",
    ("qwen3", "32B"): "qwen3-32b",
    ("qwen3", "30B-A3B"): "qwen3-30b-a3b",
}


# Whether a recipe's own references (a checkpoint folder's config.json, a DeepSpeed config it
# names) are followed: not when an agent's tool reads it (each file it reads is checked apart).
FOLLOW_REFERENCES: ContextVar[bool] = ContextVar("follow_references", default=True)


def _key(text: str) -> str:
    name = text.strip().rstrip("/").split("/")[-1].lower().replace("_", "-")
    name = re.sub(r"^meta-", "", name)
    name = re.sub(r"-(hf|instruct|it|chat)(?=-|$)", "", name)
    return name


def _index() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in catalogue_names():
        out[_key(name)] = name
        out[_key(catalogue_entry(name)["repo"])] = name
    return out


def hub_model(text: str) -> tuple[str | None, str]:
    """(``hf:NAME`` or None, a note): a Hub id or a checkpoint folder's name matched to the
    catalogue."""
    key = _key(text)
    index = _index()
    if key in index:
        return f"hf:{index[key]}", f"{text} is the catalogue's hf:{index[key]}"
    if key in SAME_SHAPE:
        name, why = SAME_SHAPE[key]
        return f"hf:{name}", why
    return None, f"{text} matches no shipped config"


def local_config(folder: object, base: Path | None = None) -> str | None:
    """``hf:PATH`` when ``folder`` (a string from the recipe, relative to ``base``) is a folder
    holding a Hugging Face config.json."""
    if not isinstance(folder, str) or not folder or not FOLLOW_REFERENCES.get():
        return None
    path = Path(folder).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    try:
        if (path / "config.json").is_file():
            return f"hf:{path}"
    except OSError:
        return None
    return None


def torchtune_model(component: str) -> tuple[str | None, bool, bool, str]:
    """(model, lora, qlora, note) for a torchtune builder such as
    ``torchtune.models.llama3_1.qlora_llama3_1_8b``."""
    builder = component.rsplit(".", 1)[-1]
    lora, qlora = builder.startswith(("lora_", "qlora_")), builder.startswith("qlora_")
    base = builder.split("_", 1)[1] if lora else builder
    base = re.sub(r"_base$", "", base)  # (qwen3_8b_base: the base model has the model's shape)
    for family in sorted(_TORCHTUNE_FAMILIES, key=len, reverse=True):
        if base.startswith(family + "_"):
            size = re.sub(r"(?<=\d)_(?=\d)", ".", base[len(family) + 1 :])
            name = _TORCHTUNE_FAMILIES[family]
            model, note = hub_model(name if _TORCHTUNE_ONE_SIZE.get(family) == size else
                                    f"{name}-{size}")  # fmt: skip
            if model is not None:
                return model, lora, qlora, note
            break
    return None, lora, qlora, f"torchtune's {builder} matches no shipped config"


def torchtitan_model(name: object, flavor: object) -> tuple[str | None, str]:
    model = _TORCHTITAN.get((str(name), str(flavor)))
    if model is None:
        return None, f"torchtitan's {name} {flavor} matches no shipped config"
    return f"hf:{model}", f"torchtitan's {name} {flavor} has hf:{model}'s shape"


__all__ = ["FOLLOW_REFERENCES", "hub_model", "local_config", "torchtitan_model", "torchtune_model"]
