"""The touch recall (#33) on a replay set: precision, recall and tokens per replayed day.

Coding sessions on a snapshot of this repository's own code with the learning journal a
developer of it keeps (tests/capture/touch_replay.py: what the set holds and how its labels were
judged), replayed through the plugin's real hooks (hooks.json's commands, one process per event,
as Claude Code runs them), side by side in the same run: the recall as this checkout has it (on
by default), off (``JOURNAL_AGENT_CAPTURE=0``: the baseline, nothing injected), and the hooks of
``--old REF`` (taken with ``git archive``; default 6fd7ccc, before the reading rules: every
overlap named, a whole-file Read included). Tokens are counted with the project's tiktoken
encoder (journal_agent/tokenizer.py): per replayed day, and per injected line (mean, max, and
the share over 40, the most a line may take). On by default needs precision >= 0.9. Beside it
(``real_sessions``, ``side_by_side``): the same hooks on the second set, the real sessions of
this repository's history after the snapshot (tests/capture/touch_replay_real.py). Prints JSON.

    python benchmarks/bench_touch_replay.py [--old REF | --no-old]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_hooks import old_plugin  # the hooks and packages at a commit
from tests.capture.touch_replay import (
    LINE_TOKENS,
    SESSIONS,
    hook_env,
    make_project,
    replay,
    score,
)
from tests.capture.touch_replay_real import sessions as real_sessions
from tests.capture.touch_replay_real import starter

FLOOR = 0.9
OLD = "6fd7ccc"


def main() -> None:
    parser = argparse.ArgumentParser(description="The touch recall on a replay set.")
    parser.add_argument("--old", default=OLD, help=f"the commit to compare with (default {OLD})")
    parser.add_argument("--no-old", action="store_true", help="no comparison with --old")
    args = parser.parse_args()
    os.environ["JOURNAL_AGENT_EMBEDDING_MODEL"] = "off"  # the meaning model is not the subject
    with tempfile.TemporaryDirectory(prefix="bench-touch-replay-") as tmp:
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")  # never the user's trust store
        root = Path(tmp) / "project"
        root.mkdir()
        ids = make_project(root)
        on = score(replay(root, SESSIONS, ids, hook_env(root), "on"))
        off_env = hook_env(root, JOURNAL_AGENT_CAPTURE="0")
        off = score(replay(root, SESSIONS, ids, off_env, "off"), detail=False)
        real = real_sessions()
        real_root = Path(tmp) / "real"
        real_root.mkdir()
        real_ids = make_project(real_root)
        real_on = score(
            replay(real_root, [r.session for r in real], real_ids, hook_env(real_root), "real",
                   starter(real))
        )  # fmt: skip
        old = None
        if not args.no_old:
            plugin = old_plugin(args.old, Path(tmp) / "old")
            old = score(replay(root, SESSIONS, ids, hook_env(root, plugin), "old"))
    out = {
        "set": {
            "entries": len(ids),
            "sessions": len(SESSIONS),
            "days": len(on["per_day"]),
            "held_out_day": "3",
        },
        "recall_on": on,
        "recall_off": {k: off[k] for k in ("injected_lines", "tokens_per_day", "hook_ms_mean")},
        "floor": {"precision": FLOOR, "met": (on["precision"] or 0) >= FLOOR},
        # The same hooks on the sessions of this repository's history after the snapshot
        # (tests/capture/touch_replay_real.py): what each commit's session read and edited.
        "real_sessions": {
            "commits": [r.commit for r in real],
            **{k: v for k, v in real_on.items() if k != "per_day"},
            "floor_met": (real_on["precision"] or 0) >= FLOOR,
        },
        "side_by_side": {
            name: {k: result[k] for k in ("injected_lines", "precision", "recall")}
            for name, result in (("scripted", on), ("real", real_on))
        },
        "line_ceiling": {
            "tokens": LINE_TOKENS,
            "met": on["tokens_per_line_max"] <= LINE_TOKENS,
        },
    }
    if old is not None:
        out[f"old_{args.old}"] = {k: v for k, v in old.items() if k != "missed"}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
