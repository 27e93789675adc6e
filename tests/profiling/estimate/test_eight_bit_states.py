"""8-bit optimizer states against the libraries' own rules (issue #31, torchtune's "+ 8-bit
AdamW" row, whose class the README does not name: torchtune's docs offer torchao's AdamW8bit
and bitsandbytes' PagedAdamW8bit).

- bitsandbytes (github.com/bitsandbytes-foundation/bitsandbytes, bitsandbytes/optim/optimizer.py,
  ``Optimizer2State.init_state`` at 95f9af3): a parameter of fewer than ``min_8bit_size`` (4,096)
  values keeps fp32 states; a larger one n uint8 and an fp32 absmax per block of 256 values
  (``blocks = n // 256 + bool(n % 256)``; 2,048 before aa57bd8, September 2024). Not installed
  here (its 8-bit kernels need a GPU): the rule is restated from that source.
- torchao (github.com/pytorch/ao, torchao/optim/adam.py ``_new_buffer`` and
  torchao/optim/subclass_8bit.py ``OptimState8bit.zeros`` at v0.18.0, 5f2baf9; the same at
  v0.6.1, November 2024's torchtune): a parameter of 4,096 values or more whose count divides
  by the block (256) keeps n uint8 codes, an fp32 scale per block and a 256-value fp32 map per
  state; any other keeps ``zeros_like(p)``, the parameter's dtype. Made here for real, on the
  CPU.
"""

from __future__ import annotations

import pytest

from profiling.estimate.bnb import state_bytes_8bit

# Llama 3.2 3B's tensors (torchtune's row): q/o, k/v, the MLP's, a norm's weight
LLAMA_3B = [(3072, 3072), (1024, 3072), (8192, 3072), (3072,)]


def _bnb_source_rule(n: int) -> int:
    """One state of bitsandbytes' Optimizer2State.init_state at 95f9af3 (module docstring)."""
    if n < 4096:
        return 4 * n  # torch.float32 states
    blocks = n // 256 + bool(n % 256)
    return n + 4 * blocks  # uint8 state, fp32 absmax per block


@pytest.mark.parametrize("n", [1, 3072, 4095, 4096, 4097, 4352, 3072 * 1024, 128_256 * 3072 + 7])
def test_a_state_is_bitsandbytes_own_rule(n: int) -> None:
    assert state_bytes_8bit(n) == _bnb_source_rule(n)


def _nbytes(t: object) -> int:
    import torch

    assert isinstance(t, torch.Tensor)
    return t.numel() * t.element_size()


# Each branch of torchao's _new_buffer: under 4,096 values; 4,096 or more dividing by 256 (Llama
# 3.2 3B's matrices, the smallest such); 4,096 or more not dividing by 256 (plain states).
TORCHAO_BRANCHES = [(3072,), (64, 64), *LLAMA_3B[:3], (4097,), (2050, 64), (162, 64)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", TORCHAO_BRANCHES)
def test_torchao_adamw8bit_states_are_its_own_rule(shape: tuple[int, ...], dtype: str) -> None:
    """torchao's AdamW8bit, made on the CPU: each state is exactly what the estimate counts
    (profiling.estimate.torchao_optim.state_bytes) — codes, scales and its own map for a tensor
    of 4,096 values or more that divides by 256, a copy in the parameter's dtype otherwise (2 B
    a value in bf16, above bitsandbytes' ~1.02 B the estimate counted for every tensor)."""
    pytest.importorskip("torchao", reason="the float8 extra is not installed")
    import torch

    from profiling._quiet_import import import_quietly
    from profiling.estimate.torchao_optim import quantized, state_bytes

    AdamW8bit = import_quietly("torchao.optim").AdamW8bit  # torchao's class
    p = torch.nn.Parameter(torch.zeros(shape, dtype=getattr(torch, dtype)))
    opt = AdamW8bit([p])
    n, e = p.numel(), p.element_size()
    for signed in (True, False):  # exp_avg, exp_avg_sq
        state = opt._new_buffer(p, signed)
        made = (
            sum(_nbytes(t) for t in (state.codes, state.scale, state.qmap))
            if hasattr(state, "codes")
            else _nbytes(state)
        )
        assert hasattr(state, "codes") is quantized(n)
        assert made == state_bytes(n, e)
        if n >= 4096 and not quantized(n):  # the branch the old estimate counted low
            assert made == e * n > state_bytes_8bit(n)
