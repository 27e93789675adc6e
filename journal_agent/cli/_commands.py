"""The command table: which module holds each command, and the line ``--help`` shows for it.

``journal-agent --help`` lists every command, but importing every command module to build that
list cost more than the rest of start-up together (the profiling commands alone build the whole
training configuration's flags from ``profiling.config``). So the top-level group imports a
command's module only when that command runs (or its own ``--help`` is asked for), and lists
the others from this table. ``tests/foundation/test_startup.py`` checks that the table says
exactly what the modules say: a command added to a module without a row here fails it.
"""

from __future__ import annotations

# name -> (module under journal_agent.cli, the first paragraph of the command's help), in the
# order of `--help`: the daily commands first, the groups last.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run_cmd", "Run an agent definition on a prompt (its body is the system prompt)."),
    "command": (
        "run_cmd",
        "Run a slash command: its expanded text is the first message of a new conversation.",
    ),
    "learn": ("run_cmd", "Record a learning insight in the journal: the /learn command."),
    "runs": ("runs_cmd", "List background runs, oldest first."),
    "wait": (
        "runs_cmd",
        "Wait for background runs; print their results; exit with the worst exit code.",
    ),
    "review": (
        "review_cmd",
        "Review what is due: the key question first, the answer on request, then your rating.",
    ),
    "view": (
        "view_cmd",
        "See the journal in your browser: entries with their code and numbers, the ledger,\n"
        "today's review. Local only, behind a random token; Ctrl-C stops it.",
    ),
    "feedback": (
        "feedback_cmd",
        "Record the user's feedback with the change it led to in an ejected command or agent.",
    ),
    "estimate": (
        "estimate_cmd",
        "Estimate training memory in closed form, every step of the calculation shown.",
    ),
    "trace": (
        "trace_cmd",
        "Trace a steady-state training step under fake tensors: exact bytes by category and\n"
        "FLOPs, no GPU needed (--gpu NAME adds the step time at --mfu).",
    ),
    "fit": (
        "fit_cmd",
        "What fits a GPU, judged by what nvidia-smi would show: precision, ZeRO, checkpointing,\n"
        "LoRA/QLoRA, offload and micro-batch searched (what you give is held) and, with --gpus N,\n"
        "the parallel plans (TP, CP, PP beside FSDP) too, ranked together by estimated"
        " throughput,\n"
        "the best one-GPU and data-parallel candidates traced to confirm (a plan is not: its\n"
        "per-rank trace command is printed); or --max-seq / --max-batch; or --plans: the plans"
        " alone.",
    ),
    "gpu": (
        "measure_cmd",
        "The NVIDIA GPUs here: driver, CUDA and torch versions, memory in use and by whom.",
    ),
    "profile": (
        "measure_cmd",
        "Measure real training steps on this machine's device: memory and time per phase.",
    ),
    "agents": (
        "agents_cmd",
        "List agent definitions: name, source, model, tools, an unapproved permissionMode.",
    ),
    "commands": (
        "agents_cmd",
        "List slash-command definitions: name, source, model, allowed tools, unapproved ones.",
    ),
    "trust": (
        "trust_cmd",
        "Approve this project's own settings, command and agent files (a clone's count only\n"
        "once you did); asks you to type yes on your terminal, where no tool call can.",
    ),
    "tool": ("tool_cmd", "Run one tool and print its result exactly as the model would see it."),
    "tools": (
        "tool_cmd",
        "List the built-in tools and their inputs (--json: the definitions the model gets).",
    ),
    "mcp": (
        "mcp_cmd",
        "Serve the journal and profiling tools over MCP on stdin/stdout (for Claude Code).",
    ),
    "doctor": (
        "doctor_cmd",
        "Check the environment: the sandbox for Bash, secrets committed to git, ripgrep, the API\n"
        "key, torch, NVML, the Claude Code hooks and their recent failures, extras.",
    ),
    "journal": (
        "journal_cmd",
        "The learning journal: append verified entries, check them, search and navigate.",
    ),
    "ledger": (
        "ledger_cmd",
        "The learning ledger: mastery levels, review queue, sessions, goals, insights.",
    ),
    "inbox": (
        "inbox_cmd",
        "Learning moments captured in Claude Code (★ Insight blocks, edits, measurements).",
    ),
    "export": ("view_cmd", "The journal, its records and review cards as files to take elsewhere."),
    "measurements": (
        "estimate_cmd",
        "List and show the saved measurement records (estimates, traces, measurements).",
    ),
}


__all__ = ["COMMANDS"]
