"""Gradient accumulation on a plan without a pipeline, in closed form: the later microbatches'
forward and backward (``F``, ``B``) from the first's (``F0``, ``B0``).

torchtitan accumulates ``gradient_accumulation_steps`` microbatches with gradient sync left on
(pytorch/torchtitan torchtitan/trainer.py at b5bcd76: ``train_step`` calls
``forward_backward_step`` once per microbatch, then ``optimizers.step``): FSDP2 reshards after
each forward as in one step (torchtitan's "default" policy without a pipeline,
torchtitan/distributed/fsdp.py ``get_fsdp_reshard_after_forward_policy``) and reduce-scatters
every backward, adding the new shard into the sharded gradient the first made
(``fsdp_param.sharded_param.grad._local_tensor += new_sharded_grad``,
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py): no unsharded gradient outlives a
backward (only ``set_requires_gradient_sync(False)``, which torchtitan's step does not call,
keeps them: ``--accumulate-unsharded``). So a later forward is the first's, and a later backward
leaves what the first left but the gradients (held from the first on: the rank's level). Its
highest moment is the loss's backward or its first block's (``B``'s peak as the closed form
gives it without a pipeline: the first backward's moment there, before any block's shard is
made, with the fresh unsharded gradient of ``w2``): later blocks free what the earlier kept
and make no gradient the rank does not already hold. No torch here.
"""

from __future__ import annotations

from profiling.plans.profile import Move, Vec, add, vec


def accumulated(moves: dict[str, Move], loss_moment: Vec, pipelined: bool) -> tuple[Move, Move]:
    """(``F``, ``B``) of a later microbatch from ``moves``' ``F0``, ``B0`` and ``B`` (the first
    block's backward); ``loss_moment``: the loss's backward above its start.
    A pipeline stage's own ``F`` and ``B`` (``moves``') stay: its schedule's later actions."""
    if pipelined:
        return moves["F"], moves["B"]
    b0, first_block = moves["B0"], moves["B"].peak
    made = b0.delta.get("gradients", 0)
    peak = loss_moment if loss_moment["total"] > first_block["total"] else first_block
    return moves["F0"], Move(delta=add(b0.delta, vec(gradients=-made)), peak=peak)


__all__ = ["accumulated"]
