"""The calibration set of the near-duplicate rule: drafts paired with an entry of the relevance
journal (tests/journal/search/relevance.py, ENTRIES).

- PARAPHRASE_PAIRS: the draft explains the same concept as its entry, written in other words
  (other title, other terms where there are any: "shards" for "partitions", "moments" for
  "optimizer states") — a journal should get one of them, not both;
- DISTINCT_PAIRS: the draft is a different concept on the same topic as its entry (ZeRO++ next
  to ZeRO-1, DoRA next to LoRA) — both belong in the journal.

The eight pairs of each kind in relevance.PARAPHRASES / relevance.DISTINCT come first. The rule
in journal_agent/journal/search/duplicates.py is chosen on this set
(tests/journal/search/test_duplicate_calibration.py), and docs/journal.md reports its precision
and recall.
"""

from __future__ import annotations

from tests.journal.search import relevance

Fields = tuple[str, str, str, str, str]  # title, tags, context, key question, intuition

_PARAPHRASES: dict[str, Fields] = {
    "zero2": (
        "How ZeRO-2 partitions gradients",
        "#zero #deepspeed",
        "Switching our DeepSpeed run to the second stage.",
        "Where do the gradient bytes go under ZeRO-2?",
        "On top of splitting the Adam moments, the second stage splits the gradient buffer: a "
        "reduce-scatter replaces the all-reduce, and every worker keeps just the slice of "
        "gradients that matches the optimizer partition it updates. Traffic equals ordinary "
        "data parallelism while gradient memory shrinks with the number of workers.",
    ),
    "zero3": (
        "Sharding the Weights Themselves: DeepSpeed Stage 3",
        "#zero #sharding",
        "The 30B model's weights alone do not fit one card.",
        "How does a rank compute a layer it only owns a piece of?",
        "Every rank stores a fraction of each weight matrix. Right before a layer is needed, in "
        "forward and again in backward, the pieces are collected from all ranks, the layer "
        "runs, and the full copy is dropped. Fetching the following layer early overlaps the "
        "collection with math; traffic is about one and a half times plain data parallel.",
    ),
    "zero_offload": (
        "Putting Adam on the Host with DeepSpeed Offload",
        "#offload #cpu",
        "A 13B fine-tune that only fits if the optimizer leaves the GPU.",
        "What runs where when the optimizer lives in host RAM?",
        "The fp32 weights and both Adam moments sit in pinned CPU memory and the update itself "
        "executes on the CPU. Gradients travel to the host over PCIe and fresh half-precision "
        "weights travel back, so the link speed sets the pace; worth it only when the model "
        "would otherwise not fit.",
    ),
    "fsdp": (
        "When Fully Sharded Data Parallel Materializes Each Block",
        "#fsdp #pytorch",
        "Tracing an FSDP step to see when the memory goes up.",
        "At which moments are the full weights of a block present?",
        "PyTorch's answer to ZeRO-3 shards each wrapped module, typically a transformer block, "
        "as one flat parameter. Just before that module's forward the shards are gathered into "
        "full weights and released right after; during backward the gradients are reduce-"
        "scattered to shards. Big wrap units raise the peak, tiny ones add latency.",
    ),
    "fsdp_mp": (
        "Which Dtype Each Copy Has Under FSDP2 Mixed Precision",
        "#fsdp #bf16",
        "Setting param_dtype and reduce_dtype for a bf16 run.",
        "Are the stored shards bf16 or fp32?",
        "The shards kept between steps remain fp32; what gets gathered for compute is cast to "
        "bf16, and gradient reduction runs in fp32 to keep precision. Because the optimizer "
        "steps the fp32 shards directly, no extra master copy is needed, unlike Megatron.",
    ),
    "ddp": (
        "Overlapping Gradient Communication in DistributedDataParallel",
        "#ddp #overlap",
        "The profiler shows NCCL kernels running during backward.",
        "Why does the all-reduce begin while gradients are still being computed?",
        "DistributedDataParallel packs gradients into 25 MB groups ordered from the last layer "
        "to the first. The moment a group is complete its reduction is launched asynchronously, "
        "so syncing hides behind the remaining backward computation; bucket_cap_mb controls "
        "the group size.",
    ),
    "tp": (
        "Splitting a Linear Layer Across GPUs the Megatron Way",
        "#tensor-parallel",
        "Our 70B model needs intra-layer parallelism across 8 GPUs.",
        "How do GPUs share one matrix multiply?",
        "The first MLP projection is cut column-wise and the second row-wise, so each device "
        "produces a partial hidden state on its own and one all-reduce adds the partial "
        "outputs. Heads of attention are distributed likewise. Two all-reduces per layer in "
        "forward demand NVLink-class bandwidth.",
    ),
    "pp": (
        "Idle Stages in Pipeline-Parallel Training",
        "#pipeline-parallel",
        "Our 4-stage pipeline reaches only 70% utilization.",
        "Why do some GPUs sit idle in a pipeline?",
        "A stage cannot start until the one before hands over its activations, so while the "
        "pipeline fills and drains some devices wait. For p stages and m micro-batches the "
        "idle share is (p - 1) / (m + p - 1); using more micro-batches or an interleaved "
        "schedule reduces it.",
    ),
    "sp": (
        "Splitting Activations Along the Token Dimension",
        "#long-context #activations",
        "Activations of 32k-token sequences overflow even with tensor parallelism.",
        "Can the norm and dropout activations be divided by position?",
        "Among tensor-parallel ranks, the LayerNorm and dropout regions are partitioned across "
        "tokens, which changes one all-reduce into a reduce-scatter followed by an all-gather. "
        "Context parallelism extends this to attention by passing blocks around a ring.",
    ),
    "allreduce": (
        "Why a Ring All-Reduce Moves Twice the Buffer",
        "#nccl #collectives",
        "Estimating how long gradient sync takes on 8 GPUs.",
        "How much data does each GPU send in a ring all-reduce?",
        "The ring version is two phases: a reduce-scatter after which every rank holds the "
        "total of one chunk, then an all-gather distributing those totals. Each phase sends "
        "(N-1)/N of the buffer from every rank, 2(N-1)/N overall, which is optimal in bandwidth.",
    ),
    "nccl_timeout": (
        "Hung Distributed Jobs and the NCCL Watchdog",
        "#nccl #distributed",
        "Training froze at step 4000 and was killed after half an hour.",
        "How can one rank freeze the whole job?",
        "A collective is a meeting point every rank must reach. When one rank skips it — an "
        "uneven last batch, an exception, a branch on local data — the rest block until the "
        "watchdog aborts. NCCL_DEBUG=INFO and async error handling reveal which rank diverged.",
    ),
    "mixed_precision": (
        "What Autocast Runs in Half Precision",
        "#amp #autocast",
        "Turning on torch.autocast for the first time.",
        "Does autocast make every op fp16?",
        "Inside an autocast region matrix multiplies and convolutions execute in bf16 or fp16, "
        "while softmax, reductions and the loss stay in fp32. The parameters themselves remain "
        "fp32 and a cast copy of each weight is cached for the region; tensor cores supply the "
        "speed.",
    ),
    "bf16_vs_fp16": (
        "Exponent Bits vs Mantissa Bits: bf16 and fp16",
        "#bf16 #fp16",
        "Choosing a 16-bit format for pretraining.",
        "Why does bf16 rarely need loss scaling?",
        "bf16 spends 8 bits on the exponent like fp32 and 7 on the mantissa, so its range "
        "matches fp32; fp16 has 5 exponent and 10 mantissa bits — finer resolution, but it "
        "overflows above 65504 and flushes tiny gradients to zero, hence scaling the loss.",
    ),
    "loss_scaling": (
        "How GradScaler Picks Its Scale",
        "#fp16 #amp",
        "fp16 training logged skipped steps.",
        "What does the scaler do when it sees an inf?",
        "Multiplying the loss by a big factor keeps small fp16 gradients from vanishing. The "
        "gradients are divided back before the optimizer runs; an inf or NaN means the update "
        "is dropped and the factor is cut in half, and a streak of clean steps doubles it.",
    ),
    "fp8": (
        "Scaling Factors Make 8-Bit Matmuls Trainable",
        "#fp8 #hopper",
        "Trying Transformer Engine on H100s.",
        "Why do FP8 tensors each need their own scale?",
        "Two formats exist: E4M3 with more mantissa for weights and activations, E5M2 with more "
        "exponent for gradients. A per-tensor factor derived from recent maximum absolute "
        "values stretches the data over the representable range, while master weights and "
        "accumulations keep higher precision.",
    ),
    "adamw_memory": (
        "Why Adam's State Outweighs the Model",
        "#optimizer #memory",
        "The optimizer took more memory than the weights in our trace.",
        "Where do the 12 extra bytes per parameter come from?",
        "For each weight AdamW tracks a running mean of the gradient and of its square, both "
        "fp32 — 8 bytes — and mixed precision adds an fp32 master weight: 12 of 16 bytes per "
        "parameter, three times an fp32 copy of the network.",
    ),
    "eight_bit_adam": (
        "Quantizing Adam's Moments to One Byte",
        "#bitsandbytes #optimizer",
        "bitsandbytes' AdamW8bit freed memory for a bigger batch.",
        "Is an 8-bit optimizer as good as the 32-bit one?",
        "Both moments are stored as 8-bit codes with one scale for every block of 2048 values, "
        "so an outlier only affects its block. The state drops from 8 to 2 bytes per weight "
        "and the paper's runs converge like full-precision Adam.",
    ),
    "qlora": (
        "Fine-Tuning on Top of a 4-Bit NormalFloat Model",
        "#quantization #peft",
        "A 65B fine-tune on a single 48 GB card.",
        "How are gradients computed through 4-bit weights?",
        "The frozen backbone is stored as NF4; each layer is expanded to bf16 just for its "
        "matmul and the trainable low-rank adapters live in bf16. The quantization constants "
        "are themselves quantized, and paged optimizer states soak up memory spikes.",
    ),
    "cosine": (
        "Annealing the Learning Rate Along a Half Cosine",
        "#schedule",
        "Every LLM config we read uses a cosine schedule.",
        "What shape does the cosine schedule give the learning rate?",
        "Once warmup ends the rate falls gently, then quickly through the middle of training, "
        "then gently again, ending near one tenth of its peak. The long low tail lets the loss "
        "settle; WSD schedules are the newer alternative.",
    ),
    "grad_clip": (
        "Capping the Update with clip_grad_norm_",
        "#stability",
        "Adding max_grad_norm=1.0 to our trainer.",
        "What does limiting the total gradient norm prevent?",
        "The L2 norm is taken over every gradient at once; above the limit all gradients are "
        "multiplied by one common factor. The direction survives and only the step length is "
        "bounded, so one bad batch cannot fling the weights away.",
    ),
    "loss_spikes": (
        "Why Training Loss Suddenly Jumps",
        "#stability #training",
        "The loss jumped tenfold at step 31k and slowly recovered.",
        "Where do sudden loss jumps come from?",
        "Typical culprits are a corrupt batch, a learning rate that is too high, or attention "
        "logits growing until the softmax saturates. Check the gradient norm right before the "
        "jump; fixes include a lower rate, skipping the batch, QK-norm or a z-loss.",
    ),
    "gqa": (
        "Sharing Key/Value Heads Across Query Groups",
        "#attention #inference",
        "Llama 2 70B serves long contexts with a small cache.",
        "Why can many query heads use the same keys and values?",
        "Query heads are grouped and each group reads a single shared key/value head, dividing "
        "the cache by the group size (eightfold for Llama 2 70B) at almost no quality cost; "
        "one KV head for all queries is multi-query attention.",
    ),
    "swiglu": (
        "The Gated Swish MLP in Modern Transformers",
        "#mlp #architecture",
        "Llama's MLP has three weight matrices instead of two.",
        "Why is Llama's intermediate size two-thirds of 4h?",
        "A Swish-activated projection is multiplied elementwise by a second linear gate before "
        "projecting back down. Holding the parameter count equal to a 4h GELU MLP with three "
        "matrices makes the hidden width 8h/3, and it learns better for the same compute.",
    ),
    "rope": (
        "Encoding Positions by Rotating Queries and Keys",
        "#positional-encoding",
        "Extending a model's context from 4k to 32k tokens.",
        "Why does rotating q and k give relative positions?",
        "Dimension pairs of queries and keys are rotated by an angle that grows with the token "
        "index, each pair at its own frequency, so their dot product depends only on the "
        "offset between tokens. Longer contexts rescale those frequencies (interpolation, "
        "NTK, YaRN).",
    ),
    "rmsnorm": (
        "Normalizing by the Root Mean Square Only",
        "#normalization",
        "Llama swapped LayerNorm for a simpler norm.",
        "Is dropping the mean subtraction safe?",
        "LayerNorm centers by the mean, divides by the standard deviation, then applies a gain "
        "and a bias. The RMS variant skips centering and the bias, dividing by the root mean "
        "square alone: one reduction fewer, a bit faster, and just as stable in practice.",
    ),
    "activation_memory": (
        "Bytes Saved for Backward in One GPT Block",
        "#activations #transformer",
        "Sizing activations for a 4k-context run.",
        "What formula gives a layer's saved activations?",
        "In 16-bit and without recomputation a block keeps about s·b·h·(34 + 5·a·s/h) bytes: "
        "34·s·b·h for the linears, norms and dropout masks, plus 5·a·s²·b for attention "
        "scores, softmax and its dropout — the quadratic part FlashAttention eliminates.",
    ),
    "fragmentation": (
        "Out of Memory Despite Free Memory: the Caching Allocator",
        "#allocator",
        "nvidia-smi shows gigabytes free, yet allocation fails.",
        "How can free memory be unusable?",
        "Freed blocks stay cached by PyTorch for reuse; when tensor sizes keep changing, the "
        "free space breaks into fragments too small for the next request. Setting "
        "expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF lets segments grow and removes "
        "most of it.",
    ),
    "mem_snapshot": (
        "Finding the Tensors Alive at Peak with memory_viz",
        "#profiling #memory",
        "Our peak is 10 GB above the estimate.",
        "Which allocations make up the peak?",
        "Turn on allocation history with its stack traces, dump a snapshot pickle, and load it "
        "in the memory_viz page to get a timeline. Clicking a block at the peak reveals the "
        "source line that allocated it — usually saved activations or the optimizer state.",
    ),
    "mfu": (
        "Measuring How Busy the GPUs Really Are",
        "#performance #throughput",
        "Comparing our throughput with the paper's.",
        "What fraction of peak FLOPs does training achieve?",
        "Take useful model FLOPs per second — roughly six times parameters times tokens per "
        "second in training — and divide by the hardware's peak. Recomputed work does not "
        "count, unlike hardware FLOPs utilization; good dense runs hit 35 to 50 percent.",
    ),
    "torch_compile": (
        "Where Compiling a PyTorch Model Gets Its Speed",
        "#compiler #performance",
        "torch.compile made our step 30% faster.",
        "What does the compiler change about the kernels?",
        "Dynamo turns Python into graphs and Inductor fuses elementwise and reduction "
        "operations into Triton kernels, so less memory traffic and fewer launches. The "
        "reduce-overhead mode adds CUDA graphs against launch overhead; graph breaks and "
        "recompiles erase the benefit.",
    ),
    "dataloader": (
        "The Input Pipeline Leaves the GPU Idle",
        "#data-loading #performance",
        "GPU utilization oscillates between 0 and 100%.",
        "Why does the accelerator wait for data?",
        "Batches are built by worker processes; with too few of them, unpinned memory or "
        "expensive CPU decoding, the device idles between iterations. Add workers, keep them "
        "persistent, prefetch more, and time the data stage of each step.",
    ),
    "moe": (
        "Sparse Experts: More Parameters Than FLOPs",
        "#moe #expert-parallel",
        "Mixtral has 47B parameters but runs like a 13B model.",
        "How can the compute per token stay small as parameters grow?",
        "A router assigns each token to its top-k expert MLPs, so a token pays for k experts "
        "while capacity grows with their number. Experts are spread over GPUs and tokens are "
        "shuffled with all-to-all; an auxiliary balancing loss keeps the load even.",
    ),
    "logits_memory": (
        "The Output Projection's Huge Tensor",
        "#vocabulary #memory",
        "A 256k vocabulary made the last layer the memory peak.",
        "Why is the final layer so memory hungry?",
        "Its output holds one value per token and vocabulary word, often cast to fp32 for the "
        "loss, so large vocabularies make it the biggest tensor. Computing cross-entropy in "
        "chunks, or fused, avoids ever storing all of it.",
    ),
    "weight_decay": (
        "Decay Applied to the Weights, Not Through the Gradient",
        "#adamw #regularization",
        "Our trainer switched from Adam with L2 to AdamW.",
        "Why is L2 regularization not the same as weight decay under Adam?",
        "An L2 term in the loss gets divided by Adam's adaptive denominator, so noisy "
        "parameters are hardly regularized. AdamW instead subtracts lr × wd × w in the update "
        "itself, separate from the moments, and usually skips biases and norm gains.",
    ),
    "batch_lr_scaling": (
        "Adjusting the Step Size When the Batch Grows",
        "#learning-rate #scaling",
        "Going from 8 to 64 GPUs multiplied our global batch by 8.",
        "How should the learning rate change with an 8x batch?",
        "For SGD the linear rule scales the rate by the batch factor, together with warmup; "
        "Adam prefers a square-root rule. Beyond the critical batch size extra samples per "
        "step stop saving steps, so more GPUs help less.",
    ),
}

_DISTINCT: dict[str, Fields] = {
    "zero2": (
        "ZeRO-Infinity Offloads to NVMe",
        "#zero #deepspeed #nvme",
        "A trillion-parameter experiment on a small cluster.",
        "How can NVMe drives extend GPU memory for training?",
        "ZeRO-Infinity builds on stage 3 and can place parameters, gradients and optimizer "
        "state on NVMe as well as CPU memory, streaming them with overlapped bandwidth-centric "
        "partitioning. It trades disk bandwidth for capacity far beyond the GPUs' memory.",
    ),
    "zero3": (
        "DeepSpeed Activation Partitioning",
        "#deepspeed #activations",
        "Megatron-DeepSpeed runs with partition_activations enabled.",
        "Can the checkpointed activations be split across model-parallel ranks?",
        "With activation checkpointing under model parallelism, each rank keeps the whole "
        "checkpointed input. Partitioning splits these across the model-parallel group and "
        "all-gathers them before recomputation; they can also go to CPU memory.",
    ),
    "zero_offload": (
        "CPU Adam Kernels in DeepSpeed",
        "#cpu #optimizer",
        "Why offloaded steps are faster than torch.optim on the CPU.",
        "What makes DeepSpeed's CPU optimizer fast?",
        "DeepSpeedCPUAdam uses AVX SIMD instructions, OpenMP threads and loop unrolling, and "
        "overlaps the copy of updated parameters back to the GPU with the computation. It is "
        "several times faster than the PyTorch CPU implementation.",
    ),
    "fsdp": (
        "Sharded Checkpoints with torch.distributed.checkpoint",
        "#fsdp #checkpointing",
        "Saving a 70B FSDP model took 40 minutes to gather on rank 0.",
        "How do ranks save a sharded model without gathering it?",
        "Distributed checkpointing writes each rank's shards in parallel with metadata that "
        "records how tensors are split, and can reshard on load to a different world size. "
        "No rank ever materializes the full state dict.",
    ),
    "fsdp_mp": (
        "HYBRID_SHARD: Sharding Inside a Node, Replicating Across",
        "#fsdp #sharding",
        "Inter-node bandwidth limits our 64-GPU FSDP run.",
        "Can FSDP shard within a node but replicate across nodes?",
        "HYBRID_SHARD shards parameters among the GPUs of one node and keeps a replica per "
        "node, so the frequent all-gathers stay on NVLink and only gradient all-reduces cross "
        "the network. Memory use is higher than full sharding.",
    ),
    "ddp": (
        "Gradient Compression Hooks in DDP",
        "#ddp #communication",
        "Slow ethernet between our training nodes.",
        "Can DDP send smaller gradients?",
        "Communication hooks replace the default all-reduce: fp16 or bf16 compression halves "
        "the bytes, and PowerSGD sends a low-rank approximation with error feedback. They "
        "trade some accuracy for bandwidth.",
    ),
    "tp": (
        "Vocabulary-Parallel Embeddings",
        "#tensor-parallel #embeddings",
        "The embedding table of a 256k vocabulary.",
        "How is the embedding layer split under tensor parallelism?",
        "The embedding matrix is split by vocabulary rows: each rank looks up only the tokens "
        "in its range and writes zeros otherwise, and an all-reduce combines the results. The "
        "output layer and its cross-entropy are split the same way.",
    ),
    "pp": (
        "Pipeline Stage Balancing",
        "#pipeline-parallel #partitioning",
        "Our first stage holds the embedding and is the slowest.",
        "How should layers be assigned to stages?",
        "The slowest stage sets the pipeline's pace, so layers are partitioned by measured time "
        "and memory rather than by count; the embedding and the output head are heavy and "
        "often get a stage with fewer blocks.",
    ),
    "sp": (
        "Ulysses All-to-All Sequence Parallelism",
        "#sequence-parallel #deepspeed",
        "DeepSpeed-Ulysses for 1M-token training.",
        "How does Ulysses parallelize attention over the sequence?",
        "Each GPU holds a slice of the sequence for all heads; an all-to-all transposes this "
        "so every GPU holds the whole sequence for a subset of heads, attention runs locally, "
        "and a second all-to-all transposes back. Parallelism is capped by the head count.",
    ),
    "allreduce": (
        "Tree All-Reduce for Latency-Bound Messages",
        "#nccl #collectives",
        "Small all-reduces are slow on many nodes.",
        "When does NCCL prefer trees over rings?",
        "A ring's latency grows with the number of ranks, which dominates for small messages. "
        "A double binary tree reduces and broadcasts in logarithmic steps, so NCCL picks trees "
        "for small sizes and many nodes and rings for large bandwidth-bound buffers.",
    ),
    "nccl_timeout": (
        "Choosing NCCL Network Interfaces",
        "#nccl #networking",
        "NCCL picked the wrong network card on our cluster.",
        "How do I make NCCL use InfiniBand?",
        "NCCL_SOCKET_IFNAME selects the interface for bootstrap, NCCL_IB_HCA the InfiniBand "
        "adapters, and NCCL_NET_GDR_LEVEL whether GPUDirect RDMA is used. NCCL_DEBUG=INFO "
        "prints which transport each channel ended up on.",
    ),
    "mixed_precision": (
        "Keeping BatchNorm and Softmax in fp32",
        "#precision #numerics",
        "Which layers break in low precision?",
        "Which operations must stay in full precision and why?",
        "Ops that sum many terms or exponentiate — batch norm statistics, softmax, layer norm, "
        "loss functions — lose accuracy or overflow in 16-bit, so autocast's op lists pin them "
        "to fp32. Custom ops need the same treatment through custom_fwd.",
    ),
    "bf16_vs_fp16": (
        "Stochastic Rounding for Pure bf16 Training",
        "#bf16 #numerics",
        "Training without fp32 master weights.",
        "Why do tiny updates vanish when weights are kept in bf16?",
        "With 7 mantissa bits an update smaller than half a unit in the last place rounds to "
        "nothing, so learning stalls. Stochastic rounding rounds up or down with probability "
        "proportional to the remainder, making updates unbiased on average.",
    ),
    "loss_scaling": (
        "Detecting NaNs with anomaly mode",
        "#debugging #numerics",
        "A NaN appeared in the loss after 2000 steps.",
        "How do I find the operation that produced the first NaN?",
        "torch.autograd.set_detect_anomaly records the forward stack for each backward op and "
        "raises at the first backward op returning NaN, naming its forward origin. It is slow, "
        "so enable it only around the failing step.",
    ),
    "fp8": (
        "MXFP8 Block Scaling on Blackwell",
        "#fp8 #blackwell",
        "New GPUs support microscaling formats.",
        "What changes with microscaling instead of per-tensor scales?",
        "Microscaling gives every block of 32 values its own power-of-two scale stored in "
        "hardware, so outliers spoil only their block and no amax history is needed. It "
        "extends to MXFP6 and MXFP4.",
    ),
    "adamw_memory": (
        "Adafactor's Factored Second Moments",
        "#optimizer #adafactor",
        "T5 was trained with Adafactor to save memory.",
        "How does Adafactor avoid storing a full second moment?",
        "For a weight matrix Adafactor keeps only the row and column sums of the squared "
        "gradients and reconstructs the second moment as their outer product, and it can drop "
        "momentum entirely. The state becomes sublinear in the matrix size.",
    ),
    "eight_bit_adam": (
        "Lion Optimizer: Sign Updates with One Moment",
        "#optimizer #lion",
        "A paper claims Lion matches AdamW with less memory.",
        "Why does Lion need only one state tensor?",
        "Lion interpolates the momentum with the current gradient, takes the sign of the "
        "result as the update and keeps just the momentum. Every coordinate moves by the same "
        "magnitude, so it needs a smaller learning rate and larger weight decay than AdamW.",
    ),
    "qlora": (
        "GPTQ Post-Training Quantization",
        "#quantization #inference",
        "Shipping a 4-bit model for inference.",
        "How does GPTQ choose quantized weights that keep accuracy?",
        "GPTQ quantizes a layer's weights column by column and updates the remaining columns "
        "to compensate for the error, using second-order information from calibration "
        "activations. It needs no training and keeps perplexity close to fp16 at 4 bits.",
    ),
    "cosine": (
        "Cyclical Learning Rates and Restarts",
        "#learning-rate #sgdr",
        "SGDR in older vision recipes.",
        "Why would one raise the learning rate again mid-training?",
        "Warm restarts reset the learning rate to a high value periodically and anneal again, "
        "which can help escape sharp minima and yields a snapshot ensemble at each cycle's end. "
        "LLM pretraining rarely uses them.",
    ),
    "grad_clip": (
        "Gradient Noise Injection",
        "#optimization #regularization",
        "An old trick for deep recurrent networks.",
        "Why add Gaussian noise to gradients?",
        "Adding annealed Gaussian noise to every gradient helps very deep networks escape poor "
        "regions early in training. The noise variance decays over steps so it vanishes once "
        "training is under way.",
    ),
    "loss_spikes": (
        "Loss Plateaus from Dead ReLUs",
        "#debugging #activations",
        "The loss stopped improving after a learning rate increase.",
        "Why can a network stop learning when units die?",
        "A ReLU whose inputs become negative for every example outputs zero and gets no "
        "gradient, so it never recovers. A high learning rate can kill many at once; leaky "
        "activations or a lower rate avoid it.",
    ),
    "gqa": (
        "Multi-Head Latent Attention Compresses Keys and Values",
        "#attention #deepseek",
        "DeepSeek-V2's attention uses a latent vector.",
        "How does MLA cache less than GQA?",
        "MLA projects keys and values into a small shared latent vector per token and caches "
        "only that; the heads' keys and values are reconstructed from it, with the "
        "up-projection absorbed into the query. Rotary embeddings travel in a separate part.",
    ),
    "swiglu": (
        "Parallel Attention and MLP Blocks",
        "#architecture #transformer",
        "GPT-J and PaLM compute attention and MLP side by side.",
        "What changes if attention and MLP read the same input?",
        "The parallel formulation adds attention and MLP outputs of the same normalized input "
        "to the residual, so their input projections can be fused into one matmul. PaLM "
        "reports about 15% faster training at scale with little quality loss.",
    ),
    "rope": (
        "ALiBi: Attention with Linear Biases",
        "#positional-encoding #alibi",
        "Extrapolating to longer sequences than trained on.",
        "How does ALiBi represent position without embeddings?",
        "ALiBi adds a penalty to each attention score proportional to the distance between "
        "query and key, with a fixed slope per head. There are no position embeddings, and "
        "models extrapolate to sequences longer than those seen in training.",
    ),
    "rmsnorm": (
        "Pre-Norm vs Post-Norm Residual Blocks",
        "#normalization #architecture",
        "Why does the original Transformer need careful warmup?",
        "Where should normalization sit relative to the residual connection?",
        "Post-norm normalizes after adding the residual, which makes gradients near the input "
        "large and training sensitive to warmup. Pre-norm normalizes each sublayer's input and "
        "leaves an identity path, so deep models train stably.",
    ),
    "activation_memory": (
        "CPU Offloading of Activations",
        "#activations #offload",
        "Saved tensors hooks let activations live elsewhere.",
        "Can saved activations wait in host memory until backward?",
        "torch.autograd.graph.save_on_cpu moves every tensor saved for backward to pinned CPU "
        "memory and copies it back when backward needs it. GPU memory drops, at the price of "
        "PCIe transfers that must overlap compute to stay cheap.",
    ),
    "fragmentation": (
        "CUDA Graph Memory Pools",
        "#memory #cuda-graphs",
        "Memory went up after enabling CUDA graphs.",
        "Why do captured graphs hold their own memory?",
        "A captured CUDA graph replays fixed addresses, so its allocations come from a private "
        "memory pool kept alive for the graph's lifetime. Several graphs can share a pool if "
        "they never run at once.",
    ),
    "mem_snapshot": (
        "Profiling Kernels with torch.profiler",
        "#profiling #performance",
        "Finding why the step takes 900 ms.",
        "Which kernels take the time in a training step?",
        "torch.profiler records CPU ops and CUDA kernels with their durations; exported to "
        "a Chrome trace it shows gaps where the GPU idles and which ops launch the most "
        "kernels. A schedule with wait, warmup and active steps keeps overhead low.",
    ),
    "mfu": (
        "Roofline Analysis of a Kernel",
        "#performance #roofline",
        "Is our attention kernel compute-bound or memory-bound?",
        "How does arithmetic intensity decide a kernel's speed limit?",
        "A kernel's FLOPs per byte moved, compared with the GPU's ratio of peak FLOPs to memory "
        "bandwidth, says which roof limits it. Below the ridge point it is memory-bound, and "
        "only less data movement or fusion speeds it up.",
    ),
    "torch_compile": (
        "Writing a Custom Triton Kernel",
        "#triton #kernels",
        "Fusing a layer norm and a residual add by hand.",
        "How does a Triton program map onto the GPU?",
        "A Triton kernel is written per block of elements: each program instance loads a tile "
        "with masks, computes with vector operations and stores the result; the compiler "
        "handles shared memory and coalescing. Autotuning picks block sizes.",
    ),
    "dataloader": (
        "Streaming Datasets from Object Storage",
        "#data-loading #streaming",
        "The dataset is too big for local disks.",
        "How do you train from data in S3 without downloading it all?",
        "Streaming formats store samples in shards read sequentially over the network, with "
        "shuffling done within a buffer and across shard order. Deterministic resumption "
        "needs the shard and offset in the checkpoint.",
    ),
    "moe": (
        "Expert Capacity and Token Dropping",
        "#moe #routing",
        "Some tokens were not processed by any expert.",
        "What happens when too many tokens pick the same expert?",
        "Each expert gets a fixed capacity of capacity_factor × tokens / experts slots. Tokens "
        "beyond it are dropped and pass through on the residual only; a larger capacity "
        "factor drops fewer tokens but wastes compute on padding.",
    ),
    "logits_memory": (
        "Tied Input and Output Embeddings",
        "#architecture #embeddings",
        "GPT-2 reuses its embedding matrix for the output layer.",
        "Why share the embedding and unembedding weights?",
        "Weight tying uses the token embedding matrix, transposed, as the output projection. It "
        "removes vocabulary × hidden parameters and often improves small models; large models "
        "usually untie them.",
    ),
    "weight_decay": (
        "Exponential Moving Average of Weights",
        "#optimizer #ema",
        "Evaluating with EMA weights improved our diffusion model.",
        "Why keep a slow-moving copy of the weights?",
        "An EMA copy updated as ema = d·ema + (1-d)·w after each step averages out the noise of "
        "the last iterates, often evaluating better than the raw weights. It costs one more "
        "copy of the parameters in memory.",
    ),
    "batch_lr_scaling": (
        "LARS and LAMB Layer-Wise Learning Rates",
        "#optimizer #large-batch",
        "Training BERT with a batch of 64k.",
        "How do LARS and LAMB keep huge batches stable?",
        "They scale each layer's update by the ratio of its weight norm to its update norm, a "
        "trust ratio, so no layer moves too far relative to its size. LAMB applies this to "
        "Adam's update and trained BERT in 76 minutes.",
    ),
}

PARAPHRASE_PAIRS: list[tuple[str, Fields]] = [
    *relevance.PARAPHRASES.items(),
    *_PARAPHRASES.items(),
]
DISTINCT_PAIRS: list[tuple[str, Fields]] = [*relevance.DISTINCT.items(), *_DISTINCT.items()]


def score(root) -> dict[str, dict[str, float]]:
    """Precision and recall of the rule on the set, against the relevance journal at ``root``:
    ``refused`` (the append is refused) and ``flagged`` (refused or warned about). A verdict is
    right when it names the paraphrased entry; naming any entry for a distinct draft, or the
    wrong entry for a paraphrase, is a false positive."""
    from journal_agent.journal.model import parse_journal
    from journal_agent.journal.search.duplicates import check_draft
    from journal_agent.workspace import Workspace

    counts = {"refused": [0, 0, 0], "flagged": [0, 0, 0]}  # true pos., false pos., false neg.
    for paraphrase, pairs in ((True, PARAPHRASE_PAIRS), (False, DISTINCT_PAIRS)):
        for key, fields in pairs:
            entry = parse_journal(relevance.render(key, fields, 28)).entries[0]
            check = check_draft(Workspace(root).index, entry)
            for verdict, named in (
                ("refused", check.duplicate),
                ("flagged", check.duplicate or check.similar),
            ):
                right = paraphrase and named is not None and named.id == relevance.entry_id(key)
                tally = counts[verdict]
                tally[0] += right
                tally[1] += named is not None and not right
                tally[2] += paraphrase and not right
    out = {}
    for verdict, (tp, fp, fn) in counts.items():
        out[verdict] = {
            "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
            "recall": round(tp / (tp + fn), 3),
            "false_positives": fp,
        }
    return out
