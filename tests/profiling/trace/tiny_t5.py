"""The tiny encoder-decoders (T5 v1.0, Flan-T5, mT5) the T5 checkpointing tests build from a
config.json: one shape for all, each kind's own fields on top."""

from __future__ import annotations

BASE = {
    "vocab_size": 512, "d_model": 64, "d_ff": 160, "num_layers": 2, "num_decoder_layers": 3,
    "num_heads": 4, "d_kv": 16,
}  # fmt: skip
FLAN = {"model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
KINDS = {
    "flan-t5": FLAN,
    # deeper stacks: each block below the top holds one gradient more than its checkpoint
    "flan-t5, 4 + 5 blocks": {**FLAN, "num_layers": 4, "num_decoder_layers": 5},
    # heads × d_kv (72) differs from d_model: o's input and q's, k's, v's outputs are 72 wide
    "mt5, q 72 wide": {"model_type": "mt5", "tie_word_embeddings": False, "d_kv": 24,
                       "num_heads": 3},
    # ReLU MLP, the head tied to the embedding (one V·h gradient for both)
    "t5 v1.0": {"model_type": "t5"},
    "t5 v1.0, 4 + 5 blocks": {"model_type": "t5", "num_layers": 4, "num_decoder_layers": 5},
}  # fmt: skip
CATEGORIES = ("parameters", "gradients", "optimizer", "activations")
