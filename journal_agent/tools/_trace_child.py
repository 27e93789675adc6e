"""The MemoryTrace of a user's model factory or a Hugging Face config, run as a child in the
sandbox.

``python -I -m journal_agent.tools._trace_child '<json>'`` with the configuration's fields and
``compare_estimate``: traces, saves the records (into the call's outbox, see
:mod:`journal_agent.tools.sandbox.call`) and prints the report; a failure is one
``error: …`` line and exit code 1. The factory's module is found from the working directory
(the workspace), inside the sandbox only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from journal_agent.errors import JournalAgentError, as_user_error
    from journal_agent.paths import records_dir_for_saving
    from profiling.config import TrainingConfig
    from profiling.records import RecordStore
    from profiling.trace.run import trace_and_record

    request = json.loads(argv[0])
    try:
        cfg = TrainingConfig.parse(style="field", **request["config"])
        store = RecordStore(records_dir_for_saving(Path.cwd()))
        run = trace_and_record(
            cfg,
            store,
            compare_estimate=bool(request["compare_estimate"]),
            timeout=float(request["timeout"]),
        )
    except Exception as exc:
        error = exc if isinstance(exc, JournalAgentError) else as_user_error(exc)
        if error is None:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(run.text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
