"""The short-microbatch pipeline toy several plan tests trace: 4 blocks of hidden 256, a
4,096-word vocabulary, 2 microbatches of 128 tokens over PP 2 (fp32, no checkpointing) unless a
test's plan says otherwise."""

from __future__ import annotations

SHORT = {"layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 704, "vocab": 4096,
         "arch": "llama", "precision": "fp32", "seq": 128, "batch": 2, "microbatches": 2,
         "pp": 2, "checkpointing": "none"}  # fmt: skip
