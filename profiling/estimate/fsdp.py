"""The moments ZeRO-3 adds under FSDP2 (what the trace runs): the root's gathers and its
unsharded gradients. No torch here.

FSDP2 shards every block and the root (the embeddings, the final norm and an untied LM head:
everything outside the blocks). Read from the trace's per-phase peaks (tests/profiling/trace/
test_fsdp_estimate.py), in the bytes of a gathered parameter g (16-bit under mixed and bf16):

- forward starts with the root gathered twice (the all-gather's output and the unsharded
  parameters it is copied into) and two blocks (current and prefetched): (2·root + 2·block)·g;
- at the loss the root and one block are gathered (the estimate's gathered line);
- backward holds the LM head's unsharded gradient (V·h·g) until the root's gradients are reduced
  last, with the root and two blocks gathered, while the blocks' activations are freed one by
  one (counted: all but the loss's log-probabilities, the first block's backward);
- backward ends with the root gathered and its unsharded gradients: the head's, the embedding's
  dense gradient and, tied, their sum (3·V·h·g; untied 2·V·h·g) beside every sharded gradient;
  tied under FSDP2 (reducing every micro-batch), beside the last block's reduce-scatter
  input, still held, and before the root's own shards are made (``_tied_end``);
- the optimizer step holds the shards only.
"""

from __future__ import annotations

from typing import Any

from profiling._config_deepspeed import ENGINE_OFF
from profiling.config import TrainingConfig
from profiling.estimate.fsdp_block_gather import block_gather
from profiling.estimate.fsdp_no_reshard import last_gather_held
from profiling.estimate.no_sync import unsharded_grads, with_unsharded
from profiling.estimate.states import fsdp_root, gathered_bytes
from profiling.units import fmt_bytes

Moment = tuple[str, float, str]
# The step's totals the moments are made of, in this order.
FSDP_PARTS: tuple[str, ...] = (
    "sharded weights",
    "gradients",
    "optimizer",
    "kept",
    "activations",
    "log-probs",
    "inputs",
    "held",
    "looped",
)


def fsdp_moments(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    moments: list[Moment],
) -> list[Moment]:
    """The step's ``moments`` with those ZeRO-3 adds under FSDP2, from the step's totals in
    ``parts`` (sharded weights, gradients, optimizer, kept gradients, activations, the loss's
    log-probs), as they are when every rank keeps unsharded gradients (``no_sync``)."""
    from profiling.estimate.deepspeed_backward import backward_buckets  # it imports this module's

    moments = last_gather_held(cfg, shape, parts["activations"], moments)
    added = _added(cfg, shape, parts) + backward_buckets(cfg, shape, parts, moments)
    return with_unsharded(cfg, shape, parts, moments + added)


def _added(cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float]) -> list[Moment]:
    root_block = fsdp_root(cfg, shape)
    if root_block is None:
        return []
    root, block = root_block
    g, t = gathered_bytes(cfg), cfg.tp
    f = fmt_bytes
    w, grads, states = parts["sharded weights"], parts["gradients"], parts["optimizer"]
    kept, act, logp = parts["kept"], parts["activations"], parts["log-probs"]
    # LitGPT's loop (--loss litgpt-full: full.py's fit()) holds the previous micro-batch's fp32
    # logits until this forward returns, and this one's from its loss to the next forward
    # (losses.held_over; LossPlan.looped), so through backward's moments below as well
    held, looped = parts["held"], parts["looped"]
    out: list[Moment] = []
    start = (2 * root + 2 * block) * g / t
    out.append((
        "forward start (the root gathered)",
        w + states + kept + start + held,
        f"sharded weights {f(w)} + optimizer {f(states)}"
        + (f" + gradients kept {f(kept)}" if kept else "")
        + f" + (2·root + 2·block)·{g} B {f(start)}"
        + (f" + the previous micro-batch's logits (LitGPT's loop holds them) {f(held)}"
           if held else ""),
    ))  # fmt: skip
    V, h = shape.get("vocab"), shape.get("hidden")
    if not (V and h):
        return out
    head = V * h * g / t
    mid = (root + 2 * block) * g / t
    # without resharding (--zero 2) every block is still gathered when backward starts
    first, blocks = (mid, "2·block") if cfg.zero == 3 else (psi_of(shape) * g / t, "L·block")
    out.append((
        "backward, first block (the LM head's unsharded gradient)",
        w + states + first + head + act - logp,
        f"sharded weights {f(w)} + optimizer {f(states)} + (root + {blocks})·{g} B {f(first)} + "
        f"head gradient V·h·{g} B {f(head)} + activations less the log-probabilities "
        f"{f(act - logp)}",
    ))  # fmt: skip
    L, psi = int(shape["layers"]), int(shape["params"])
    done = grads * (1 - root / psi) * (L - 1) / L  # the other blocks' sharded gradients
    current = block * g / t  # the last block's unsharded gradients
    layer = (act - logp - looped) / L
    loop = f" + the logits LitGPT's loop holds {f(looped)}" if looped else ""
    out.append((
        "backward, last block",
        w + states + mid + head + done + current + layer + looped,
        f"sharded weights {f(w)} + optimizer {f(states)} + (root + 2·block)·{g} B {f(mid)} + "
        f"head gradient {f(head)} + the other blocks' sharded gradients {f(done)} + this "
        f"block's unsharded gradients block·{g} B {f(current)} + one layer's activations "
        f"{f(layer)}{loop}",
    ))  # fmt: skip
    if not (cfg.fsdp_flat or cfg.accumulate_unsharded):  # FSDP2 reducing every micro-batch
        out += block_gather(cfg, shape, parts, root, block)
    grads_then = grads
    if shape.get("tied") and not (cfg.fsdp_flat or cfg.accumulate_unsharded):
        end, what, grads_then = _tied_end(cfg, parts, root, block, psi, head)
    elif shape.get("tied"):  # the root stays gathered; head, embedding and their sum
        end = root * g / t + 3 * head
        what = f"root·{g} B + 3·V·h·{g} B (head, embedding, their sum)"
    else:  # the root resharded; both gradients, and their fp32 copies for the reduction
        r = 4 if cfg.precision == "mixed" else 0
        end = 2 * V * h * (g + r) / t
        what = f"2·V·h·({g} + {r}) B (head, embedding" + (", fp32 copies)" if r else ")")
    if cfg.fsdp_flat:  # FSDP1: the root's flat gradient, made while the root is gathered
        tied = bool(shape.get("tied"))  # (tied: the root is counted gathered already)
        end += root * g / t * (1 if tied else 2)
        what += ("" if tied else f" + the root gathered root·{g} B") + (
            f" + FSDP1's flat gradient, its views' gradients concatenated root·{g} B"
        )
    out.append((
        "end of backward (the root's gradients)",
        w + grads_then + states + end + looped,
        f"sharded weights {f(w)} + gradients {f(grads_then)} + optimizer {f(states)} + {what} "
        f"{f(end)}{loop}",
    ))  # fmt: skip
    return out


def fsdp_refusal(cfg: TrainingConfig, shape: dict[str, Any]) -> str | None:
    """The sentence refusing what the estimate does not model under FSDP: an encoder-decoder
    (T5), whose moments here are a decoder's — it read 0.885-0.968 of the trace (t5-l4 mixed
    FSDP 2 0.885, flan-t5-small mixed FSDP 2 0.950, a wide T5 fp32 --zero 2 on 4 GPUs 0.968),
    where the encoder's activations stay beside the decoder blocks' gathers and gradients."""
    if shape.get("t5") and cfg.fsdp and cfg.gpus > 1:
        return (
            "the estimate does not model an encoder-decoder (T5) under FSDP yet (it read "
            "0.885-0.968 of the trace); trace it instead (journal-agent trace)"
        )
    return None


def psi_of(shape: dict[str, Any]) -> int:
    """The model's parameters: every block and the root."""
    return int(shape["params"])


def _tied_end(
    cfg: TrainingConfig, parts: dict[str, float], root: int, block: int, psi: int, head: float
) -> tuple[float, str, float]:
    """FSDP2's end of backward with a tied head: (what it adds, how, the sharded gradients by
    then). The root is still gathered, with its unsharded gradients — the head's, the
    embedding's dense one and, tied, their sum (3·V·h·g), and the final norm's — while the
    last block's reduce-scatter input (block·r, r the reduce dtype's bytes: fp32 under
    ``mixed``'s MixedPrecisionPolicy(reduce_dtype=fp32)) is still held: torch's
    ``FSDPParamGroup.post_backward`` appends each ``foreach_reduce`` input to
    ``comm_ctx.reduce_scatter_states`` and pops the oldest only at the next group's
    post_backward (``reduce_scatter_max_input_buffers`` 1), the root's, which runs after these
    gradients are made; so the root's own gradient shards are not made yet (torch 2.13
    ``_fsdp_param_group.py``, ``_fsdp_collectives.foreach_reduce``). With the step's inputs
    and the loss's scalars, which the loop holds through backward."""
    g, t, f = gathered_bytes(cfg), cfg.tp, fmt_bytes
    r = 4 if cfg.precision == "mixed" else g
    gathered, others, held = root * g / t, root * g / t - head, block * r / t
    grads = parts["gradients"] * (1 - root / psi)
    inputs = parts["inputs"]
    end = gathered + others + 3 * head + held + inputs
    what = (
        f"root·{g} B {f(gathered)} + the root's other gradients (the final norm's) {f(others)}"
        f" + 3·V·h·{g} B (head, embedding, their sum) {f(3 * head)} + the last block's "
        f"reduce-scatter input block·{r} B {f(held)} + the step's inputs and the loss "
        f"{f(inputs)}; the root's gradient shards not made yet"
    )
    return end, what, grads


def fsdp_parts(totals: tuple[float, ...], loss: Any) -> dict[str, float]:
    """The step's ``totals`` (sharded weights … log-probs, the step's inputs and loss) named as
    ``FSDP_PARTS``, with what LitGPT's loop holds across the step: the previous micro-batch's
    and this one's (``loss``:
    the step's ``losses.LossPlan``, its ``held`` and ``looped``; None for PyTorch's loss)."""
    held = float(sum(t.bytes for t in loss.held)) if loss is not None else 0.0
    looped = float(loss.looped) if loss is not None else 0.0
    return dict(zip(FSDP_PARTS, (*totals, held, looped), strict=True))


def one_gpu(cfg: TrainingConfig) -> dict[str, Any]:
    """The settings of the same step on one GPU, nothing sharded (DeepSpeed's engine off): one
    GPU that accumulates micro-batches keeps its gradients through the later ones' forward."""
    kept = cfg.grads_kept or cfg.accumulate_unsharded is not None
    alone = {"gpus": 1, "zero": 0, "fsdp": False, "fsdp_flat": False, "accumulate_unsharded": None}
    alone["grads_kept"] = kept
    if cfg.fsdp and not cfg.deepspeed:  # FSDP2's CPU offload needs FSDP (estimate/fsdp_offload)
        alone["offload_optimizer"] = False
    return {**ENGINE_OFF, **alone}


__all__ = ["FSDP_PARTS", "fsdp_moments", "fsdp_parts", "fsdp_refusal", "one_gpu", "unsharded_grads"]
