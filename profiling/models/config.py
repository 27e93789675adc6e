"""A reference model's shape as plain data: layers, widths, heads, and its exact parameter count.

No torch here: ``estimate --model NAME`` reads these without building anything.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class WorkloadConfig(BaseModel):
    name: str
    arch: Literal["gpt2", "llama"]
    layers: int
    hidden: int
    heads: int
    vocab: int
    ffn: int
    kv_heads: int | None = None  # grouped-query attention (Llama); None = heads
    max_seq: int = 2048
    tied_embeddings: bool = False
    description: str = ""
    # How the built model runs (the trace sets them from the training configuration):
    # "eager" attention materializes the s² scores and probabilities (saved for backward);
    # "sdpa" is PyTorch's fused kernel (flash on GPUs: no s² tensor kept).
    attention: Literal["eager", "sdpa"] = "sdpa"
    dropout: float = 0.0  # GPT-2: embeddings, attention probabilities, both residual branches

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def layer_params(self) -> int:
        """Parameters of one transformer block."""
        h, f = self.hidden, self.ffn
        if self.arch == "gpt2":
            # qkv (3h² + 3h), proj (h² + h), fc (h·f + f), fc_proj (f·h + h), two LayerNorms (4h)
            return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
        kv = self.n_kv_heads * self.head_dim
        # q, o: h²; k, v: h·kv; SwiGLU: three h·f matrices; two RMSNorm weights
        return 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h

    def embedding_params(self) -> int:
        n = self.vocab * self.hidden
        if self.arch == "gpt2":
            n += self.max_seq * self.hidden  # learned positions
        return n

    def param_count(self) -> int:
        """Exact number of parameters of the model ``build_model`` makes."""
        h = self.hidden
        final_norm = 2 * h if self.arch == "gpt2" else h
        head = 0 if self.tied_embeddings else self.vocab * h
        return self.embedding_params() + self.layers * self.layer_params() + final_norm + head

    def largest_layer_params(self) -> int:
        """The largest unit ZeRO-3 / FSDP gathers at once: a transformer block or the embedding."""
        return max(self.vocab * self.hidden, self.layer_params())

    def largest_module_params(self) -> int:
        """DeepSpeed's ZeRO-3 'largest layer': the most parameters held directly by one module.

        DeepSpeed's ``model_to_params`` takes ``max(sum(p.numel() for p in
        m.parameters(recurse=False)) for m in model.modules())``: a single Linear or Embedding,
        not a whole block.
        """
        h, f = self.hidden, self.ffn
        if self.arch == "gpt2":  # Linear layers carry a bias; positions are an Embedding
            return max(self.vocab * h, self.max_seq * h, 3 * h * h + 3 * h, h * f + f)
        return max(self.vocab * h, h * f, h * h)
