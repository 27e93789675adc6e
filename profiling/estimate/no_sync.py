"""FSDP's accumulation without gradient sync in closed form (``accumulate_unsharded`` N): each
rank keeps every parameter's unsharded gradient from the first micro-batch's backward to the
last one's (FSDP1's ``no_sync``, FSDP2's ``set_requires_gradient_sync(False)``; what the trace
runs: ``profiling.trace.no_sync``). No torch here.

In the bytes of a kept gradient u (the parameter's; fp32 under FSDP2's mixed precision, whose
fp32 reduce dtype accumulates the unsharded gradients in fp32), U = Ψ·u on every rank:

- the last micro-batch's forward, its loss and its recomputations hold U beside everything the
  step holds without accumulation (every micro-batch but the first holds it too);
- backward's first block adds the LM head's new gradient to U (the same bytes as the unsharded
  head gradient without accumulation), then the block's own new gradients (counted together:
  a bound);
- a backward without sync (N ≥ 3: a micro-batch that starts with U) reaches its last block with
  U, that block's new gradients and one layer's activations, and no sharded gradients;
- the last micro-batch reduce-scatters each block's gradients as its backward ends, so its last
  block holds the root's unsharded gradients (root·u) and this block's twice (kept and new)
  beside the others' shards; its end adds the root's kept gradients to the new ones;
- the optimizer step holds the shards only, as without accumulation.
"""

from __future__ import annotations

from typing import Any

from profiling.config import TrainingConfig
from profiling.estimate.ledger import Ledger, Line
from profiling.estimate.states import fsdp_root
from profiling.units import fmt_bytes, fmt_count

Moment = tuple[str, float, str]
_UNCHANGED = ("optimizer step",)
FIRST_BLOCK = "backward, first block (the LM head's unsharded gradient)"
LAST_BLOCK = "backward, last block"
END = "end of backward (the root's gradients)"


def kept_bytes(cfg: TrainingConfig) -> int:
    """The bytes of one kept unsharded gradient element."""
    return 2 if cfg.precision == "bf16" else 4


def unsharded_grads(ledger: Ledger, cfg: TrainingConfig, shape: dict[str, Any]) -> None:
    """The estimate's line for the unsharded gradients every rank keeps."""
    if not cfg.accumulate_unsharded:
        return
    psi, u = int(shape["params"]), kept_bytes(cfg)
    ledger.add(
        Line(
            name=f"Unsharded gradients kept by every rank through the {cfg.accumulate_unsharded} "
            "micro-batches (no gradient sync)",
            bytes=psi * u,
            unsharded=0,
            formula=f"Ψ · {u} B",
            substituted=f"{fmt_count(psi)} · {u}",
            group="overhead",
            category="gradients",
        )
    )


def with_unsharded(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    moments: list[Moment],
) -> list[Moment]:
    """The step's moments as they are when every rank keeps the unsharded gradients."""
    if not cfg.accumulate_unsharded:
        return moments
    psi, u = int(shape["params"]), kept_bytes(cfg)
    big = psi * u
    f = fmt_bytes
    plus = f" + unsharded gradients kept Ψ·{u} B {f(big)}"
    root_block = fsdp_root(cfg, shape)
    out: list[Moment] = []
    for name, value, calc in moments:
        if name in _UNCHANGED:
            out.append((name, value, calc))
        elif name == LAST_BLOCK and root_block is not None:
            out += _last_block(cfg, shape, parts, value, calc, root_block)
        elif name == FIRST_BLOCK and root_block is not None:
            # A bound: the head's new gradient (added to U, then freed) and the next block's
            # new gradients (the trace: tied toy 0.6 % over; without them 2.2 % under).
            new = root_block[1] * u
            bound = f" + a block's new gradients block·{u} B {f(new)} (a bound: each in turn)"
            out.append((name, value + big + new, calc + plus + bound))
        elif name == END and root_block is not None:
            root = root_block[0] * u
            out.append((name, value + root, f"{calc} + the root's kept gradients root·{u} B "
                        f"{f(root)}"))  # fmt: skip
            if cfg.fsdp_flat:
                out.append(flat_end(cfg, shape, parts, root_block))
        else:
            out.append((name, value + big, calc + plus))
    return out


def flat_end(
    cfg: TrainingConfig, shape: dict[str, Any], parts: dict[str, float], root_block: tuple[int, int]
) -> Moment:
    """FSDP1's end of a backward without sync: the root's flat parameter gets its gradient from
    autograd's backward of the views FSDP1 made of it (``torch.split``: SplitWithSizesBackward
    waits for every view's gradient, then concatenates them into one root-sized tensor) while
    the root is still gathered — the LM head's gradient, the embedding's dense gradient and
    their concatenation at once, beside the kept gradients (the root's own once a micro-batch
    has accumulated them), which the new one is then added to in place."""
    f, u = fmt_bytes, kept_bytes(cfg)
    g = 2 if cfg.precision in ("bf16", "mixed") else 4
    root, _ = root_block
    psi, n = int(shape["params"]), int(cfg.accumulate_unsharded or 0)
    head = int(shape["vocab"]) * int(shape["hidden"]) * g
    views = (3 if shape.get("tied") else 2) * head  # tied: head, embedding and their sum
    kept = psi * u if n >= 3 else (psi - root) * u  # N = 2: the first holds the blocks' alone
    w, states, looped = parts["sharded weights"], parts["optimizer"], parts["looped"]
    value = w + states + kept + root * g + views + root * g + looped
    which = "Ψ" if n >= 3 else "(Ψ − root)"
    return (
        "end of backward without sync (FSDP1: the root's flat gradient)",
        value,
        f"sharded weights {f(w)} + optimizer {f(states)} + unsharded gradients kept {which}·{u} "
        f"B {f(kept)} + the root gathered root·{g} B {f(root * g)} + its views' gradients "
        f"{f(views)} + their concatenation root·{g} B {f(root * g)}"
        + (f" + the logits LitGPT's loop holds {f(looped)}" if looped else ""),
    )


def _last_block(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    parts: dict[str, float],
    value: float,
    calc: str,
    root_block: tuple[int, int],
) -> list[Moment]:
    """The last block's backward: in the last micro-batch, and (N ≥ 3) in one without sync."""
    f, u, g = fmt_bytes, kept_bytes(cfg), 2 if cfg.precision in ("bf16", "mixed") else 4
    root, block = root_block
    psi, L = int(shape["params"]), int(shape["layers"])
    head = int(shape["vocab"]) * int(shape["hidden"]) * g
    done = parts["gradients"] * (1 - root / psi) * (L - 1) / L
    kept = root * u + block * u
    out = [(
        f"{LAST_BLOCK} (the last micro-batch)",
        value - head + kept,
        f"{calc} − head gradient {f(head)} + the root's and this block's kept gradients "
        f"(root + block)·{u} B {f(kept)}",
    )]  # fmt: skip
    if cfg.accumulate_unsharded and cfg.accumulate_unsharded >= 3:
        out.append((
            f"{LAST_BLOCK} (a micro-batch without sync)",
            value - head - done + psi * u,
            f"{calc} − head gradient {f(head)} − the other blocks' shards {f(done)} + unsharded "
            f"gradients kept Ψ·{u} B {f(psi * u)}",
        ))  # fmt: skip
    return out


__all__ = ["flat_end", "kept_bytes", "unsharded_grads", "with_unsharded"]
