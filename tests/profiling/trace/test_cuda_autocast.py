"""--target cuda under autocast follows CUDA's autocast lists (profiling/trace/cuda_autocast.py).

Each op runs on fake tensors inside a module, under torch's ``MemTracker`` (the tracker the trace
wraps): the activations it counts are compared with bytes worked out by hand. n = 8·1024
elements of a bf16 input, which is the module's input (the tracker counts it apart).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402

from profiling.trace.target import describe_rules, kernels  # noqa: E402

BF16, FP32 = torch.bfloat16, torch.float32
ROWS, COLS = 8, 1024
N = ROWS * COLS


class _Op(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor], *modules: torch.nn.Module) -> None:
        super().__init__()
        self.fn, self.inner = fn, torch.nn.ModuleList(modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, *self.inner)


def _run(
    fn: Callable[..., torch.Tensor],
    *,
    target: str = "cuda",
    dtype: torch.dtype = BF16,
    amp: bool = True,
    modules: tuple[Callable[[], torch.nn.Module], ...] = (),
) -> tuple[torch.dtype, int, list[tuple[torch.dtype, int]]]:
    """(output dtype, activation bytes the tracker counts after forward, saved tensors)."""
    saved: list[tuple[torch.dtype, int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((t.dtype, t.numel()))
        return t

    with FakeTensorMode(), kernels(target):
        model = _Op(fn, *(make() for make in modules))
        x = torch.empty(ROWS, COLS, dtype=dtype, requires_grad=True)
        tracker = MemTracker()
        tracker.track_external(model, x)
        autocast = torch.autocast("cpu", dtype=BF16, enabled=amp)
        with tracker, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with autocast:
                y = model(x)
            acts = sum(
                v for per in tracker.get_tracker_snapshot("current").values()
                for k, v in per.items() if "ACT" in str(k)
            )  # fmt: skip
            y.float().sum().backward()  # the backward runs on what was saved
        assert x.grad is not None and x.grad.shape == x.shape
    return y.dtype, acts, saved


# op -> bytes per input element it keeps under CUDA's autocast, and on the CPU
OPS: dict[str, tuple[Callable[..., torch.Tensor], int, int]] = {
    # pow keeps its fp32 input copy (4) and its fp32 output (4); on the CPU only a bf16 output
    "torch.pow(x, 3.0)": (lambda x: torch.pow(x, 3.0), 8, 2),
    "x ** 3": (lambda x: x**3, 8, 2),
    "3 ** x": (lambda x: 3**x, 8, 2),  # pow.Scalar keeps its fp32 exponent and its output
    # exp's backward needs only its output: the fp32 copy of x is freed, the fp32 output kept
    "torch.exp(x)": (torch.exp, 4, 2),
    "x.softmax(-1)": (lambda x: x.softmax(-1), 4, 2),  # SET_OPT_DTYPE: dtype=float32
    "F.softmax(x, dim=-1)": (lambda x: torch.nn.functional.softmax(x, dim=-1), 4, 2),
}


@pytest.mark.parametrize("op", list(OPS))
def test_fp32_list_ops_keep_fp32_copies_under_cuda_autocast(op: str) -> None:
    fn, cuda_bytes, cpu_bytes = OPS[op]
    dtype, acts, _ = _run(fn)
    assert dtype == FP32
    assert acts == cuda_bytes * N
    # the CPU target keeps CPU autocast's behaviour: the op runs in bf16
    dtype, acts, _ = _run(fn, target="cpu")
    assert dtype == BF16
    assert acts == cpu_bytes * N


def test_sum_of_a_bf16_tensor_is_fp32_under_cuda_autocast() -> None:
    dtype, acts, _ = _run(lambda x: x.sum())
    assert (dtype, acts) == (FP32, 4)  # one fp32 scalar, nothing saved
    assert _run(lambda x: x.sum(), target="cpu")[:2] == (BF16, 2)
    assert _run(lambda x: torch.sum(x, dim=-1))[:2] == (FP32, 4 * ROWS)


def test_pow_saves_the_fp32_copy_for_backward() -> None:
    _, _, saved = _run(lambda x: torch.pow(x, 3.0))
    assert (FP32, N) in saved and (BF16, N) not in saved
    _, _, saved = _run(lambda x: torch.pow(x, 3.0), target="cpu")
    assert saved == [(BF16, N)]  # the input as it came


def test_what_autocast_leaves_alone_is_left_alone() -> None:
    # in-place ops are not autocast (on a bf16 intermediate: a leaf cannot be changed in place)
    dtype, acts, _ = _run(lambda x: (x * 2).exp_())
    assert (dtype, acts) == (BF16, 2 * N)
    dtype, _, _ = _run(lambda x: (x * 2).pow_(3))
    assert dtype == BF16
    # fp32 inputs: no copy, the same bytes as without autocast
    assert _run(lambda x: torch.pow(x, 3.0), dtype=FP32)[:2] == (FP32, 4 * N)
    # a dtype the caller gives is kept; no autocast, nothing cast
    assert _run(lambda x: x.softmax(-1, dtype=BF16))[0] == BF16
    assert _run(lambda x: torch.pow(x, 3.0), amp=False)[:2] == (BF16, 2 * N)
    assert _run(lambda x: x.sum(), amp=False)[0] == BF16


def test_rms_norm_under_cuda_autocast_keeps_the_fp32_input_and_rstd() -> None:
    # a bf16 input (a projection's output: q/k norms): autocast casts it to fp32, then the
    # fused kernel keeps that fp32 input (4 B per element) and one fp32 rstd per row
    dtype, acts, saved = _run(lambda x, norm: norm(x), modules=(lambda: torch.nn.RMSNorm(COLS),))
    assert dtype == FP32
    assert sorted(saved, key=str) == sorted([(FP32, N), (FP32, ROWS), (FP32, COLS)], key=str)
    assert acts == 4 * N + 4 * ROWS + 4 * N  # the fp32 copy, rstd, the fp32 output


def test_gelu_new_keeps_16_bytes_per_element_on_cuda_10_on_the_cpu() -> None:
    """GPT-2's gelu_new then its second matmul, per f-wide element of the fc output x:

    CUDA under bf16 autocast: pow casts x to fp32 and keeps the copy (4 B); x + 0.044715·x³ and
    √(2/π)·(…) are fp32 (kept by nothing); tanh keeps its fp32 output (4 B); 1 + tanh is fp32 and
    the last product keeps it (4 B) with 0.5·x (x's dtype: 2 B); the product is fp32, and the
    matmul keeps its bf16 copy (2 B): 4 + 4 + 2 + 4 + 2 = 16 B, x itself kept by nothing.
    The CPU: pow keeps x (2 B), tanh, 0.5·x, 1 + tanh and the product all bf16 (2 B each):
    10 B. Beside them the matmul's output (rows × 64, bf16) and its weight's bf16 copy.
    """
    transformers = pytest.importorskip("transformers.activations")

    def mlp(x: torch.Tensor, gelu: torch.nn.Module, proj: torch.nn.Module) -> torch.Tensor:
        return proj(gelu(x))

    modules = (transformers.NewGELUActivation, lambda: torch.nn.Linear(COLS, 64, bias=False))
    matmul = ROWS * 64 * 2 + COLS * 64 * 2  # output, the weight's autocast copy
    dtype, cuda, _ = _run(mlp, modules=modules)
    assert dtype == BF16
    assert cuda == (4 + 4 + 2 + 4 + 2) * N + matmul
    _, cpu, _ = _run(mlp, modules=modules, target="cpu")
    assert cpu == (2 + 2 + 2 + 2) * N + matmul  # + x, the module's input, which pow keeps
    assert cuda - cpu == 8 * N  # x's 2 B no longer kept: 16 − 10 = 6 B per element in a model


def test_the_record_states_the_rule() -> None:
    assert "CUDA's autocast lists" in describe_rules("cuda")
    assert "autocast" not in describe_rules("cpu")


def test_no_rule_without_a_target() -> None:
    assert isinstance(kernels("cpu"), contextlib.nullcontext)


def test_our_eager_softmax_is_fp32_on_cuda_under_autocast_and_the_estimate_agrees() -> None:
    """Our blocks' eager attention calls softmax without a dtype: under autocast CUDA runs it
    in fp32 (4 B per probability) and the next matmul keeps its bf16 copy (2 B); the CPU keeps
    the bf16 probabilities (2 B). tiny-gpt2 (4 heads, 2 layers), batch 2, seq 64: the targets
    differ by 4 B × a·s²·b·L, in the trace and in the estimate alike."""
    from profiling.config import TrainingConfig
    from profiling.estimate.memory import estimate
    from profiling.trace.step import trace_step

    acts = {}
    for target in ("cuda", "cpu"):
        cfg = TrainingConfig(
            model="tiny-gpt2", seq=64, batch=2, precision="amp-bf16", attention="eager",
            target=target,
        )  # fmt: skip
        traced = trace_step(cfg).phases["after_forward"]["activations"]
        acts[target] = (traced, estimate(cfg).category_bytes("activations"))
    by_hand = 4 * (4 * 64 * 64 * 2 * 2)
    assert acts["cuda"][0] - acts["cpu"][0] == by_hand
    assert acts["cuda"][1] - acts["cpu"][1] == by_hand


@pytest.mark.parametrize("target", ["cuda", "cpu"])
@pytest.mark.parametrize("precision", ["amp-bf16", "mixed"])
def test_our_eager_attention_estimate_matches_the_trace(target: str, precision: str) -> None:
    """tiny-llama (grouped-query: 2 key/value heads of 4) with eager attention: the softmax in
    the dtype each target's autocast gives it, and the keys and values repeated to every head
    (the matmuls keep the expanded copies), counted by the estimate as the trace keeps them.
    Seq 64: our blocks' causal masks (s² bools a block) in place of a logsumexp (at seq 32 the
    two are the same bytes; tests/profiling/estimate/test_eager_blocks.py has the rest)."""
    from profiling.config import TrainingConfig
    from profiling.estimate.memory import estimate
    from profiling.trace.step import trace_step

    cfg = TrainingConfig(
        model="tiny-llama", seq=64, batch=2, precision=precision, attention="eager",
        target=target,
    )  # fmt: skip
    traced = trace_step(cfg).phases["after_forward"]["activations"]
    assert estimate(cfg).category_bytes("activations") / traced == pytest.approx(1.0, abs=1e-5)
