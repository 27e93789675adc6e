"""A relevance set for journal search: 43 entries on training systems, 72 queries as learners
ask them, each with the entries it should find; plus near-duplicate pairs.

Used by tests/journal/search/test_relevance.py (which asserts the floors) and
benchmarks/bench_search.py (which reports MRR@5 and recall@5 for BM25, meaning and fused).
Entries are short versions of the user's 20-section structure: what a journal holds after a
few weeks of study. Queries mix keywords, whole questions, misspellings, abbreviations and
their spellings out, and Chinese (the user's ledger is bilingual).
"""

from __future__ import annotations

from pathlib import Path

from tests.entries import render_entry

# key: (title, tags, context, key question, intuition + insights)
ENTRIES: dict[str, tuple[str, str, str, str, str]] = {
    "zero1": (
        "ZeRO Stage 1 Partitions Optimizer States",
        "#zero #deepspeed #memory",
        "Reading the DeepSpeed config of our 7B run, which sets zero_optimization.stage to 1.",
        "Why does stage 1 save so much memory when the weights are still replicated?",
        "With mixed-precision Adam most of the bytes per parameter are optimizer state: the "
        "fp32 master copy, momentum and variance take 12 of the 16 bytes. ZeRO stage 1 keeps "
        "the weights and gradients replicated but gives every data-parallel rank only 1/N of "
        "the optimizer states; after the step each rank broadcasts its updated slice.",
    ),
    "zero2": (
        "ZeRO Stage 2 Shards Gradients Too",
        "#zero #deepspeed #gradients",
        "Moving the config from stage 1 to stage 2 and comparing peak memory per GPU.",
        "What does stage 2 add on top of stage 1?",
        "Stage 2 also partitions the gradients: instead of an all-reduce, gradients are "
        "reduce-scattered so each rank only keeps the gradient slice for the optimizer states "
        "it owns. Communication volume stays the same as plain data parallel, memory for "
        "gradients drops by N.",
    ),
    "zero3": (
        "ZeRO Stage 3 Partitions the Parameters",
        "#zero #deepspeed #parameters",
        "Trying to fit a 13B model where even the fp16 weights do not fit on one card.",
        "How can a GPU run a layer whose weights it does not hold?",
        "Stage 3 shards the parameters themselves. Before a layer runs forward or backward the "
        "rank all-gathers its full weights, uses them, and frees them again; prefetching the "
        "next layer hides the gather behind compute. It costs about 1.5x the communication of "
        "data parallel.",
    ),
    "zero_offload": (
        "ZeRO-Offload Moves the Optimizer to the CPU",
        "#zero #offload #cpu",
        "A single 24 GB card and a model that needs far more for Adam state.",
        "Can the CPU hold the optimizer instead of the GPU?",
        "ZeRO-Offload keeps fp32 master weights and Adam moments in pinned host memory and runs "
        "the optimizer step on the CPU; gradients stream down over PCIe and updated fp16 weights "
        "stream back. PCIe bandwidth, not GPU compute, becomes the limit, so it pays off only "
        "when the model would not fit otherwise.",
    ),
    "fsdp": (
        "FSDP Unit Wrapping and Per-Layer All-Gather",
        "#fsdp #pytorch #sharding",
        "Porting a DeepSpeed run to PyTorch fully_shard.",
        "Where exactly does FSDP gather and free the weights?",
        "FSDP is PyTorch's native version of ZeRO-3. Each wrapped unit (usually one transformer "
        "block) owns a flat sharded parameter; before the unit's forward it all-gathers the "
        "full parameters, after it frees them, and in backward gradients are reduce-scattered "
        "back to shards. Wrapping too coarsely raises peak memory, too finely adds latency.",
    ),
    "fsdp_mp": (
        "FSDP2 MixedPrecisionPolicy",
        "#fsdp #precision #bf16",
        "Setting param_dtype and reduce_dtype for fully_shard.",
        "Which copy of the weights is in bf16 and which in fp32?",
        "With MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) the sharded parameters "
        "stay fp32, the all-gathered copy used for compute is bf16, and gradients are reduced "
        "in fp32 for accuracy. The optimizer updates the fp32 shards, so there is no separate "
        "master copy as in Megatron.",
    ),
    "ddp": (
        "DDP Gradient Buckets Overlap All-Reduce with Backward",
        "#ddp #communication #overlap",
        "Profiling a DistributedDataParallel run and seeing NCCL kernels during backward.",
        "Why does communication start before backward is finished?",
        "DDP groups gradients into buckets (25 MB by default, a setting) in reverse order of "
        "the parameters. As soon as every gradient in a bucket is ready an asynchronous "
        "all-reduce starts, so communication overlaps the rest of the backward pass. "
        "bucket_cap_mb and gradient_as_bucket_view tune it.",
    ),
    "tp": (
        "Megatron Tensor Parallelism Splits the Matmuls",
        "#tensor-parallel #megatron",
        "Reading Megatron-LM's ColumnParallelLinear and RowParallelLinear.",
        "How is one linear layer spread over several GPUs?",
        "The MLP's first weight is split by columns and the second by rows, so each GPU computes "
        "its part of the hidden activation without talking, and a single all-reduce sums the "
        "outputs. Attention heads are divided the same way. It needs fast NVLink because there "
        "are two all-reduces per layer in forward.",
    ),
    "pp": (
        "Pipeline Parallelism and the Bubble",
        "#pipeline-parallel #scheduling",
        "Splitting 32 layers over 4 stages and wondering why GPUs sit idle.",
        "Where does the idle time in a pipeline come from?",
        "Each stage waits for activations from the previous one, so at the start and end of a "
        "step some stages are idle: the bubble. With p stages and m micro-batches the bubble "
        "fraction is (p - 1) / (m + p - 1). More micro-batches or interleaved 1F1B schedules "
        "shrink it.",
    ),
    "sp": (
        "Sequence Parallelism for Long-Context Activations",
        "#sequence-parallel #activations #long-context",
        "Training with 32k-token sequences where activations, not weights, run out of memory.",
        "How do you split work along the sequence dimension?",
        "Sequence parallelism shards LayerNorm and dropout activations along the sequence "
        "between tensor-parallel ranks, turning the all-reduce into reduce-scatter plus "
        "all-gather. Context parallelism goes further and splits attention itself with ring "
        "attention.",
    ),
    "allreduce": (
        "Ring All-Reduce Is Reduce-Scatter Plus All-Gather",
        "#nccl #communication #allreduce",
        "Estimating how long gradient synchronisation takes on 8 GPUs.",
        "Why does ring all-reduce send about twice the data size regardless of GPU count?",
        "A ring all-reduce runs a reduce-scatter (each rank ends with the sum of one chunk) and "
        "then an all-gather (everyone receives every summed chunk). Each phase moves (N-1)/N of "
        "the buffer per rank, so the total is 2(N-1)/N times the buffer: bandwidth-optimal.",
    ),
    "nccl_timeout": (
        "NCCL Timeouts and Hanging Collectives",
        "#nccl #debugging #distributed",
        "A job froze at step 1200 and died after the watchdog timeout.",
        "Why does one slow rank make every rank hang?",
        "Collectives are blocking rendezvous: if one rank never calls the all-reduce (a "
        "data-dependent branch, an exception, uneven batches) the others wait until the NCCL "
        "watchdog kills the process. TORCH_NCCL_ASYNC_ERROR_HANDLING and NCCL_DEBUG=INFO help "
        "find the rank that diverged.",
    ),
    "act_ckpt": (
        "Activation Checkpointing Trades Compute for Memory",
        "#activations #memory #recomputation",
        "Peak memory is dominated by saved activations at batch 8.",
        "What if we just did not keep the activations?",
        "Activation checkpointing (gradient checkpointing) stores only the inputs of each "
        "checkpointed block and recomputes the forward during backward. Activation memory drops "
        "from all layers to roughly one layer plus the checkpoints, at the cost of one extra "
        "forward pass, about 33% more compute.",
    ),
    "grad_accum": (
        "Gradient Accumulation Simulates a Larger Batch",
        "#training #batch-size",
        "The paper used a global batch of 512 but only 8 samples fit per GPU.",
        "How do I get a bigger effective batch without more memory?",
        "Run several micro-batches forward and backward, letting gradients add up in .grad, and "
        "step the optimizer only every k micro-batches. Divide the loss by k so the sum is an "
        "average. With DDP, use no_sync() on the accumulation steps to skip redundant "
        "all-reduces.",
    ),
    "mixed_precision": (
        "Mixed Precision Training with Autocast",
        "#precision #amp #autocast",
        "Turning on torch.autocast in our training loop. 混合精度训练的第一步.",
        "Which operations actually run in half precision?",
        "Autocast runs matmuls and convolutions in bf16 or fp16 while keeping reductions, "
        "softmax and the loss in fp32. Parameters stay fp32; autocast caches a low-precision "
        "copy of each weight inside the region. Tensor cores give the speedup.",
    ),
    "bf16_vs_fp16": (
        "bfloat16 vs float16: Range Against Precision",
        "#precision #bf16 #fp16",
        "Our fp16 run diverged where the bf16 run of the same model did not.",
        "Why is bf16 more forgiving than fp16?",
        "bfloat16 keeps the 8 exponent bits of fp32 and only 7 mantissa bits, so it covers the "
        "same range and never overflows where fp32 would not; fp16 has 5 exponent bits and "
        "10 mantissa bits, more precise but it overflows past 65504 and underflows small "
        "gradients, which is why fp16 needs loss scaling.",
    ),
    "loss_scaling": (
        "Dynamic Loss Scaling with GradScaler",
        "#fp16 #loss-scaling #amp",
        "Using torch.amp.GradScaler for an fp16 run.",
        "How does the scaler choose the scale, and what happens on inf?",
        "The loss is multiplied by a large scale so small gradients do not underflow in fp16. "
        "Before the step gradients are unscaled; if any is inf or NaN the step is skipped and "
        "the scale halved, and after a run of good steps it is doubled again.",
    ),
    "fp8": (
        "FP8 Training with Per-Tensor Scaling",
        "#fp8 #precision #hopper",
        "Trying Transformer Engine on an H100.",
        "How can 8 bits be enough for training matmuls?",
        "FP8 comes in E4M3 (more precision, for weights and activations) and E5M2 (more range, "
        "for gradients). Each tensor carries a scale factor chosen from the amax history so "
        "values use the representable range; master weights and accumulation stay in higher "
        "precision.",
    ),
    "adamw_memory": (
        "AdamW Keeps Two Moments per Parameter",
        "#optimizer #adamw #memory",
        "Counting where the memory of a 7B fine-tune goes before any activations.",
        "Why is the optimizer bigger than the model?",
        "AdamW stores an exponential average of the gradient (momentum) and of its square "
        "(variance) for every parameter, both in fp32: 8 bytes per parameter, plus the fp32 "
        "master copy under mixed precision. That is 12 of the 16 bytes per parameter, so the "
        "optimizer state is three times the fp32-equivalent model.",
    ),
    "eight_bit_adam": (
        "8-bit Adam Shrinks Optimizer State",
        "#optimizer #quantization #bitsandbytes",
        "Using bitsandbytes' Adam8bit to fit a bigger model.",
        "Does quantizing the Adam moments hurt convergence?",
        "Block-wise quantization stores momentum and variance in 8 bits with a scale per block "
        "of 2048 values, so outliers only spoil their own block. State falls from 8 to 2 bytes "
        "per parameter and convergence matches 32-bit Adam in the paper's experiments.",
    ),
    "lora": (
        "LoRA Trains Low-Rank Adapters",
        "#lora #fine-tuning #peft",
        "Fine-tuning a 7B model on one GPU with peft.",
        "Why train only two small matrices instead of the weight?",
        "LoRA freezes the pretrained weight W and learns an update B·A of rank r, with A of "
        "shape r×k and B of shape d×r, so the trainable parameters per layer drop from d·k to "
        "r·(d+k). Only the adapters need gradients and optimizer state; the update can be "
        "merged into W after training.",
    ),
    "qlora": (
        "QLoRA: 4-bit NF4 Base Weights with LoRA",
        "#qlora #quantization #fine-tuning",
        "Fitting a 33B model for fine-tuning on a single 48 GB card.",
        "How does QLoRA fine-tune a model it stores in 4 bits?",
        "QLoRA stores the frozen base model in 4-bit NormalFloat (NF4), dequantizes each layer "
        "to bf16 on the fly for the matmul, and trains LoRA adapters in bf16. Double "
        "quantization compresses the quantization constants too, and paged optimizers absorb "
        "memory spikes.",
    ),
    "warmup": (
        "Learning Rate Warmup Stabilizes Early Training",
        "#learning-rate #schedule #warmup",
        "Our run blew up in the first 200 steps without warmup. 学习率预热.",
        "Why start with a tiny learning rate?",
        "Early on, Adam's variance estimate is based on few steps and the weights are random, "
        "so large updates can push the model into a bad region. A linear warmup over the first "
        "few thousand steps keeps updates small until the statistics settle.",
    ),
    "cosine": (
        "Cosine Decay Learning Rate Schedule",
        "#learning-rate #schedule",
        "Choosing the scheduler for a 100k-step pretraining run.",
        "Why do most LLM recipes decay the learning rate along a cosine?",
        "After warmup, cosine decay lowers the learning rate slowly at first, faster in the "
        "middle, and slowly again near the end, down to about a tenth of the peak. The long "
        "tail at low learning rate lets the loss settle; newer recipes use warmup-stable-decay "
        "instead.",
    ),
    "grad_clip": (
        "Gradient Clipping by Global Norm",
        "#optimizer #stability #gradients",
        "Every LLM config sets max_grad_norm to 1.0.",
        "What does clipping the gradient norm actually protect against?",
        "clip_grad_norm_ computes the L2 norm of all gradients together and, if it exceeds the "
        "threshold, scales every gradient down by the same factor. The direction is kept, only "
        "the step size is capped, so a single bad batch cannot throw the weights far away.",
    ),
    "loss_spikes": (
        "Debugging Loss Spikes",
        "#debugging #stability #training",
        "The loss jumped tenfold at step 31k and recovered slowly.",
        "What causes a sudden spike in the training loss?",
        "Spikes usually come from a bad batch, a too-high learning rate, or attention logits "
        "growing until softmax saturates. Look at the gradient norm just before the spike; "
        "remedies are lowering the learning rate, skipping the batch, QK-norm, or z-loss on "
        "the logits.",
    ),
    "kv_cache": (
        "KV Cache Memory at Inference",
        "#inference #kv-cache #memory",
        "Serving a 7B model and running out of memory with long prompts.",
        "Why does generation memory grow with the sequence length?",
        "To avoid recomputing attention over past tokens, each layer caches the keys and values "
        "of every previous token. The cache is 2 × layers × kv heads × head dim × sequence "
        "length × batch values, so long contexts and large batches make it bigger than the "
        "weights.",
    ),
    "gqa": (
        "Grouped-Query Attention Shrinks the KV Cache",
        "#attention #gqa #inference",
        "Llama 2 70B uses 8 key-value heads for 64 query heads.",
        "How can several query heads share one key and value head?",
        "In grouped-query attention the query heads are split into groups and each group shares "
        "one key/value head. The KV cache shrinks by the group size (8x for Llama 2 70B) with "
        "almost no quality loss; multi-query attention is the extreme of a single KV head.",
    ),
    "flash_attn": (
        "FlashAttention Avoids Materializing the Attention Matrix",
        "#attention #kernels #flash-attention",
        "Attention memory grew quadratically with sequence length in our profile.",
        "How does FlashAttention compute exact attention without the s × s matrix?",
        "FlashAttention tiles queries, keys and values into SRAM-sized blocks and computes "
        "softmax online, keeping a running max and sum per row. The full score matrix never "
        "goes to HBM, so memory is linear in sequence length and the kernel is bound by compute "
        "instead of memory traffic. Backward recomputes the tiles.",
    ),
    "swiglu": (
        "SwiGLU Feed-Forward Layers",
        "#architecture #mlp #swiglu",
        "Llama's MLP has three weight matrices instead of two.",
        "Why a gated MLP, and why is the hidden size 8/3 of the model size?",
        "SwiGLU multiplies a Swish-activated projection with a second linear projection (the "
        "gate) before the down projection. To keep parameters equal to a 4h GELU MLP with three "
        "matrices, the hidden size becomes 8h/3. It trains better at the same compute.",
    ),
    "rope": (
        "Rotary Position Embeddings",
        "#architecture #positional-encoding #rope",
        "Extending a model's context from 4k to 16k tokens.",
        "How does RoPE encode position by rotating vectors?",
        "RoPE rotates each pair of query and key dimensions by an angle proportional to the "
        "token position, with a different frequency per pair. The dot product then depends "
        "only on the relative distance. Context extension rescales the frequencies (position "
        "interpolation, NTK scaling, YaRN).",
    ),
    "rmsnorm": (
        "RMSNorm vs LayerNorm",
        "#architecture #normalization",
        "Llama uses RMSNorm where GPT-2 used LayerNorm.",
        "What does RMSNorm drop, and why is that fine?",
        "LayerNorm subtracts the mean and divides by the standard deviation, then applies a "
        "gain and bias. RMSNorm skips the mean and the bias and divides by the root mean square "
        "only: fewer reductions, slightly faster, and in practice just as stable.",
    ),
    "activation_memory": (
        "Activation Memory per Transformer Layer",
        "#activations #memory #transformer",
        "Working through Korthikanti et al. to predict our activation footprint.",
        "How many bytes does one transformer layer keep for backward?",
        "Without recomputation a GPT layer saves about s·b·h·(34 + 5·a·s/h) bytes in 16-bit: "
        "34·s·b·h for the linear layers, norms and dropout masks, and 5·a·s²·b for the "
        "attention scores, softmax and its dropout. FlashAttention removes the quadratic term.",
    ),
    "oom_debug": (
        "Debugging CUDA Out of Memory Errors",
        "#memory #debugging #oom",
        "torch.OutOfMemoryError at the first backward of a new config. 显存不足, 训练崩溃.",
        "How do I find what filled the GPU?",
        "Read the error: it reports allocated versus reserved memory. Compare "
        "max_memory_allocated after forward, backward and the optimizer step to see which "
        "phase peaks. Fixes in order: smaller micro-batch with gradient accumulation, "
        "activation checkpointing, bf16, sharding the optimizer.",
    ),
    "fragmentation": (
        "Caching Allocator Fragmentation and expandable_segments",
        "#memory #allocator #fragmentation",
        "reserved memory was far above allocated memory when we hit OOM.",
        "Why can an allocation fail while there is free memory?",
        "PyTorch's caching allocator keeps freed blocks for reuse. With changing tensor sizes "
        "the free space splits into pieces too small for a new request. "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow instead, which "
        "removes most of the fragmentation.",
    ),
    "mem_snapshot": (
        "Reading a PyTorch Memory Snapshot",
        "#memory #profiling #snapshot",
        "Recording torch.cuda.memory._record_memory_history for one training step.",
        "How do I see which tensors are alive at the peak?",
        "_record_memory_history records every allocation with its stack trace; _dump_snapshot "
        "writes a pickle that the memory_viz page draws as a timeline. At the peak you can "
        "click each block to see the line that allocated it: usually saved activations or "
        "optimizer state.",
    ),
    "mfu": (
        "Model FLOPs Utilization",
        "#performance #mfu #throughput",
        "Reporting training efficiency for our cluster.",
        "How do I know if the GPUs are used well?",
        "MFU is the model's useful FLOPs per second (about 6 × parameters × tokens per second "
        "for training) divided by the hardware's peak. Recomputation does not count as useful, "
        "unlike in hardware FLOPs utilization. Well-tuned dense training reaches 35 to 50 "
        "percent.",
    ),
    "torch_compile": (
        "torch.compile and CUDA Graphs",
        "#performance #compiler #kernels",
        "Trying torch.compile on the training step.",
        "Where does the speedup of torch.compile come from?",
        "TorchDynamo captures the Python code into graphs, and Inductor fuses pointwise and "
        "reduction ops into Triton kernels, cutting memory traffic and kernel launches. "
        "mode='reduce-overhead' adds CUDA graphs to remove launch overhead for small batches. "
        "Graph breaks and recompilations eat the gains.",
    ),
    "dataloader": (
        "DataLoader Workers Starve the GPU",
        "#performance #data-loading #dataloader",
        "GPU utilization dropped to 40 percent with a new augmentation pipeline.",
        "Why is the GPU waiting on the input pipeline?",
        "Each DataLoader worker prepares batches in a separate process. Too few workers, no "
        "pin_memory, or heavy decoding on the CPU leave the GPU idle between steps. Raise "
        "num_workers, enable persistent_workers and prefetch_factor, and profile the data "
        "time per step.",
    ),
    "moe": (
        "Mixture of Experts Routing and Expert Parallelism",
        "#moe #architecture #expert-parallel",
        "Reading Mixtral's sparse MLP layers.",
        "How does a model have more parameters than it computes with?",
        "Each MoE layer has several expert MLPs and a router that sends each token to its top-k "
        "experts. Compute per token stays that of k experts while parameters grow with the "
        "expert count. Expert parallelism places experts on different GPUs and exchanges "
        "tokens with all-to-all; a load-balancing loss keeps routing even.",
    ),
    "logits_memory": (
        "Logits Memory for Large Vocabularies",
        "#memory #logits #vocabulary",
        "A small model with a 256k vocabulary ran out of memory at the loss.",
        "Why can the output layer use more memory than the rest of the model?",
        "The logits tensor is sequence × batch × vocabulary values and is often upcast to fp32 "
        "for the cross-entropy, so with a huge vocabulary it dominates. Chunked or fused "
        "cross-entropy computes the loss without materializing the full logits.",
    ),
    "weight_decay": (
        "Decoupled Weight Decay in AdamW",
        "#optimizer #adamw #regularization",
        "Why the recipe says AdamW and not Adam with L2.",
        "What is different about AdamW's weight decay?",
        "Adding an L2 penalty to the loss puts the decay through Adam's adaptive scaling, so "
        "parameters with large gradient variance are barely regularized. AdamW subtracts "
        "lr × wd × weight directly in the update, decoupled from the moments, and is usually not "
        "applied to biases and norm gains.",
    ),
    "batch_lr_scaling": (
        "Scaling the Learning Rate with Batch Size",
        "#learning-rate #batch-size #scaling",
        "Going from 8 to 64 GPUs and keeping the per-GPU batch.",
        "If the batch grows 8x, what should happen to the learning rate?",
        "The linear scaling rule multiplies the learning rate by the batch growth for SGD, with "
        "warmup; for Adam a square-root rule works better. Past the critical batch size a larger "
        "batch stops reducing the number of steps, so extra GPUs buy less.",
    ),
}

# (query, expected entry keys) — any expected key in the top 5 counts as found.
QUERIES: list[tuple[str, list[str]]] = [
    # keywords
    ("zero stage 1", ["zero1"]),
    ("optimizer state partitioning", ["zero1"]),
    ("gradient sharding zero", ["zero2"]),
    ("parameter sharding all-gather", ["zero3", "fsdp"]),
    ("cpu offload optimizer", ["zero_offload"]),
    ("fsdp wrapping", ["fsdp"]),
    ("fsdp bf16 reduce_dtype", ["fsdp_mp"]),
    ("ddp bucket overlap", ["ddp"]),
    ("ring allreduce", ["allreduce"]),
    ("pipeline bubble", ["pp"]),
    ("activation checkpointing", ["act_ckpt"]),
    ("loss scaling", ["loss_scaling"]),
    ("kv cache", ["kv_cache", "gqa"]),
    ("rotary embeddings", ["rope"]),
    ("memory snapshot", ["mem_snapshot"]),
    ("expandable_segments", ["fragmentation"]),
    ("torch.compile", ["torch_compile"]),
    ("num_workers pin_memory", ["dataloader"]),
    ("mixture of experts", ["moe"]),
    ("cross entropy vocabulary", ["logits_memory"]),
    # questions
    ("how does zero split the adam state", ["zero1"]),
    ("why does my loss suddenly jump", ["loss_spikes"]),
    ("how do I fit a bigger batch without more memory", ["grad_accum"]),
    ("why is the optimizer bigger than the model", ["adamw_memory"]),
    ("which ops run in half precision under autocast", ["mixed_precision"]),
    ("why does fp16 overflow but bf16 not", ["bf16_vs_fp16"]),
    ("how can several query heads share keys and values", ["gqa"]),
    ("why do GPUs sit idle in pipeline training", ["pp"]),
    ("what happens when one rank hangs in a collective", ["nccl_timeout"]),
    ("how to find what filled the gpu memory", ["oom_debug", "mem_snapshot"]),
    ("why can allocation fail when memory is free", ["fragmentation"]),
    ("how to fine-tune a big model on one gpu", ["lora", "qlora"]),
    ("should I change the learning rate when I use more gpus", ["batch_lr_scaling"]),
    ("why start training with a small learning rate", ["warmup"]),
    ("how many bytes of activations does a transformer layer keep", ["activation_memory"]),
    ("is my training using the gpu efficiently", ["mfu"]),
    ("how is a linear layer split across gpus", ["tp"]),
    ("what is the difference between adam and adamw weight decay", ["weight_decay"]),
    # misspellings
    ("optimzer state sharding", ["zero1", "zero2"]),
    ("gradient acumulation", ["grad_accum"]),
    ("activation checkpionting", ["act_ckpt"]),
    ("flash atention", ["flash_attn"]),
    ("pipline bubble", ["pp"]),
    ("rmsnrom layernorm", ["rmsnorm"]),
    # abbreviations and spellings out, compounds
    ("bfloat16 vs float16", ["bf16_vs_fp16"]),
    ("out of memory", ["oom_debug"]),
    ("OOM", ["oom_debug"]),
    ("MFU", ["mfu"]),
    ("low rank adaptation", ["lora"]),
    ("quantized lora nf4", ["qlora"]),
    ("grouped query attention", ["gqa"]),
    ("swish gated linear unit", ["swiglu"]),
    ("distributed data parallel", ["ddp"]),
    ("fully sharded data parallel", ["fsdp"]),
    ("key value cache", ["kv_cache"]),
    ("warm-up", ["warmup"]),
    ("gradient checkpointing", ["act_ckpt"]),
    ("AMP", ["mixed_precision"]),
    # words the entries do not use: only the meaning can match them
    ("stop keeping intermediate results for backprop", ["act_ckpt"]),
    ("the job froze and then got killed", ["nccl_timeout"]),
    ("gpu waiting for input data", ["dataloader"]),
    ("attention that scales to long inputs without quadratic memory", ["flash_attn"]),
    ("several small batches before each weight update", ["grad_accum"]),
    ("the output layer is too big for a huge vocabulary", ["logits_memory"]),
    # Chinese
    ("显存不足怎么办", ["oom_debug"]),
    ("优化器状态分片", ["zero1", "zero2"]),
    ("梯度累积", ["grad_accum"]),
    ("混合精度训练", ["mixed_precision"]),
    ("学习率预热", ["warmup"]),
    ("低秩适配", ["lora"]),
    ("为什么需要梯度裁剪", ["grad_clip"]),
    ("流水线并行的气泡", ["pp"]),
]

# Near-duplicates: a new draft saying what an existing entry says, in other words.
PARAPHRASES: dict[str, tuple[str, str, str, str, str]] = {
    "zero1": (
        "ZeRO-1: Sharding the Optimizer State Across Data-Parallel Ranks",
        "#zero #deepspeed",
        "Looking at why our DeepSpeed stage-1 config cut memory so much.",
        "How does ZeRO stage 1 reduce memory if every GPU still has the full weights?",
        "Under mixed precision, Adam's state (fp32 master weights, first and second moments) is "
        "the largest part of the per-parameter memory. ZeRO-1 splits that optimizer state "
        "across the N data-parallel GPUs, each updating only its 1/N slice, while weights and "
        "gradients stay replicated; the updated pieces are broadcast after the step.",
    ),
    "act_ckpt": (
        "Gradient Checkpointing: Recompute Instead of Store",
        "#memory #activations",
        "Saved activations dominate our peak memory.",
        "Can we avoid keeping every activation for the backward pass?",
        "Gradient checkpointing keeps only the inputs of selected blocks and re-runs their "
        "forward pass during backward to rebuild the activations. It cuts activation memory to "
        "about one layer's worth plus the checkpoints, paying roughly one more forward pass of "
        "compute.",
    ),
    "grad_accum": (
        "Accumulating Gradients Over Micro-Batches",
        "#training #batch-size",
        "Only a few samples fit on each GPU but we want the paper's large batch.",
        "How to emulate a large batch when memory is limited?",
        "Do forward and backward on several micro-batches in a row so the gradients sum in "
        ".grad, and call optimizer.step() once every k micro-batches. Scale the loss by 1/k to "
        "get the mean; under DDP wrap the intermediate steps in no_sync() to avoid extra "
        "all-reduces.",
    ),
    "warmup": (
        "Why Warm Up the Learning Rate",
        "#learning-rate #warmup",
        "Training diverged during the first hundred steps until we added warmup.",
        "What is the point of ramping the learning rate up from near zero?",
        "At the start Adam's second-moment estimates come from very few steps and the network is "
        "random, so full-size updates can throw it into a bad region. Increasing the learning "
        "rate linearly over the first thousands of steps keeps updates small while those "
        "statistics stabilize.",
    ),
    "kv_cache": (
        "How Big the KV Cache Gets During Generation",
        "#inference #kv-cache",
        "Long prompts made our 7B inference server run out of memory.",
        "Why does memory during generation keep growing with the number of tokens?",
        "Each attention layer stores the key and value vectors of all earlier tokens so they are "
        "not recomputed at every new token. Its size is 2 × layers × kv heads × head dim × "
        "tokens × batch, which for long sequences and big batches exceeds the model weights.",
    ),
    "flash_attn": (
        "FlashAttention: Exact Attention Without the Full Score Matrix",
        "#attention #kernels",
        "Our profile showed attention memory growing with the square of the sequence length.",
        "How can attention be exact without storing the s × s scores?",
        "FlashAttention splits Q, K and V into tiles that fit in on-chip SRAM and computes the "
        "softmax incrementally with a running maximum and sum per row, so the score matrix is "
        "never written to HBM. Memory becomes linear in sequence length; the backward pass "
        "recomputes the tiles.",
    ),
    "lora": (
        "Low-Rank Adaptation for Cheap Fine-Tuning",
        "#lora #peft",
        "We want to fine-tune a 7B model on one GPU.",
        "Why does LoRA learn two small matrices rather than the full weight update?",
        "LoRA keeps the pretrained weight frozen and learns its update as the product of two "
        "thin matrices B and A of rank r, so each layer trains r·(d+k) parameters instead of "
        "d·k. Gradients and optimizer state exist only for the adapters, and B·A can be merged "
        "into the weight afterwards.",
    ),
    "oom_debug": (
        "Tracking Down a CUDA OOM",
        "#memory #oom",
        "A new config crashed with torch.OutOfMemoryError in the first backward.",
        "What filled the GPU memory?",
        "Start from the error message, which gives allocated and reserved memory. Record "
        "max_memory_allocated after forward, backward and optimizer step to find the phase "
        "that peaks. Then try, in order: a smaller micro-batch with accumulation, activation "
        "checkpointing, bf16, and sharding the optimizer states.",
    ),
}

# Same topic as an existing entry, but a different concept: must be accepted.
DISTINCT: dict[str, tuple[str, str, str, str, str]] = {
    "zero1": (
        "ZeRO++ Quantized Communication",
        "#zero #deepspeed #communication",
        "Cross-node bandwidth limits our ZeRO-3 run.",
        "How does ZeRO++ cut the communication volume of ZeRO-3?",
        "ZeRO++ quantizes weights to int8 before the all-gather (qwZ), keeps a secondary copy "
        "of the parameters within each node so backward gathers stay on NVLink (hpZ), and "
        "quantizes gradients for the reduce-scatter (qgZ). Together they cut cross-node "
        "traffic by about 4x.",
    ),
    "act_ckpt": (
        "Selective Activation Recomputation",
        "#activations #memory #megatron",
        "Megatron's recompute_granularity=selective option.",
        "Can we recompute only the cheap, memory-hungry part of attention?",
        "Selective recomputation keeps the linear layers' activations and recomputes only the "
        "attention softmax and dropout, whose activations grow with the square of the sequence "
        "length but cost few FLOPs. It saves most of the attention memory for a few percent of "
        "extra compute, unlike full checkpointing.",
    ),
    "grad_accum": (
        "Gradient Noise Scale and the Critical Batch Size",
        "#training #batch-size #scaling",
        "Deciding how large a batch is worth using.",
        "At what batch size do larger batches stop helping?",
        "The gradient noise scale estimates the ratio of gradient variance to the squared "
        "gradient norm; batches much smaller than it waste steps, much larger ones waste "
        "compute. It grows during training as the loss falls, which is why batch size ramps "
        "up in some recipes.",
    ),
    "warmup": (
        "Warmup-Stable-Decay Schedules",
        "#learning-rate #schedule",
        "MiniCPM and others replaced cosine with WSD.",
        "Why hold the learning rate constant and decay only at the end?",
        "A WSD schedule warms up, keeps a constant learning rate for most of training, and "
        "decays quickly in the last tenth. Checkpoints from the stable phase can be decayed "
        "later to get a finished model at any length, so one run serves several compute "
        "budgets.",
    ),
    "kv_cache": (
        "PagedAttention Manages the KV Cache in Blocks",
        "#inference #kv-cache #vllm",
        "Reading how vLLM serves many requests at once.",
        "Why does allocating the KV cache in fixed blocks raise throughput?",
        "PagedAttention stores each sequence's keys and values in fixed-size blocks mapped by a "
        "block table, like virtual memory pages. No memory is reserved for the maximum length, "
        "fragmentation almost vanishes, and sequences can share prefix blocks, so far more "
        "requests fit in a batch.",
    ),
    "flash_attn": (
        "Ring Attention for Million-Token Contexts",
        "#attention #long-context #distributed",
        "Sequences too long for one GPU's memory even with FlashAttention.",
        "How can attention span a sequence spread over many devices?",
        "Ring attention splits the sequence into blocks across GPUs; each GPU keeps its queries "
        "and passes key/value blocks around a ring, computing blockwise attention while the "
        "next block is in flight. Context length scales with the number of devices.",
    ),
    "lora": (
        "DoRA: Weight-Decomposed Low-Rank Adaptation",
        "#lora #peft #fine-tuning",
        "Comparing adapters for a domain fine-tune.",
        "What does DoRA change compared with plain LoRA?",
        "DoRA splits each pretrained weight into a magnitude vector and a direction matrix, "
        "fine-tunes the magnitude directly and the direction with a LoRA update. Learning the "
        "two separately brings its behaviour closer to full fine-tuning at the same rank.",
    ),
    "oom_debug": (
        "CPU RAM Blowups When Loading Checkpoints",
        "#memory #checkpointing #loading",
        "The host ran out of RAM before training even started.",
        "Why does loading a 13B checkpoint need twice the model size in CPU memory?",
        "torch.load materializes the whole state dict while the freshly built model also holds "
        "its own random weights. Building the model on the meta device, loading with mmap=True "
        "and assign=True, or loading shard by shard keeps peak host memory near one copy.",
    ),
}

DATE = "2026-11-{:02d}"


def render(key: str, fields: tuple[str, str, str, str, str], day: int = 1) -> str:
    title, tags, context, question, intuition = fields
    return render_entry(
        title,
        DATE.format(day),
        context=context,
        question=question,
        intuition=intuition,
        tags=tags,
    )


def entry_id(key: str) -> str:
    return f"rel-{key.replace('_', '-')}"


def write_journal(root: Path) -> dict[str, str]:
    """The relevance journal, written as markdown; returns entry key → entry id."""
    from journal_agent.journal.store import HEADER

    parts = [HEADER, "\n"]
    ids = {}
    for n, (key, fields) in enumerate(ENTRIES.items()):
        text = render(key, fields, 1 + n % 28)
        heading, rest = text.split("\n", 1)
        ids[key] = entry_id(key)
        parts.append(f"{heading}\n<!-- entry: {ids[key]} -->\n{rest}\n---\n\n")
    (root / "learning_journal.md").write_text("".join(parts), encoding="utf-8")
    return ids


def score(ranked: list[list[str]], k: int = 5) -> dict[str, float]:
    """MRR@k and recall@k over QUERIES, given each query's ranked entry ids."""
    rr, found = 0.0, 0
    for (_, expected), ids in zip(QUERIES, ranked, strict=True):
        want = {entry_id(e) for e in expected}
        for rank, entry in enumerate(ids[:k], start=1):
            if entry in want:
                rr += 1.0 / rank
                found += 1
                break
    n = len(QUERIES)
    return {"mrr@5": round(rr / n, 3), "recall@5": round(found / n, 3), "queries": n}
