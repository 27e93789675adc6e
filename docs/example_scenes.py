"""The workspaces the docs' examples run in (``<!-- example: in=NAME -->``, docs/examples.py).

Each scene is a small, realistic project built once per process: a training script and its
DeepSpeed config, entries appended through the real journal API (so their references have
anchors and their numbers cite real records), a ledger, review history. An example runs its
commands in a fresh copy of its scene, so examples never see each other's changes.

The entries are written with the tests' own template (tests/entries.py) and the search examples
use the relevance journal of tests/journal/search/relevance.py, so the docs show what the tests
check.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.* (the entry template, the relevance journal)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from example_agents import (  # noqa: E402  (docs/ is no package: found beside this file)
    build_bad_definition,
    build_definitions,
    build_drafting,
    build_runtime,
    build_tools,
    drafting_script,
    journal_agent_script,
    scribe_script,
    write,
)

# What the examples' files hold before the code moves on (docs/journal.md, "Checking").
TRAIN = (
    "import torch\n"
    "\n"
    "\n"
    "def train_step(model, batch, optimizer):\n"
    "    loss = model(batch).mean()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
    "    optimizer.zero_grad(set_to_none=True)\n"
    "    return loss\n"
)
DS_CONFIG = (
    "{\n"
    '  "zero_optimization": {\n'
    '    "stage": 2,\n'
    '    "overlap_comm": true\n'
    "  },\n"
    '  "bf16": {"enabled": true},\n'
    '  "train_micro_batch_size_per_gpu": 4\n'
    "}\n"
)
# The estimate the entries cite: the README's quickstart question.
ESTIMATE = {
    "model": "llama-7b",
    "precision": "mixed",
    "optimizer": "adamw",
    "gpus": 2,
    "zero": 2,
    "gpu_mem": 40,
}
ESTIMATE_CMD = (
    "journal-agent estimate --model llama-7b --precision mixed --optimizer adamw "
    "--gpus 2 --zero 2 --gpu-mem 40"
)


@dataclass(frozen=True)
class Scene:
    build: Callable[[Path], None]
    base: str | None = None  # built on a copy of this scene
    # The model's answers, for the commands that call one: journal_agent.testing's scripted
    # /v1/messages endpoint serves them (a fresh script per example) while the example runs.
    script: Callable[[], list] | None = None


ESTIMATE_ID = "est-13d7dbbf"  # a fixed name, so a command line in the docs can cite it


def _estimate_id(root: Path) -> str:
    """The estimate ESTIMATE_CMD makes, saved under ESTIMATE_ID."""
    from journal_agent.paths import measurements_dir
    from profiling import estimate_memory
    from profiling.estimate.record import estimate_record
    from profiling.records import RecordStore

    record = estimate_record(estimate_memory(**ESTIMATE)).model_copy(update={"id": ESTIMATE_ID})
    return RecordStore(measurements_dir(root)).save(record)


def _record_id(root: Path, prefix: str) -> str:
    """The id of the one record of this kind the scene made."""
    from journal_agent.paths import measurements_dir

    [found] = [p.stem for p in measurements_dir(root).glob(f"{prefix}-*.json")]
    return found


def zero_entry(record: str) -> str:
    from tests.entries import render_entry

    return render_entry(
        "ZeRO Stage 2 for Llama-2-7B",
        "2026-11-21",
        context="Reading our training step (`src/train.py:4-6`) and the DeepSpeed config "
        "that shards it (`src/ds_config.json:2-5`).",
        question="Why does Llama-2-7B still not fit two 40 GB GPUs under ZeRO-2?",
        intuition="ZeRO-2 shards the gradients and the optimizer states across the two GPUs, "
        "but each GPU still holds all the weights and its own activations: "
        f"64.80 GB per GPU in mixed precision [m:{record}].",
        tags="#deepspeed #zero #memory-optimization",
        body="\n### 🔍 Key Insights\n- The all-reduce of plain data parallelism becomes a "
        "reduce-scatter: each GPU receives only the gradients of the shard it updates.\n",
    )


def accumulation_entry() -> str:
    from tests.entries import render_entry

    return render_entry(
        "Gradient Accumulation",
        "2026-11-22",
        context="Our micro-batch of 4 is too small for stable training.",
        question="How do eight small batches act like one big batch?",
        intuition="Gradients add up across backward passes until `optimizer.step()`; dividing "
        "the loss by the number of micro-batches makes the sum an average.",
        tags="#training #memory-optimization",
        body="\n### 🔗 Related Concepts\n- **ZeRO Stage 2 for Llama-2-7B** (2026-11-21)\n",
    )


def build_project(root: Path) -> None:
    """A training project before any entry: the code, one estimate record, drafts to append."""
    write(root, "src/train.py", TRAIN)
    write(root, "src/ds_config.json", DS_CONFIG)
    record = _estimate_id(root)
    write(root, "entry.md", zero_entry(record))
    from tests.entries import render_entry

    write(
        root,
        "bad.md",
        render_entry(
            "ZeRO Offload",
            "2026-11-23",
            context="Reading `src/optim.py:12`, where the optimizer is built.",
            question="What does offloading the optimizer states save?",
            intuition="Offloading the Adam states to the CPU saves 28 GB on each GPU.\n\n"
            f"Without offload the estimate needs 95 GB per GPU [m:{record}].",
            tags="#zero #offload",
        ),
    )


def build_entries(root: Path) -> None:
    """The project with its two entries appended (the code as they cite it)."""
    from journal_agent.journal import api
    from journal_agent.workspace import Workspace

    record = _record_id(root, "est")
    for text in (zero_entry(record), accumulation_entry()):
        outcome = api.append_entry(Workspace(root), text)
        assert outcome.appended, outcome.problems
    (root / "entry.md").unlink()
    (root / "bad.md").unlink()


def build_journal(root: Path) -> None:
    """The entries after the code moved on: a docstring added at the top of train.py (its
    cited lines moved down one) and ZeRO's stage changed in the config; a draft to link."""
    write(root, "src/train.py", '"""One optimizer step of our training loop."""\n' + TRAIN)
    write(root, "src/ds_config.json", DS_CONFIG.replace('"stage": 2', '"stage": 3'))
    from tests.entries import render_entry

    write(
        root,
        "draft.md",
        render_entry(
            "ZeRO Stage 3",
            "2026-11-24",
            context="The 13B model does not fit even with ZeRO-2.",
            question="What does sharding the weights too cost?",
            intuition="ZeRO-3 shards the parameters as well as the gradients and optimizer "
            "states; each layer's weights are gathered just before they are used.",
            tags="#zero #deepspeed",
        ),
    )


SCALE = "def scale(x):\n    y = x * 2\n    z = y + 1\n    return z\n"


def build_moved_and_changed(root: Path) -> None:
    """An entry citing a whole function, then two lines inserted above it and one of its
    lines edited (docs/journal.md: what `--accept` is offered for)."""
    from journal_agent.journal import api
    from journal_agent.workspace import Workspace
    from tests.entries import render_entry

    write(root, "m.py", SCALE)
    entry = render_entry(
        "Scaling",
        "2026-11-21",
        context="Reading `m.py:1-4`, the scaling helper.",
        question="Why add one after doubling?",
        intuition="The offset keeps zero inputs away from zero.",
        tags="#python",
    )
    outcome = api.append_entry(Workspace(root), entry)
    assert outcome.appended, outcome.problems
    write(root, "m.py", "import os\n\n" + SCALE.replace("y + 1", "y + 2"))


def build_disagreeing(root: Path) -> None:
    """The entries, then two more that disagree on what the DeepSpeed config says and a copy of
    the accumulation entry forced in under another title (docs/journal.md: entries that
    disagree)."""
    from journal_agent.journal import api
    from journal_agent.workspace import Workspace
    from tests.entries import render_entry

    ws = Workspace(root)
    for title, date, text in (
        ("ZeRO Config", "2026-11-23", "`src/ds_config.json:3` sets stage to 2."),
        ("Sharding Parameters", "2026-11-24", "In `src/ds_config.json:3` the stage is 3."),
    ):
        entry = render_entry(
            title,
            date,
            context="Reading the DeepSpeed config.",
            question=f"What does {title.lower()} change?",
            intuition=text,
            tags="#deepspeed",
        )
        assert api.append_entry(ws, entry).appended
    copy = accumulation_entry().replace(
        "## Gradient Accumulation (2026-11-22)", "## Gradient Accumulation Again (2026-11-25)"
    )
    assert api.append_entry(ws, copy, force=True).appended


def build_mojibake(root: Path) -> None:
    """The entries after an editor read the journal as cp1252 and saved it again: the first
    entry's 🔍 and the second's 🏷️ double-encoded, losing the bytes cp1252 does not define."""
    journal = root / "learning_journal.md"
    text = journal.read_text(encoding="utf-8")
    for heading, nth in (("### 🔍 Key Insights", 0), ("### 🏷️ Tags", 1)):
        broken = heading.encode("utf-8").decode("cp1252", errors="ignore")
        at = -1
        for _ in range(nth + 1):
            at = text.index(heading, at + 1)
        text = text[:at] + broken + text[at + len(heading) :]
    journal.write_text(text, encoding="utf-8")


def build_relevance(root: Path) -> None:
    """The relevance set's 43 entries (tests/journal/search/relevance.py), indexed and embedded,
    and drafts from the duplicate calibration set (tests/journal/search/duplicate_pairs.py)."""
    from journal_agent.journal import api
    from journal_agent.workspace import Workspace
    from tests.journal.search import duplicate_pairs, relevance

    relevance.write_journal(root)
    api.index(Workspace(root))
    pairs = dict(duplicate_pairs.PARAPHRASE_PAIRS)
    write(root, "zero2-again.md", relevance.render("zero2", pairs["zero2"], 28))
    write(root, "lora-again.md", relevance.render("lora", pairs["lora"], 28))


def build_learning(root: Path) -> None:
    """Three entries studied over three days (the second cites the estimate), no ledger yet."""
    from journal_agent.journal import api
    from journal_agent.workspace import Workspace
    from tests.entries import render_entry

    record = _estimate_id(root)
    entries = [
        render_entry(
            "Gradient Accumulation",
            "2026-11-20",
            context="Our micro-batch of one sample is too small for stable training.",
            question="How can eight small batches act like one big batch?",
            intuition="Gradients add up across backward passes until `optimizer.step()`; "
            "dividing the loss by the number of micro-batches makes the sum an average, so "
            "eight micro-batches of one sample update the weights like one batch of eight.",
            tags="#gradient-accumulation #training-loop",
        ),
        render_entry(
            "ZeRO Stage 2",
            "2026-11-21",
            context="Fitting Llama-7B on two 40 GB GPUs.",
            question="Why shard gradients as well as optimizer state?",
            intuition="Each GPU updates only its shard of the parameters, so it needs only "
            "that shard's gradients; still 64.80 GB per GPU in mixed precision "
            f"[m:{record}].",
            tags="#zero #deepspeed #memory",
        ),
        render_entry(
            "Activation Checkpointing",
            "2026-11-22",
            context="The activations are what is left after ZeRO-2.",
            question="What does recomputation trade for memory?",
            intuition="Keep the inputs of a few layers and recompute the rest in the "
            "backward pass: about one more forward pass of compute.",
            tags="#checkpointing #memory",
        ),
    ]
    for text in entries:
        outcome = api.append_entry(Workspace(root), text)
        assert outcome.appended, outcome.problems


def build_feedback(root: Path) -> None:
    """/learn ejected, Claude Code's Edit changed it, the feedback recorded, and then someone
    rewrote the history's second line to name a file outside .claude/."""
    import subprocess

    learn = ".claude/commands/learn.md"
    run = [sys.executable, "-m", "journal_agent"]
    subprocess.run(
        [*run, "commands", "--eject", "learn"], cwd=root, check=True, capture_output=True
    )
    path = root / learn
    path.write_text(path.read_text().replace(*LEARN_EDIT), encoding="utf-8")
    subprocess.run(
        [*run, "feedback", "Practice problems, please", "--file", "learn"],
        cwd=root, check=True, capture_output=True,
    )  # fmt: skip
    history = root / ".journal" / "history" / "feedback.jsonl"
    first = json.loads(history.read_text().splitlines()[0])
    forged = {**first, "n": 2, "file": "../victim/pwned.txt", "feedback": "x"}
    with history.open("a", encoding="utf-8") as f:
        f.write(json.dumps(forged) + "\n")


# What Claude Code's Edit changes in the ejected /learn when the user asks for practice problems.
LEARN_EDIT = (
    '**Action**: Add "🎯 Practice Exercise" section with verification steps\n',
    '**Action**: Add "🎯 Practice Exercise" section with verification steps '
    "(this user asked for it: always add one)\n",
)


def build_recipes(root: Path) -> None:
    """Real recipe files of five frameworks (tests/profiling/recipes/fixtures: copies of public
    configs, sources named there), the Trainer's arguments naming transformers' DeepSpeed
    ZeRO-3 config, and a Hugging Face Trainer checkpoint folder written by
    transformers' own classes (training_args.bin, a 4-bit model config.json, peft's
    adapter_config.json)."""
    fixtures = REPO / "tests" / "profiling" / "recipes" / "fixtures"
    for src, name in (
        ("litgpt/llama-3.1-8b-qlora.yaml", "qlora.yaml"),
        ("torchtune/8B_qlora_single_device.yaml", "8B_qlora_single_device.yaml"),
        ("torchtitan/llama3_8b.toml", "llama3_8b.toml"),
        ("torchtitan/llama3_405b.toml", "llama3_405b.toml"),
        ("deepspeed/ds_config_zero3.json", "ds_config_zero3.json"),
    ):
        shutil.copyfile(fixtures / src, root / name)
    # The Trainer's arguments of a ZeRO-3 offload run, naming transformers' own DeepSpeed config.
    trainer = {
        "output_dir": "out", "per_device_train_batch_size": 4, "gradient_accumulation_steps": 8,
        "bf16": True, "gradient_checkpointing": True, "learning_rate": 2e-5,
        "model_name_or_path": "meta-llama/Llama-3.1-8B", "deepspeed": "ds_config_zero3.json",
    }  # fmt: skip
    (root / "zero3_args.json").write_text(json.dumps(trainer, indent=2), encoding="utf-8")
    import warnings

    import torch
    import transformers

    from profiling.models.hf_config import catalogue_entry

    folder = root / "checkpoint-500"
    folder.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = transformers.TrainingArguments(
            output_dir="out", per_device_train_batch_size=4, gradient_accumulation_steps=4,
            gradient_checkpointing=True, optim="paged_adamw_8bit", report_to=[],
        )  # fmt: skip
    args.bf16 = True  # (validated against a GPU this machine lacks)
    torch.save(args, folder / "training_args.bin")
    config = dict(catalogue_entry("llama-3.1-8b")["config"])
    config["quantization_config"] = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True
    ).to_dict()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    adapter = {
        "peft_type": "LORA", "r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "bias": "none",
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "task_type": "CAUSAL_LM",
        "base_model_name_or_path": "meta-llama/Llama-3.1-8B",
    }  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps(adapter, indent=2), encoding="utf-8")


SCENES: dict[str, Scene] = {
    "project": Scene(build_project),
    "entries": Scene(build_entries, base="project"),
    "journal": Scene(build_journal, base="entries"),
    "mojibake": Scene(build_mojibake, base="entries"),
    "moved-and-changed": Scene(build_moved_and_changed),
    "disagreeing": Scene(build_disagreeing, base="entries"),
    "relevance": Scene(build_relevance),
    "learning": Scene(build_learning),
    "feedback": Scene(build_feedback),
    "tools": Scene(build_tools),
    "runtime": Scene(build_runtime, script=scribe_script),
    "background": Scene(lambda root: None, base="runtime", script=journal_agent_script),
    "drafting": Scene(build_drafting, script=drafting_script),
    "definitions": Scene(build_definitions),
    "bad-definition": Scene(build_bad_definition),
    "recipes": Scene(build_recipes),
}

_built: dict[str, Path] = {}
_tmp: list[str] = []


def scenes_dir() -> Path:
    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="doc-scenes-"))
    return Path(_tmp[0])


def keep(name: str, work: Path) -> None:
    """Keep a block's workspace, after its commands ran, as the scene ``name`` (``keep=NAME``
    in its marker): later blocks can run ``in=NAME``."""
    root = scenes_dir() / name / "demo"
    shutil.rmtree(root.parent, ignore_errors=True)
    shutil.copytree(work, root, symlinks=True)
    _built[name] = root


def known(name: str) -> bool:
    return name in _built or name in SCENES


def prepare(name: str) -> Path:
    """The scene's directory, built on first use (with the scenes it is based on)."""
    if name in _built:
        return _built[name]
    scene = SCENES.get(name)
    if scene is None:
        raise SystemExit(f"no example scene {name!r}; the scenes are {', '.join(SCENES)}")
    root = scenes_dir() / name / "demo"
    if scene.base is not None:
        shutil.copytree(prepare(scene.base), root, symlinks=True)
    else:
        root.mkdir(parents=True)
    # Built in this process, in the environment the examples run in (docs/examples.py _env):
    # no API key or gateway, none of journal-agent's own switches, a HOME of its own.
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(("ANTHROPIC_", "JOURNAL_AGENT_", "CLAUDE_"))]:
        del os.environ[key]
    # One key for every scene (a scene built on another cites its records): their records are
    # the scene's user's own, sealed again under each example's key (examples._adopt_records).
    os.environ.update({"NO_COLOR": "1", "HOME": str(root.parent / "home"),
                       "XDG_CONFIG_HOME": str(scenes_dir() / "config")})  # fmt: skip
    try:
        scene.build(root)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    _built[name] = root
    return root


def cleanup() -> None:
    for path in _tmp:
        shutil.rmtree(path, ignore_errors=True)
    _tmp.clear()
    _built.clear()
