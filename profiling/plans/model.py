"""Which models and settings a plan runs: torchtitan's Llama 3 and what torchtitan offers for it.

A plan's step is torchtitan's (``profiling.plans.titan``): a Llama-family model without the
variations torchtitan's Llama does not have (a reference model, ``hf:NAME`` of the Llama 3
family and friends, or a shape given by hand with ``--arch llama``). What it cannot run is said
in one sentence. No torch here.
"""

from __future__ import annotations

from profiling.config import TrainingConfig
from profiling.errors import ProfilingError
from profiling.models.config import WorkloadConfig
from profiling.models.shape_overrides import workload_of


def _variations(w: WorkloadConfig) -> list[str]:
    found = []
    for name, present in (
        ("a mixture of experts", w.moe or w.shared_experts),
        ("latent attention", w.mla),
        ("q/k norms", w.qk_norm != "none"),
        ("post or sandwich norms", w.norms != "pre"),
        ("a GeGLU MLP", w.mlp != "swiglu"),
        ("q/k/v biases", w.qkv_bias),
        ("sliding-window attention", w.sliding_window is not None),
        ("soft-capped logits", w.logit_softcap or w.attn_softcap),
        ("scaled embeddings", w.embed_scale),
        ("a head size other than hidden / heads", w.head_size not in (None, w.hidden // w.heads)),
        ("an output tied to the embedding", w.tied_embeddings),
    ):
        if present:
            found.append(name)
    return found


def _unsupported(cfg: TrainingConfig) -> list[str]:
    """The settings torchtitan's step has not."""
    problems = []
    if cfg.lora_rank is not None:
        problems.append("LoRA")
    if cfg.optimizer_in_bwd:
        problems.append("--optimizer-in-bwd")
    if cfg.offload_optimizer and not cfg.fsdp:  # FSDP2's CPU offload (plans.cpu_offload)
        problems.append("--offload-optimizer without FSDP (--dp-shard)")
    if cfg.zero == 1 or (cfg.zero and not cfg.fsdp):
        problems.append("DeepSpeed-style ZeRO (give --dp-shard for FSDP2)")
    if cfg.grads_kept:
        problems.append("--grads-kept")
    if cfg.autocast:  # torchtitan's autocast runs under DDP alone (ddp_precision)
        problems.append("autocast beside FSDP, TP or a pipeline (--precision amp-*: give mixed, "
                        "bf16 or fp32)")  # fmt: skip
    if cfg.dropout:
        problems.append("--dropout (torchtitan's Llama has none)")
    return problems


def ddp_precision(cfg: TrainingConfig) -> None:
    """torchtitan's precision under DDP alone (``--dp-replicate N``, nothing sharded): its
    ``maybe_enable_amp`` (torchtitan/distributed/utils.py) leaves mixed precision to
    ``fully_shard`` under FSDP, turns it off beside TP or a pipeline, and otherwise ("DDP or
    single-device training") returns ``torch.autocast(device, dtype=mixed_precision_param)``:
    fp32 parameters, gradients, Adam's state and DDP's buckets, 16-bit matmuls. A plan's
    ``mixed`` (16-bit weights, an fp32 master copy: 2 + 2 + 12 B with Adam) is not that step,
    and a plan's closed form and trace run no autocast: one sentence."""
    from profiling._config_plan import ddp_alone

    if ddp_alone(cfg) and (cfg.precision == "mixed" or cfg.autocast):
        raise ProfilingError(
            f"--precision {cfg.precision} with --dp-replicate alone is torchtitan's DDP under "
            "torch.autocast over fp32 parameters (its maybe_enable_amp), which a plan does not "
            "model: give --precision fp32 or bf16, or estimate --gpus "
            f"{cfg.gpus} --precision amp-bf16 without --dp-replicate (torch's DDP on the "
            "one-GPU step)"
        )


def ddp_beside(cfg: TrainingConfig) -> None:
    """DDP's replicas beside tensor or pipeline parallelism without FSDP (``--dp-replicate N``,
    or a plain ``--gpus N``, beside ``--tp``/``--pp``), refused in one sentence as torchtitan
    refuses them (pytorch/torchtitan torchtitan/models/llama3/parallelize.py before e1847f4,
    March 2026: ``parallelize_llama`` raises "DDP has not supported > 1D parallelism" before
    ``apply_ddp``); a plan counted them with no gradient buckets. Here, not in the
    configuration's checks: ``fit --plans --gpus N`` names the GPUs to lay out, not replicas."""
    from profiling._config_plan import dp_degrees

    model_parallel = [f"--{n} {d}" for n, d in (("tp", cfg.tp), ("pp", cfg.pp)) if d > 1]
    replicate = dp_degrees(cfg)[1]
    if not model_parallel or cfg.fsdp or replicate == 1:
        return
    flag = f"--dp-replicate {replicate}" if cfg.dp_replicate else f"--gpus {replicate}"
    raise ProfilingError(
        f"{flag} beside {' and '.join(model_parallel)} without FSDP is DDP on a mesh of more "
        'than one dimension, which torchtitan refuses ("DDP has not supported > 1D '
        'parallelism", its parallelize_llama): give --dp-shard N (FSDP2, HSDP with '
        "--dp-replicate), or DDP alone"
    )


def plan_workload(cfg: TrainingConfig, searched: bool = False) -> WorkloadConfig:
    """The model a plan runs, or one sentence saying why it cannot; ``searched``: ``fit
    --plans``' base, whose ``--gpus N`` are the GPUs to lay out (``ddp_beside`` not asked)."""
    if cfg.is_factory:
        raise ProfilingError(
            "a parallel plan runs torchtitan's Llama 3 on the model's shape: give --model (a "
            "reference or hf:NAME) or --layers --hidden --heads --vocab --arch llama, not a "
            "factory"
        )
    w = workload_of(cfg) if cfg.model is not None else cfg.hand_workload()
    if w is None:
        raise ProfilingError(
            "a parallel plan needs the model's shape: give --model, or --layers --hidden "
            "--heads --vocab --arch llama with --params"
        )
    if w.arch != "llama":
        raise ProfilingError(
            f"{w.name} is a GPT-2 block; a parallel plan runs torchtitan's Llama 3 blocks: use a "
            "Llama-family model (--model llama-7b, hf:llama-3.1-8b …)"
        )
    found = _variations(w)
    if found:
        raise ProfilingError(
            f"{w.name} has {', '.join(found)}, which torchtitan's Llama 3 has not: a parallel plan "
            "runs that model; use a Llama 3 / Mistral-shaped model, or estimate without --pp, "
            "--cp, --ulysses, --dp-shard and --dp-replicate"
        )
    ddp_precision(cfg)
    if not searched:
        ddp_beside(cfg)
    problems = _unsupported(cfg)
    if problems:
        raise ProfilingError(
            f"a parallel plan runs torchtitan's step, which has no {', '.join(problems)}: leave "
            f"{'it' if len(problems) == 1 else 'them'} out, or estimate without --pp, --cp, "
            "--ulysses, --dp-shard and --dp-replicate"
        )
    if w.heads % cfg.tp or w.n_kv_heads % cfg.tp:
        raise ProfilingError(
            f"--tp {cfg.tp} must divide {w.name}'s {w.heads} attention heads and "
            f"{w.n_kv_heads} key/value heads (tensor parallelism gives each rank whole heads)"
        )
    u, kv = cfg.ulysses, w.n_kv_heads
    if w.heads % u or (kv % u and u % kv):
        raise ProfilingError(
            f"--ulysses {u} must divide {w.name}'s {w.heads} attention heads and divide or be a "
            f"multiple of its {kv} key/value heads (the all-to-all gives each rank whole heads; "
            "DeepSpeed replicates key/value heads only when N is a multiple of them)"
        )
    seq = cfg.seq_or_default()
    if cfg.model is not None and seq > w.max_seq:  # a shape by hand has no maximum
        raise ProfilingError(f"--seq {seq} exceeds {w.name}'s maximum of {w.max_seq}")
    if cfg.cp > 1:
        from profiling.plans.ring_form import ring_problem

        problem = ring_problem(cfg, w)
        if problem:
            raise ProfilingError(problem)
    if cfg.tp > 1 and (seq // cfg.cp) % cfg.tp:
        raise ProfilingError(
            f"--seq {seq} must divide by --tp {cfg.tp}"
            + (f" · --cp {cfg.cp}" if cfg.cp > 1 else "")
            + ": sequence parallelism gives each rank an equal share of the tokens"
        )  # fmt: skip
    return w


__all__ = ["ddp_beside", "ddp_precision", "plan_workload"]
