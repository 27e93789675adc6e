"""torchao's 8-bit AdamW (``--torchao-optim``: a torchtune config's
``torchao.prototype.low_bit_optim.AdamW8bit`` or ``torchao.optim.AdamW8bit``), tensor by tensor.

**Which tensors get 8-bit states** (github.com/pytorch/ao, ``_AdamBase._new_buffer`` in
torchao/prototype/low_bit_optim/adam.py at v0.6.1, 99c8d52, torchtune's stable torchao when its
README's table was made in November 2024; torchao/optim/adam.py at v0.18.0, 5f2baf9, the same):
a parameter of n ≥ 4,096 values **whose n divides by the block (256)** gets an
``OptimState8bit`` per state (subclass_8bit.py ``zeros``): n uint8 codes, an fp32 scale per
256 values and its own copy of the 256-value fp32 map (``torch.tensor(QMAP_…)``: 1,024 B a
state); **any other parameter keeps ``torch.zeros_like(p)``**, the parameter's dtype (2 B a
value in bf16: more than an 8-bit state's ~1.02 B). The step counter and the learning rate are
``torch.tensor(…)`` on the host: nothing on the GPU.

**What the step holds** (measured: an H200, torch 2.11, both versions' code: per parameter,
``torch.compile(single_param_adam, fullgraph=True)``; Inductor's generated code read with
``TORCH_LOGS=output_code``): for an 8-bit tensor, a first kernel dequantizes both states,
takes their new values and the new per-block scales, writing the new states as **two fp32
buffers of n values** and the scales as two of n/256; a second kernel quantizes them into the
codes and updates the parameter in place; two more copy the scales. So the step holds 8·n +
8·n/256 B beside its parameter, gradient and states (128256 × 3072: 3,164,332,032 B asked,
3,166,429,184 allocated: the caching allocator's 1 MiB tails). A tensor with plain states is
updated by one fused in-place kernel: nothing.

**The first step of each shape** (``torch.compile``'s first call, once a process): Inductor
autotunes each kernel that has more than one launch config (every pointwise kernel:
``autotune_pointwise``) on the real arguments, and its benchmark clones every argument the
kernel mutates before each launch, "to avoid autotune contaminating them"
(torch/_inductor/runtime/triton_heuristics.py ``CachingAutotuner.bench`` / ``clone_args`` at
v2.5.1, the torch of torchtune's November 2024 table; v2.13 the same), beside the L2 flush
buffer the benchmark allocates: ``torch.empty(int(256e6 // 4), dtype=torch.int)``, 256·10⁶ B
(triton 3.1's ``triton.testing.do_bench``, which torch 2.5's ``TritonBenchmarker`` calls;
torch 2.13's ``InductorBenchmarker`` flushes a buffer of the GPU's L2 size, less). The
kernel that quantizes both new states into their codes and updates the parameter mutates all
three: clones of n·(e + 2) B (e the parameter's bytes a value) while the fp32 buffers are
alive. Counted for the largest 8-bit tensor, the step's peak: on torchtune's Llama 3.2 3B
(tied 128256 × 3072 embedding stepped last in backward) 1.58 GB + 256 MB. Not counted: the
flush buffer at other kernels' first runs (smaller tensors, a compiled model), and a run that
finds the kernel's best config in Inductor's autotune cache (``autotune_local_cache``: a
repeated run on one machine does not benchmark).

No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiling.estimate.bnb import DYNAMIC_MAP_BYTES
from profiling.estimate.ledger import Ledger, Line, Sharding, add_state
from profiling.units import fmt_count

if TYPE_CHECKING:
    from profiling.config import TrainingConfig

MIN_SIZE = 4096  # "follow bitsandbytes, only quantize tensors >= 4096 values"
BLOCK = 256  # AdamW8bit's block_size
FLUSH_BYTES = 256_000_000  # triton 3.1's do_bench: torch.empty(int(256e6 // 4), dtype=torch.int)


def quantized(n: int) -> bool:
    """Whether torchao's ``_new_buffer`` gives a tensor of n values 8-bit states."""
    return n >= MIN_SIZE and n % BLOCK == 0


def state_bytes(n: int, param_bytes: int) -> int:
    """One state of a tensor of n values: codes + scales + its map, or a copy of the parameter."""
    if quantized(n):
        return n + 4 * (n // BLOCK) + DYNAMIC_MAP_BYTES
    return n * param_bytes


def step_scratch(n: int) -> int:
    """What the compiled step of a tensor of n values allocates and frees (module docstring)."""
    return 8 * n + 8 * (n // BLOCK) if quantized(n) else 0


def first_step_autotune(n: int, param_bytes: int) -> int:
    """What the first step of a tensor of n values adds to its compiled step while Inductor
    benchmarks the kernel writing the parameter and both codes (module docstring)."""
    return n * (param_bytes + 2) + FLUSH_BYTES if quantized(n) else 0


def param_bytes(cfg: TrainingConfig) -> int:
    """The stepped parameter's bytes a value: bf16 only in pure bf16 training (``mixed`` steps
    the fp32 master copy)."""
    return 2 if cfg.precision == "bf16" else 4


def torchao_states(
    ledger: Ledger,
    cfg: TrainingConfig,
    shape: dict[str, Any],
    numels: list[tuple[int, int]] | None,
    sh: Sharding,
    names: tuple[str, ...],
) -> None:
    """Both states of every trainable tensor by torchao's rule, one line each; the tensors not
    known (``numels`` None), every value in the parameter's dtype (the upper bound)."""
    e = param_bytes(cfg)
    if numels is None:
        psi = int(shape.get("params") or 0)
        for name in names:
            add_state(
                ledger,
                f"{name} (torchao)",
                psi * e,
                sh,
                f"Ψ · {e} B (the tensors not known: every "
                "state in the parameter's dtype, the upper bound)",
                f"{fmt_count(psi)} · {e}",
            )
        return
    big = [(n, c) for n, c in numels if quantized(n)]
    plain = sum(n * c for n, c in numels if not quantized(n))
    values = sum(n * c for n, c in big)
    blocks = sum(n // BLOCK * c for n, c in big)
    tensors = sum(c for _, c in big)
    each = sum(state_bytes(n, e) * c for n, c in numels)
    formula = f"Σ (n + 4·n/{BLOCK} + 1024) over tensors of n ≥ {MIN_SIZE} dividing by {BLOCK}"
    numbers = f"{fmt_count(values)} + 4·{blocks:,} + 1024·{tensors}"
    if plain:
        formula += f" + {e}·Σ n of the others (the parameter's dtype)"
        numbers += f" + {e}·{plain:,}"
    for name in names:
        add_state(ledger, f"{name} (torchao)", each, sh, formula, numbers)
    if plain:
        ledger.note(
            f"torchao's AdamW8bit: {plain:,} values in tensors under {MIN_SIZE:,} values or not "
            f"dividing by {BLOCK} keep their states in the parameter's dtype ({e} B a value)"
        )


def torchao_temporaries(
    ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any], numels: list[tuple[int, int]] | None
) -> bool:
    """The compiled step's fp32 buffers for the largest 8-bit tensor; False for another
    optimizer."""
    if not cfg.torchao_optim:
        return False
    if numels:
        largest = max((n for n, _ in numels if quantized(n)), default=0)
    else:  # the tensors not known: the largest taken as 8-bit (the upper bound)
        largest = -(-int(shape.get("largest_tensor") or 0) // BLOCK) * BLOCK
    if not largest:
        return True
    value = step_scratch(largest)
    ledger.add(
        Line(
            name="Optimizer step temporaries (torchao's compiled step, largest 8-bit tensor)",
            bytes=value,
            unsharded=value,
            formula=f"8·n + 8·n/{BLOCK} (both new states and scales in fp32)",
            substituted=f"8·{fmt_count(largest)} + 8·{largest // BLOCK:,}",
            group="temporaries",
            category="temporaries",
        )
    )
    e = param_bytes(cfg)
    first = first_step_autotune(largest, e)
    ledger.add(
        Line(
            name="Optimizer step temporaries (torchao's first step of that tensor: "
            "torch.compile's autotuning)",
            bytes=first,
            unsharded=first,
            formula=f"n·({e} + 2) (clones of the parameter and both codes) + the benchmark's "
            "L2 flush buffer 256·10⁶ B",
            substituted=f"{fmt_count(largest)}·{e + 2} + {FLUSH_BYTES:,}",
            group="temporaries",
            category="temporaries",
        )
    )
    return True


__all__ = [
    "BLOCK",
    "FLUSH_BYTES",
    "MIN_SIZE",
    "first_step_autotune",
    "param_bytes",
    "quantized",
    "state_bytes",
    "step_scratch",
    "torchao_states",
    "torchao_temporaries",
]
