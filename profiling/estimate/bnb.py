"""bitsandbytes' bytes, read from its source: the 4-bit (NF4) weights of QLoRA with and without
double quantization, and the 8-bit and paged optimizers' states. The one place for them: the
estimate's lines and the trace's stand-ins (``profiling.trace.lora``, ``profiling.trace.bnb``)
both take their sizes from here.

**A 4-bit weight of n values** (``functional.quantize_4bit``, blocksize 64; source:
github.com/bitsandbytes-foundation/bitsandbytes, bitsandbytes/functional.py and
backends/cuda/ops.py at 95f9af3):

- the packed codes, two a byte: ⌈n/2⌉ B (uint8);
- the NF4 code ``get_4bit_type("nf4")``: 16 fp32 values, a tensor of its own per weight: 64 B;
- without double quantization (``compress_statistics=False``: Hugging Face's default
  ``bnb_4bit_use_double_quant=False``, LitGPT's ``bnb.nf4``): one fp32 absmax per 64-value
  block, 4·⌈n/64⌉ B;
- with it (``bnb_4bit_use_double_quant=True``, LitGPT's ``bnb.nf4-dq``, the QLoRA paper's
  setting): the absmax less its mean quantized to uint8 by ``quantize_blockwise(blocksize=256)``,
  ⌈n/64⌉ B, that mean as a 0-d fp32 tensor (the offset, 4 B), the nested state's fp32 absmax per
  256 blocks, 4·⌈⌈n/64⌉/256⌉ B, and the nested state's copy of the 256-value dynamic map
  (``code.to(A.device, copy=True)``, since 0.46.0, May 2025: 1,024 B per weight), plus the map
  itself once (``name2qmap["dynamic"]``, 1,024 B).

``dequantize_4bit`` of a double-quantized weight first writes the absmax back in fp32
(4·⌈n/64⌉ B, alive while the weight is written); without double quantization it reads the fp32
absmax it holds.

**8-bit optimizers** (``optim/optimizer.py``, ``Optimizer2State.init_state``): each state of a
parameter of n ≥ ``min_8bit_size`` (4,096) values is n uint8 plus an fp32 absmax per 256-value
block; a smaller parameter keeps fp32 states (4·n B each). The two 256-value quantile maps
(``dynamic``, ``udynamic``: 2 × 1,024 B) are the optimizer's, once. The step counter is a Python
int (no tensor), and the update is one fused kernel per parameter, in place: no temporaries.

**Paged optimizers** (``get_state_buffer``): a state of a parameter of ≥ 10⁵ values is made with
``F.get_paged``: ``cudaMallocManaged`` memory wrapped by ``torch.frombuffer``, so PyTorch's
caching allocator never sees it (not in ``max_memory_allocated`` nor ``max_memory_reserved``);
smaller ones are ordinary ``torch.zeros_like``. Managed pages live on the GPU while there is
room (nvidia-smi counts them) and are moved page by page to host memory when the GPU runs out
(bitsandbytes' docs/source/explanations/optimizers.mdx, "Paged optimizers"): a step that needs
the room does not run out of memory, it pays the transfers.

No torch here.
"""

from __future__ import annotations

NF4_BLOCK = 64
NESTED_BLOCK = 256
NF4_CODE_BYTES = 16 * 4
DYNAMIC_MAP_BYTES = 256 * 4
OFFSET_BYTES = 4

OPT_BLOCK = 256
MIN_8BIT_SIZE = 4096
PAGED_MIN_NUMEL = 100_000
QMAPS_BYTES = 2 * DYNAMIC_MAP_BYTES


def nf4_bytes(numel: int, double_quant: bool = True) -> int:
    """Bytes bitsandbytes keeps for one 4-bit weight of ``numel`` values (the shared map apart)."""
    blocks = -(-numel // NF4_BLOCK)
    packed = (numel + 1) // 2 + NF4_CODE_BYTES
    if not double_quant:
        return packed + 4 * blocks
    nested = -(-blocks // NESTED_BLOCK)
    return packed + blocks + 4 * nested + OFFSET_BYTES + DYNAMIC_MAP_BYTES


def nf4_formula(double_quant: bool) -> str:
    """One weight's bytes as ``nf4_bytes`` counts them, in words."""
    if not double_quant:
        return "n/2 packed + 4·n/64 fp32 absmax + 64 (the NF4 code)"
    return (
        "n/2 packed + n/64 uint8 absmax + 4·⌈n/16384⌉ nested absmax + 64 (the NF4 code) + 4 "
        "(offset) + 1024 (the nested map's copy)"
    )


def shared_map_bytes(double_quant: bool) -> int:
    """The dynamic map ``quantize_blockwise`` keeps once per device (double quantization only)."""
    return DYNAMIC_MAP_BYTES if double_quant else 0


def nf4_base_bytes(layer_numels: list[int], layers: int, double_quant: bool = True) -> int:
    """The quantized Linear layers of every block, and the shared map."""
    per_block = sum(nf4_bytes(n, double_quant) for n in layer_numels)
    return layers * per_block + shared_map_bytes(double_quant)


def dequant_absmax_bytes(numel: int, double_quant: bool) -> int:
    """The fp32 absmax ``dequantize_4bit`` writes before the weight (double quantization)."""
    return 4 * -(-numel // NF4_BLOCK) if double_quant else 0


def state_bytes_8bit(numel: int) -> int:
    """One 8-bit optimizer state of a parameter of ``numel`` values: uint8 + fp32 absmax per
    256 values, or fp32 under ``min_8bit_size``."""
    if numel < MIN_8BIT_SIZE:
        return 4 * numel
    return numel + 4 * -(-numel // OPT_BLOCK)


def paged(numel: int) -> bool:
    """Whether a paged optimizer puts this parameter's states in managed memory."""
    return numel >= PAGED_MIN_NUMEL


__all__ = [
    "DYNAMIC_MAP_BYTES",
    "MIN_8BIT_SIZE",
    "NESTED_BLOCK",
    "NF4_BLOCK",
    "OPT_BLOCK",
    "PAGED_MIN_NUMEL",
    "QMAPS_BYTES",
    "dequant_absmax_bytes",
    "nf4_base_bytes",
    "nf4_bytes",
    "nf4_formula",
    "paged",
    "shared_map_bytes",
    "state_bytes_8bit",
]
