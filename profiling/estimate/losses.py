"""What each stack's loss keeps and allocates (``--loss``), estimated from its source.

The reference loss (``cross-entropy``) is ``activations``' log-probabilities term and
``memory``'s loss moments. Every other loss is written here as a :class:`~loss_tape.Tape` in
its source's order (``profiling.models.losses`` says where each is read, and runs the same ops
in the trace): the forward's tape gives the loss's peak in forward and what it keeps for backward
(the activations it adds, replacing the LM head's input and the log-probabilities), the
backward's — the autograd engine's order, the LM head's gradients included — its peak in
backward. Symbols: s·b tokens, V vocabulary, h hidden size; t a chunk's tokens (b rows of t);
C Liger's chunk of tokens. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from profiling._config_behaviours import double_quant, loss_conflict
from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.estimate import activations as acts
from profiling.estimate import compiled_loss_tape as compiled_tapes
from profiling.estimate.activations import Bytes, Dims, Term
from profiling.estimate.bnb import dequant_absmax_bytes
from profiling.estimate.last_mlp import LAYER_NORM as _LAYER_NORM
from profiling.estimate.last_mlp import down_adapter, last_mlp, unsaved_down_input
from profiling.estimate.last_mlp import norm_row_bytes as _norm_row_bytes
from profiling.estimate.loss_tape import Ctx, Tape, chunk_scalars, listed, sized
from profiling.estimate.loss_tapes import backward_tape, forward_tape
from profiling.estimate.selective import blocks_keep_saved
from profiling.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from profiling.estimate.ledger import Line

REFERENCE = "cross-entropy"


@dataclass
class LossPlan:
    """A loss's part of the step: what it keeps after forward, and its two peaks above the end of
    forward (what else is alive then), each with the tensors that make it."""

    kept: list[Term]
    forward_extra: float
    forward_calc: str
    backward_extra: float
    backward_calc: str
    drops_head_copy: bool  # autocast's cached 16-bit copy of the head's weight is not kept
    held: list[Term]  # what the script's loop holds of the previous micro-batch (LitGPT's)
    looped: float = 0.0  # of ``kept``, what the loop holds past backward (LitGPT's logits)
    largest: float = 0.0  # the largest tensor either tape makes

    @property
    def released(self) -> float:
        """The kept tensors backward releases."""
        return sum(t.bytes for t in self.kept) - self.looped


def context(d: Dims, e: Bytes, cfg: TrainingConfig) -> Ctx:
    assert d.V is not None, "a loss is estimated only with a vocabulary"
    w = 2 if cfg.precision in ("bf16", "mixed") else 4
    trained = cfg.lora_rank is None
    chunks = cfg.loss_chunks or 8
    cap = d.extra.get("logit_softcap")
    rank = int(cfg.lora_rank or 0) if x_head(cfg) else 0
    nf4 = cfg.fabric_bnb and not d.extra.get("tied")
    absmax = dequant_absmax_bytes(d.V * d.h, double_quant(cfg)) if nf4 else 0
    keeps = nf4 and cfg.bnb_keeps_inputs
    a, mask = head_chunks(cfg, e) if rank else (0, 0)
    return Ctx(
        d.s, d.b, d.V, d.h, e.r, e.c, e.amp, cfg.target == "cuda", trained, w, cap, chunks, rank,
        nf4, keeps, absmax, cfg.compile, a, mask,
    )  # fmt: skip


def head_chunks(cfg: TrainingConfig, e: Bytes) -> tuple[int, int]:
    """LitGPT's adapted head runs chunk by chunk (``lm_head_chunk_size=128``): its A output and
    dropout mask (bytes an element) are the loss tape's, made chunk by chunk (the trace: an
    earlier chunk's peak holds none of a later chunk's); (0, 0) for the other losses."""
    if cfg.loss != "litgpt" or not x_head(cfg):
        return 0, 0
    from profiling.estimate.lora_bytes import adapter_compute, mask_bytes

    return adapter_compute(cfg, e), (mask_bytes(cfg) if cfg.lora_dropout else 0)


def problem(cfg: TrainingConfig, d: Dims | None) -> str | None:
    """What of ``--loss`` the estimate cannot model, as a clause, or None."""
    if cfg.loss == REFERENCE:
        return None
    if d is None or d.V is None:
        return f"--loss {cfg.loss} without the model's vocabulary (give --model or --vocab)"
    conflict = loss_conflict(cfg.model_dump())
    if conflict:
        return conflict
    if d.extra.get("hf_module") == "gpt2":
        return f"--loss {cfg.loss} on transformers' GPT-2 module (its last block's backward)"
    if d.extra.get("logit_softcap") and cfg.loss in ("chunked", "linear-chunked"):
        return f"--loss {cfg.loss} on a model with soft-capped logits (torchtune caps none)"
    if cfg.compile and cfg.loss == "linear-chunked" and cfg.autocast:
        return (
            "--loss linear-chunked compiled under autocast (the casts inside the compiled "
            "head: trace it)"
        )
    if cfg.loss == "litgpt" and cfg.qlora and cfg.bnb_keeps_inputs:
        if d.extra.get("experts") or d.extra.get("mla"):
            return "--loss litgpt with --bnb-keeps-inputs on a mixture of experts or MLA"
        if cfg.autocast:  # LitGPT refuses it too: "Quantization and mixed precision is not …"
            return "--loss litgpt with --qlora under autocast (LitGPT refuses the pair)"
    return None


def x_head(cfg: TrainingConfig) -> bool:
    """Whether LoRA adapts the LM head."""
    return cfg.lora_rank is not None and "lm_head" in cfg.lora_targets


def plan(d: Dims, e: Bytes, cfg: TrainingConfig) -> LossPlan:
    """The loss ``cfg.loss`` of the step ``d``, as its tapes run."""
    reason = problem(cfg, d)
    if reason:
        raise ProfilingError(f"the estimate cannot model {reason}")
    x = context(d, e, cfg)
    hidden = sized("the final norm's output", [*x.tokens, ("h", x.h)], x.r)
    previous = held_over(d, e, cfg, x)
    fwd = Tape({"hidden": hidden, **{f"held{i}": term for i, term in enumerate(previous)}})
    compiled = x.compiled and cfg.loss in compiled_tapes.FORWARD  # torchtune's compile_loss
    forward, backward = (
        (compiled_tapes.FORWARD[cfg.loss], compiled_tapes.BACKWARD[cfg.loss]) if compiled
        else _distill_tapes(cfg) if cfg.kd_teacher  # torchtune's KD step (estimate.distill)
        else (partial(forward_tape, cfg.loss), partial(backward_tape, cfg.loss))
    )  # fmt: skip
    forward(x, fwd)
    if fwd.has("hidden"):
        fwd.keep_as("hidden", "hidden", "the final norm's output, kept for backward")
    kept = list(fwd.alive.values())
    bwd = Tape(dict(fwd.alive))
    backward(x, bwd)
    held = sum(t.bytes for t in kept)
    unsaved = _unsaved_input(d, e, cfg)
    caller = f" + the LM head's input, held by its caller {fmt_bytes(unsaved)}" if unsaved else ""
    return LossPlan(
        kept=[as_activation(t) for t in kept],
        forward_extra=fwd.peak - held + unsaved,
        forward_calc=calc(fwd, kept) + caller,
        backward_extra=bwd.peak - held,
        backward_calc=calc(bwd, kept),
        drops_head_copy=cfg.loss in ("liger", "cce") and x.amp,
        held=previous,
        looped=sum(t.bytes for key, t in fwd.alive.items() if key.startswith("loop")),
        largest=max(fwd.largest, bwd.largest),
    )


def _distill_tapes(cfg: TrainingConfig) -> tuple[Any, Any]:
    from profiling.estimate import distill

    h_t = distill.teacher_dims(cfg).h
    return partial(distill.forward_tape, h_t=h_t), distill.backward_tape


# The losses whose caller holds the LM head's input through the loss: transformers' model's
# forward (its ``hidden_states``, returned with the logits), torchtune's LinearCrossEntropyLoss
# (``hidden_chunks``, the labelled rows, a local to the loss's end)
_INPUT_HELD = ("transformers-4.46", "transformers-4.45", "linear-chunked")


def _unsaved_input(d: Dims, e: Bytes, cfg: TrainingConfig) -> float:
    """A frozen LM head saves no input (``lora_bytes.head_input_not_kept`` takes it off the end of
    forward), but where the caller holds it, it is alive through the loss's forward all the
    same (16,392 B below the trace at V 512, h 64, 64 × 2 tokens, bf16, before). Not under
    autocast: there the head's input is autocast's 16-bit copy, freed as the matmul returns."""
    if cfg.lora_rank is None or e.amp or cfg.loss not in _INPUT_HELD:
        return 0.0
    from profiling.estimate.lora_bytes import head_input_not_kept

    return d.s * d.b * d.h * head_input_not_kept(d, e, cfg)


def held_over(d: Dims, e: Bytes, cfg: TrainingConfig, x: Ctx) -> list[Term]:
    """What LitGPT's loop still holds of the previous micro-batch while this one's forward runs
    (and of this one through its optimizer step): ``logits = model(input_ids,
    lm_head_chunk_size=128)`` in litgpt/finetune/lora.py's fit() is rebound only when the next
    forward returns, so the chunks stay — and through their graph every bitsandbytes <= 0.43.1
    4-bit layer's input, a ctx attribute (``ctx.tensors = (A, B)``, MatMul4Bit.forward) that
    backward never releases; bitsandbytes PR #1270 stopped keeping it (0.43.2)."""
    if cfg.loss not in ("litgpt", "litgpt-full"):  # full.py's loop holds its logits alike
        return []
    # in fp32: Fabric casts what the model returns (models.losses._litgpt, _litgpt_full)
    held = [sized("the previous micro-batch's logits (LitGPT's loop holds them)",
                  [*x.tokens, ("V", x.V)], 4)]  # fmt: skip
    if cfg.qlora and cfg.bnb_keeps_inputs:
        # Each block's 4-bit inputs that need a gradient: the attention norm's output (q, k, v
        # share it; not in the first block, whose input needs none), the attention's output
        # (o), the MLP norm's output (gate, up) and the gate·up product (down).
        q = d.a * d.hd
        if d.arch == "neox":
            from profiling.estimate.lora_neox import held_4bit_inputs

            held.append(held_4bit_inputs(d, cfg, x.c, x.head_keeps))
            return held
        # A 4-bit LM head (--fabric-bnb) keeps its input too: the final norm's output.
        head, hf, hs = (d.h, "", "") if x.head_keeps else (0, " − h", f" − {d.h}")
        value = d.s * d.b * x.c * (d.L * (2 * d.h + q + d.f) - d.h + head)
        held.append(Term(
            "the previous micro-batch's 4-bit layers' inputs (bitsandbytes <= 0.43.1, held by "
            "its graph)", value, f"s·b·{x.c}·(L·(2h + q + f){hf}) B",
            f"{d.s}·{d.b}·{x.c}·({d.L}·(2·{d.h} + {q} + {d.f}){hs})",
        ))  # fmt: skip
    return held


def as_activation(term: Term) -> Term:
    name = term.name[0].upper() + term.name[1:]
    return Term(f"Logits: {name}", term.bytes, term.formula, term.substituted)


def calc(tape: Tape, kept: list[Term]) -> str:
    """'end of forward + … − …': what is alive at the tape's peak beside the kept tensors."""
    ids = {id(t) for t in tape.at_peak}
    extra = [t for t in tape.at_peak if id(t) not in {id(k) for k in kept}]
    gone = [t for t in kept if id(t) not in ids]
    text = "end of forward"
    if extra:
        formula, numbers = listed(extra)
        text += f" + {formula} ({numbers})"
    if gone:
        formula, numbers = listed(gone)
        text += f" − freed by then: {formula} ({numbers})"
    return text


def loss_plan(cfg: TrainingConfig, shape: dict[str, Any]) -> LossPlan | None:
    """A stack's loss (``--loss`` other than cross-entropy) as its tapes run, else None."""
    if cfg.dpo:  # torchtune's DPO step (estimate.preference)
        d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
        if d is None or d.V is None:
            raise ProfilingError("the estimate cannot model --dpo without the model's vocabulary")
        if d.arch in ("encoder", "t5") or d.extra.get("logit_softcap"):
            # (Gemma 2's soft cap: 2 B below the trace under LoRA; torchtune has no Gemma 2 DPO)
            raise ProfilingError(
                "the estimate cannot model --dpo on an encoder, an "
                "encoder-decoder or soft-capped logits (Gemma 2's)"
            )
        return _dpo_plan(d, Bytes.of(cfg.precision), cfg)
    if cfg.loss == REFERENCE:
        return None
    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    reason = problem(cfg, d)
    if reason:
        raise ProfilingError(f"the estimate cannot model {reason}")
    assert d is not None, "problem() names a missing shape"
    return plan(d, Bytes.of(cfg.precision), cfg)


def _dpo_plan(d: Dims, e: Bytes, cfg: TrainingConfig) -> LossPlan:
    """torchtune's DPO step (``estimate.preference``'s tapes): the previous step's held
    outputs, the policy's and the reference's log-probabilities, back to the LM head."""
    from profiling.estimate import preference as dpo

    x = context(d, e, cfg)
    parts = 1 if cfg.lora_rank is not None else 2  # full_dpo_distributed.py: half by half
    hidden = sized("the final norm's output", [*x.tokens, ("h", x.h)], x.r)
    held = [sized(dpo.HELD, [*x.tokens, ("V", x.V)], 4)] if parts == 1 else []
    held.append(sized(dpo.OUTPUTS, dpo.outputs(x), 4))
    fwd = Tape({"hidden": hidden, **{f"held{i}": t for i, t in enumerate(held)}})
    dpo.forward_tape(x, fwd, parts)
    kept = list(fwd.alive.values())
    bwd = Tape(dict(fwd.alive))
    dpo.backward_tape(x, bwd, parts)
    total = sum(t.bytes for t in kept)
    return LossPlan(
        kept=[as_activation(t) for t in kept],
        forward_extra=fwd.peak - total,
        forward_calc=calc(fwd, kept),
        backward_extra=bwd.peak - total,
        backward_calc=calc(bwd, kept),
        drops_head_copy=False,
        held=held,
        looped=sum(t.bytes for key, t in fwd.alive.items() if key.startswith("loop")),
    )


def without_head_copy(term: Term, shape: dict[str, Any]) -> Term | None:
    """Autocast's weight copies less the LM head's: a fused loss casts it outside the cache
    (Cut Cross-Entropy, which saves its own copy) or keeps none (Liger). None where the term
    was the head's copy alone (``activations.head_copy_only``: the blocks' copies are a
    compiled block's own, or its 4-bit weights dequantize with none) — it counted the blocks'
    copies back, a second time under --compile (amp-bf16 CCE 1.0707, LoRA Liger 1.1155)."""
    if not term.name.startswith("autocast"):
        return term
    if "LM-head weight copy" in term.name:
        return None
    blocks = int(shape.get("matmul_weights") or 0) - int(shape.get("head_params") or 0)
    return Term(
        "autocast's 16-bit weight copies of the blocks (the fused loss keeps none of the head's)",
        blocks * 2,
        "(matmul weights − V·h) · 2 B",
        f"{fmt_count(blocks)} · 2",
    )


Moment = tuple[str, float, str]


@dataclass
class AfterLoss:
    """What is alive once the loss and the final norm are through backward."""

    bytes: float
    calc: str


def after_loss(
    cfg: TrainingConfig, shape: dict[str, Any], lines: list[Line], fwd: float, loss: LossPlan
) -> AfterLoss:
    """End of forward less the loss's and the final norm's saved tensors, plus the LM head's and
    the final norm's gradients."""
    from profiling.estimate.lora_bytes import head_input_not_kept

    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    assert d is not None and d.V is not None, "a loss plan needs the shape"
    e = Bytes.of(cfg.precision)
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    # A frozen head's input (the final norm's output, or the copy matmul folds a strided chunk
    # into): kept by the loss's tape, saved by nothing (the LoRA lines took it off the end of
    # forward: lora_bytes.head_input_not_kept), so not freed here either. Under autocast the
    # tape frees autocast's copy as the matmul returns (as ``_unsaved_input``).
    unsaved = 0 if e.amp else d.s * d.b * d.h * head_input_not_kept(d, e, cfg)
    kept = loss.released - unsaved
    norm = _final_norm_saved(d, e, cfg)
    grads = (d.V * d.h * p if cfg.lora_rank is None else 0) + (
        (2 if d.arch in _LAYER_NORM else 1) * d.h * p if cfg.lora_rank is None else 0
    )
    if cfg.optimizer_in_bwd and not d.extra.get("tied"):
        grads = 0  # each stepped and freed as soon as it was made (a tied head's waits)
    value = fwd - kept - norm + grads
    f = fmt_bytes
    calc = (
        f"end of forward {f(fwd)} − the loss's kept tensors {f(kept)} − the final norm's "
        f"{f(norm)}" + (f" + the LM head's and final norm's gradients {f(grads)}" if grads else "")
    )
    return AfterLoss(value, calc)


def _final_norm_saved(d: Dims, e: Bytes, cfg: TrainingConfig) -> float:
    """What the final norm saves (freed by its backward), its output aside. Under LoRA an RMSNorm
    of separate ops keeps no normalized: its product saves it for the frozen weight's gradient
    only (``lora._head`` takes it off the forward, ``norm_tapes.NormShape.trained``)."""
    from profiling.estimate.hf_ops import normalized_kept

    frozen = d.h * normalized_kept(d, e, cfg) if d.arch not in _LAYER_NORM else 0
    return d.s * d.b * (_norm_row_bytes(d, e, cfg) - frozen)


def moments(
    cfg: TrainingConfig,
    shape: dict[str, Any],
    fwd: float,
    cache: float,
    loss: LossPlan,
    after: AfterLoss,
) -> list[Moment]:
    """A stack's loss: its peaks in forward and in backward above the end of forward, and the
    last block's backward after it (where a small loss leaves the backward's peak)."""
    f = fmt_bytes
    d = acts.dims_of(shape, cfg.seq_or_default(), cfg.batch)
    assert d is not None, "a loss plan needs the shape"
    a_copies = cached_a_copies(d, cfg)
    forward = fwd + cache + a_copies + loss.forward_extra
    calc = loss.forward_calc + (
        f" + autocast's cached 16-bit copies of the blocks' weights or biases {f(cache)}"
        if cache
        else ""
    )
    if a_copies:
        calc += f" + autocast's cached copies of the first block's A weights {f(a_copies)}"
    if scalars := chunk_scalars(cfg):  # torchtune's chunked loss: its forward's peak holds them
        forward, calc = forward + scalars, f"{calc} + the chunks' loss scalars {f(scalars)}"
    # torchtune's chunked loss: the loop's two fp32 scalars, held through backward, are no line
    # of the estimate's (step_scalars counts PyTorch's loss's): the trace's loss backward 8 B above
    held = 2 * 4 if cfg.loss == "chunked" else 0  # step_scalars.LOSS_SCALARS (it imports this)
    held_calc = f" + the loss's two fp32 scalars the loop holds {f(held)}" if held else ""
    out: list[Moment] = [
        ("loss forward", forward, f"{calc} = {f(forward)}"),
        ("loss backward", fwd + loss.backward_extra + held,
         f"{loss.backward_calc}{held_calc} = {f(fwd + loss.backward_extra + held)}"),
    ]  # fmt: skip
    e = Bytes.of(cfg.precision)
    mlp = last_mlp(d, e, cfg)
    if mlp is not None and blocks_keep_saved(cfg):
        # after another stack's loss an adapted down goes back with its adapter's gradients
        # (PyTorch's loss: the architectures' own moments count them, ``llama_end._grads``)
        down, unsaved = down_adapter(d, e, cfg), unsaved_down_input(d, e, cfg)
        value = after.bytes + mlp[0] + down + unsaved
        calc = (
            f"{after.calc} + {mlp[1]}"
            + (f" + down's adapter's gradients less A's output {f(down)}" if down else "")
            + (f" + the frozen down's unsaved input's gradient s·b·f·{e.c}" if unsaved else "")
        )
        out.append(("backward, the last block's MLP", value, f"{calc} = {f(value)}"))
    return out + _final_norm_moments(d, e, cfg, fwd, loss)


def cached_a_copies(d: Dims, cfg: TrainingConfig) -> int:
    """LoRA under autocast: every stack's loss runs inside the autocast region (the trace's, as
    transformers' ``ForCausalLMLoss`` and the patches do), whose weight cache still holds the
    first block's A copies that nothing saved (their input needs no gradient) until it exits —
    beside the loss's forward, as ``llama_loss_held`` / ``neox_loss_held`` count them for
    PyTorch's loss. Without checkpointing (with it: ``activations.autocast_cache``), not DoRA."""
    if not Bytes.of(cfg.precision).amp or cfg.lora_rank is None or cfg.dora:
        return 0
    if cfg.checkpointing != "none":
        return 0
    module = d.extra.get("hf_module")
    if d.arch == "neox" and module:
        from profiling.estimate.lora_neox_amp import first_block_a_copies

        return first_block_a_copies(d, cfg)
    if module in ("llama", "mistral") or not d.extra:  # transformers' Llama kinds, our blocks
        from profiling.estimate.llama_loss_held import first_a

        return 2 * first_a(d, cfg)
    return 0


def _final_norm_moments(
    d: Dims, e: Bytes, cfg: TrainingConfig, fwd: float, loss: LossPlan
) -> list[Moment]:
    """An RMSNorm of separate ops (transformers', or the CPU's): its fp32 temporaries at the end
    of forward and the start of backward (``norm_tapes``)."""
    from profiling.estimate.hf_ops import fp32_norm
    from profiling.estimate.norm_tapes import NormShape, backward_peak, forward_peak

    module = d.extra.get("hf_module")
    if d.arch in _LAYER_NORM or (not module and cfg.target == "cuda"):
        return []  # LayerNorm, and CUDA's fused rms_norm: one kernel each way
    p = 4 if cfg.precision in ("fp32", "amp-bf16", "amp-fp16") else 2
    T = d.s * d.b
    trained = cfg.lora_rank is None  # under LoRA the norm's weight is frozen
    n = NormShape(T, d.h, e.r, p, bool(module) and not fp32_norm(d), trained)
    base = fwd - loss.released - _final_norm_saved(d, e, cfg)
    grads = d.V * d.h * p if cfg.lora_rank is None and d.V else 0
    forward, backward = forward_peak(n), backward_peak(n)
    f = fmt_bytes
    head = f" + the LM head's gradient {f(grads)}" if grads else ""
    where = "end of forward without the loss's and the final norm's tensors"
    # Before the head: none of this micro-batch's logits yet, the previous one's still held.
    held = sum(t.bytes for t in loss.held) - loss.looped
    then = f" + the previous micro-batch's, still held {f(held + loss.looped)}" if held else ""
    return [
        ("the final norm's forward", base + held + forward.peak,
         f"{where} {f(base - loss.looped)}{then} + the norm's ops at their peak: "
         f"{listed(forward.at_peak)[0]} = {f(base + held + forward.peak)}"),
        ("the final norm's backward", base + grads + backward.peak,
         f"{where} {f(base)}{head} + the norm's backward at its peak: "
         f"{listed(backward.at_peak)[0]} = {f(base + grads + backward.peak)}"),
    ]  # fmt: skip


def bias_copies(inp: TrainingConfig, shape: dict[str, Any]) -> float:
    """Autocast's cached 16-bit copies of trained biases (GPT-2's, Qwen2's q/k/v): addmm saves
    none for backward, so they live until autocast exits at the end of forward."""
    if not inp.autocast or inp.lora_rank is not None:
        return 0.0
    L, h = int(shape.get("layers") or 0), int(shape.get("hidden") or 0)
    if shape.get("arch") == "gpt2":
        biases = L * (5 * h + int(shape.get("ffn") or 4 * h))
    elif shape.get("neox", {}).get("bias"):  # q, k, v, the output, the MLP's two
        kv = int(shape.get("kv_dim") or h)
        biases = L * (int(shape["neox"]["q_dim"]) + 2 * kv + 2 * h + int(shape.get("ffn") or 0))
    elif shape.get("arch") == "encoder":  # q, k, v, the output, the MLP's two; masked LM's
        # head: its transform's and its decoder's (a classifier's: encoder._last_norm)
        biases = L * (5 * h + int(shape.get("ffn") or 0)) + h + int(shape.get("vocab") or 0)
    elif shape.get("qkv_bias"):
        biases = L * (int(shape.get("q_dim") or h) + 2 * int(shape.get("kv_dim") or h))
    else:
        return 0.0
    return 2 * biases / inp.tp


__all__ = [
    "REFERENCE",
    "AfterLoss",
    "Ctx",
    "LossPlan",
    "after_loss",
    "bias_copies",
    "context",
    "loss_plan",
    "moments",
    "plan",
    "problem",
    "without_head_copy",
]
