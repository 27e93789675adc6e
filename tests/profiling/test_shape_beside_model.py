"""A shape flag beside a named model (#31): ``--model llama-7b --layers 4`` dropped --layers
without a word while the model's own shape was used. Each shape flag (--layers --hidden --heads
--kv-heads --ffn --vocab) now replaces that field of the model in estimate, trace, fit and
profile alike, with a note; what a model has no setting for (--arch, grouped key/value heads
on GPT-2, BLOOM's MLP width, T5's two stacks) is one sentence. Through the CLI."""

from __future__ import annotations

import pytest

from profiling.models.hf_config import load_hf
from profiling.models.shape_overrides import overridden
from profiling.models.workloads import WORKLOADS

# one value per flag tiny-llama (h 64, 4 heads over 2 key/value heads, f 172, V 512) can take
FLAGS = {"layers": 3, "hidden": 96, "heads": 8, "kv_heads": 1, "ffn": 320, "vocab": 1000}


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _params(model: str, **fields: int) -> int:
    own = WORKLOADS[model] if model in WORKLOADS else load_hf(model)
    return overridden(own, model, fields).param_count()


@pytest.mark.parametrize("field", list(FLAGS))
def test_estimate_and_trace_take_each_shape_flag_beside_a_model(cli, tmp_path, field) -> None:
    args = ("--model", "tiny-llama", "--seq", "32", _flag(field), str(FLAGS[field]))
    est = cli.json("estimate", *args, "--root", str(tmp_path))
    plain = cli.json("estimate", *args[:4], "--root", str(tmp_path))
    expected = _params("tiny-llama", **{field: FLAGS[field]})
    assert est["params"] == expected != plain["params"]
    (note,) = [n for n in est["notes"] if "given beside --model tiny-llama" in n]
    assert note.startswith(f"{_flag(field)} {FLAGS[field]} given beside")
    traced = cli.json("trace", *args, "--root", str(tmp_path))
    assert traced["params"] == expected
    assert note in traced["notes"]
    assert traced["peak_bytes"] == est["per_gpu_bytes"]  # the same model on both sides


def test_a_hugging_face_config_is_changed_in_its_own_fields(cli, tmp_path) -> None:
    """GPT-2's config names them n_layer, n_embd, n_head: the estimate reads the changed
    config and transformers builds it for the trace, the same parameters on both sides."""
    shape = {"layers": 1, "hidden": 64, "heads": 4, "vocab": 500}
    args = ["--model", "hf:gpt2", "--seq", "16"]
    for field, value in shape.items():
        args += [_flag(field), str(value)]
    est = cli.json("estimate", *args, "--root", str(tmp_path))
    expected = _params("hf:gpt2", **shape)
    # 4h MLP (GPT2Config's n_inner None), 1,024 learned positions, a tied head
    assert (
        expected
        == 500 * 64 + 1024 * 64 + (4 * 64 * 64 + 4 * 64 + 2 * 64 * 256 + 256 + 5 * 64) + 2 * 64
    )
    assert est["params"] == expected
    traced = cli.json("trace", *args, "--root", str(tmp_path))
    assert traced["params"] == expected


def test_profile_and_fit_run_the_changed_model(cli, tmp_path) -> None:
    args = ("--model", "tiny-llama", "--layers", "3", "--vocab", "300")
    expected = _params("tiny-llama", layers=3, vocab=300)
    run = cli.json("profile", *args, "--seq", "16", "--steps", "1", "--warmup", "0",
                   "--device", "cpu", "--no-trace", "--root", str(tmp_path))  # fmt: skip
    assert run["params"] == expected
    note = ("--layers 3 --vocab 300 given beside --model tiny-llama: replace its own (layers 2, "
            "vocabulary 512)")  # fmt: skip
    assert note in run["notes"]
    fit = cli.json("fit", *args, "--gpu-mem", "1", "--confirm", "0", "--root", str(tmp_path))
    assert note in fit["notes"]
    assert fit["fitting"][0]["config"]["layers"] == 3


REFUSED = {
    ("tiny-llama", "--arch", "gpt2"): "--arch gpt2 names the blocks of a shape given by hand",
    ("tiny-gpt2", "--kv-heads", "2"): "--kv-heads cannot replace tiny-gpt2's own key/value heads",
    ("hf:bloom-560m", "--ffn", "512"): "BLOOM's MLP is 4 × hidden",
    ("hf:t5-small", "--layers", "2"): "T5 has two stacks",
    ("tiny-llama", "--heads", "3"): "--heads 3 leaves tiny-llama 3 attention heads over 2 key/",
    ("tiny-llama", "--hidden", "66"): "--hidden 66 leaves tiny-llama a hidden size of 66 over 4",
}


@pytest.mark.parametrize("args", list(REFUSED))
def test_what_a_model_cannot_take_is_one_sentence_in_every_command(cli, args) -> None:
    model, flag, value = args
    # profile measures named models only: it has no --arch (a usage error, exit 2)
    for command in ("estimate", "trace", "fit", *(("profile",) if flag != "--arch" else ())):
        done = cli(command, "--model", model, flag, value, "--seq", "16")
        assert done.returncode == 1, (command, done.stdout)
        assert REFUSED[args] in done.stderr, (command, done.stderr)
        assert "Traceback" not in done.stderr
