"""Hugging Face configs: the shipped catalogue's parameter counts, our blocks and the real
module against them, and bad configs refused in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiling.config import ConfigError, TrainingConfig
from profiling.errors import ProfilingError
from profiling.models.hf_config import (
    FAMILIES,
    catalogue_entry,
    catalogue_names,
    load_hf,
    workload_from_config,
)
from profiling.models.workloads import build_model

NAMES = catalogue_names()
# The "configs people use most": each must be shipped.
REQUIRED = {
    "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "llama-2-7b", "llama-2-13b",
    "mistral-7b", "mixtral-8x7b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b",
    "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "qwen3-0.6b", "qwen3-8b", "qwen3-30b-a3b",
    "gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "phi-3-mini", "phi-4", "gpt2", "olmo-2-7b",
    "olmoe-1b-7b", "deepseek-v2-lite",
}  # fmt: skip


def test_the_catalogue_ships_the_models_people_train() -> None:
    assert set(NAMES) >= REQUIRED


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_is_the_published_one(name: str) -> None:
    entry = catalogue_entry(name)
    # The source: the config's public location on the Hub and the model's publication date.
    assert entry["source"]["url"] == f"https://huggingface.co/{entry['repo']}/blob/main/config.json"
    assert len(entry["source"]["date"]) == 10
    w = load_hf(f"hf:{name}")
    assert w.param_count() == entry["published_params"]
    assert entry["source"]["url"] in w.source


def test_published_counts_spelled_out() -> None:
    """The figures the model cards publish, written here by hand (not read from the files)."""
    published = {
        "llama-3.1-8b": 8_030_261_248,
        "mistral-7b": 7_241_732_096,
        "qwen2.5-0.5b": 494_032_768,
        "gpt2": 124_439_808,
        "mixtral-8x7b": 46_702_792_704,
        "gemma-2-2b": 2_614_341_888,
        # Gemma 1: 256 000 · hidden tied embeddings, head size 256 (one key/value head on 2b)
        "gemma-2b": 2_506_172_416,
        "gemma-7b": 8_537_680_896,
        "qwen3-30b-a3b": 30_532_122_624,
        # Qwen3 dense: 151,936 · hidden embeddings (tied on 1.7B and 4B), q/k norms per head
        "qwen3-1.7b": 1_720_574_976,
        "qwen3-4b": 4_022_468_096,
        "qwen3-14b": 14_768_307_200,
        "qwen3-32b": 32_762_123_264,
        # Llama 2 70B: 80 blocks of 8,192 with 8 key/value heads, 32,000 untied; Llama 3.1 405B:
        # 126 blocks of 16,384, 53,248 wide, 128,256 untied
        "llama-2-70b": 68_976_648_192,
        "llama-3.1-405b": 405_853_388_800,
        # 15.7B total (2.4B activated): 2·102400·2048 embeddings and head, 27 blocks of latent
        # attention, the first with a dense MLP of 10944, 26 with 64 routed + 2 shared experts
        "deepseek-v2-lite": 15_706_484_224,
        # GPT-NeoX's kind: the counts transformers' own classes give (and the model cards)
        "pythia-1b": 1_011_781_632,
        "stablelm-base-alpha-3b": 3_637_321_728,
        "phi-2": 2_779_683_840,
        "falcon-7b": 6_921_720_704,
        # TinyLlama: Llama 2's shape at 22 blocks of 2048, 4 key/value heads, untied head
        "tinyllama-1.1b": 1_100_048_384,
    }
    for name, count in published.items():
        assert load_hf(f"hf:{name}").param_count() == count


# Encoders, encoder-decoders and BLOOM have no blocks of ours: transformers' module is theirs
# (tests/profiling/trace/test_encoders.py, test_t5.py count it and check the refusal without it)
DECODERS = [
    n
    for n in NAMES
    if load_hf(f"hf:{n}").arch not in ("encoder", "t5") and not load_hf(f"hf:{n}").alibi
]


@pytest.mark.parametrize("name", DECODERS)
def test_our_blocks_have_the_counted_parameters(name: str) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    w = load_hf(f"hf:{name}").model_copy(update={"layers": 2})
    with FakeTensorMode():
        model = build_model(w)
    assert sum(p.numel() for p in model.parameters()) == w.param_count()


@pytest.mark.parametrize("name", NAMES)
def test_the_real_module_has_the_counted_parameters(name: str) -> None:
    """transformers' own class, built from the same config (2 layers, fake tensors)."""
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoConfig

    from profiling.models.hf_module import _auto_model, _from_config

    raw = dict(catalogue_entry(name)["config"])
    kind = str(raw.pop("model_type"))
    raw["n_layer" if kind in ("gpt2", "bloom") else "num_hidden_layers"] = 2
    w = load_hf(f"hf:{name}").model_copy(update={"layers": 2})
    if w.arch == "t5":  # as the trace builds it: both stacks, the head as a checkpoint loads
        from profiling.config import TrainingConfig
        from profiling.models.hf_module import build_hf

        w = w.model_copy(update={"decoder_layers": 2})
        choices = TrainingConfig(model=f"hf:{name}", seq=8)
        with FakeTensorMode():
            t5, _ = build_hf(w, choices)
        assert sum(p.numel() for p in t5.parameters()) == w.param_count()
        return
    with FakeTensorMode():  # the task's class: ...ForCausalLM, ...ForMaskedLM
        model = _from_config(AutoConfig, _auto_model(w), kind, raw, "eager")
    assert sum(p.numel() for p in model.parameters()) == w.param_count()


def test_an_8b_builds_without_allocating() -> None:
    import psutil
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    before = psutil.Process().memory_info().rss
    with FakeTensorMode():
        model = build_model(load_hf("hf:llama-3.1-8b"))
    params = list(model.parameters())
    assert all(isinstance(p, FakeTensor) for p in params)
    assert sum(p.numel() for p in params) == 8_030_261_248
    assert psutil.Process().memory_info().rss - before < 300 * 2**20  # 32 GB if it allocated


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    return f"hf:{path}"


TINY = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
}  # fmt: skip


def test_a_path_or_a_folder(tmp_path: Path) -> None:
    spec = _config(tmp_path, json.dumps(TINY))
    assert load_hf(spec).param_count() == load_hf(f"hf:{tmp_path}").param_count()
    cfg = TrainingConfig.parse(model=f"hf:{tmp_path}")
    assert cfg.is_hf and not cfg.is_factory and cfg.seq_or_default() == 2048


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no catalogue model or config file of that name; give hf:PATH"),
        ("{not json", "is not JSON (Expecting property name"),
        ("[1, 2]", "a config.json holds a JSON object, not a list"),
        (json.dumps({**TINY, "hidden_size": "4096"}), "hidden_size is '4096', but input should be"),
        (json.dumps({k: v for k, v in TINY.items() if k != "vocab_size"}), "lacks vocab_size"),
        (
            json.dumps({**TINY, "model_type": "mamba"}),
            "model_type 'mamba' is not supported; supported types are bert, bloom, deepseek_v2, "
            "falcon, gemma, gemma2",
        ),
        (
            # a 10-trillion-parameter config: three layers of width 500,000
            json.dumps(
                {
                    **TINY,
                    "hidden_size": 500_000,
                    "intermediate_size": 1_500_000,
                    "num_hidden_layers": 3,
                    "num_attention_heads": 1000,
                    "num_key_value_heads": 1000,
                }
            ),
            "describes 9.8 trillion parameters, more than the 3 trillion",
        ),
        (json.dumps({**TINY, "num_key_value_heads": 3}), "num_key_value_heads 3 must divide"),
    ],
)
def test_bad_configs_are_one_sentence(tmp_path: Path, text: str | None, message: str) -> None:
    spec = _config(tmp_path, text) if text is not None else f"hf:{tmp_path}/missing.json"
    with pytest.raises(ConfigError) as caught:
        TrainingConfig.parse(model=spec)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.field == "model"


def test_unknown_model_type_names_every_supported_one() -> None:
    with pytest.raises(ProfilingError) as caught:
        workload_from_config({**TINY, "model_type": "rwkv"}, "hf:x")
    assert all(kind in str(caught.value) for kind in FAMILIES)


def test_unknown_name_lists_the_catalogue() -> None:
    with pytest.raises(ConfigError) as caught:
        TrainingConfig.parse(model="hf:llama-9")
    assert "hf:llama-3.1-8b" in str(caught.value) and "hf:qwen3-30b-a3b" in str(caught.value)


def test_bad_config_on_the_cli_saves_nothing(tmp_path: Path, run_cli) -> None:
    spec = _config(tmp_path, json.dumps({**TINY, "hidden_size": "4096"}))
    for command in ("estimate", "trace", "fit"):
        extra = ["--gpu-mem", "24"] if command == "fit" else ["--root", str(tmp_path)]
        proc = run_cli(command, "--model", spec, *extra, cwd=tmp_path, check=False)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: ") and "hidden_size is '4096'" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / ".journal" / "measurements").exists() or not any(
        (tmp_path / ".journal" / "measurements").iterdir()
    )


def test_transformers_rewriting_an_entry_changes_no_later_callers_config() -> None:
    """transformers' config classes rewrite the dicts they are given (5.x moves rope_theta into
    rope_scaling): a trace building the module must not change what the next reader of the
    catalogue gets (a checkpoint's config.json written after it carried the rewritten keys)."""
    transformers = pytest.importorskip("transformers")
    shipped = json.loads(
        (Path(__file__).parents[3] / "profiling/models/catalogue/llama-3.1-8b.json").read_text()
    )["config"]
    raw = dict(catalogue_entry("llama-3.1-8b")["config"])
    kind = raw.pop("model_type")
    transformers.AutoConfig.for_model(kind, **raw)  # as the trace's build_hf does
    assert catalogue_entry("llama-3.1-8b")["config"] == shipped
