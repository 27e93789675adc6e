"""The head's moments in a plan's closed form without a pipeline: the forward's highest (the
last block or the loss) and, under torchtitan's ``fsdp_reshard_after_forward = "always"``
(``--reshard-always``), the head's backward with its group gathered again.

torchtitan shards [norm, output] as one FSDP group resharded after forward only under
"always" (pytorch/torchtitan torchtitan/distributed/fsdp.py at b5bcd76, apply_fsdp_to_decoder:
``reshard_after_forward=reshard_after_forward_policy == "always"``). Its default keeps the group
gathered from the output's forward to its backward, so the loss's forward and backward hold it;
"always" frees it after the output's forward (the trace: 16,777,216 B less at the loss's
backward, the peak, on a 8,192 × 1,024 output — the closed form's ``head_keep``, 0 there) and
FSDP2 gathers it again in the output's pre-backward. That moment the closed form bounds from
above: the group gathered twice (all-gather result and the parameters copied out of it), the
logits' gradient and the logits, the weight's gradient in the gathered dtype and its fp32
reduce-scatter input, the output's input gradient. No torch here.
"""

from __future__ import annotations

from profiling.plans.profile import Vec, vec


def forward_peak(blocks: int, gathering: int, block_extra: int, head: Vec) -> Vec:
    """A forward without a pipeline at its highest: at the last block (every block's saved
    tensors, its group's gathered parameters twice, its transient) or at the loss."""
    at_blocks = vec(parameters=gathering, activations=blocks, temporaries=block_extra)
    return at_blocks if at_blocks["total"] > head["total"] else head


def regathered_head(head_el: int, logits: int, hidden_el: int, c: int, reduce_b: int) -> Vec:
    """The output's backward under "always", above the backward's start (see the module):
    ``head_el`` the group's gathered elements, ``logits`` the rank's logits, ``hidden_el`` the
    output's input, ``c`` the gathered dtype's bytes, ``reduce_b`` the reduce dtype's."""
    return vec(
        parameters=2 * head_el * c,
        temporaries=2 * logits * c + head_el * (c + reduce_b) + hidden_el * c,
    )


__all__ = ["forward_peak", "regathered_head"]
