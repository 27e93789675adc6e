"""The fp32-master optimizer trains the 16-bit model as Megatron and DeepSpeed do: real CPU
tensors, checked against plain AdamW run on fp32 copies."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from profiling.trace.master_weights import MasterWeightOptimizer  # noqa: E402


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


@pytest.mark.parametrize("fp32_grads", [False, True])
def test_steps_match_adamw_on_fp32_masters(fp32_grads: bool) -> None:
    model = _model().to(torch.bfloat16)
    reference = [p.detach().float().clone() for p in model.parameters()]
    ref_opt = torch.optim.AdamW(reference, lr=1e-2)
    opt = MasterWeightOptimizer(
        model.parameters(),
        lambda masters: torch.optim.AdamW(masters, lr=1e-2),
        fp32_grads=fp32_grads,
    )
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        for ref, p in zip(reference, model.parameters(), strict=True):
            ref.grad = p.grad.float()  # the 16-bit gradient, upcast: what the master sees
        ref_opt.step()
        opt.step()
        for ref, p in zip(reference, model.parameters(), strict=True):
            assert p.dtype == torch.bfloat16 and p.grad.dtype == torch.bfloat16
            assert torch.equal(opt.state[p]["master"], ref)  # fp32 masters, bit for bit
            assert torch.equal(p, ref.to(torch.bfloat16))  # the model holds their rounding
    state = opt.state[next(iter(model.parameters()))]
    expected = {"master", "exp_avg", "exp_avg_sq", "step"} | (
        {"master_grad"} if fp32_grads else set()
    )
    assert set(state) == expected
    assert all(state[k].dtype == torch.float32 for k in expected - {"step"})
    assert opt.gradient_state_keys == (("master_grad",) if fp32_grads else ())
