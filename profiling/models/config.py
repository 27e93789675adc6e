"""A model's shape as plain data: layers, widths, heads, and its exact parameter count.

The reference models and every Hugging Face config (``profiling.models.hf_config``) become one
of these. The Llama family's variations are fields: an explicit head size (Qwen3, Gemma 2),
q/k/v biases (Qwen2), q/k norms (Qwen3 per head, OLMo 2 over the whole projection), where the
norms sit (OLMo 2 after each sublayer, Gemma 2 before and after), GeGLU (Gemma), mixture of
experts with top-k routing (Mixtral, Qwen3-MoE, OLMoE), sliding-window attention.

No torch here: ``estimate --model NAME`` reads these without building anything.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class WorkloadConfig(BaseModel):
    name: str
    # "neox": GPT-NeoX's kind of decoder (GPT-NeoX/Pythia/StableLM-alpha, Phi-1/2, Falcon):
    # LayerNorm with bias, a plain GELU MLP, rotary (possibly partial) attention, biases on the
    # linears or not, attention and MLP in parallel or one after the other (``neox`` fields).
    # "encoder": a bidirectional encoder with post-LayerNorm blocks (BERT, RoBERTa): learned
    # positions and token types, a masked-LM or classification head (``encoder`` fields).
    # "t5": an encoder-decoder (T5, mT5, Flan-T5): ``t5`` fields below.
    arch: Literal["gpt2", "llama", "neox", "encoder", "t5"]
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
    # The loss the step ends with, as a training stack computes it (profiling.models.losses).
    loss: str = "cross-entropy"
    loss_chunks: int = 8
    compile_loss: bool = False  # torchtune's compile_loss: its chunked losses' per-chunk function
    target: Literal["cuda", "cpu"] = "cuda"  # whose kernels a fused loss's branches follow
    # ---- the Llama family's variations (Hugging Face configs)
    head_size: int | None = None  # None = hidden // heads
    qkv_bias: bool = False  # Qwen2: biases on q, k, v
    qk_norm: Literal["none", "head", "full"] = "none"  # Qwen3: per head; OLMo 2: whole width
    norms: Literal["pre", "post", "sandwich"] = "pre"  # OLMo 2: post; Gemma 2: both sides
    mlp: Literal["swiglu", "geglu"] = "swiglu"  # Gemma: GELU (tanh) gate
    experts: int = 0  # mixture of experts: routed experts per layer (0 = a dense MLP)
    experts_per_token: int = 0  # top-k
    expert_ffn: int | None = None  # each expert's inner size (None = ffn)
    # Tokens an expert takes: capacity_factor · k·T/E. Our blocks assume balanced routing
    # (factor 1: each expert gets exactly k·T/E tokens); the data decides on a real run.
    capacity_factor: float = 1.0
    sliding_window: int | None = None  # tokens each query sees (None = all)
    sliding_layers: Literal["all", "alternate"] = "all"  # Gemma 2: every other layer
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    embed_scale: bool = False  # Gemma: embeddings multiplied by sqrt(hidden)
    logit_softcap: float | None = None  # Gemma 2: cap · tanh(logits / cap)
    attn_softcap: float | None = None  # Gemma 2's attention scores, as transformers caps them
    # DeepSeek-V2: multi-head latent attention (keys and values through a rank-r latent),
    # experts every token runs beside the routed ones, dense MLPs in the first layers.
    kv_lora_rank: int | None = None  # None: plain attention
    q_lora_rank: int | None = None  # None: one q_proj
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_dim: int = 0
    shared_experts: int = 0  # each an MLP of expert_ffn; together one of shared · expert_ffn
    dense_layers: int = 0  # the first layers keep a dense MLP of width ffn
    # ---- GPT-NeoX's kind (arch "neox"): the readers in profiling.models.hf_neox set them
    # sequential: x + attn(ln1 x), then + mlp(ln2 ·); parallel: x + attn(ln1 x) + mlp(ln2 x)
    # (GPT-NeoX); parallel_one_norm: both read one LayerNorm's output (Phi, Falcon-7B)
    residual: Literal["sequential", "parallel", "parallel_one_norm"] = "sequential"
    rotary_dim: int | None = None  # leading dims of each head that rotate (None: all)
    linear_bias: bool = False  # every block Linear has a bias (GPT-NeoX, Phi)
    fused_qkv: bool = False  # one query_key_value Linear (GPT-NeoX, Falcon) or q, k, v apart
    head_bias: bool = False  # Phi's LM head has a bias
    gelu: Literal["exact", "tanh"] = "exact"  # Phi's gelu_new is the tanh approximation
    # BLOOM: ALiBi's per-head linear biases on the scores instead of rotary positions (rotary_dim
    # 0), and a LayerNorm on the embeddings (word_embeddings_layernorm)
    alibi: bool = False
    embed_norm: bool = False
    # LitGPT's own GPT (its finetune scripts, --loss litgpt) for Phi: q, k, v one fused Linear
    # whose values SDPA reads as a view, heads rotated after the transpose (q head-major: the
    # output projection reads a copy), torch's fused tanh GELU — traced as our blocks so laid out
    litgpt: bool = False
    # LitGPT's RMSNorm (litgpt/model.py at 00af8b0), as its scripts run transformers' Llama,
    # Mistral, Qwen2 and Phi-3 shapes: eager ops that keep the fp32 input and the fp32
    # normalized values (multiplied by the fp32 weight) where transformers keeps the latter cast
    # back to 16 bits
    litgpt_norm: bool = False
    # LitGPT's own CausalSelfAttention (litgpt/model.py at 00af8b0) on a Llama, Mistral, Qwen2 or
    # Gemma shape: q, k, v one fused Linear (LoRA on it LitGPT's LoRAQKVLinear), grouped keys and
    # values expanded to every head, q and k rotated after the transpose and concatenated: SDPA
    # reads v as a view of the fused output (a copy of its own under grouped heads)
    litgpt_qkv: bool = False
    # ---- encoders (arch "encoder"): the readers in profiling.models.hf_encoders set them
    type_vocab: int = 0  # token-type (segment) embeddings: BERT 2, RoBERTa 1
    positions: int | None = None  # learned position embeddings' rows (None: max_seq)
    # the head the task trains: masked LM (the LM transform and the tied decoder) or sequence
    # classification (BERT's pooler and classifier, RoBERTa's classification head)
    encoder_head: Literal["mlm", "classify"] = "mlm"
    num_labels: int = 2  # classify: its outputs (1: a regression, mean-squared error)
    # ViT: pre-LayerNorm blocks over image patches and a class token (0: a text encoder)
    patch_size: int = 0
    image_size: int = 0
    channels: int = 3
    # ---- encoder-decoders (arch "t5"): profiling.models.hf_t5 sets them; ``layers`` is the
    # encoder's, ``decoder_layers`` the decoder's, ``head_size`` d_kv when it is not h/heads
    decoder_layers: int = 0
    rel_buckets: int = 32  # relative_attention_num_buckets: each stack's first layer's table
    gated: bool = False  # feed_forward_proj gated-gelu (v1.1, mT5, Flan-T5) or relu (v1.0)
    target_seq: int | None = None  # the decoder's tokens per sequence (the trace sets it)
    hf_model_type: str | None = None  # the config's model_type, for configs from Hugging Face
    source: str = ""  # where the config came from (a catalogue entry's public location)

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): heads × head size; with MLA the
        attention output's, heads × v_head_dim."""
        return self.heads * (self.v_dim if self.mla else self.head_dim)

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def mlp_ffn(self) -> int:
        """The inner size of one MLP: an expert's with MoE, else the dense one."""
        return (self.expert_ffn or self.ffn) if self.moe else self.ffn

    def attention_params(self) -> int:
        """q, k, v, o (+ biases, + q/k norms) of one Llama-family block."""
        if self.mla:
            return self._mla_params()
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        n = 2 * h * q + 2 * h * kv
        if self.qkv_bias:
            n += q + 2 * kv
        if self.qk_norm == "head":
            n += 2 * self.head_dim
        elif self.qk_norm == "full":
            n += q + kv
        return n

    def _mla_params(self) -> int:
        h, heads, rank = self.hidden, self.heads, self.kv_lora_rank or 0
        qk = self.qk_nope_dim + self.qk_rope_dim
        ql = self.q_lora_rank
        q = h * ql + ql + ql * heads * qk if ql else h * heads * qk
        kv = h * (rank + self.qk_rope_dim) + rank + rank * heads * (self.qk_nope_dim + self.v_dim)
        return q + kv + heads * self.v_dim * h

    def mlp_params(self) -> int:
        """The MLP of one block: three h·f matrices, or the router and every expert's three
        (and the shared experts', one MLP of shared · expert width)."""
        h = self.hidden
        if self.moe:
            shared = 3 * h * self.mlp_ffn * self.shared_experts
            return h * self.experts + self.experts * 3 * h * self.mlp_ffn + shared
        return 3 * h * self.ffn

    def neox_attention_params(self) -> int:
        """q, k, v (fused or not) and the output projection, with their biases or not."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        return 2 * h * q + 2 * h * kv + ((q + 2 * kv + h) if self.linear_bias else 0)

    def neox_mlp_params(self) -> int:
        h, f = self.hidden, self.ffn
        return 2 * h * f + ((f + h) if self.linear_bias else 0)

    def neox_norms(self) -> int:
        """LayerNorms per block (weight and bias each)."""
        return 1 if self.residual == "parallel_one_norm" else 2

    @property
    def rotary(self) -> int:
        """How many leading dims of each head rotate."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    def dense_layer_params(self) -> int:
        """One of the first ``dense_layers`` blocks: attention, a dense MLP of ffn, two norms."""
        return self.attention_params() + 3 * self.hidden * self.ffn + 2 * self.hidden

    def layer_params(self) -> int:
        """Parameters of one transformer block."""
        h, f = self.hidden, self.ffn
        if self.arch == "neox":
            return self.neox_attention_params() + self.neox_mlp_params() + self.neox_norms() * 2 * h
        if self.arch == "t5":  # an encoder block: q, k, v, o, the MLP, two RMS norms
            return 4 * h * self.q_dim + (3 if self.gated else 2) * h * f + 2 * h
        if self.arch in ("gpt2", "encoder"):
            # qkv (3h² + 3h), proj (h² + h), fc (h·f + f), fc_proj (f·h + h), two LayerNorms (4h)
            return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
        norms = 4 if self.norms == "sandwich" else 2
        return self.attention_params() + self.mlp_params() + norms * h

    def embedding_params(self) -> int:
        n = self.vocab * self.hidden
        if self.arch == "gpt2":
            n += self.max_seq * self.hidden  # learned positions
        if self.arch == "encoder" and self.patch_size:  # the class token, positions, patches
            conv = self.hidden * self.channels * self.patch_size**2 + self.hidden
            return (1 + (self.positions or self.max_seq)) * self.hidden + conv
        if self.arch == "encoder":  # positions, token types and the embeddings' LayerNorm
            n += ((self.positions or self.max_seq) + self.type_vocab + 2) * self.hidden
        if self.embed_norm:  # BLOOM's word_embeddings_layernorm
            n += 2 * self.hidden
        return n

    def encoder_head_params(self) -> int:
        """The encoder's head: masked LM's transform (h×h, LayerNorm), the decoder's bias (and
        its weight when untied); classification's h×h layer (BERT's pooler, RoBERTa's dense)
        and the classifier."""
        h, n = self.hidden, self.num_labels
        if self.patch_size:  # ViT: the final LayerNorm and the classifier on the class token
            return 2 * h + h * n + n
        if self.encoder_head == "classify":
            return h * h + h + h * n + n
        return h * h + 3 * h + self.vocab + (0 if self.tied_embeddings else self.vocab * h)

    def param_count(self) -> int:
        """Exact number of parameters of the model ``build_model`` makes."""
        h = self.hidden
        if self.arch == "t5":
            return self.t5_params()
        if self.arch == "encoder":  # post-LayerNorm blocks: no final norm
            blocks = self.layers * self.layer_params()
            return self.embedding_params() + blocks + self.encoder_head_params()
        final_norm = 2 * h if self.arch in ("gpt2", "neox") else h
        head = 0 if self.tied_embeddings else self.vocab * h
        head += self.vocab if self.head_bias else 0
        dense = min(self.dense_layers, self.layers)
        blocks = (self.layers - dense) * self.layer_params() + dense * self.dense_layer_params()
        return self.embedding_params() + blocks + final_norm + head

    def t5_decoder_layer_params(self) -> int:
        """A decoder block: an encoder block's and cross-attention's q, k, v, o and norm."""
        return self.layer_params() + 4 * self.hidden * self.q_dim + self.hidden

    def t5_params(self) -> int:
        """T5ForConditionalGeneration / MT5ForConditionalGeneration as from_pretrained loads
        them: one shared embedding (both stacks read it), each stack's blocks, one relative
        position table per stack (its first block's, buckets × heads), two final norms, and
        lm_head — tied to the embedding in v1.0, its own matrix in v1.1, mT5 and Flan-T5."""
        h, v = self.hidden, self.vocab
        blocks = self.layers * self.layer_params()
        blocks += self.decoder_layers * self.t5_decoder_layer_params()
        head = 0 if self.tied_embeddings else v * h
        return v * h + blocks + 2 * self.rel_buckets * self.heads + 2 * h + head

    def largest_layer_params(self) -> int:
        """The largest unit ZeRO-3 / FSDP gathers at once: a transformer block or the embedding."""
        block = self.t5_decoder_layer_params() if self.arch == "t5" else self.layer_params()
        return max(self.vocab * self.hidden, block)

    def largest_module_params(self) -> int:
        """DeepSpeed's ZeRO-3 'largest layer': the most parameters held directly by one module.

        DeepSpeed's ``model_to_params`` takes ``max(sum(p.numel() for p in
        m.parameters(recurse=False)) for m in model.modules())``: a single Linear or Embedding,
        not a whole block.
        """
        h, f = self.hidden, self.ffn
        if self.arch == "gpt2":  # Linear layers carry a bias; positions are an Embedding
            return max(self.vocab * h, self.max_seq * h, 3 * h * h + 3 * h, h * f + f)
        if self.arch == "encoder":
            conv = h * self.channels * self.patch_size**2 + h  # ViT's patch projection
            return max(self.vocab * h, (self.positions or self.max_seq) * h, h * f + f, conv)
        if self.arch == "t5":
            return max(self.vocab * h, h * f, h * self.q_dim)
        if self.arch == "neox":
            bias = 1 if self.linear_bias else 0
            qkv = (h + bias) * (self.q_dim + 2 * self.kv_dim) if self.fused_qkv else 0
            return max(self.vocab * h, (h + bias) * f, (h + bias) * self.q_dim, qkv)
        experts = 3 * h * self.mlp_ffn * self.experts  # our blocks hold them stacked in one module
        return max(self.vocab * h, h * self.mlp_ffn, h * self.q_dim, experts)
