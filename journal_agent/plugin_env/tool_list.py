"""Write ``tools.json``, the tool list the MCP front serves before the full server runs:
``python -m journal_agent.plugin_env.tool_list`` after changing a tool's input or brief
(tests/foundation/test_plugin_env.py fails until then). Needs the whole package."""

from __future__ import annotations

import json
from pathlib import Path

TOOLS_JSON = Path(__file__).with_name("tools.json")


def generated() -> str:
    from journal_agent import __version__
    from journal_agent.mcp_server import INSTRUCTIONS, listing

    data = {"version": __version__, "instructions": INSTRUCTIONS, "tools": listing()}
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


if __name__ == "__main__":
    TOOLS_JSON.write_text(generated(), encoding="utf-8")
